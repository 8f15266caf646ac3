"""A full disk or quota (docs/exit_status.md): a write that fails for space ends the command with
exit status 4 and one plain line naming the directory (for training, the newest complete
checkpoint), the command's partial files are removed, what was there before stays, and the same
command continues once there is room. The disk is real: a small tmpfs the test mounts (root; CI
runs as root, and there a disk that cannot be mounted fails the test) and fills; the failing run
is a real process. And the table of exit statuses lists every status the commands return."""

import ast
import ctypes
import errno
import hashlib
import os
import re
import subprocess
import sys

import pytest
from conftest import run_in_process, write_tiny_config

from albert_tf import cli
from albert_tf.storage import space

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
# what the libraries say of a full disk, which the command's line must not repeat
LIBRARY_TEXT = ("Traceback", "ResourceExhausted", "SaveV2", "function_node", "Errno", "errno =", "tempstate",
                "No space left on device", "RuntimeError", "while running")


# --- the table ------------------------------------------------------------------------------
def _doc_statuses():
    with open(os.path.join(ROOT, "docs", "exit_status.md"), encoding="utf-8") as f:
        return {int(m.group(1)) for m in re.finditer(r"^\| (\d+) \|", f.read(), re.MULTILINE)}


def _returned_statuses(path, functions=("run", "main")):
    """The int constants that the functions of module `path` named in `functions` (None: all)
    return or raise as SystemExit."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    found = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or (functions and function.name not in functions):
            continue
        for node in ast.walk(function):
            value = node.value if isinstance(node, ast.Return) else (
                node.args[0] if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "SystemExit"
                and node.args else None)
            if isinstance(value, ast.Constant) and type(value.value) is int:
                found.add(value.value)
    return found


def test_the_table_lists_every_exit_status():
    assert _doc_statuses() == set(cli.EXIT_STATUSES)
    modules = [os.path.join(d, n) for d in (os.path.join(ROOT, "albert_tf"), os.path.join(ROOT, "tools"))
               for n in sorted(os.listdir(d)) if n.endswith(".py")]
    modules.append(os.path.join(ROOT, "albert_tf", "convert", "__main__.py"))
    returned = set().union(*map(_returned_statuses, modules))
    assert returned and returned <= set(cli.EXIT_STATUSES), returned - set(cli.EXIT_STATUSES)
    # cli returns its constants, the table's keys, and no number of its own
    assert _returned_statuses(os.path.join(ROOT, "albert_tf", "cli.py"), functions=None) == set()


# --- what counts as a full disk ------------------------------------------------------------------
def test_each_librarys_full_disk_is_one_fault_named_plainly(tmp_path):
    import tensorflow as tf

    run = tmp_path / "run"
    run.mkdir()
    saved = tf.errors.ResourceExhaustedError(
        None, None, "{{function_node __wrapped__SaveV2_dtypes_9_device_/job:localhost/replica:0/task:0/device:CPU:0}} "
        f"{run}/ckpt-4_temp/part-00000-of-00001.data-00000-of-00001.tempstate1234; No space left on device "
        "[Op:SaveV2]")
    h5 = OSError(errno.ENOSPC, "Can't synchronously write data (file write failed: time = now, filename = "
                               f"'{run}/.w.weights.tmp-1-abcd.h5', file descriptor = 3, errno = 28, error message = "
                               "'No space left on device', buf = 0x1)")
    python = OSError(errno.ENOSPC, "No space left on device", str(run / "metrics.jsonl"))
    buffered = OSError(errno.ENOSPC, "No space left on device")
    space.attribute(buffered, str(run / "shard"))
    for error in (saved, h5, python, buffered):
        full = space.disk_full(error)
        assert full.directory == str(run) and not full.quota, (error, full.directory)
        assert str(full).startswith(f"no space left on the disk of {run}. ") and "Free space" in str(full)
        assert cli._ending(error) == (4, f"disk full: {full}")
    quota = space.disk_full(OSError(errno.EDQUOT, "Disk quota exceeded", str(run / "x")))
    assert quota.quota and str(quota).startswith(f"the disk quota for {run} is exceeded.")
    wrapped = ValueError("could not write the export")
    wrapped.__cause__ = python
    assert cli._ending(wrapped)[0] == 4
    (run / "train").mkdir()
    events = tf.errors.ResourceExhaustedError(  # TensorBoard's events writer, on a flush
        None, None, "{{function_node __wrapped__FlushSummaryWriter_device_/job:localhost/replica:0/task:0/device:CPU:0"
        f"}} {run}/train/events.out.tfevents.1.vm.2.0.v2; No space left on device\n\tFailed to flush 7 events to "
        f"{run}/train/events.out.tfevents.1.vm.2.0.v2\n\tCould not flush events file. [Op:FlushSummaryWriter]")
    assert space.disk_full(events).directory == str(run / "train")
    # running out of memory is no full disk, nor is another OSError
    assert space.disk_full(tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")) is None
    assert cli._ending(OSError(errno.EACCES, "Permission denied", str(run)))[0] == 2


def test_events_files_are_cut_to_their_whole_records(tmp_path):
    """What a failed events write leaves: a record cut short is cut off, a file without a whole
    record removed; changed bytes (no failed write's) are left as they are."""
    from albert_tf.data.tfrecord_file import frame
    from albert_tf.training.reporting import cut_partial_events

    whole = frame(b"file_version") + frame(b"a scalar")
    files = {"train/cut": whole + frame(b"cut short")[:9], "train/empty": b"", "eval/whole": whole,
             "eval/changed": whole[:-1] + b"!" + frame(b"more")}
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(data)
    cut_partial_events(str(tmp_path))
    left = {name: (tmp_path / name).read_bytes() for name in files if (tmp_path / name).exists()}
    assert left == {"train/cut": whole, "eval/whole": whole, "eval/changed": files["eval/changed"]}


# --- the commands on a full disk --------------------------------------------------------------
class SmallDisk:
    """A tmpfs of `size` bytes mounted at `path` (root only); `fill(leave)` leaves `leave` bytes
    free, `free()` makes the room again."""

    def __init__(self, path, size=64 << 20):
        self.path = str(path)
        os.makedirs(self.path)
        libc = ctypes.CDLL(None, use_errno=True)
        self._libc = libc
        if os.geteuid() != 0 or libc.mount(b"tmpfs", self.path.encode(), b"tmpfs", 0, f"size={size}".encode()):
            why = os.strerror(ctypes.get_errno()) if os.geteuid() == 0 else "not root"
            message = f"cannot mount a tmpfs at {self.path} ({why}): the full-disk tests need root and mount"
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(message)
            pytest.skip(message)
        self.filler = os.path.join(self.path, "filler")

    def fill(self, leave):
        stat = os.statvfs(self.path)
        with open(self.filler, "ab") as f:
            f.write(b"\0" * (stat.f_bavail * stat.f_frsize - leave))

    def free(self):
        os.remove(self.filler)

    def unmount(self):
        self._libc.umount2(self.path.encode(), 2)  # MNT_DETACH


@pytest.fixture
def disk(tmp_path):
    small = SmallDisk(tmp_path / "disk")
    yield small
    small.unmount()


def _files(directory):
    """{relative path: sha256} of every file under `directory` (but the filler)."""
    found = {}
    for parent, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(parent, name)
            if name != "filler":
                with open(path, "rb") as f:
                    found[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
    return found


def _fails_for_space(module, args, directory, **environ):
    """Runs `python -m albert_tf.MODULE ARGS` (a real process, `environ` added to its environment)
    on the full disk: exit status 4 and one plain line naming `directory`; returns the line."""
    proc = subprocess.run([sys.executable, "-m", f"albert_tf.{module}", *map(str, args)], capture_output=True,
                          text=True, env=dict(ENV, **environ), cwd=ROOT, timeout=600)
    assert proc.returncode == 4, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"{module}: disk full: no space left on the disk of {directory}. "), proc.stderr[-3000:]
    assert not any(t in proc.stderr for t in LIBRARY_TEXT), proc.stderr[-3000:]
    return line


def _no_temporaries(directory):
    """No file or directory under `directory` is a temporary of a write (albert_tf's, TensorFlow's)."""
    names = [name for _, subdirectories, files in os.walk(directory) for name in subdirectories + files]
    left = [name for name in names if re.search(r"^\.[^/]*\.tmp-|_temp$|^checkpoint\.tmp|^albert_tf_shuffle", name)]
    assert not left, left


def test_an_outputs_lock_on_a_full_disk_names_its_directory_and_is_let_go(disk):
    """Taking an output's lock writes its holder record: on a full disk that write fails naming
    the output's directory, and the lock is let go (taken once there is room, in this process too)."""
    from albert_tf.storage import lock

    run = os.path.join(disk.path, "run")
    os.makedirs(run)
    disk.fill(leave=0)
    with pytest.raises(OSError) as raised:
        lock.holding(os.path.join(run, ".albert_tf_lock"), "--output_dir", run)
    assert space.disk_full(raised.value).directory == run and os.listdir(run) == []
    disk.free()
    with lock.holding(os.path.join(run, ".albert_tf_lock"), "--output_dir", run):
        assert os.listdir(run) == [".albert_tf_lock"]


SAVE_PRETRAINED = """
import sys
from albert_tf import AlbertConfig, AlbertPretrainer, cli
model = AlbertPretrainer(AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000))
sys.exit(cli.main("save_pretrained", lambda values: None, lambda f: model.save_pretrained(sys.argv[1]), []))
"""


@pytest.mark.real_process
def test_a_weights_file_on_a_full_disk_is_named_and_removed(disk):
    """h5py's own error (Keras writes .weights.h5 through it) through the entry points' error
    handling, in a process: h5py leaves the file open, and freed as the process exits it would
    report the error again and crash the process (status 139): closed, neither happens."""
    directory = os.path.join(disk.path, "pretrained")
    disk.fill(leave=16 << 10)  # model.json and albert_config.json fit, the weights do not
    proc = subprocess.run([sys.executable, "-c", SAVE_PRETRAINED, directory], capture_output=True, text=True,
                          env=ENV, cwd=ROOT, timeout=600)
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"save_pretrained: disk full: no space left on the disk of {directory}. The files this command was writing "
        "were removed; what was there before is unchanged. Free space, then run the same command again.")
    assert not any(t in proc.stderr for t in LIBRARY_TEXT), proc.stderr[-3000:]
    assert sorted(os.listdir(directory)) == ["albert_config.json", "model.json"]


