"""Fine-tunes ALBERT on GLUE (or any TSV) classification and regression tasks.

    python -m albert_tf.run_classifier --task_name=MRPC --data_dir=glue_data/MRPC \
        --albert_hub_module_handle=export/albert_base --output_dir=runs/mrpc \
        --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=32 \
        --learning_rate=2e-5 --train_step=800 --warmup_step=200 --export_dir=runs/mrpc/export

Flags keep the release's names. The model starts from an export (--albert_hub_module_handle:
the directory holding `encoder/` and `preprocess/`, as written by albert_tf.export_tfhub),
or from an albert_tf checkpoint (--init_checkpoint with --albert_config_file and
--spm_model_file). Tasks: cola, sst-2, mrpc, sts-b, qqp, mnli, mismnli, qnli, rte, wnli
(case-insensitive) in the GLUE TSV layout, or `tsv` with columns named by
--text_a_column/--text_b_column/--label_column and --labels.

Output in --output_dir: `ckpt-N` checkpoints (a run resumes from the newest), `best/`
(the checkpoint with the best dev metric), `metrics.jsonl` (train loss and every dev
evaluation), `eval_results.json` / `eval_results.txt` (dev metrics of the best
checkpoint), `dev_predictions.tsv`, `test_results.tsv` (GLUE submission layout),
`training_curves.png`; with --export_dir a SavedModel that takes raw strings.
"""

import json
import math
import os
import sys
import time

from absl import flags

from albert_tf.cli import run_entry_point, start


def define_flags(flag_values=None):
    """The release's run_classifier flags, plus the tsv columns, --strategy and a few more.

    Args:
        flag_values: an absl FlagValues to define them in (default: the global FLAGS).
    """
    fv = {"flag_values": flags.FLAGS if flag_values is None else flag_values}
    flags.DEFINE_string("task_name", None, "cola, sst-2, mrpc, sts-b, qqp, mnli, mismnli, qnli, rte, wnli or tsv.", **fv)
    flags.DEFINE_string("data_dir", None, "The input data dir: the task's .tsv files.", **fv)
    flags.DEFINE_string("output_dir", None, "The output directory for checkpoints, metrics and predictions.", **fv)
    flags.DEFINE_string("albert_hub_module_handle", None,
                        "An albert_tf export (directory with encoder/ and preprocess/) to start from.", **fv)
    flags.DEFINE_string("init_checkpoint", None,
                        "An albert_tf checkpoint (run_pretraining output_dir, ckpt-N prefix or converted directory).", **fv)
    flags.DEFINE_string("albert_config_file", None, "The albert_config.json (with --init_checkpoint).", **fv)
    flags.DEFINE_string("spm_model_file", None, "The SentencePiece model (with --init_checkpoint).", **fv)
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (with --init_checkpoint; an export carries its own).", **fv)
    flags.DEFINE_integer("max_seq_length", 512, "The maximum total input sequence length after tokenization.", **fv)
    flags.DEFINE_bool("do_train", False, "Whether to run training.", **fv)
    flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set (every --save_checkpoints_steps).", **fv)
    flags.DEFINE_bool("do_predict", False, "Whether to run the model on the test set.", **fv)
    flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.", **fv)
    flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.", **fv)
    flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.", **fv)
    flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for the optimizer.", **fv)
    flags.DEFINE_integer("train_step", 1000, "Total number of training steps to perform.", **fv)
    flags.DEFINE_integer("warmup_step", 0, "Number of steps to perform linear learning rate warmup for.", **fv)
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint (and evaluate with --do_eval).", **fv)
    flags.DEFINE_integer("keep_checkpoint_max", 5, "How many checkpoints to keep.", **fv)
    flags.DEFINE_integer("iterations_per_loop", 100, "Steps per tf.function call (and per progress line).", **fv)
    flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer for fine-tuning.", **fv)
    flags.DEFINE_float("classifier_dropout", 0.1, "Dropout on pooled_output during training.", **fv)
    flags.DEFINE_string("export_dir", None, "Export the fine-tuned classifier (raw strings in) here at the end.", **fv)
    flags.DEFINE_string("text_a_column", "text_a", "--task_name=tsv: header name of the first text.", **fv)
    flags.DEFINE_string("text_b_column", "text_b", "--task_name=tsv: header name of the second text (optional).", **fv)
    flags.DEFINE_string("label_column", "label", "--task_name=tsv: header name of the label.", **fv)
    flags.DEFINE_list("labels", None, "--task_name=tsv: the label values (comma-separated); omit for regression.", **fv)
    flags.DEFINE_string("strategy", "default", "mirrored | one_device | default.", **fv)
    flags.DEFINE_integer("random_seed", 12345, "Seed of the classifier initialisation, dropout and shuffling.", **fv)


