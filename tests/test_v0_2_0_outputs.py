"""What albert_tf 0.2.0 wrote keeps working: its pretraining run continues, its fine-tuned run
evaluates and exports, its conversion, export and save_pretrained directory load and give the
outputs 0.2.0 computed, and the output rule recognises each as albert_tf's own.

tests/data/v0_2_0/fixtures.tar.xz (1.8 MB) was written by tests/v0_2_0_fixtures.py
with 0.2.0's own commands (commit 614fe3f in a worktree, CPython 3.11.7; the script's docstring
says how and what each directory is). Each test works on copies in tmp_path of a fresh
extraction: the archive is never written.
"""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the preprocessing model's ops)
import v0_2_0_fixtures as make_fixtures  # its argument lists: the continuation uses the same flags
from conftest import extract_archive, run_in_process

from albert_tf.storage import outputs

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "v0_2_0")
ARCHIVE = os.path.join(HERE, "fixtures.tar.xz")
# float32 rounding: the same ops on the same weights, recorded on a CPU with AVX-512 and computed
# here on whatever CPU runs the suite (other kernels sum in another order: a few ulps per layer);
# a changed op, weight or input moves these outputs by orders of magnitude more
ATOL = 1e-5
ENCODER_KEYS = ("sequence_output", "pooled_output")
V0_2_0_COMMIT = "614fe3f8279bec622607c829ce73acde68146ded"
ORIGINAL_OUTPUT_DIR = "/tmp/v0_2_0"  # make_fixtures --output_dir (its docstring)




@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    """The archive's v0_2_0/ directory, extracted once for the module (the tests copy from it)."""
    root = tmp_path_factory.mktemp("v0_2_0")
    extract_archive(ARCHIVE, root)
    return root / "v0_2_0"


@pytest.fixture
def v020(extracted, tmp_path):
    """A copy of the fixtures in tmp_path / "v0_2_0"."""
    return shutil.copytree(extracted, tmp_path / "v0_2_0")


@pytest.fixture(scope="module")
def recorded(extracted):
    """outputs.npz: the fixed inputs and what 0.2.0 computed on them."""
    with np.load(extracted / "outputs.npz") as data:
        return dict(data)


def _inputs(recorded):
    return {k[len("inputs_"):]: v for k, v in recorded.items() if k.startswith("inputs_")}


def _assert_outputs(model, recorded, prefix):
    x = _inputs(recorded)
    out, encoded = model(x, training=False), model.encoder(x, training=False)
    for key in ENCODER_KEYS:
        np.testing.assert_allclose(np.asarray(encoded[key]), recorded[f"{prefix}_{key}"], atol=ATOL, rtol=0,
                                   err_msg=key)
    for key in ("mlm_logits", "sop_logits"):
        np.testing.assert_allclose(np.asarray(out[key]), recorded[f"{prefix}_{key}"], atol=ATOL, rtol=0, err_msg=key)