def _pretraining_args(records, tmp_path, run, save_checkpoints_steps=2, iterations_per_loop=2):
    """run_pretraining's flags for a 1-layer tiny model trained on `records` into `run`."""
    from albert_tf import AlbertConfig

    config = str(tmp_path / "albert_config.json")
    AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000, num_hidden_layers=1,
                                                    num_hidden_groups=1).to_json_file(config)
    return [f"--input_file={','.join(records[0])}", f"--output_dir={run}", f"--albert_config_file={config}",
            "--max_seq_length=128", "--max_predictions_per_seq=20", "--train_batch_size=8", "--learning_rate=0.005",
            "--num_warmup_steps=1", f"--save_checkpoints_steps={save_checkpoints_steps}",
            f"--iterations_per_loop={iterations_per_loop}", "--nodo_eval"]


@pytest.mark.real_process
def test_run_pretraining_on_a_full_disk_keeps_its_checkpoint_and_continues(disk, pretraining_records, tmp_path):
    from albert_tf import run_pretraining

    run = os.path.join(disk.path, "run")
    args = _pretraining_args(pretraining_records, tmp_path, run)
    assert run_in_process(run_pretraining, [*args, "--num_train_steps=2"]).returncode == 0
    before = {p: h for p, h in _files(run).items() if p.startswith("ckpt-2")}
    assert before
    disk.fill(leave=256 << 10)  # the session's records fit, the step-4 checkpoint does not

    line = _fails_for_space("run_pretraining", [*args, "--num_train_steps=4"], run)
    assert f"The newest complete checkpoint is {run}/ckpt-2;" in line
    assert "run the same command again to continue from it" in line
    after = _files(run)
    assert {p: h for p, h in after.items() if p.startswith("ckpt-2")} == before
    assert not [name for name in os.listdir(run) if name.startswith("ckpt-4")]
    _no_temporaries(run)
    with open(os.path.join(run, "checkpoint"), encoding="utf-8") as f:
        assert 'model_checkpoint_path: "ckpt-2"' in f.read()
    disk.fill(leave=0)  # not even the lock's record fits: the command stops before training, naming ckpt-2 too
    line = _fails_for_space("run_pretraining", [*args, "--num_train_steps=4"], run)
    assert f"The newest complete checkpoint is {run}/ckpt-2: free space" in line and "continue from it" in line
    assert _files(run) == after

    disk.free()
    result = run_in_process(run_pretraining, [*args, "--num_train_steps=4"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"resuming from {run}/ckpt-2 at step 2" in result.stdout + result.stderr
    assert os.path.exists(os.path.join(run, "ckpt-4.index"))


@pytest.mark.real_process
def test_run_pretraining_whose_tensorboard_events_do_not_fit(pretraining_records, tmp_path):
    """TensorBoard's train/ on a disk of its own, its last page left for the events file: the
    file's growth fails while the run trains (on one disk metrics.jsonl, rewritten each time,
    fails before the events, which fill their last page first). TensorFlow's events writer
    reports the failed flush (it drops nothing silently there) and leaves a record cut short,
    which is cut off, the whole records kept; status 4 naming train/ and the newest complete
    checkpoint; with room the same command continues from it."""
    from albert_tf import run_pretraining
    from albert_tf.data.record_check import damage
    from albert_tf.storage import outputs

    run = tmp_path / "run"
    events = SmallDisk(run / "train", size=1 << 20)
    try:
        outputs.write_marker(str(run), outputs.RUN)  # a run directory of albert_tf's, train/ its own disk
        args = _pretraining_args(pretraining_records, tmp_path, run, save_checkpoints_steps=4, iterations_per_loop=1)
        events.fill(leave=4 << 10)

        line = _fails_for_space("run_pretraining", [*args, "--num_train_steps=12"], run / "train")
        with open(run / "checkpoint", encoding="utf-8") as f:
            newest = re.search(r'^model_checkpoint_path: "(ckpt-(\d+))"', f.read(), re.MULTILINE)
        assert 4 <= int(newest.group(2)) < 12 and f"The newest complete checkpoint is {run}/{newest.group(1)};" in line
        logged = [os.path.join(run, "train", n) for n in os.listdir(run / "train") if n.startswith("events.out")]
        assert len(logged) == 1 and os.path.getsize(logged[0]) > 2 << 10 and damage(logged[0]) is None
        _no_temporaries(run)

        events.free()
        result = run_in_process(run_pretraining, [*args, "--num_train_steps=12"])
        assert result.returncode == 0, result.stderr[-3000:]
        assert f"resuming from {run}/{newest.group(1)} at step {newest.group(2)}" in result.stdout + result.stderr
        assert os.path.exists(run / "ckpt-12.index")
    finally:
        events.unmount()


@pytest.mark.real_process
def test_create_pretraining_data_on_a_full_disk_keeps_its_old_shards_and_leaves_no_spill(disk, sample_corpus,
                                                                                          spm_model, tmp_path):
    from albert_tf import create_pretraining_data

    corpus = tmp_path / "corpus.txt"
    with open(sample_corpus, encoding="utf-8") as f:
        corpus.write_text(f.read(60_000).rsplit("\n\n", 1)[0] + "\n", encoding="utf-8")
    out, spill = os.path.join(disk.path, "out"), os.path.join(disk.path, "spill")
    os.makedirs(spill)
    args = [f"--input_file={corpus}", f"--output_file={out}/train.tfrecord", f"--spm_model_file={spm_model}",
            "--max_seq_length=64", "--dupe_factor=2", "--num_output_shards=2", "--shuffle_buffer_size=50",
            f"--temp_dir={spill}", "--random_seed=7"]
    assert run_in_process(create_pretraining_data, args).returncode == 0
    disk.fill(leave=16 << 10)  # the first spill of 50 instances does not fit
    _data_on_a_full_disk(disk, args, spill, out, spill)


def _data_on_a_full_disk(disk, args, named, out, empty, **environ):
    """create_pretraining_data ARGS on the full disk (`environ` added to its environment): status
    4 naming directory `named`, the output directory `out` as it was, directory `empty` empty, no
    temporaries on the disk; with room the same command writes the same two shards again."""
    from albert_tf import create_pretraining_data

    before = _files(out)
    _fails_for_space("create_pretraining_data", args, named, **environ)
    assert _files(out) == before and os.listdir(empty) == []
    _no_temporaries(disk.path)

    disk.free()
    assert run_in_process(create_pretraining_data, args).returncode == 0
    shards = [p for p in before if p.endswith("-of-00002")]
    assert len(shards) == 2 and {p: _files(out)[p] for p in shards} == {p: before[p] for p in shards}


@pytest.mark.real_process
def test_create_pretraining_data_as_a_beam_pipeline_on_a_full_disk(disk, tmp_path):
    """--runner=DirectRunner, 2 worker processes: a shard a worker cannot write for space ends the
    command with status 4 naming the output's directory, without Beam's wrapped worker error; no
    shard temporary nor a file of Beam's ($TMPDIR on the disk) is left, the earlier output stays;
    with room the same command writes the local writer's bytes."""
    from test_data_writer import write_fixed_corpus, write_fixed_model

    from albert_tf import create_pretraining_data

    out, beam_tmp = os.path.join(disk.path, "out"), os.path.join(disk.path, "tmp")
    os.makedirs(beam_tmp)
    args = [f"--input_file={write_fixed_corpus(str(tmp_path / 'corpus.txt'))}", f"--output_file={out}/t.tfrecord",
            f"--spm_model_file={write_fixed_model(str(tmp_path / 'fixed.model'))}", "--max_seq_length=40",
            "--max_predictions_per_seq=7", "--dupe_factor=3", "--num_output_shards=2"]
    assert run_in_process(create_pretraining_data, args).returncode == 0  # the local writer: Beam's bytes
    disk.fill(leave=16 << 10)  # the shards do not fit
    _data_on_a_full_disk(disk, [*args, "--runner=DirectRunner", "--num_workers=2"], out, out, beam_tmp,
                         TMPDIR=beam_tmp)


@pytest.mark.real_process
def test_export_tfhub_on_a_full_disk_keeps_the_previous_export(disk, tiny_export):
    from albert_tf import export_tfhub

    pretrained = tiny_export["pretrained"]
    exports = os.path.join(disk.path, "exports")
    args = [f"--albert_config_file={pretrained}/albert_config.json", f"--checkpoint={pretrained}",
            f"--spm_model_file={tiny_export['spm']}", f"--export_path={exports}/hub", "--seq_length=32"]
    assert run_in_process(export_tfhub, args).returncode == 0
    before = _files(exports)
    disk.fill(leave=64 << 10)  # the SavedModels do not fit

    _fails_for_space("export_tfhub", args, exports)
    assert _files(exports) == before
    _no_temporaries(disk.path)

    disk.free()
    assert run_in_process(export_tfhub, args).returncode == 0


@pytest.mark.real_process
def test_run_classifier_on_a_full_disk_then_with_room(disk, spm_model, tmp_path):
    from albert_tf import run_classifier

    data = tmp_path / "cola"
    data.mkdir()
    with open(os.path.join(ROOT, "notebooks", "data", "docstring_topics", "train.tsv"), encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:33]
    (data / "train.tsv").write_text("".join(f"src\t{int(label == 'networking')}\t\t{text}\n" for text, label in rows),
                                    encoding="utf-8")
    run = os.path.join(disk.path, "run")
    args = ["--task_name=cola", f"--data_dir={data}", "--max_seq_length=32", f"--spm_model_file={spm_model}",
            f"--albert_config_file={write_tiny_config(tmp_path)}", "--train_step=2", "--save_checkpoints_steps=2",
            "--iterations_per_loop=2", "--train_batch_size=16", "--dtype_policy=float32", f"--output_dir={run}",
            "--do_train"]
    disk.fill(leave=256 << 10)  # the run's records fit, its checkpoint does not

    line = _fails_for_space("run_classifier", args, run)
    assert "No checkpoint is complete yet" in line
    _no_temporaries(run)

    disk.free()
    result = run_in_process(run_classifier, args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert os.path.exists(os.path.join(run, "ckpt-2.index"))