STRATEGIES = ("mirrored", "one_device", "default")


def check_flags(f):
    """Raises ValueError for bad flag combinations, naming the flags."""
    from albert_tf.data.classifier_data import get_task

    for name in ("task_name", "data_dir", "output_dir"):
        if not getattr(f, name):
            raise ValueError(f"--{name} is required.")
    get_task(f.task_name)  # names the valid tasks
    if not (f.do_train or f.do_eval or f.do_predict):
        raise ValueError("at least one of --do_train, --do_eval and --do_predict must be true.")
    if f.albert_hub_module_handle and f.init_checkpoint:
        raise ValueError("give --albert_hub_module_handle or --init_checkpoint, not both.")
    if f.albert_hub_module_handle:
        for sub in ("encoder", "preprocess"):
            if not os.path.isfile(os.path.join(f.albert_hub_module_handle, sub, "saved_model.pb")):
                raise ValueError(f"--albert_hub_module_handle={f.albert_hub_module_handle}: no {sub}/saved_model.pb; "
                                 "expected the directory written by albert_tf.export_tfhub (encoder/ and preprocess/).")
    else:
        if not f.spm_model_file:
            raise ValueError("--spm_model_file is required without --albert_hub_module_handle.")
        if not os.path.isfile(f.spm_model_file):
            raise ValueError(f"--spm_model_file={f.spm_model_file} does not exist.")
        if not _config_file(f):
            raise ValueError("--albert_config_file is required (or an --init_checkpoint directory holding "
                             "albert_config.json).")
    for name in ("max_seq_length", "train_batch_size", "eval_batch_size", "predict_batch_size", "train_step",
                 "save_checkpoints_steps", "keep_checkpoint_max", "iterations_per_loop"):
        if getattr(f, name) <= 0:
            raise ValueError(f"--{name} must be positive, got {getattr(f, name)}.")
    if f.max_seq_length < 3:
        raise ValueError(f"--max_seq_length={f.max_seq_length} leaves no room for [CLS] text [SEP].")
    if not 0 <= f.warmup_step <= f.train_step:
        raise ValueError(f"--warmup_step={f.warmup_step} must be between 0 and --train_step={f.train_step}.")
    if f.learning_rate <= 0:
        raise ValueError(f"--learning_rate must be positive, got {f.learning_rate}.")
    if not 0 <= f.classifier_dropout < 1:
        raise ValueError(f"--classifier_dropout must be in [0, 1), got {f.classifier_dropout}.")
    if f.strategy not in STRATEGIES:
        raise ValueError(f"--strategy must be one of {', '.join(STRATEGIES)}, got {f.strategy!r}.")
    if f.labels and f.task_name.lower() != "tsv":
        raise ValueError(f"--labels is only for --task_name=tsv; {f.task_name} has its own label set.")


def _config_file(f):
    if f.albert_config_file:
        return f.albert_config_file
    if f.init_checkpoint:
        candidate = os.path.join(f.init_checkpoint, "albert_config.json")
        if os.path.isfile(candidate):
            return candidate
    return None


