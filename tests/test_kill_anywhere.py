"""A kill at any moment (issue 74): real commands in real processes, SIGKILLed several times, at
seeded random moments and at the named hazards, and started again each time with the same command
line, end as an uninterrupted run does: pretraining and fine-tuning with the same final checkpoint
(and best/) bit for bit and each step's and evaluation's metrics.jsonl line once;
create_pretraining_data with the same shards and no spill or temporary left.

A hazard is hit below TensorFlow: an LD_PRELOAD shim (built with the system's C compiler) SIGKILLs
its process when it opens (or makes) a path containing KILL_AT_PATH, once KILL_IF_EXISTS (when set)
exists, past the first KILL_AFTER (when set) such opens. The command line is the same on every
start; only the shim's variables differ."""

import filecmp
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from conftest import run_in_process, write_tiny_config
from test_run_classifier import stsb_dir  # noqa: F401 (their fixture)
from test_run_pretraining import ENV, ROOT, model_values, pretrain_args, pretrain_cmd, \
    tiny_config_file  # noqa: F401 (their fixture)

pytestmark = pytest.mark.real_process

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static int passed = 0;

static void kill_if_hazard(const char *path) {
    const char *pattern = getenv("KILL_AT_PATH");
    const char *gate = getenv("KILL_IF_EXISTS");
    const char *after = getenv("KILL_AFTER");
    struct stat st;
    if (!pattern || !*pattern || !path || !strstr(path, pattern)) return;
    if (gate && *gate && stat(gate, &st) != 0) return;
    if (after && passed++ < atoi(after)) return;
    kill(getpid(), SIGKILL);
}

#define OPEN(name, ...) \
    int name(__VA_ARGS__ const char *path, int flags, ...) { \
        va_list ap; \
        va_start(ap, flags); \
        mode_t mode = va_arg(ap, int); \
        va_end(ap); \
        kill_if_hazard(path); \
        int (*real)(__VA_ARGS__ const char *, int, ...) = dlsym(RTLD_NEXT, #name);

OPEN(open) return real(path, flags, mode); }
OPEN(open64) return real(path, flags, mode); }
OPEN(openat, int dirfd,) return real(dirfd, path, flags, mode); }
OPEN(openat64, int dirfd,) return real(dirfd, path, flags, mode); }

FILE *fopen(const char *path, const char *how) {
    kill_if_hazard(path);
    FILE *(*real)(const char *, const char *) = dlsym(RTLD_NEXT, "fopen");
    return real(path, how);
}

FILE *fopen64(const char *path, const char *how) {
    kill_if_hazard(path);
    FILE *(*real)(const char *, const char *) = dlsym(RTLD_NEXT, "fopen64");
    return real(path, how);
}

int mkdir(const char *path, mode_t mode) {
    kill_if_hazard(path);
    int (*real)(const char *, mode_t) = dlsym(RTLD_NEXT, "mkdir");
    return real(path, mode);
}
"""

WALL_CLOCK = ("examples_per_second",)
SEED = 74
STARTUP = 4  # seconds a command's process takes to import TensorFlow and its own modules


@pytest.fixture(scope="module")
def kill_shim(tmp_path_factory):
    """The shim's shared library (cc from the system)."""
    directory = tmp_path_factory.mktemp("shim")
    (directory / "kill_shim.c").write_text(SHIM)
    library = directory / "kill_shim.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(library), str(directory / "kill_shim.c"), "-ldl"],
                   check=True)
    return str(library)


def killed(cmd, shim, at_path=None, if_exists=None, after=0, *, after_seconds=None, env=ENV):
    """Runs `cmd` until it is SIGKILLed: by the shim at `at_path` (once `if_exists` exists, past
    `after` such opens), or by this process after `after_seconds`. Returns its exit status (-9
    when it was killed, else the status of a run that ended first)."""
    hazard = {"KILL_AT_PATH": str(at_path or ""), "KILL_IF_EXISTS": str(if_exists or ""), "KILL_AFTER": str(after)}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
                            env=dict(env, LD_PRELOAD=shim, **hazard))
    try:
        status = proc.wait(timeout=after_seconds if after_seconds is not None else 300)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        status = proc.wait()
    return status


def metrics_lines(run):
    """metrics.jsonl's records without the wall-clock fields, in order."""
    with open(run / "metrics.jsonl") as f:
        return [{k: v for k, v in json.loads(line).items() if k not in WALL_CLOCK} for line in f]


