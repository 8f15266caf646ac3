"""run_classifier: GLUE layouts, both starting points, best checkpoint, predictions, the
raw-string export, resume, and clear errors for bad input."""

import csv
import json
import os

import numpy as np
import pytest
from conftest import Capture, run_in_process, write_tiny_config
from tools import make_topic_task
from distributed_helpers import MECHANICS
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the preprocessing model's ops)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TOPICS = os.path.join(ROOT, "notebooks", "data", "docstring_topics")
SEQ = 32


def _topic_rows(split):
    with open(os.path.join(TOPICS, f"{split}.tsv"), encoding="utf-8", newline="") as f:
        return list(csv.reader(f, delimiter="\t", quotechar=None))[1:]


def _write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


@pytest.fixture(scope="module")
def cola_dir(tmp_path_factory):
    """CoLA layout (no header; source, label, star, sentence): "is it about networking?"."""
    d = str(tmp_path_factory.mktemp("cola"))
    rows = _topic_rows("train")
    train = [f"src\t{int(label == 'networking')}\t\t{text}" for text, label in rows[:96]]
    _write(os.path.join(d, "train.tsv"), train)
    _write(os.path.join(d, "dev.tsv"), train[:48])  # dev = part of train: training must fit it
    _write(os.path.join(d, "test.tsv"), ["index\tsentence"] + [f"{i}\t{text}" for i, (text, _) in
                                                                enumerate(rows[200:210])])
    return d


@pytest.fixture(scope="module")
def stsb_dir(tmp_path_factory):
    """STS-B layout (10 columns with header; score 5 when both sentences share a topic)."""
    d = str(tmp_path_factory.mktemp("stsb"))
    rows = _topic_rows("dev")
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
    pairs = [f"{i}\tmain\tf\t2026\t{i}\ts1\ts2\t{a}\t{b}\t{5.0 if la == lb else 0.0:.3f}"
             for i, ((a, la), (b, lb)) in enumerate(zip(rows[:64], rows[64:128]))]
    _write(os.path.join(d, "train.tsv"), [header] + pairs[:48])
    _write(os.path.join(d, "dev.tsv"), [header] + pairs[48:])
    return d


@pytest.fixture(scope="module")
def random_start_run(tmp_path_factory, spm_model, cola_dir):
    """One 2-step CoLA training from random weights (a two-layer config: its point is not the
    depth), with dev evaluation, shared by two tests: the bad-input test's random start (its
    warning, eval_results.json) and the evaluation-alone test, which continues in its
    directory. Returns the run's result, its directory and eval_results.json as the run wrote
    it (read here, before any test adds a session)."""
    from albert_tf import run_classifier

    base = tmp_path_factory.mktemp("random_start")
    run = base / "run"
    common = ["--task_name=cola", f"--data_dir={cola_dir}", f"--max_seq_length={SEQ}", "--eval_batch_size=16",
              f"--spm_model_file={spm_model}", f"--albert_config_file={write_tiny_config(base, **MECHANICS)}",
              "--train_step=2", "--save_checkpoints_steps=2", "--iterations_per_loop=2", "--dtype_policy=float32"]
    result = run_in_process(run_classifier, [*common, f"--output_dir={run}", "--do_train", "--do_eval",
                                                 "--train_batch_size=16"])
    summary = json.load(open(run / "eval_results.json")) if result.returncode == 0 else None
    return {"result": result, "run": run, "common": common, "summary": summary}


def classifier_args(*args):
    """The arguments of `python -m albert_tf.run_classifier` with the tests' common sizes."""
    return [f"--max_seq_length={SEQ}", "--train_batch_size=16", "--eval_batch_size=16", "--predict_batch_size=4", *args]