def build_model(f, strategy, num_classes):
    """-> (AlbertClassifier built under the strategy, preprocessing object, where it started)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the preprocessing model's ops)

    from albert_tf.modeling.classifier import AlbertClassifier

    if f.albert_hub_module_handle:
        from albert_tf.export.keras3 import EncoderTFSMLayer

        preprocess = tf.saved_model.load(os.path.join(f.albert_hub_module_handle, "preprocess"))
        with strategy.scope():
            encoder = EncoderTFSMLayer(os.path.join(f.albert_hub_module_handle, "encoder"), trainable=True)
            model = AlbertClassifier(encoder, num_classes, dropout=f.classifier_dropout)
        return model, preprocess, f.albert_hub_module_handle

    from albert_tf.export.preprocess_module import PreprocessModule
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.modeling.pretrainer import AlbertPretrainer
    from albert_tf.training.checkpoints import load_init_checkpoint

    config_file = _config_file(f)
    config = AlbertConfig.from_json_file(config_file)
    if f.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length ({f.max_seq_length}) exceeds max_position_embeddings "
                         f"({config.max_position_embeddings}) of {config_file}.")
    preprocess = PreprocessModule(f.spm_model_file, do_lower_case=f.do_lower_case, seq_length=f.max_seq_length)
    with strategy.scope():
        pretrainer = AlbertPretrainer(config)
        source = load_init_checkpoint(pretrainer, f.init_checkpoint) if f.init_checkpoint else "random initialisation"
        model = AlbertClassifier(pretrainer.encoder, num_classes, dropout=f.classifier_dropout,
                                 initializer_range=config.initializer_range)
    return model, preprocess, source


def _task_info(f):
    from albert_tf.data.classifier_data import get_task

    task = get_task(f.task_name, labels=f.labels, text_a_column=f.text_a_column, text_b_column=f.text_b_column,
                    label_column=f.label_column)
    return task, list(task.labels), list(task.metrics)


def _write_atomic(path, text):
    with open(path + ".tmp", "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(path + ".tmp", path)


def _append_jsonl(path, record):
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def _duration(seconds):
    seconds = int(seconds)
    m, s = divmod(seconds, 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def _format_prediction(value, labels):
    return labels[int(value)] if labels else f"{float(value):.6f}"


def write_predictions(path, examples, predictions, labels, with_gold):
    """TSV of index, guid, prediction (label name or score) and, for dev, the gold label."""
    lines = ["index\tguid\tprediction" + ("\tlabel" if with_gold else "")]
    for i, (example, value) in enumerate(zip(examples, predictions)):
        row = [str(i), example.guid, _format_prediction(value, labels)]
        if with_gold:
            row.append(str(example.label))
        lines.append("\t".join(row))
    _write_atomic(path, "\n".join(lines) + "\n")


def plot_curves(records, path, metric, baseline=None):
    """Train loss and the dev metric (beside the majority-class baseline) against the step, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in records if r["split"] == "train"]
    dev = [r for r in records if r["split"] == "dev"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    axes[0].plot([r["step"] for r in train], [r["loss"] for r in train], label="train loss")
    if dev:
        axes[0].plot([r["step"] for r in dev], [r["loss"] for r in dev], "o-", label="dev loss")
        axes[1].plot([r["step"] for r in dev], [r[metric] for r in dev], "o-", label=f"dev {metric}")
    if baseline is not None:
        axes[1].axhline(baseline, color="gray", linestyle="--", label="majority baseline")
    axes[0].set_title("loss")
    axes[1].set_title(f"dev {metric}")
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=100)
    plt.close(fig)
    os.replace(path + ".tmp.png", path)
    return path


