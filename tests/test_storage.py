"""The storage room: atomic output (also under SIGKILL), the checkpoint-matching report,
checkpoint prefixes by step."""

import json
import os
import signal
import subprocess
import sys

import pytest

from albert_tf.storage import atomic
from albert_tf.storage.report import CheckpointMismatchError, MatchReport

# A writer that streams a big file (or fills a directory) slowly through the atomic
# helpers, printing "started" once its temporary exists, so the test can kill it midway.
WRITER = r"""
import os, sys, time
from albert_tf.storage import atomic
kind, path = sys.argv[1], sys.argv[2]
if kind == "file":
    with atomic.open_file(path, "w") as f:
        f.write("new content, part 1\n"); f.flush()
        print("started", flush=True)
        time.sleep(60)
        f.write("part 2\n")
elif kind == "path":
    with atomic.output_path(path) as tmp:
        open(tmp, "w").write("new"); print("started", flush=True); time.sleep(60)
else:
    with atomic.output_dir(path) as tmp:
        open(os.path.join(tmp, "a.txt"), "w").write("new")
        print("started", flush=True)
        time.sleep(60)
"""


def _litter(directory):
    return [n for n in os.listdir(directory) if ".tmp-" in n or ".old-" in n]


@pytest.mark.parametrize("kind", ["file", "path", "dir"])
def test_a_writer_killed_midway_leaves_the_previous_output_and_its_litter_is_swept(tmp_path, kind):
    target = tmp_path / ("out" if kind == "dir" else "out.txt")
    if kind == "dir":
        atomic.write_text(str(target / "a.txt"), "previous\n")
    else:
        atomic.write_text(str(target), "previous\n")
    proc = subprocess.Popen([sys.executable, "-c", WRITER, kind, str(target)], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert proc.stdout.readline().strip() == "started"
    assert _litter(tmp_path), "the writer should be holding a temporary name"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    # the previous output is whole
    previous = (target / "a.txt") if kind == "dir" else target
    assert previous.read_text() == "previous\n"
    # the next atomic write in that directory removes the dead writer's temporaries
    atomic.write_text(str(tmp_path / "other.txt"), "x")
    assert _litter(tmp_path) == []
    assert previous.read_text() == "previous\n"


def test_a_directory_left_aside_by_a_killed_replacement_is_put_back(tmp_path):
    target = tmp_path / "export"
    atomic.write_text(str(target / "saved_model.pb"), "old")
    # as if a process (pid 999999, not running) was killed between its two renames
    aside = tmp_path / ".export.old-999999-0123abcd"
    os.replace(target, aside)
    assert atomic.sweep(str(tmp_path)) == [aside.name]
    assert (target / "saved_model.pb").read_text() == "old" and _litter(tmp_path) == []


def test_exceptions_keep_the_old_output_and_leave_nothing(tmp_path):
    path = tmp_path / "metrics.json"
    atomic.write_json(str(path), {"a": 1})
    with pytest.raises(RuntimeError):
        with atomic.open_file(str(path)) as f:
            f.write("half")
            raise RuntimeError("boom")
    with pytest.raises(RuntimeError):
        with atomic.output_dir(str(tmp_path / "d")) as tmp:
            open(os.path.join(tmp, "x"), "w").write("x")
            raise RuntimeError("boom")
    assert json.loads(path.read_text()) == {"a": 1}
    assert sorted(os.listdir(tmp_path)) == ["metrics.json"]



def test_removed_if_refused_removes_only_what_the_refused_block_created(tmp_path):
    def refused_after_writing(path):
        with pytest.raises(CheckpointMismatchError):
            with atomic.removed_if_refused(str(path), CheckpointMismatchError):
                atomic.write_text(os.path.join(path, "albert_config.json"), "{}")
                raise CheckpointMismatchError("shape mismatches")

    refused_after_writing(tmp_path / "runs" / "new")  # runs/ was made by the block too
    assert os.listdir(tmp_path) == []
    users = tmp_path / "users"
    users.mkdir()
    (users / "notes.txt").write_bytes(b"mine")
    refused_after_writing(users)
    assert (users / "notes.txt").read_bytes() == b"mine"
    with pytest.raises(KeyboardInterrupt):  # not a refusal: an interrupted run keeps what it wrote
        with atomic.removed_if_refused(str(tmp_path / "interrupted"), CheckpointMismatchError):
            atomic.write_text(str(tmp_path / "interrupted" / "ckpt"), "x")
            raise KeyboardInterrupt
    assert (tmp_path / "interrupted" / "ckpt").read_text() == "x"

def test_append_line_and_suffixes(tmp_path):
    path = str(tmp_path / "m.jsonl")
    for i in range(3):
        atomic.append_line(path, json.dumps({"step": i}))
    assert [json.loads(line)["step"] for line in open(path)] == [0, 1, 2]
    # libraries that pick the format from the name get the target's suffix
    assert atomic.temporary_name(str(tmp_path / "encoder.weights.h5")).endswith(".weights.h5")
    assert atomic.temporary_name(str(tmp_path / "curves.png")).endswith(".png")
    with pytest.raises(NotADirectoryError, match="is not a directory"):
        with atomic.output_dir(path):
            pass


def test_the_report_names_every_difference():
    report = MatchReport.compare({"a": (2, 3), "b": (4,), "c": (1,)}, {"a": (3, 2), "b": [4], "d": (5,), "slot": (1,)},
                                 "--init_checkpoint=x", ignore_unexpected=("slot",))
    assert not report.ok and report.matched == 1
    assert report.missing == ("c",) and report.unexpected == ("d",) and report.mismatched == (("a", (3, 2), (2, 3)),)
    with pytest.raises(CheckpointMismatchError) as error:
        report.raise_if_mismatched()
    text = str(error.value)
    assert text.splitlines()[0] == "--init_checkpoint=x does not match the model (1 variables match):"
    assert "missing from the source (1): c" in text and "not in the model (1): d" in text
    assert "a: source [3, 2], model [2, 3]" in text
    assert MatchReport.compare({"a": (1,)}, {"a": (1,)}, "src").raise_if_mismatched().ok


def test_a_weights_file_is_loaded_only_when_every_variable_matches(tmp_path):
    import keras
    import numpy as np

    from albert_tf.storage.weights_file import load_weights_file

    def model(units, extra=False):
        inputs = keras.Input((3,))
        x = keras.layers.Dense(units, name="first")(inputs)
        if extra:
            x = keras.layers.Dense(2, name="second")(x)
        return keras.Model(inputs, x)

    source = model(4)
    path = str(tmp_path / "m.weights.h5")
    source.save_weights(path)
    same = model(4)
    assert load_weights_file(same, path, "--init_checkpoint") == path
    assert all(np.array_equal(a, b) for a, b in zip(source.get_weights(), same.get_weights()))
    for other, pattern in ((model(5), r"shape mismatches \(2\): .*layers/dense/vars/0: source \[3, 4\], model \[3, 5\]"),
                           (model(4, extra=True), r"missing from the source \(2\): layers/dense_1/vars/0")):
        before = [w.copy() for w in other.get_weights()]
        with pytest.raises(CheckpointMismatchError, match=pattern):
            load_weights_file(other, path, "--init_checkpoint")
        assert all(np.array_equal(a, b) for a, b in zip(before, other.get_weights()))  # nothing half loaded


def test_latest_prefix_takes_the_highest_step(tmp_path):
    import tensorflow as tf

    from albert_tf.storage.checkpoints import latest_prefix

    v = tf.Variable(1.0)
    for step in (9, 10000, 200):
        tf.train.Checkpoint(v=v).write(str(tmp_path / f"model.ckpt-{step}"))
    assert latest_prefix(str(tmp_path)).endswith("model.ckpt-10000")  # not ckpt-9 (alphabetical)
    assert latest_prefix(str(tmp_path / "model.ckpt-9")).endswith("model.ckpt-9")
    assert latest_prefix(str(tmp_path / "nothing")) is None