def _jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_pretraining_run_continues_from_its_newest_checkpoint(v020, tmp_path):
    """run_pretraining with the run's own flags and a longer --num_train_steps resumes 0.2.0's
    run from its ckpt-4 (model, optimizer and input state), trains steps 5 and 6 only, and
    appends its session to 0.2.0's run_info.json and metrics.jsonl."""
    from albert_tf import run_pretraining

    run = v020 / "pretraining_run"
    config = shutil.copy(run / "albert_config.json", tmp_path / "albert_config.json")
    before = _jsonl(run / "metrics.jsonl")
    # the input iterator's state in ckpt-4 names the file the run read (make_fixtures wrote it
    # under /tmp/v0_2_0): a run continues on its own data, where it was
    original = os.path.join(ORIGINAL_OUTPUT_DIR, "data", "train.tfrecord")
    if os.path.exists(ORIGINAL_OUTPUT_DIR):
        pytest.fail(f"{ORIGINAL_OUTPUT_DIR} exists: this test puts the fixture's data there for the run; move it away")
    try:
        os.makedirs(os.path.dirname(original))
        shutil.copy(v020 / "data" / "train.tfrecord", original)
        result = run_in_process(run_pretraining, make_fixtures.pretraining_args(original, run, config,
                                                                                "--num_train_steps=6"))
    finally:
        shutil.rmtree(ORIGINAL_OUTPUT_DIR, ignore_errors=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"resuming from {run / 'ckpt-4'} at step 4" in result.stdout, result.stdout
    assert tf.train.latest_checkpoint(str(run)) == str(run / "ckpt-6")
    reader = tf.train.load_checkpoint(str(run / "ckpt-6"))
    assert reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == 6
    sessions = json.load(open(run / "run_info.json"))["sessions"]
    assert [(s["start_step"], s["final_step"], s["status"]) for s in sessions] == [(0, 4, "finished"),
                                                                                   (4, 6, "finished")]
    assert sessions[0]["albert_tf"]["version"] == "0.2.0" and sessions[1]["resumed_from"] == str(run / "ckpt-4")
    assert sessions[1]["changes"] == [{"setting": "num_train_steps", "old": 4, "new": 6}]
    records = _jsonl(run / "metrics.jsonl")
    assert records[:len(before)] == before  # 0.2.0's records kept as they were
    assert [(r["split"], r["step"]) for r in records[len(before):]] == [("train", 6), ("eval", 6)]
    assert json.load(open(run / "eval_results.json"))["global_step"] == 6


def test_fine_tuned_run_evaluates_as_it_did_and_exports(v020, tmp_path):
    """run_classifier --do_eval in 0.2.0's fine-tuned run (its training flags, --do_eval for
    --do_train) evaluates its best checkpoint to 0.2.0's own results, and --export_dir writes
    a raw-string export whose dev predictions and loss are the evaluation's."""
    from albert_tf import run_classifier

    run, data = v020 / "classifier_run", v020 / "classifier_data"
    old = json.load(open(run / "eval_results.json"))
    export = tmp_path / "export"
    result = run_in_process(run_classifier, make_fixtures.classifier_args(
        data, run, v020 / "pretrained", v020 / "data" / "spm.model", "--do_eval", f"--export_dir={export}"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{run / 'best' / 'ckpt-2'} (step 2)" in result.stdout, result.stdout
    new = json.load(open(run / "eval_results.json"))
    assert (new["checkpoint"], new["global_step"], new["examples"]) == (old["checkpoint"], 2, 16)
    for key in ("accuracy", "matthews_corrcoef"):
        assert new[key] == old[key], key
    assert new["loss"] == pytest.approx(old["loss"], rel=1e-6, abs=0)
    sessions = json.load(open(run / "run_info.json"))["sessions"]
    assert [(s["albert_tf"]["version"], s["trains"], s["start_step"]) for s in sessions][0] == ("0.2.0", True, 0)
    assert [(s["trains"], s["start_step"], s["final_step"]) for s in sessions[1:]] == [(False, 4, 4)]  # the run's step

    model = tf.saved_model.load(str(export))
    dev = [line.rstrip("\n").split("\t") for line in open(data / "dev.tsv", encoding="utf-8")]
    got = model(tf.constant([row[3] for row in dev]))
    predictions = [line.rstrip("\n").split("\t") for line in open(run / "dev_predictions.tsv", encoding="utf-8")][1:]
    assert [x.decode() for x in got["label"].numpy()] == [row[2] for row in predictions]
    gold = np.array([int(row[1]) for row in dev])
    loss = -np.mean(np.log(got["probabilities"].numpy()[np.arange(len(gold)), gold]))
    assert loss == pytest.approx(old["loss"], rel=1e-5)


def test_save_pretrained_directory_gives_the_outputs_0_2_0_computed(v020, recorded):
    """from_pretrained of 0.2.0's save_pretrained directory: the encoder's and the heads' outputs
    on fixed padded inputs are 0.2.0's (AlbertEncoder.from_pretrained too)."""
    from albert_tf import AlbertEncoder, AlbertPretrainer

    _assert_outputs(AlbertPretrainer.from_pretrained(v020 / "pretrained"), recorded, "pretrained")
    encoded = AlbertEncoder.from_pretrained(v020 / "pretrained")(_inputs(recorded), training=False)
    np.testing.assert_allclose(np.asarray(encoded["pooled_output"]), recorded["pretrained_pooled_output"],
                               atol=ATOL, rtol=0)


def test_converted_directory_loads_and_a_conversion_replaces_it(v020, recorded, tmp_path):
    """0.2.0's conversion (its run, to TF1 and back) loads with 0.2.0's outputs; the output rule
    takes it for albert_tf's own conversion, so today's convert replaces it."""
    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.convert import __main__ as convert

    converted = v020 / "converted"
    _assert_outputs(AlbertPretrainer.from_pretrained(converted), recorded, "converted")
    assert outputs.examine(converted, outputs.CONVERSION).status == "own"
    other = AlbertPretrainer(AlbertConfig.from_json_file(converted / "albert_config.json"))  # random weights
    other.save_pretrained(tmp_path / "other")
    result = run_in_process(convert, ["--from=albert_tf", f"--input={tmp_path / 'other'}", f"--output={converted}"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.load(open(converted / outputs.MARKER))["made_by"]["albert_tf"].get("git_commit") != V0_2_0_COMMIT
    replaced = AlbertPretrainer.from_pretrained(converted).encoder(_inputs(recorded), training=False)
    assert np.abs(np.asarray(replaced["pooled_output"]) - recorded["converted_pooled_output"]).max() > 1e-4


def test_export_loads_everywhere_with_the_outputs_0_2_0_computed(v020, recorded):
    """0.2.0's export_tfhub export: tf.saved_model.load, hub.KerasLayer and EncoderTFSMLayer give
    0.2.0's preprocessing of fixed sentences and its encoder's outputs on them."""
    import tensorflow_hub as hub

    from albert_tf.export.keras3 import EncoderTFSMLayer

    export = v020 / "export"
    sentences = tf.constant([str(s) for s in recorded["export_sentences"]])
    preprocess = tf.saved_model.load(str(export / "preprocess"))
    ids = preprocess(sentences)
    for key in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(ids[key].numpy(), recorded[f"export_{key}"], err_msg=key)
    encoders = {"saved_model": tf.saved_model.load(str(export / "encoder")),
                "hub.KerasLayer": hub.KerasLayer(str(export / "encoder")),
                "EncoderTFSMLayer": EncoderTFSMLayer(str(export / "encoder"))}
    for name, encoder in encoders.items():
        got = encoder(ids, training=False) if name == "saved_model" else encoder(ids)
        for key in ENCODER_KEYS:
            np.testing.assert_allclose(np.asarray(got[key]), recorded[f"export_{key}"], atol=ATOL, rtol=0,
                                       err_msg=f"{name} {key}")


OWN = [("pretraining_run", outputs.RUN), ("classifier_run", outputs.RUN), ("export", outputs.EXPORT),
       ("converted", outputs.CONVERSION), ("data/train.tfrecord", outputs.PRETRAINING_DATA),
       ("data/summary_train.tfrecord.json", outputs.PRETRAINING_DATA),
       ("data/spm.model", outputs.SENTENCEPIECE_MODEL)]


def test_the_output_rule_takes_each_0_2_0_output_for_its_own(extracted):
    """Every output 0.2.0's commands wrote is albert_tf's own of its kind (resumed or replaced),
    and of no other kind (its marker says which)."""
    others = {outputs.RUN: outputs.EXPORT, outputs.EXPORT: outputs.CONVERSION, outputs.CONVERSION: outputs.EXPORT,
              outputs.PRETRAINING_DATA: outputs.FEATURE_CACHE,
              outputs.SENTENCEPIECE_MODEL: outputs.LITERT_SENTENCEPIECE}
    for name, kind in OWN:
        assert outputs.examine(extracted / name, kind).status == "own", name
        assert outputs.examine(extracted / name, others[kind]).status == "foreign", name