def assert_same_checkpoint(a, b):
    """The model variables of checkpoints `a` and `b` (prefixes) are bit for bit equal."""
    x, y = model_values(str(a)), model_values(str(b))
    assert x.keys() == y.keys() and x
    for name in x:
        np.testing.assert_array_equal(x[name], y[name], err_msg=name)


def leftovers(directory):
    """Temporaries and partial files in `directory` (and below): albert_tf's `.NAME.tmp-*`, TensorFlow's
    `ckpt-N_temp` and the checkpoint state file's temporary."""
    return sorted(os.path.relpath(os.path.join(d, n), directory) for d, dirs, names in os.walk(directory)
                  for n in dirs + names if ".tmp-" in n or n.endswith("_temp") or n.startswith("checkpoint.tmp"))


def restarted_until_done(cmd, shim, kills, output, seconds=None):
    """Starts `cmd` once per kill in `kills` ((at_path, if_exists[, after]) of a hazard, or None: a
    seeded random moment of the run, `seconds` long in this process, after a process's start-up,
    but at the latest at the next hazard, so that it is still ahead), then once more to the end.
    Returns the hazard kills' exit statuses and the last run's."""
    rng = random.Random(SEED)
    statuses = []
    for i, kill in enumerate(kills):
        if kill is None:
            ahead = next((k for k in kills[i + 1:] if k is not None), ())
            killed(cmd, shim, *ahead, after_seconds=STARTUP + rng.uniform(0, seconds))
        else:
            statuses.append(killed(cmd, shim, *kill))
    last = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=300)
    assert last.returncode == 0, last.stderr[-3000:]
    assert leftovers(output) == []
    return statuses, last


PRETRAINING = ("--deterministic", "--num_train_steps=15", "--save_checkpoints_steps=5", "--iterations_per_loop=5",
               "--dynamic_masking", "--max_eval_steps=2")


def test_pretraining_killed_anywhere_ends_as_the_uninterrupted_run(pretraining_records, kill_shim, request, tmp_path):
    """Killed inside the save of ckpt-10 (its train line written; TensorFlow's data file of it written
    in ckpt-10_temp/, its index not), at a seeded random moment, during the final evaluation (it
    reads --eval_input_file once ckpt-15 is there) and after the evaluation's line, as
    eval_results.json is written; each time restarted."""
    from albert_tf import run_pretraining

    records, _ = pretraining_records
    config = request.getfixturevalue("tiny_config_file")
    eval_file = tmp_path / "eval" / "eval.tfrecord"
    eval_file.parent.mkdir()
    shutil.copy(records[0], eval_file)
    flags = (*PRETRAINING, f"--eval_input_file={eval_file}")
    whole, run = tmp_path / "whole", tmp_path / "killed"
    started = time.time()
    reference = run_in_process(run_pretraining, pretrain_args(records, whole, config, *flags))
    seconds = time.time() - started
    assert reference.returncode == 0, reference.stderr[-3000:]

    hazards = [(run / "ckpt-10_temp/", None, 1), None, (eval_file, run / "ckpt-15.index"),
               (run / ".eval_results.json.tmp-", None)]
    statuses, last = restarted_until_done(pretrain_cmd(records, run, config, *flags), kill_shim, hazards, run,
                                          seconds)
    assert statuses == [-signal.SIGKILL] * 3
    assert "resuming from" in last.stdout
    assert tf.train.latest_checkpoint(str(run)).endswith("ckpt-15")
    assert_same_checkpoint(whole / "ckpt-15", run / "ckpt-15")
    assert metrics_lines(run) == metrics_lines(whole)
    assert json.load(open(run / "eval_results.json")) == json.load(open(whole / "eval_results.json"))


CLASSIFIER = ("--task_name=sts-b", "--max_seq_length=32", "--train_batch_size=16", "--eval_batch_size=16",
              "--train_step=6", "--save_checkpoints_steps=2", "--iterations_per_loop=1", "--dtype_policy=float32",
              "--do_train", "--do_eval")


