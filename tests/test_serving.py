"""The SavedModels albert_tf writes, as a model server has them (issue 75): the encoder and
preprocessing exports, the classifier's (pair and single-text), SQuAD v1 and v2, RACE.

tests/serving_check.py loads each in a process of its own that imports only tensorflow and
tensorflow_text and checks every signature's outputs against what the writing process got.
The exports of tests/data/serving/exports.tar.xz were written with the lock's TensorFlow
(requirements.txt; tests/serving_exports.py writes the archive): in the lower-bound run
(requirements-lower.txt, the quick tier) they load under the oldest TensorFlow and
tensorflow-text of pyproject.toml's ranges. Exports written here and now load the same way and
have the archive's signatures, inputs, outputs and ops (so the archive is what the code writes).
docs/export.md's TF Serving recipe lists each export's tensorflow-text ops: checked here.
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops of the loaded SavedModels)
from conftest import extract_archive
from serving_exports import requests, write_exports

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ARCHIVE = os.path.join(ROOT, "tests", "data", "serving", "exports.tar.xz")
CHECK = os.path.join(ROOT, "tests", "serving_check.py")
# docs/export.md's names for the exports -> the exports of tests/serving_exports.py
DOC_NAMES = {"encoder/": ["hub/encoder"], "preprocess/": ["hub/preprocess"],
             "classifier": ["classifier_pair", "classifier_single"], "SQuAD": ["squad_v1", "squad_v2"],
             "RACE": ["race"]}


@pytest.fixture(scope="module")
def archived(tmp_path_factory):
    """The archive's exports, extracted: (directory, reference.json's content)."""
    root = tmp_path_factory.mktemp("serving_archive")
    extract_archive(ARCHIVE, str(root))
    with open(root / "serving" / "reference.json", encoding="utf-8") as f:
        return root / "serving", json.load(f)


@pytest.fixture(scope="module")
def fresh(spm_model, tmp_path_factory):
    """The same exports written now, with this process's TensorFlow: (directory, reference)."""
    directory = tmp_path_factory.mktemp("serving_fresh")
    return directory, write_exports(directory, spm_model)


def _serving_check(directory):
    """tests/serving_check.py on `directory` in a process of its own; its stdout."""
    result = subprocess.run([sys.executable, CHECK, str(directory)], cwd=str(directory), capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    return result.stdout


def text_ops(export_dir):
    """The ops of the SavedModel at `export_dir` (its graph and every function of its library)
    that TensorFlow itself does not define (not in tf.raw_ops): tensorflow-text's."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    (meta_graph,) = proto.meta_graphs
    graph = meta_graph.graph_def
    functions = {f.signature.name for f in graph.library.function}  # called by name
    ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    return sorted(op for op in ops - functions if not hasattr(tf.raw_ops, op))


def documented_text_ops():
    """docs/export.md's list: {export name of serving_exports: [op, ...]}."""
    text = open(os.path.join(ROOT, "docs", "export.md"), encoding="utf-8").read()
    section = text.split("The tensorflow-text ops each export uses", 1)[1].split("\n\n", 2)[1]
    found = {}
    for line in section.split("\n"):
        match = re.match(r"^- `?([^`:]+)`?: (.*)$", line)
        assert match, f"docs/export.md: not an entry of the tensorflow-text ops list: {line!r}"
        ops = [] if match.group(2).startswith("none") else re.findall(r"`([^`]+)`", match.group(2))
        for name in DOC_NAMES[match.group(1)]:
            found[name] = ops
    return found


def _shapes(reference):
    """Each export's signatures and each call's input and output names and dtypes."""
    return {name: (export["signatures"], {signature: {side: {k: v["dtype"] for k, v in call[side].items()}
                                                      for side in ("inputs", "outputs")}
                                          for signature, call in export["calls"].items()})
            for name, export in reference["exports"].items()}


@pytest.mark.real_process
def test_the_lock_s_exports_serve_in_a_plain_process(archived):
    """Under the lower-bound lock: exports of the lock's TensorFlow, loaded by the oldest one."""
    directory, reference = archived
    pins = dict(re.findall(r"^([\w-]+)==(\S+)", open(os.path.join(ROOT, "requirements.txt")).read(), re.M))
    assert reference["written_with"] == {"tensorflow": pins["tensorflow"],
                                         "tensorflow_text": pins["tensorflow-text"]}, (
        "tests/data/serving/exports.tar.xz was not written with the lock's TensorFlow: run tests/serving_exports.py")
    out = _serving_check(directory)
    assert out.count(" checked\n") == len(DOC_NAMES) + 2 == len(reference["exports"]), out


def test_docs_list_the_text_ops_of_each_export(archived):
    directory, reference = archived
    assert documented_text_ops() == {name: text_ops(directory / name) for name in reference["exports"]}


@pytest.mark.real_process
def test_exports_written_now_serve_in_a_plain_process_as_the_archive_s(fresh, archived):
    directory, reference = fresh
    _serving_check(directory)
    assert _shapes(reference) == _shapes(archived[1])
    assert {name: text_ops(directory / name) for name in reference["exports"]} == documented_text_ops()
    assert [(e["export"], e["signature"], e["error"]) for e in reference["errors"]] == [
        (e["export"], e["signature"], e["error"]) for e in archived[1]["errors"]]


def test_serve_examples_answers_as_serving_default_and_refuses_what_it_cannot_read(fresh):
    """The same outputs, exactly, for the same texts; a missing text_b (pair task), bytes that
    are no tf.Example, a text_b given to a single-text task, a text feature that is not one
    bytes value: an InvalidArgumentError naming it, no numbers."""
    directory, reference = fresh
    for name, outputs in (("classifier_pair", {"logits", "probabilities", "label_id", "label"}),
                          ("classifier_single", {"score"})):
        calls = reference["exports"][name]["calls"]
        assert calls["serve_examples"]["outputs"] == calls["serving_default"]["outputs"], name
        assert set(calls["serve_examples"]["outputs"]) == outputs
    ok, fail = requests()
    models = {name: tf.saved_model.load(str(directory / name)) for name in ("classifier_pair", "classifier_single")}
    pair = models["classifier_pair"]
    by_method = pair.serve_examples(tf.constant(ok["classifier_pair"]["serve_examples"]["examples"]))
    by_call = pair(**{k: tf.constant(v) for k, v in ok["classifier_pair"]["serving_default"].items()})
    assert sorted(by_method) == sorted(by_call)
    for key, value in by_method.items():
        np.testing.assert_array_equal(value.numpy(), by_call[key].numpy())

    def example(**features):
        return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()

    def text(*values):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))

    fail += [("classifier_pair", "serve_examples", {"examples": [example(text_a=text(b"one", b"two"),
                                                                          text_b=text(b"three"))]}, "text_a"),
             ("classifier_pair", "serve_examples",
              {"examples": [example(text_a=tf.train.Feature(int64_list=tf.train.Int64List(value=[7])),
                                    text_b=text(b"fine"))]}, "text_a")]
    for name, signature, inputs, word in fail:
        with pytest.raises(tf.errors.InvalidArgumentError, match=word):
            models[name].signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