def run(f, stream=sys.stdout):
    """Trains, evaluates, predicts and exports as the flags say; returns a dict of results."""
    check_flags(f)
    from albert_tf.data.classifier_data import read_examples

    task, labels, metric_names = _task_info(f)
    # read (and check) every split first: a bad file fails before any training
    wanted = [name for name, on in (("train", f.do_train), ("dev", f.do_eval), ("test", f.do_predict)) if on]
    splits = {name: read_examples(task, f.data_dir, name) for name in wanted}

    import keras
    import numpy as np

    from albert_tf.data.classifier_metrics import compute
    from albert_tf.data.classifier_pipeline import classifier_dataset
    from albert_tf.training.distribution import get_strategy
    from albert_tf.training.finetuning import FineTuningCheckpoints, FineTuningLoop, predictions_from_logits
    from albert_tf.modeling.losses import classifier_nll
    from albert_tf.training.errors import TrainingDivergedError

    keras.utils.set_random_seed(f.random_seed)
    strategy = get_strategy(f.strategy)
    os.makedirs(f.output_dir, exist_ok=True)
    num_classes = len(labels) or 1
    model, preprocess, source = build_model(f, strategy, num_classes)
    loop = FineTuningLoop(strategy, model, f.train_batch_size, optimizer=f.optimizer, learning_rate=f.learning_rate,
                          num_train_steps=f.train_step, num_warmup_steps=f.warmup_step)
    checkpoints = FineTuningCheckpoints(f.output_dir, model, loop.optimizer, f.keep_checkpoint_max)
    resumed = checkpoints.restore_latest()
    print(f"task {task.name}: {len(labels) or 'regression'}{' labels' if labels else ''}; started from {source}"
          + (f"; resuming from {resumed} at step {loop.step}" if resumed else ""), file=stream, flush=True)
    metrics_path = os.path.join(f.output_dir, "metrics.jsonl")
    if not resumed and os.path.exists(metrics_path):
        os.remove(metrics_path)
    key = metric_names[0]
    pair = any(e.text_b is not None for split in splits.values() for e in split)

    def predict(examples, batch_size):
        return loop.predict(classifier_dataset(examples, preprocess, f.max_seq_length, batch_size, labels))

    def evaluate(step):
        logits, gold = predict(splits["dev"], f.eval_batch_size)
        predictions = predictions_from_logits(logits)
        metrics = compute(metric_names, predictions, gold)
        metrics["loss"] = float(np.mean(np.asarray(classifier_nll(logits, gold))))
        _append_jsonl(metrics_path, {"split": "dev", "step": int(step), **metrics})
        best = checkpoints.offer(step, metrics, key)
        print(f"dev at step {step}: " + "  ".join(f"{k} {metrics[k]:.4f}" for k in metric_names)
              + f"  loss {metrics['loss']:.4f}" + ("  (best so far)" if best else ""), file=stream, flush=True)
        return metrics

    results = {"task": task.name, "labels": labels}
    if f.do_train and loop.step < f.train_step:
        train_ds_fn = lambda ctx: classifier_dataset(  # noqa: E731
            splits["train"], preprocess, f.max_seq_length, ctx.get_per_replica_batch_size(f.train_batch_size),
            labels, is_training=True, seed=f.random_seed + loop.step, input_context=ctx)
        iterator = iter(strategy.distribute_datasets_from_function(train_ds_fn))
        print(f"training {len(splits['train'])} examples, batch {f.train_batch_size}, {f.train_step} steps "
              f"({f.train_step * f.train_batch_size / len(splits['train']):.1f} epochs), {f.optimizer} "
              f"lr {f.learning_rate:g}, warmup {f.warmup_step}", file=stream, flush=True)
        start, first_step = time.time(), loop.step
        while loop.step < f.train_step:
            step = loop.step
            next_save = (step // f.save_checkpoints_steps + 1) * f.save_checkpoints_steps
            n = min(f.iterations_per_loop, next_save - step, f.train_step - step)
            loss = loop.train(iterator, n)
            step = loop.step
            if not math.isfinite(loss):
                raise TrainingDivergedError(
                    f"the training loss became {loss} between steps {step - n} and {step}; stopped without saving. "
                    f"Last good checkpoint: {checkpoints.manager.latest_checkpoint or 'none'}. Lower --learning_rate.")
            elapsed = time.time() - start
            rate = (step - first_step) * f.train_batch_size / max(elapsed, 1e-9)
            eta = (f.train_step - step) * f.train_batch_size / max(rate, 1e-9)
            lr = float(loop.schedule(step - 1))
            _append_jsonl(metrics_path, {"split": "train", "step": step, "loss": loss, "learning_rate": lr,
                                         "examples_per_second": rate})
            print(f"step {step}/{f.train_step}  loss {loss:.4f}  lr {lr:.3g}  {rate:.1f} ex/s  ETA {_duration(eta)}",
                  file=stream, flush=True)
            if step % f.save_checkpoints_steps == 0 or step == f.train_step:
                checkpoints.save(step)
                if f.do_eval:
                    evaluate(step)
    results["final_step"] = loop.step  # before the best checkpoint is restored below
    if f.do_eval and checkpoints.best is None:  # no training here: evaluate the starting (or resumed) model
        evaluate(loop.step)
    if checkpoints.best is not None:  # predictions and the export come from the best dev checkpoint
        checkpoints.restore_best()
    if f.do_eval:
        best = checkpoints.best
        logits, _ = predict(splits["dev"], f.eval_batch_size)
        write_predictions(os.path.join(f.output_dir, "dev_predictions.tsv"), splits["dev"],
                          predictions_from_logits(logits), labels, with_gold=True)
        summary = {"task": task.name, "best_step": best["step"], "metric": key, **best["metrics"],
                   "checkpoint": os.path.join("best", best["checkpoint"]),
                   "majority_baseline": _majority_baseline(splits, labels, metric_names)}
        _write_atomic(os.path.join(f.output_dir, "eval_results.json"), json.dumps(summary, indent=2) + "\n")
        _write_atomic(os.path.join(f.output_dir, "eval_results.txt"),
                      "".join(f"{k} = {summary[k]}\n" for k in sorted(summary)))
        print(f"best dev {key} {best['metrics'][key]:.4f} at step {best['step']} ({summary['checkpoint']})",
              file=stream, flush=True)
        results["eval"] = summary
    records = _read_jsonl(metrics_path)
    if records:
        baseline = results["eval"]["majority_baseline"][key] if "eval" in results else None
        results["curves"] = plot_curves(records, os.path.join(f.output_dir, "training_curves.png"), key, baseline)
    if f.do_predict:
        logits, _ = predict(splits["test"], f.predict_batch_size)
        path = os.path.join(f.output_dir, "test_results.tsv")
        write_predictions(path, splits["test"], predictions_from_logits(logits), labels, with_gold=False)
        print(f"wrote {path} ({len(splits['test'])} predictions)", file=stream, flush=True)
        results["test_results"] = path
    if f.export_dir:
        from albert_tf.export.classifier_module import export_classifier

        results["export_dir"] = export_classifier(preprocess, model, f.export_dir, f.max_seq_length, labels, pair,
                                                  task.name)
        print(f"exported the classifier (raw strings in) to {results['export_dir']}", file=stream, flush=True)
    return results


def _read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _majority_baseline(splits, labels, metric_names):
    """The dev metrics of always predicting the most frequent training label (mean for regression)."""
    from albert_tf.data.classifier_metrics import compute
    from albert_tf.data.classifier_pipeline import label_ids

    source = splits.get("train") or splits["dev"]
    dev_gold = label_ids(splits["dev"], labels)
    train_gold = label_ids(source, labels)
    if labels:
        constant = int(max(range(len(labels)), key=lambda i: (int((train_gold == i).sum()), -i)))
    else:
        constant = float(train_gold.mean())
    return compute(metric_names, [constant] * len(dev_gold), dev_gold)


def main(argv):
    del argv
    return run_entry_point("run_classifier", run)


if __name__ == "__main__":
    start(define_flags, main)
