"""Accuracy of LiteRT files against their float32 model: a classifier fine-tuned on the
demo's docstring-topics task (notebooks/data/docstring_topics) and, with --squad_run, a
SQuAD v1.1 run, exported with `python -m albert_tf.export_litert` at none and
dynamic_int8 and evaluated on their dev sets.

    python benchmarks/litert_accuracy_bench.py --init_checkpoint=PRETRAINED_DIR --spm_model_file=SPM \\
        [--squad_run=RUN_DIR --squad_dev=dev-v1.1.json] [--output_dir=benchmarks/results/litert] \\
        [--steps=400] [--work_dir=DIR]

PRETRAINED_DIR is an albert_tf pretrained directory (e.g. a run_pretraining output_dir)
whose SentencePiece model is SPM. The classifier is trained with run_classifier at float32
(--init_checkpoint, 4 labels, max_seq_length 64, batch 32, learning rate 5e-4, 10% warmup),
as benchmarks/precision_learning_bench.py's pretrained-start classification run. Every dev
sentence is tokenized as the release does ([CLS] pieces [SEP], at most 64) and run at its
own length through each LiteRT file in ai_edge_litert; the Keras run model's accuracy is
computed on the same ids. SQuAD: the run's own dev features (max_seq_length 128, doc_stride
48, max_query_length 24, as benchmarks/precision_learning_bench.py trains it) through each
file, then the run's post-processing and the official v1.1 metrics; the run's own F1 is
the float32 reference. Writes OUTPUT_DIR/litert_accuracy.json.
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
TOPICS = os.path.join(ROOT, "notebooks", "data", "docstring_topics")
LABELS = ("concurrency", "networking", "numbers", "text")
SEQ = 64


def _module(name, *args):
    done = subprocess.run([sys.executable, "-m", name, *args], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    if done.returncode:
        raise RuntimeError(f"{name} exited {done.returncode}: {done.stderr[-3000:]}")
    return done.stdout


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--init_checkpoint", required=True)
    parser.add_argument("--spm_model_file", required=True)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--output_dir", default=os.path.join(HERE, "results", "litert"))
    parser.add_argument("--work_dir", default=None)
    parser.add_argument("--squad_run", default=None, help="A run_squad_v1 output_dir (trained, with --do_predict).")
    parser.add_argument("--squad_dev", default=None, help="Its --predict_file.")
    args = parser.parse_args(argv)
    for path in (args.init_checkpoint, args.spm_model_file):
        if not os.path.exists(path):
            print(f"litert_accuracy_bench: {path} does not exist", file=sys.stderr)
            return 2
    work = args.work_dir or tempfile.mkdtemp(prefix="litert_accuracy_")
    run = os.path.join(work, "classifier")
    if not os.path.isfile(os.path.join(run, "eval_results.json")):
        print(f"fine-tuning the topic classifier ({args.steps} steps) into {run}", flush=True)
        _module("albert_tf.run_classifier", "--task_name=tsv", f"--data_dir={TOPICS}",
                f"--spm_model_file={args.spm_model_file}", "--text_a_column=sentence", f"--labels={','.join(LABELS)}",
                f"--init_checkpoint={args.init_checkpoint}", f"--output_dir={run}", "--do_train", "--do_eval",
                f"--max_seq_length={SEQ}", "--train_batch_size=32", "--eval_batch_size=64", "--learning_rate=5e-4",
                f"--train_step={args.steps}", f"--warmup_step={args.steps // 10}",
                f"--save_checkpoints_steps={args.steps}", "--iterations_per_loop=50", "--dtype_policy=float32")
    files = {}
    for quantization in ("none", "dynamic_int8"):
        files[quantization] = os.path.join(work, f"topics_{quantization}.tflite")
        if not os.path.isfile(files[quantization]):
            print(_module("albert_tf.export_litert", f"--init_checkpoint={run}", f"--output={files[quantization]}",
                          f"--quantization={quantization}", f"--max_seq_length={SEQ}",
                          f"--spm_model_file={args.spm_model_file}").strip(), flush=True)

    import keras
    import numpy as np

    keras.config.set_dtype_policy("float32")
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf.convert.api import load_source
    from albert_tf.data.tokenization import SentencePieceTokenizer

    with open(os.path.join(TOPICS, "dev.tsv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    tokenizer = SentencePieceTokenizer(args.spm_model_file)
    model = load_source("albert_tf", run)
    assert list(model.run_labels) == list(LABELS), model.run_labels
    runners = {q: Interpreter(model_path=p).get_signature_runner("serving_default") for q, p in files.items()}
    predicted = {"keras_float32": [], **{f"litert_{q}": [] for q in files}}
    for row in rows:
        ids = np.array([[tokenizer.cls_id] + tokenizer.encode(row["sentence"])[: SEQ - 2] + [tokenizer.sep_id]],
                       "int32")
        x = {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)}
        predicted["keras_float32"].append(int(np.argmax(np.asarray(model(x, training=False))[0])))
        for q, runner in runners.items():
            predicted[f"litert_{q}"].append(int(np.argmax(runner(**x)["logits"][0])))
    gold = [LABELS.index(r["label"]) for r in rows]
    accuracy = {k: 100.0 * float(np.mean(np.array(v) == np.array(gold))) for k, v in predicted.items()}
    int8, keras_float32 = np.array(predicted["litert_dynamic_int8"]), np.array(predicted["keras_float32"])
    agreement = 100.0 * float(np.mean(int8 == keras_float32))
    with open(os.path.join(run, "eval_results.json"), encoding="utf-8") as f:
        run_accuracy = 100.0 * json.load(f)["accuracy"]
    result = {"dev_examples": len(rows), "accuracy": accuracy, "run_eval_accuracy": run_accuracy,
              "int8_minus_float32_points": accuracy["litert_dynamic_int8"] - accuracy["litert_none"],
              "int8_agrees_with_float32_percent": agreement,
              "file_bytes": {q: os.path.getsize(p) for q, p in files.items()}, "steps": args.steps}
    if args.squad_run:
        result["squad_v1"] = squad(args, work, tokenizer)
    os.makedirs(args.output_dir, exist_ok=True)
    path = os.path.join(args.output_dir, "litert_accuracy.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f, indent=2)
    os.replace(path + ".tmp", path)
    print(f"dev accuracy on {len(rows)} sentences: " + ", ".join(f"{k} {v:.2f}" for k, v in accuracy.items())
          + f" (the run's own eval: {run_accuracy:.2f}); int8 - float32: {result['int8_minus_float32_points']:+.2f} "
          f"points; int8 agrees with float32 on {agreement:.1f}% of the sentences")
    print(f"wrote {path}")
    return 0


def squad(args, work, tokenizer, seq=128):
    """SQuAD v1.1 F1 / EM of the run (float32) and of its LiteRT files."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf.tasks.squad import metrics as squad_metrics
    from albert_tf.tasks.squad import postprocess
    from albert_tf.tasks.squad.cache import load_or_build_features
    from albert_tf.tasks.squad.features import FeatureSettings

    files = {}
    for quantization in ("none", "dynamic_int8"):
        files[quantization] = os.path.join(work, f"squad_{quantization}.tflite")
        if not os.path.isfile(files[quantization]):
            print(_module("albert_tf.export_litert", f"--init_checkpoint={args.squad_run}",
                          f"--output={files[quantization]}", f"--quantization={quantization}",
                          f"--max_seq_length={seq}",
                          f"--spm_model_file={args.spm_model_file}").strip(), flush=True)
    cache = load_or_build_features(args.squad_dev, os.path.join(work, "squad_dev.tf_record"), tokenizer,
                                   FeatureSettings(seq, 48, 24, False, "v1"))
    features, examples = cache.features, cache.examples
    with open(args.squad_dev, encoding="utf-8") as f:
        questions = squad_metrics.questions_from_squad_json(json.load(f))
    contexts = {e.qas_id: e.context_text for e in examples}
    with open(os.path.join(args.squad_run, "eval_results.json"), encoding="utf-8") as f:
        run = json.load(f)
    out = {"features": len(features), "questions": len(questions),
           "run_float32": {"f1": run["f1"], "exact_match": run["exact_match"]}}
    for quantization, path in files.items():
        runner = Interpreter(model_path=path).get_signature_runner("serving_default")
        windows = []
        for feature in features:
            length = feature.sequence_length  # each window at its own length, padding never an answer
            x = {"input_word_ids": feature.input_ids[None, :length].astype("int32"),
                 "input_mask": feature.input_mask[None, :length], "input_type_ids": feature.segment_ids[None, :length]}
            logits = runner(**x)
            window = feature.as_window()
            for key in ("start_logits", "end_logits"):
                window[key] = np.concatenate([logits[key][0], np.full(seq - length, -1e9, "float32")])
            windows.append(window)
        result = postprocess.predict_v1(windows, contexts, 20, 30)
        predictions = {e.qas_id: result["predictions"].get(e.qas_id, "") for e in examples}
        metrics = squad_metrics.evaluate_v1([q for q in questions if q["answers"]], predictions)
        out[f"litert_{quantization}"] = {"f1": metrics["f1"], "exact_match": metrics["exact_match"]}
    out["int8_minus_float32_f1_points"] = out["litert_dynamic_int8"]["f1"] - out["litert_none"]["f1"]
    print("SQuAD v1.1 dev: " + ", ".join(f"{k} F1 {v['f1']:.2f} EM {v['exact_match']:.2f}" for k, v in out.items()
                                        if isinstance(v, dict))
          + f"; int8 - float32 F1: {out['int8_minus_float32_f1_points']:+.2f} points", flush=True)
    return out


if __name__ == "__main__":
    sys.exit(main())