def _jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def _tsv(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t") for line in f][1:]


@pytest.mark.learning
def test_cola_from_the_export_best_checkpoint_predictions_and_raw_string_export(tiny_export, cola_dir,
                                                                                 tmp_path, learning):
    from albert_tf import run_classifier

    out, export = str(tmp_path / "run"), str(tmp_path / "classifier")
    result = run_in_process(run_classifier, classifier_args(
                       "--task_name=CoLA", f"--data_dir={cola_dir}", f"--output_dir={out}",
                       f"--albert_hub_module_handle={tiny_export['hub']}", "--do_train", "--do_eval",
                       "--do_predict", "--optimizer=adamw", "--learning_rate=5e-4", "--train_step=60",
                       "--warmup_step=6", "--save_checkpoints_steps=20", "--iterations_per_loop=10",
                       "--keep_checkpoint_max=1",
                       f"--export_dir={export}", *learning.flags()))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ETA" in result.stdout and "best dev matthews_corrcoef" in result.stdout

    records = _jsonl(os.path.join(out, "metrics.jsonl"))
    train = [r for r in records if r["split"] == "train"]
    dev = [r for r in records if r["split"] == "eval"]
    assert [r["step"] for r in train] == [10, 20, 30, 40, 50, 60]
    assert [r["step"] for r in dev] == [20, 40, 60]
    # it learns (checked on dev below: the best checkpoint's accuracy against the majority baseline);
    # not train[-1] < train[0]: a run may learn, then diverge by step 60 (seen with LAMB at 2e-3, the
    # setting before benchmarks/results/learning_checks: dev accuracy 0.917 at step 20, 0.458 at 60)
    assert train[0]["learning_rate"] > train[-1]["learning_rate"]  # linear decay after warmup

    # the best dev checkpoint is kept even when newer ones pushed it out of keep_checkpoint_max
    summary = json.load(open(os.path.join(out, "eval_results.json")))
    print("cola eval", {k: summary[k] for k in ("accuracy", "matthews_corrcoef", "majority_baseline", "best_step")})
    best = max(dev, key=lambda r: (r["matthews_corrcoef"], -r["step"]))
    assert summary["best_step"] == best["step"] and summary["metric"] == "matthews_corrcoef"
    assert summary["matthews_corrcoef"] == pytest.approx(best["matthews_corrcoef"])
    # the majority baseline, from the files: the most frequent training label (a tie here, 48 of each:
    # the first label) predicted for every dev row
    train_gold = [line.split("\t")[1] for line in open(os.path.join(cola_dir, "train.tsv"), encoding="utf-8")
                  .read().splitlines()]
    dev_gold = [line.split("\t")[1] for line in open(os.path.join(cola_dir, "dev.tsv"), encoding="utf-8")
                .read().splitlines()]
    majority = max(("0", "1"), key=train_gold.count)
    assert 0 < dev_gold.count(majority) < len(dev_gold)  # both labels on dev: the metrics can tell
    assert summary["majority_baseline"] == {"matthews_corrcoef": 0.0,
                                            "accuracy": pytest.approx(dev_gold.count(majority) / len(dev_gold))}
    assert tf.train.latest_checkpoint(os.path.join(out, "best")).endswith(f"ckpt-{best['step']}")
    assert tf.train.latest_checkpoint(out).endswith("ckpt-60")
    assert len(tf.train.get_checkpoint_state(out).all_model_checkpoint_paths) == 1
    assert os.path.getsize(os.path.join(out, "training_curves.png")) > 10_000

    # dev_predictions.tsv: each row's gold label is the file's (column 1), in the file's order;
    # the summary's metrics are those of its predictions against those labels (computed here)
    dev_rows = _tsv(os.path.join(out, "dev_predictions.tsv"))
    assert [r[0] for r in dev_rows] == [str(i) for i in range(48)] and [r[3] for r in dev_rows] == dev_gold
    assert {r[2] for r in dev_rows} <= {"0", "1"}
    predicted, gold = np.array([r[2] == "1" for r in dev_rows]), np.array([g == "1" for g in dev_gold])
    assert np.mean(predicted == gold) == pytest.approx(summary["accuracy"])
    tp, tn = np.sum(predicted & gold), np.sum(~predicted & ~gold)
    fp, fn = np.sum(predicted & ~gold), np.sum(~predicted & gold)
    denominator = np.sqrt(float((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))
    assert summary["matthews_corrcoef"] == pytest.approx((tp * tn - fp * fn) / denominator if denominator else 0.0)
    learning.record("accuracy", summary["accuracy"], 0.75, "higher")
    assert summary["accuracy"] >= 0.75 > summary["majority_baseline"]["accuracy"], summary  # it learned the task
    test_rows = _tsv(os.path.join(out, "test_results.tsv"))
    assert [r[0] for r in test_rows] == [str(i) for i in range(10)]

    # the export takes raw strings and reproduces the best checkpoint's dev predictions
    model = tf.saved_model.load(export)
    sentences = [line.split("\t")[3] for line in open(os.path.join(cola_dir, "dev.tsv"), encoding="utf-8")
                 .read().splitlines()]
    outputs = model(tf.constant(sentences))
    assert [x.decode() for x in outputs["label"].numpy()] == [r[2] for r in dev_rows]
    # and the run's test predictions (test.tsv: index, sentence)
    test_sentences = [line.split("\t")[1] for line in open(os.path.join(cola_dir, "test.tsv"), encoding="utf-8")
                      .read().splitlines()[1:]]
    assert [x.decode() for x in model(tf.constant(test_sentences))["label"].numpy()] == [r[2] for r in test_rows]
    np.testing.assert_array_equal(outputs["logits"].numpy(), model(tf.constant(sentences))["logits"].numpy())
    serving = model.signatures["serving_default"](text_a=tf.constant(sentences[:3]))
    np.testing.assert_allclose(serving["probabilities"].numpy().sum(-1), 1.0, rtol=1e-5)
    info = json.load(open(os.path.join(export, "classifier_info.json")))
    assert info["labels"] == ["0", "1"] and info["inputs"] == ["text_a"] and info["seq_length"] == SEQ
    assert info["skips_padding"] is False  # an encoder loaded from an export runs as exported
    # fine-tuned on an export (a Keras TFSMLayer), the run still converts: transformers' logits
    # (the suite's NumPy transcription) equal the export's on every dev sentence
    from convert_helpers import hf_outputs

    from albert_tf.convert.api import load_source, write_target
    from albert_tf.data.tokenization import SentencePieceTokenizer

    info = json.load(open(os.path.join(out, "run_info.json")))
    assert info["model"]["config"]["encoder"]["class_name"] == "EncoderTFSMLayer"
    assert info["export_encoder"]["variables"] and info["labels"] == ["0", "1"]
    run_model = load_source("albert_tf", out)
    assert run_model.run_labels == ["0", "1"] and "best" in run_model.run_checkpoint
    hf_dir, kind, _ = write_target(run_model, "hf", str(tmp_path / "hf"), tiny_export["spm"])
    tokenizer = SentencePieceTokenizer(tiny_export["spm"])
    x = {name: np.zeros((len(sentences), SEQ), "int32") for name in ("input_word_ids", "input_mask", "input_type_ids")}
    for n, sentence in enumerate(sentences):
        ids = [tokenizer.cls_id] + tokenizer.encode(sentence)[: SEQ - 2] + [tokenizer.sep_id]
        x["input_word_ids"][n, :len(ids)], x["input_mask"][n, :len(ids)] = ids, 1
    theirs, _, c = hf_outputs(hf_dir, x)
    assert kind == "AlbertForSequenceClassification" and c["id2label"] == {"0": "0", "1": "1"}
    np.testing.assert_allclose(theirs["logits"], outputs["logits"].numpy(), atol=1e-4, rtol=0)


def test_sts_b_regression_from_an_albert_tf_checkpoint_in_process(tiny_export, stsb_dir, tmp_path):
    from absl import flags

    from albert_tf import run_classifier

    values = flags.FlagValues()
    run_classifier.define_flags(values)
    values([
        "run_classifier", "--task_name=sts-b", f"--data_dir={stsb_dir}", f"--output_dir={tmp_path / 'run'}",
        f"--init_checkpoint={tiny_export['pretrained']}", f"--spm_model_file={tiny_export['spm']}",
        f"--max_seq_length={SEQ}", "--do_train", "--do_eval", "--train_batch_size=8", "--eval_batch_size=8",
        "--train_step=12", "--save_checkpoints_steps=6", "--iterations_per_loop=6", "--learning_rate=1e-3",
        f"--export_dir={tmp_path / 'export'}",
        "--dtype_policy=float32"])  # compared with its float32 export below; "auto" is bf16 on bf16 CPUs
    results = run_classifier.run(values, stream=open(os.devnull, "w"))
    assert results["final_step"] == 12 and results["labels"] == []
    summary = results["eval"]
    assert summary["metric"] == "pearson" and summary["initialized_from"].endswith("pretrainer.weights.h5")
    rows = _tsv(os.path.join(tmp_path / "run", "dev_predictions.tsv"))
    gold = [float(r[9]) for r in (line.split("\t") for line in
                                  open(os.path.join(stsb_dir, "dev.tsv"), encoding="utf-8").read().splitlines()[1:])]
    assert len(rows) == 16 and [float(r[3]) for r in rows] == gold
    # the reported metrics are those of the written predictions (the best checkpoint's scores,
    # unrounded: float32 values written exactly), up to float64 summation order
    predicted = np.array([float(r[2]) for r in rows])
    assert all(float(np.float32(p)) == p for p in predicted)
    assert summary["pearson"] == pytest.approx(np.corrcoef(predicted, gold)[0, 1], rel=1e-12, abs=1e-12)
    # the loss: squared error computed by the model in float32
    assert summary["loss"] == pytest.approx(np.mean((predicted - np.array(gold)) ** 2), rel=1e-6)
    # the driver's TensorBoard and curves come with fine-tuning too
    assert list((tmp_path / "run" / "train").glob("events.out.tfevents.*"))
    assert list((tmp_path / "run" / "eval").glob("events.out.tfevents.*"))
    assert open(tmp_path / "run" / "training_curves.png", "rb").read(4) == b"\x89PNG"

    model = tf.saved_model.load(str(tmp_path / "export"))
    dev = [line.split("\t") for line in open(os.path.join(stsb_dir, "dev.tsv"), encoding="utf-8")
           .read().splitlines()[1:]]
    scores = model(tf.constant([r[7] for r in dev]), tf.constant([r[8] for r in dev]))["score"].numpy()
    np.testing.assert_allclose(scores, [float(r[2]) for r in rows], atol=1e-5)
    info = json.load(open(tmp_path / "export" / "classifier_info.json"))
    assert info["skips_padding"] is True
    from made_by import check_made_by

    check_made_by(info["made_by"], "run_classifier", {
        "task_name": "sts-b", "data_dir": str(stsb_dir), "output_dir": str(tmp_path / "run"),
        "init_checkpoint": tiny_export["pretrained"], "export_dir": str(tmp_path / "export"), "train_step": 12,
        "learning_rate": 1e-3, "dtype_policy": "float32"}, dtype_policy="float32")
    _run_converts_to_hf_and_keras_hub(tmp_path, tiny_export["spm"], dev, scores, summary["best_step"])

    # a second run with more steps resumes from the newest checkpoint
    values["train_step"].value = 18
    values["export_dir"].value = None
    values["do_eval"].value = False  # (its point is the resume: no second evaluation)
    buffer = Capture()
    assert run_classifier.run(values, stream=buffer)["final_step"] == 18, buffer.text
    assert "resuming from" in buffer.text and "ckpt-12" in buffer.text


def _run_converts_to_hf_and_keras_hub(tmp_path, spm, dev, scores, best_step):
    """The run directory (its best checkpoint, as the export) converts to transformers'
    AlbertForSequenceClassification and keras-hub's AlbertTextClassifier; both compute the
    export's scores from the same ids (transformers: the suite's NumPy transcription)."""
    import keras_hub
    from convert_helpers import hf_outputs

    from albert_tf.convert.api import load_source, write_target
    from albert_tf.data.tokenization import SentencePieceTokenizer

    model = load_source("albert_tf", str(tmp_path / "run"))
    assert model.run_checkpoint.endswith(os.path.join("best", f"ckpt-{best_step}")) and model.run_labels == []
    hf_dir, kind, left_behind = write_target(model, "hf", str(tmp_path / "hf"), spm)
    assert (kind, left_behind) == ("AlbertForSequenceClassification", [])
    preset, kind, _ = write_target(model, "keras_hub", str(tmp_path / "keras_hub"), spm)
    assert kind == "AlbertTextClassifier" and json.load(open(tmp_path / "keras_hub" / "labels.json")) == {"labels": []}

    tokenizer = SentencePieceTokenizer(spm)
    ids, types = [], []
    for r in dev:  # packed as the release packs a pair: the longer side loses its last piece until it fits
        a, b = tokenizer.encode(r[7]), tokenizer.encode(r[8])
        while len(a) + len(b) > SEQ - 3:
            (a if len(a) > len(b) else b).pop()
        ids.append([tokenizer.cls_id] + a + [tokenizer.sep_id] + b + [tokenizer.sep_id])
        types.append([0] * (len(a) + 2) + [1] * (len(b) + 1))
    rows = np.arange(len(dev))
    x = {"input_word_ids": np.zeros((len(rows), SEQ), "int32"), "input_mask": np.zeros((len(rows), SEQ), "int32"),
         "input_type_ids": np.zeros((len(rows), SEQ), "int32")}
    for n, (i, t) in enumerate(zip(ids, types, strict=True)):
        x["input_word_ids"][n, :len(i)], x["input_mask"][n, :len(i)], x["input_type_ids"][n, :len(t)] = i, 1, t
    theirs, _, c = hf_outputs(hf_dir, x)
    assert c["problem_type"] == "regression" and c["num_labels"] == 1 and c["id2label"] == {"0": "score"}
    np.testing.assert_allclose(theirs["logits"][:, 0], scores[rows], atol=1e-4, rtol=0)
    classifier = keras_hub.models.AlbertTextClassifier.from_preset(preset)
    keras_hub_scores = classifier({"token_ids": x["input_word_ids"], "segment_ids": x["input_type_ids"],
                                   "padding_mask": x["input_mask"]})
    np.testing.assert_allclose(np.asarray(keras_hub_scores)[:, 0], scores[rows], atol=1e-4, rtol=0)
    back = load_source("hf", hf_dir)
    for a, b in zip(model.weights, back.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)


BAD_INPUT = [  # (files of --data_dir, extra flags, the message expected on stderr)
    ({"train.tsv": ["src\t1\t\tfine", "src\t0\tonly three"]}, [], r"train.tsv:2: 3 columns, expected 4"),
    ({"train.tsv": ["src\t1\t\tfine", "src\tyes\t\tbad label"]}, [], r"train.tsv:2: label 'yes' is not one of 0, 1"),
    ({"train.tsv": []}, [], r"train.tsv: the file is empty"),
    ({"train.tsv": ["src\t1\t\tfine"]}, ["--task_name=glue"], r"--task_name='glue' is not one of cola, sst-2"),
    ({"train.tsv": ["src\t1\t\tfine"]}, ["--albert_hub_module_handle=/nonexistent"], r"no encoder/saved_model.pb"),
    ({"train.tsv": ["src\t1\t\tfine"]}, ["--dtype_policy=bf16"],
     r"--dtype_policy='bf16' is not one of auto, float32, mixed_bfloat16"),
]


def test_bad_input_names_the_file_and_line_and_a_random_start_warns(tmp_path, spm_model, tiny_export, cola_dir,
                                                                    random_start_run):
    """Every bad input exits 2 naming the file, line or flag, with nothing written; a hub
    handle whose encoder is shorter than --max_seq_length fails before any work; a run with
    no starting point warns and records "random". All in this process (run_classifier.main)."""
    import re

    from albert_tf import run_classifier

    # a valid tiny config: every case here is refused before any work
    common = [f"--max_seq_length={SEQ}", "--train_batch_size=16", "--eval_batch_size=16", "--predict_batch_size=4",
              f"--spm_model_file={spm_model}", f"--albert_config_file={write_tiny_config(tmp_path, **MECHANICS)}",
              "--do_train"]
    cases, outs = [], []
    for i, (files, extra, _) in enumerate(BAD_INPUT):
        for name, lines in files.items():
            _write(str(tmp_path / f"data{i}" / name), lines)
        outs.append(tmp_path / f"out{i}")
        cases.append(["--task_name=cola", f"--data_dir={tmp_path / f'data{i}'}", f"--output_dir={outs[-1]}", *common,
                      *extra])
    too_long = tmp_path / "too_long"
    cases.append(["--task_name=cola", f"--data_dir={cola_dir}", f"--output_dir={too_long}",
                  f"--albert_hub_module_handle={tiny_export['hub']}", "--do_train", "--max_seq_length=4096"])
    results = [run_in_process(run_classifier, args) for args in cases]
    for (_, _, message), out, result in zip(BAD_INPUT, outs, results):
        assert result.returncode == 2, (message, result.stderr[-2000:])
        assert "Traceback" not in result.stderr
        assert re.search(message, result.stderr), result.stderr
        assert not os.path.exists(out)  # nothing written for bad input

    result = results[len(BAD_INPUT)]
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "--max_seq_length (4096) exceeds max_position_embeddings (128)" in result.stderr
    assert not os.path.exists(too_long)

    result = random_start_run["result"]  # the module's random start (--do_train --do_eval, no starting point)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "WARNING: no --init_checkpoint and no --albert_hub_module_handle" in result.stderr
    summary = random_start_run["summary"]
    assert summary["initialized_from"] == "random" and summary["examples"] == 48


def test_shipped_topic_task_is_balanced_and_disjoint():
    from albert_tf.tasks.classification.data import get_task, read_examples

    task = get_task("tsv", labels=["networking", "numbers", "text", "concurrency"], text_a_column="sentence")
    train, dev = read_examples(task, TOPICS, "train"), read_examples(task, TOPICS, "dev")
    for examples, per_class in ((train, 448), (dev, 112)):
        counts = {label: sum(e.label == label for e in examples) for label in task.labels}
        assert set(counts.values()) == {per_class}
    assert not {e.text_a for e in train} & {e.text_a for e in dev}


def test_driver_mirrored_two_cpus_matches_one_device_for_a_classifier():
    """The classifier's gradients are summed over replicas before clipping (not averaged
    or left per replica): 2 replicas x 4 examples train exactly as 1 x 8 (the CPU split in
    two logical devices: conftest)."""
    from distributed_helpers import finetune_mirrored_vs_one_device

    data = finetune_mirrored_vs_one_device()
    assert data["mirrored"]["replicas"] == 2 and data["one_device"]["replicas"] == 1
    np.testing.assert_allclose(data["mirrored"]["losses"], data["one_device"]["losses"], atol=1e-5, rtol=0)
    assert data["mirrored"]["losses"][-1] < data["mirrored"]["losses"][0]


def test_the_driver_keeps_no_best_checkpoint_under_multi_worker_training(tmp_path, monkeypatch):
    """The driver refuses a best checkpoint under multi-worker training before any work: the
    chief alone saves best/, which the other workers would not read back, so they would end on
    other weights (the fine-tuning commands refuse multi_worker_mirrored before the driver:
    test_run_race's bad input). A cluster of two is stood for by `is_multi_worker`."""
    import types

    from albert_tf.training import distribution
    from albert_tf.training.driver import TrainingOptions, train_and_evaluate

    monkeypatch.setattr(distribution, "is_multi_worker", lambda strategy: True)
    run = tmp_path / "run"
    with pytest.raises(ValueError, match=r"best checkpoint \(keep_best\) is not kept under multi-worker training"):
        train_and_evaluate(types.SimpleNamespace(best_metric="accuracy"),
                           TrainingOptions(output_dir=str(run), keep_best=True))
    assert not run.exists()


def test_make_topic_task_is_balanced_disjoint_and_deterministic():
    train, dev = make_topic_task.make_task(per_class=40, dev_fraction=0.25)
    assert len(train) == 4 * 30 and len(dev) == 4 * 10
    assert {label for _, label in dev} == set(make_topic_task.LABELS)
    assert not {s for s, _ in train} & {s for s, _ in dev}
    assert all("\t" not in s and "\n" not in s for s, _ in train + dev)
    assert make_topic_task.make_task(per_class=40, dev_fraction=0.25) == (train, dev)
    with pytest.raises(ValueError, match="fewer than --per_class"):
        make_topic_task.make_task(per_class=100_000)


def test_evaluation_alone_says_what_it_evaluates_and_a_changed_training_is_refused(tmp_path, random_start_run):
    """A 2-step training (the module's random start), then in its directory: a training with
    another warmup and batch (refused, exit 2, each change named, nothing touched); evaluation
    alone with another learning rate (never refused: it names the trained checkpoint it
    evaluates and warns of no random start). Evaluation alone in a new directory warns that it
    evaluates random weights, not that fine-tuning starts from them. Each session is in
    run_info.json."""
    from albert_tf import run_classifier

    common, run, trained = random_start_run["common"], random_start_run["run"], random_start_run["result"]
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert "fine-tuning starts from random weights" in trained.stderr  # a training from nothing: warned
    before = {p: open(os.path.join(run, p), "rb").read() for p in os.listdir(run) if os.path.isfile(run / p)}
    refused = run_in_process(run_classifier, [*common, f"--output_dir={run}", "--do_train", "--train_batch_size=8",
                                              "--warmup_step=1", "--train_step=4"])
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    assert "--train_batch_size 16 -> 8" in refused.stderr and "--warmup_step 0 -> 1" in refused.stderr
    assert "--allow_changed_settings" in refused.stderr and "new --output_dir" in refused.stderr
    assert {p: open(os.path.join(run, p), "rb").read() for p in os.listdir(run) if os.path.isfile(run / p)} == before

    evaluated = run_in_process(run_classifier, [*common, f"--output_dir={run}", "--do_eval", "--learning_rate=0.1",
                                                "--train_batch_size=8"])
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert f"evaluating the trained checkpoint {run / 'ckpt-2'} (step 2)" in evaluated.stdout, evaluated.stdout
    assert "random weights" not in evaluated.stderr and "WARNING" not in evaluated.stderr, evaluated.stderr
    sessions = json.load(open(run / "run_info.json"))["sessions"]
    assert [(s["command"], s["trains"], s["start_step"], s["final_step"]) for s in sessions] == [
        ("run_classifier", True, 0, 2), ("run_classifier", False, 2, 2)]

    fresh = run_in_process(run_classifier, [*common, f"--output_dir={tmp_path / 'fresh'}", "--do_eval"])
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert "evaluating and predicting with random weights" in fresh.stderr
    assert "fine-tuning starts" not in fresh.stderr


def _doc_file(marker):
    """The ```python block of docs/fine_tuning.md holding `marker`: a command file the page shows."""
    import re

    text = open(os.path.join(ROOT, "docs", "fine_tuning.md"), encoding="utf-8").read()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if marker in b]
    assert len(blocks) == 1, (marker, len(blocks))
    return blocks[0]


def load_doc_file(marker, name):
    """The command file of docs/fine_tuning.md holding `marker`, run as the module `name` (not
    as __main__: its `main` is called by the test)."""
    import types

    module = types.ModuleType(name)
    exec(compile(_doc_file(marker), f"docs/fine_tuning.md: {name}.py", "exec"), vars(module))
    return module


def test_the_task_table_is_the_one_list_of_names():
    """TASKS (tasks/classification/data.py) is the named tasks: docs/fine_tuning.md's table
    (labels and metrics too), --task_name's help and run_classifier's help list exactly them."""
    import dataclasses
    import re

    from albert_tf import run_classifier
    from albert_tf.tasks.classification.data import TASKS
    from albert_tf.tasks.options import NamedTask

    text = open(os.path.join(ROOT, "docs", "fine_tuning.md"), encoding="utf-8").read()
    rows = re.findall(r"^\| `(\w[^`]*)` \| (.*?) \| (.*?) \| (.*?) \|$", text, re.M)  # not the header
    assert [name for name, *_ in rows] == list(TASKS)
    for name, labels, metrics, dev_file in rows:
        task = TASKS[name]
        assert labels == (", ".join(task.labels) or "(regression)"), name
        assert (metrics, dev_file) == (", ".join(task.metrics), task.files["dev"]), name
    help_text = dataclasses.fields(NamedTask)[0].metadata["help"]
    assert f"run_classifier: {', '.join(TASKS)} or tsv;" in help_text
    listed = re.search(r"Tasks: (.*?) \(case-insensitive\)", " ".join(run_classifier.__doc__.split())).group(1)
    assert listed.split(", ") == list(TASKS)


def test_a_task_of_your_own_is_one_file(spm_model, tmp_path):
    """docs/fine_tuning.md's topics task, the page's file as written: a tiny fine-tuning on the
    docstring topics through it, its name in eval_results.json."""
    from albert_tf.tasks.classification import data

    try:
        command = load_doc_file('TASKS["topics"]', "topics")
        assert data.TASKS["topics"].labels == ("concurrency", "networking", "numbers", "text")
        out = tmp_path / "run"
        result = run_in_process(command, classifier_args(
            "--task_name=topics", f"--data_dir={TOPICS}", f"--output_dir={out}", f"--spm_model_file={spm_model}",
            f"--albert_config_file={write_tiny_config(tmp_path)}", "--do_train", "--do_eval", "--train_step=2",
            "--save_checkpoints_steps=2", "--iterations_per_loop=2", "--dtype_policy=float32"))
    finally:
        data.TASKS.pop("topics", None)  # the file added its task to the process's table
    assert result.returncode == 0, result.stderr[-3000:]
    assert "task topics: 4 labels; training 1792 examples" in result.stdout, result.stdout
    summary = json.load(open(out / "eval_results.json"))
    assert (summary["task"], summary["metric"], summary["examples"]) == ("topics", "accuracy", 448)
    assert len(_tsv(out / "dev_predictions.tsv")) == 448