def test_fine_tuning_killed_anywhere_ends_as_the_uninterrupted_run(spm_model, kill_shim, request, tmp_path):
    """run_classifier (STS-B: each checkpoint evaluated and offered as best/; the Pearson correlation
    rises at steps 2, 4 and 6): killed at a seeded random moment, between the save of ckpt-4 and
    best/ (inside best/'s save of ckpt-4, which replaces ckpt-2) and after best/'s ckpt-6 but before
    its record (best_metrics.json, still ckpt-4's); each time restarted."""
    from albert_tf import run_classifier

    # one layer, dropout on (its random state is in the checkpoints)
    config = write_tiny_config(tmp_path, num_hidden_layers=1, num_hidden_groups=1, hidden_dropout_prob=0.1)
    args = [*CLASSIFIER, f"--data_dir={request.getfixturevalue('stsb_dir')}", f"--spm_model_file={spm_model}",
            f"--albert_config_file={config}"]
    whole, run = tmp_path / "whole", tmp_path / "killed"
    started = time.time()
    reference = run_in_process(run_classifier, [*args, f"--output_dir={whole}"])
    seconds = time.time() - started
    assert reference.returncode == 0, reference.stderr[-3000:]
    pearson = [r["pearson"] for r in metrics_lines(whole) if r["split"] == "eval"]
    assert len(pearson) == 3 and pearson == sorted(set(pearson)), pearson  # each checkpoint became best/

    cmd = [sys.executable, "-m", "albert_tf.run_classifier", *args, f"--output_dir={run}"]
    hazards = [None, (run / "best" / "ckpt-4_temp/", None, 1),
               (run / "best" / ".best_metrics.json.tmp-", run / "best" / "ckpt-6.index")]
    statuses, _ = restarted_until_done(cmd, kill_shim, hazards, run, seconds)
    assert statuses == [-signal.SIGKILL] * 2
    assert tf.train.latest_checkpoint(str(run)).endswith("ckpt-6")
    assert_same_checkpoint(whole / "ckpt-6", run / "ckpt-6")
    best = json.load(open(whole / "best" / "best_metrics.json"))
    assert json.load(open(run / "best" / "best_metrics.json")) == best
    assert_same_checkpoint(whole / "best" / best["checkpoint"], run / "best" / best["checkpoint"])
    assert metrics_lines(run) == metrics_lines(whole)
    assert json.load(open(run / "eval_results.json")) == json.load(open(whole / "eval_results.json"))


def test_create_pretraining_data_killed_and_run_again_writes_the_same_shards(sample_corpus, spm_model, kill_shim,
                                                                             tmp_path):
    """Killed as it writes its spill files (--temp_dir: at its 6th file), then as it opens the shards
    (the spill complete); run again: the same bytes as an uninterrupted run, nothing left in --temp_dir
    or beside the shards."""
    spill = tmp_path / "spill"
    spill.mkdir()

    def command(out):
        return [sys.executable, "-m", "albert_tf.create_pretraining_data", f"--input_file={sample_corpus}",
                f"--output_file={out / 'shard.tfrecord'}", f"--spm_model_file={spm_model}", "--max_seq_length=64",
                "--max_predictions_per_seq=10", "--dupe_factor=1", "--num_output_shards=2",
                "--shuffle_buffer_size=500", f"--temp_dir={spill}"]

    whole, run = tmp_path / "whole", tmp_path / "killed"
    whole.mkdir()
    run.mkdir()
    done = subprocess.run(command(whole), capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "from the shuffle's spill files" in done.stderr
    # the second shard's temporary is opened after the first's (made, empty)
    hazards = [(spill, None, 6), (run / ".shard.tfrecord-00001-of-00002.tmp-", None)]
    statuses, _ = restarted_until_done(command(run), kill_shim, hazards, run)
    assert statuses == [-signal.SIGKILL] * 2
    assert sorted(os.listdir(run)) == sorted(os.listdir(whole))  # the same files, nothing more
    shards = sorted(p.name for p in whole.glob("shard.tfrecord-*"))
    assert len(shards) == 2
    for name in shards:
        assert filecmp.cmp(whole / name, run / name, shallow=False), name
    assert os.listdir(spill) == []


def test_a_killed_save_leaves_nothing_once_training_starts_again(tmp_path):
    """What a save killed midway left (TensorFlow's ckpt-N_temp/, the state file's temporary), in the
    run directory and best/, is removed when a training chief opens the run; checkpoints stay."""
    from albert_tf.training.checkpoints import remove_partial_saves

    (tmp_path / "best").mkdir()
    left = [tmp_path / "ckpt-10_temp", tmp_path / "best" / "ckpt-4_temp"]
    for directory in left:
        directory.mkdir()
        (directory / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"partial")
    left.append(tmp_path / "checkpoint.tmp0123abcd")
    left[-1].write_text("partial")
    kept = ["checkpoint", "ckpt-5.index", "ckpt-5.data-00000-of-00001", "metrics.jsonl", "ckpt-5_tempo"]
    for name in kept:
        (tmp_path / name).write_text("")
    assert sorted(remove_partial_saves(str(tmp_path))) == sorted(map(str, left))
    assert sorted(os.listdir(tmp_path)) == sorted(["best", *kept]) and os.listdir(tmp_path / "best") == []

