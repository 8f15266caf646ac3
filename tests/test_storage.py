"""The storage room: atomic output (also under SIGKILL), the checkpoint-matching report,
checkpoint prefixes by step, the one JSON reader."""

import json
import os
import subprocess
import sys

import pytest

from albert_tf.storage import atomic, outputs
from albert_tf.storage.json_files import JsonFileError, read_json, read_json_lines
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


@pytest.mark.real_process  # a writer killed by SIGKILL: its own process (its pid in the temporary names)
@pytest.mark.parametrize("kind", ["file", "path", "dir"])
def test_a_writer_killed_midway_leaves_the_previous_output_and_its_litter_is_swept(tmp_path, kind):
    target = tmp_path / ("out" if kind == "dir" else "out.txt")
    if kind == "dir":
        atomic.write_text(str(target / "a.txt"), "previous\n")
    else:
        atomic.write_text(str(target), "previous\n")
    proc = subprocess.Popen([sys.executable, "-c", WRITER, kind, str(target)], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ,
                                     PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert proc.stdout.readline().strip() == "started"
    assert _litter(tmp_path), "the writer should be holding a temporary name"
    proc.kill()  # SIGKILL
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
    refused_after_writing(users)  # an existing directory: only what the block made goes
    assert sorted(os.listdir(users)) == ["notes.txt"] and (users / "notes.txt").read_bytes() == b"mine"
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


CONFIG = "an albert_config.json (the model's settings)"


def test_the_json_reader_words_every_problem_alike(tmp_path):
    """Missing, empty, not UTF-8, not JSON (line, column and the text there) and not an
    object: each names the file, says what it should be and what to do."""
    def written(name, data):
        path = tmp_path / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
        return str(path)

    assert read_json(written("ok.json", '\ufeff{"a": [1, 2]}\n'), CONFIG) == {"a": [1, 2]}  # a BOM is allowed
    cases = [
        (str(tmp_path / "none.json"),
         ": no such file (it does not exist or is not a file); expected an albert_config.json (the model's settings)."),
        (written("empty.json", " \n"),
         ": the file is empty; expected an albert_config.json (the model's settings): fix or replace the file."),
        (written("broken.json", '{\n "vocab_size": 30000,\n oops\n}'),
         ":3:2: not valid JSON (Expecting property name enclosed in double quotes): oops; expected an "
         "albert_config.json (the model's settings): fix or replace the file."),
        (written("list.json", "[1, 2]"),
         ": a JSON array, not an object; expected an albert_config.json (the model's settings): fix or replace the "
         "file."),
        (written("latin1.json", b'{"a":\n "caf\xe9"}'),
         ":2: not valid UTF-8 (invalid continuation byte at byte 11); save the file as UTF-8."),
    ]
    for path, message in cases:
        with pytest.raises(JsonFileError) as error:
            read_json(path, CONFIG)
        assert str(error.value) == path + message
        assert isinstance(error.value, ValueError)  # exit status 2 at the entry points
    with pytest.raises(JsonFileError) as error:
        read_json(str(tmp_path / "broken.json"), CONFIG, fix="write it again with to_json_file")
    assert str(error.value).endswith("(the model's settings): write it again with to_json_file.")

    class DataError(ValueError):
        pass

    with pytest.raises(DataError, match=r"list\.json: a JSON array, not an object"):  # a room's own error type
        read_json(str(tmp_path / "list.json"), error=DataError)
    long_line = '{"data": [' + ", ".join(f'{{"k": {i}}}' for i in range(40)) + ",, ]}"
    with pytest.raises(JsonFileError) as error:
        read_json(written("long.json", long_line))
    column = long_line.index(",, ") + 2
    assert str(error.value) == (f"{tmp_path / 'long.json'}:1:{column}: not valid JSON (Expecting value): ..."
                                f"{long_line[column - 61:column + 19].strip()}; expected a JSON object: fix or replace "
                                "the file.")  # the text around the column of a long line


def test_json_lines_and_gzip_through_the_one_reader(tmp_path):
    import gzip

    path = tmp_path / "records.jsonl"
    path.write_text('{"step": 1}\n\n{"step": 2}\n', encoding="utf-8")
    assert read_json_lines(str(path), "a record") == [(1, {"step": 1}), (3, {"step": 2})]  # blank lines skipped
    (tmp_path / "empty.jsonl").write_text("\n\n")
    assert read_json_lines(str(tmp_path / "empty.jsonl")) == []
    for text, message in (('{"step": 1}\n{"step": \n', ":2:10: not valid JSON (Expecting value): {\"step\":; "),
                          ('{"step": 1}\n[2]\n', ":2: a JSON array, not an object; ")):
        path.write_text(text, encoding="utf-8")
        with pytest.raises(JsonFileError) as error:
            read_json_lines(str(path), "a record")
        assert str(error.value) == f"{path}{message}expected a record: fix or replace the file."
    packed = tmp_path / "records.jsonl.gz"
    packed.write_bytes(gzip.compress(b'{"step": 1}\n'))
    assert read_json_lines(str(packed)) == [(1, {"step": 1})]
    packed.write_bytes(b'{"step": 1}\n')
    with pytest.raises(JsonFileError, match=r"records\.jsonl\.gz: not a gzip file .*expected a JSON object, "
                                            r"gzip-compressed: fix or replace the file\."):
        read_json_lines(str(packed))


def test_a_url_is_read_through_tf_io_gfile(tmp_path):
    import tensorflow as tf

    url = "ram://json_reader_test/config.json"
    with tf.io.gfile.GFile(url, "w") as f:
        f.write('{"hidden_size": 32}')
    assert read_json(url) == {"hidden_size": 32}
    with pytest.raises(JsonFileError, match="^ram://json_reader_test/none.json: no such file"):
        read_json("ram://json_reader_test/none.json")


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
    for other, pattern in ((model(5),
                            r"shape mismatches \(2\): .*layers/dense/vars/0: source \[3, 4\], model \[3, 5\]"),
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


# ---------------------------------------------------------------------------------------------------------
# The output rule (albert_tf.storage.outputs): new, albert_tf's own, or refused


def _tree(root):
    """{relative path: bytes (files) or None (directories)} of everything under root."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(directory, name), root)] = None
        for name in files:
            with open(os.path.join(directory, name), "rb") as f:
                found[os.path.relpath(os.path.join(directory, name), root)] = f.read()
    return found


def _write(path, data=b"mine\x00\xff"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def _unmarked_outputs(root):
    """One output of each kind that looks like albert_tf's but has no marker (what albert_tf
    wrote before markers, which no release wrote: 0.2.0 marked every output)."""
    run = root / "run"
    _write(run / "run_info.json", b"{}")
    _write(run / "ckpt-1.index")
    hub = root / "hub"
    _write(hub / "encoder" / "saved_model.pb")
    _write(hub / "encoder" / "assets" / "albert_config.json", b"{}")
    _write(hub / "preprocess" / "saved_model.pb")
    qa = root / "qa_export"
    _write(qa / "saved_model.pb")
    _write(qa / "variables" / "variables.index")
    _write(qa / "qa_info.json", b"{}")
    conversion = root / "converted"
    _write(conversion / "albert_config.json", b"{}")
    _write(conversion / "pretrainer.weights.h5")
    cache = root / "train.tf_record"
    _write(cache)
    _write(root / "train.tf_record.json", json.dumps({"kind": "albert_tf squad features"}).encode())
    shard = root / "data" / "train.tfrecord-00000-of-00002"
    _write(shard)
    _write(root / "data" / "summary_train.tfrecord.json",
           json.dumps({"output_files": {str(shard): 3}}).encode())
    return {outputs.RUN: [run], outputs.EXPORT: [hub, qa], outputs.CONVERSION: [conversion],
            outputs.FEATURE_CACHE: [cache],
            outputs.PRETRAINING_DATA: [shard, root / "data" / "summary_train.tfrecord.json"]}


def test_the_rule_new_own_or_refused_and_check_writes_nothing(tmp_path):
    # new: a path that does not exist; for a directory kind also an empty directory
    (tmp_path / "empty").mkdir()
    for kind in outputs.DESCRIPTIONS:
        assert outputs.check([outputs.Output("--out", str(tmp_path / "nothing" / kind), kind)]) == \
            {str(tmp_path / "nothing" / kind): "new"}
    for kind in outputs.DIRECTORY_KINDS:
        assert outputs.examine(str(tmp_path / "empty"), kind).status == "new"
    # own: marked; an output that only looks like albert_tf's is not
    for kind, paths in _unmarked_outputs(tmp_path / "unmarked").items():
        for path in paths:
            assert outputs.examine(str(path), kind).status == "foreign", (kind, path)
    marked = tmp_path / "marked"
    marked.mkdir()
    outputs.write_marker(str(marked), outputs.EXPORT)
    (marked / "anything").write_text("x")
    assert outputs.examine(str(marked), outputs.EXPORT).status == "own"
    # refused: a user's directory or file, albert_tf's output of another kind, a link
    users = tmp_path / "users"
    _write(users / "notes.txt")
    _write(users / "saved_model.pb")  # a SavedModel with a user's file beside it is not an albert_tf export
    _write(users / "qa_info.json")
    user_file = _write(tmp_path / "user.bin")
    os.symlink(str(tmp_path / "unmarked" / "hub"), str(tmp_path / "link"))
    before = _tree(tmp_path)
    cases = [(str(users), kind, "is a directory that albert_tf did not make") for kind in outputs.DIRECTORY_KINDS]
    cases += [(user_file, kind, "is a file that albert_tf did not make (no marker .user.bin.albert_tf_output.json)")
              for kind in (outputs.FEATURE_CACHE, outputs.PRETRAINING_DATA)]
    cases += [(user_file, outputs.RUN, "exists and is not a directory"),
              (str(users), outputs.FEATURE_CACHE, "is a directory"),
              (str(tmp_path / "unmarked" / "run"), outputs.EXPORT, "is a directory that albert_tf did not make"),
              (str(marked), outputs.RUN, "is albert_tf's export, not a run directory"),
              (str(tmp_path / "link"), outputs.EXPORT, "is a symbolic link")]
    for path, kind, why in cases:
        with pytest.raises(outputs.OutputRefused) as refused:
            outputs.check([outputs.Output("--some_flag", path, kind)])
        assert str(refused.value).startswith(f"--some_flag={path} {why}"), (kind, str(refused.value))
        assert "never overwrites what it did not make" in str(refused.value)
    assert _tree(tmp_path) == before  # checking wrote nothing


def test_outputs_apart_from_inputs_and_from_each_other(tmp_path):
    def refused(outs, ins=()):
        with pytest.raises(outputs.OutputRefused) as error:
            outputs.check([outputs.Output(*o) for o in outs], [outputs.Input(*i) for i in ins])
        return str(error.value)

    run, export, cache = str(tmp_path / "run"), str(tmp_path / "exp"), str(tmp_path / "c.tf_record")
    # an output equal to, holding or inside an input (a checkpoint prefix need not exist)
    assert refused([("--export_path", run, outputs.EXPORT)], [("--checkpoint", run)]).startswith(
        f"--export_path={run} is the same path as the input --checkpoint={run}")
    assert refused([("--output", run, outputs.CONVERSION)], [("--input", run + "/model.ckpt")]).startswith(
        f"--output={run} contains the input --input={run}/model.ckpt")
    assert refused([("--output_dir", run + "/sub", outputs.RUN)], [("--init_checkpoint", run)]).startswith(
        f"--output_dir={run}/sub lies inside the input --init_checkpoint={run}")
    os.symlink(str(tmp_path), str(tmp_path / "alias"))  # the same path through a link is the same path
    assert "is the same path" in refused([("--output", str(tmp_path / "alias" / "run"), outputs.CONVERSION)],
                                         [("--input", run)])
    # two outputs on one path, or one inside another that does not leave room for it
    assert refused([("--output_dir", run, outputs.RUN), ("--export_dir", run, outputs.EXPORT)]) == \
        f"--output_dir={run} and --export_dir={run} are the same path; each output needs its own."
    assert refused([("--train_feature_file", cache, outputs.FEATURE_CACHE),
                    ("--predict_feature_file", cache, outputs.FEATURE_CACHE)]).endswith("each output needs its own.")
    assert "lies inside --export_dir" in refused([("--export_dir", export, outputs.EXPORT),
                                                  ("--output_dir", export + "/run", outputs.RUN)])
    for name in ("best", "train", "ckpt-3", "checkpoint", "run_info.json", outputs.MARKER):
        assert f"takes the name {name!r}, which the run in --output_dir writes itself" in refused(
            [("--output_dir", run, outputs.RUN), ("--export_dir", f"{run}/{name}", outputs.EXPORT)])
    # what a run leaves room for: its export and its feature caches inside it; empty paths are skipped
    assert outputs.check([outputs.Output("--output_dir", run, outputs.RUN),
                          outputs.Output("--export_dir", run + "/export", outputs.EXPORT),
                          outputs.Output("--train_file", run + "/train.tf_record", outputs.FEATURE_CACHE),
                          outputs.Output("--eval_file", None, outputs.FEATURE_CACHE)],
                         [outputs.Input("--init_checkpoint", str(tmp_path / "pretrained")),
                          outputs.Input("--albert_config_file", None)]) == \
        {run: "new", run + "/export": "new", run + "/train.tf_record": "new"}
    assert os.listdir(tmp_path) == ["alias"]


def test_writers_mark_what_they_make_and_refuse_what_they_did_not(tmp_path):
    # a run directory: created and marked, then resumed; a user's directory refused untouched
    run = str(tmp_path / "runs" / "a")
    assert outputs.claim_run(run) == "new" and os.listdir(run) == [outputs.MARKER]
    assert json.load(open(os.path.join(run, outputs.MARKER)))["kind"] == "run"
    assert outputs.claim_run(run) == "own"
    users = _write(tmp_path / "users" / "notes.txt")
    with pytest.raises(outputs.OutputRefused, match="--output_dir=.*users is a directory that albert_tf did not"):
        outputs.claim_run(os.path.dirname(users))
    # a directory output: written whole under a marked temporary, replacing only its own
    export = str(tmp_path / "export")
    for content in ("first", "second"):
        with outputs.replacing_dir(export, outputs.EXPORT) as tmp:
            _write(os.path.join(tmp, "saved_model.pb"), content.encode())
        assert sorted(os.listdir(export)) == [outputs.MARKER, "saved_model.pb"]
        assert open(os.path.join(export, "saved_model.pb")).read() == content
    before = _tree(tmp_path)
    for kind in (outputs.EXPORT, outputs.CONVERSION):
        with pytest.raises(outputs.OutputRefused, match="did not make"):
            with outputs.replacing_dir(os.path.dirname(users), kind, "--export_dir"):
                raise AssertionError("not reached")
    with pytest.raises(outputs.OutputRefused, match="is albert_tf's run directory, not an export"):
        with outputs.replacing_dir(run, outputs.EXPORT):
            raise AssertionError("not reached")
    # a file output: marked before it is written, the marker gone again when nothing was
    cache = str(tmp_path / "c.tf_record")
    with pytest.raises(RuntimeError):
        with outputs.replacing_file(cache, outputs.FEATURE_CACHE):
            raise RuntimeError("the builder failed")
    assert _tree(tmp_path) == before
    with outputs.replacing_file(cache, outputs.FEATURE_CACHE):
        atomic.write_text(cache, "records")
    assert os.path.isfile(outputs.marker_path(cache, outputs.FEATURE_CACHE))
    with pytest.raises(RuntimeError):  # a failed rebuild keeps the marker: the file stays albert_tf's
        with outputs.replacing_file(cache, outputs.FEATURE_CACHE):
            raise RuntimeError("the builder failed")
    assert outputs.examine(cache, outputs.FEATURE_CACHE).status == "own"
    # a user's file where a new cache would put its sidecar: refused, untouched
    _write(tmp_path / "d.tf_record.json", b"my json")
    with pytest.raises(outputs.OutputRefused, match=r"d.tf_record does not exist, but .*d.tf_record.json does"):
        with outputs.replacing_file(str(tmp_path / "d.tf_record"), outputs.FEATURE_CACHE, "--train_file"):
            raise AssertionError("not reached")
    assert (tmp_path / "d.tf_record.json").read_bytes() == b"my json"


def test_a_directory_output_keeps_what_made_it_in_its_marker_written_when_complete(tmp_path):
    """replacing_dir(made_by=...): the record, stamped, in the marker once the block
    completes; a failed block leaves the old output and its marker; the output stays own."""
    from albert_tf.storage import provenance

    export = str(tmp_path / "export")
    made_by = {"command": "export_tfhub", "flags": {"export_path": "export"}}
    with outputs.replacing_dir(export, outputs.EXPORT, made_by=made_by) as tmp:
        _write(os.path.join(tmp, "saved_model.pb"), b"model")
        assert "made_by" not in json.load(open(os.path.join(tmp, outputs.MARKER)))  # not before it is complete
    marker = json.load(open(os.path.join(export, outputs.MARKER)))
    assert marker["kind"] == outputs.EXPORT and sorted(os.listdir(export)) == [outputs.MARKER, "saved_model.pb"]
    assert {k: v for k, v in marker["made_by"].items() if k != "written"} == made_by
    assert marker["made_by"]["written"].endswith("Z") and "written" not in made_by  # stamped on a copy
    before = _tree(tmp_path)
    with pytest.raises(RuntimeError):
        with outputs.replacing_dir(export, outputs.EXPORT, made_by=dict(made_by, command="other")):
            raise RuntimeError("the writer failed")
    assert _tree(tmp_path) == before and outputs.examine(export, outputs.EXPORT).status == "own"
    assert provenance.stamp(None) is None


def test_package_sha256_follows_the_py_files_alone(tmp_path):
    from albert_tf.storage.provenance import package_sha256

    _write(tmp_path / "pkg" / "a.py", b"x = 1\n")
    _write(tmp_path / "pkg" / "sub" / "b.py", b"y = 2\n")
    first = package_sha256(str(tmp_path / "pkg"))
    _write(tmp_path / "pkg" / "notes.txt", b"not code")
    _write(tmp_path / "pkg" / "__pycache__" / "c.py", b"cached")
    assert package_sha256(str(tmp_path / "pkg")) == first and len(first) == 64
    _write(tmp_path / "pkg" / "sub" / "b.py", b"y = 3\n")
    assert package_sha256(str(tmp_path / "pkg")) != first
    os.rename(tmp_path / "pkg" / "sub" / "b.py", tmp_path / "pkg" / "sub" / "c.py")  # a renamed file counts too
    _write(tmp_path / "pkg" / "sub" / "c.py", b"y = 2\n")
    assert package_sha256(str(tmp_path / "pkg")) != first


def test_the_rules_names_agree_with_the_modules_that_write_them():
    from albert_tf.modeling.pretrained import CONFIG_NAME, MODEL_FILE
    from albert_tf.training.checkpoints import BEST_DIR, RUN_INFO

    assert outputs.RUN_INFO == RUN_INFO
    assert {BEST_DIR, RUN_INFO, CONFIG_NAME, MODEL_FILE} <= set(outputs.RUN_NAMES)


def test_write_csv_header_columns_and_values(tmp_path):
    import csv

    rows = [{"variant": "shipped", "error": 0.5, "extra": "x"}, {"variant": "gelu", "error": 0.25, "extra": "y"}]
    atomic.write_csv(str(tmp_path / "a.csv"), rows)
    atomic.write_csv(str(tmp_path / "b.csv"), rows, ["error", "variant"])  # chosen columns, others left out
    with open(tmp_path / "a.csv", newline="") as f:
        assert list(csv.reader(f)) == [["variant", "error", "extra"], ["shipped", "0.5", "x"], ["gelu", "0.25", "y"]]
    with open(tmp_path / "b.csv", newline="") as f:
        assert list(csv.reader(f)) == [["error", "variant"], ["0.5", "shipped"], ["0.25", "gelu"]]
    assert _litter(tmp_path) == []
