"""The SQuAD task (v1.1 and v2.0): for `python -m albert_tf.run_squad_v1` / `run_squad_v2`.

As the release's run_squad_v1.py / run_squad_v2.py: windowed features ([CLS] question [SEP]
context [SEP], albert_tf.tasks.squad, cached as TFRecords beside a settings sidecar and
rebuilt when the settings, tokenizer or input change), the v1 linear start/end head or the
v2 XLNet-style head (albert_tf.modeling.question_answering), the release's losses averaged
over the global batch, AdamW with linear warmup and decay, num_train_steps =
int(train features / train_batch_size * num_train_epochs). Training runs through the
driver (checkpoints, resume, TensorBoard, curves, NaN stop); prediction runs after
training from the final weights (with --best_checkpoint: from the checkpoint that scored
best on the predict file, scored at every checkpoint; with --do_predict alone, from
output_dir's best checkpoint where a --best_checkpoint run kept one, else its newest) and
writes predictions.json, nbest_predictions.json, (v2) null_odds.json and, when the predict
file holds answers, the official metrics in eval_results.json.

Shape legend: B batch, T max_seq_length, k1 start_n_top, k2 end_n_top.
"""

import dataclasses
import os
import sys

import numpy as np
import tensorflow as tf

from albert_tf.data.bucket_widths import bucket_widths
from albert_tf.data.buckets import bucketed_batches, cut_to_width
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.storage import atomic
from albert_tf.storage.report import CheckpointMismatchError
from albert_tf.tasks.common import (check_model_source, check_outputs, check_training, encoder_for, initialize_from,
                                    spm_file_for, start_run)
from albert_tf.tasks.squad.options import SquadOptions  # noqa: F401 (re-exported)
from albert_tf.training.checkpoints import BEST_DIR
from albert_tf.training import sessions
from albert_tf.training.driver import train_and_evaluate
from albert_tf.training.task import EXAMPLE_INDEX, Task
from albert_tf.storage import files

SEQUENCE_INPUTS = INPUT_NAMES + ("p_mask",)
PADDING_LOGIT = -1e9
VERSIONS = ("v1", "v2")
NO_ANSWER_WARNING_SHARE = 0.95


def check_options(o, training):
    """run_squad's checks, in one place: raises ValueError for bad values, combinations or
    missing inputs, naming the flags; runs before anything is written."""
    check_training(o, training, warmup=False)
    if o.version not in VERSIONS:
        raise ValueError(f"version must be one of {', '.join(VERSIONS)}, got {o.version!r}.")
    if not o.output_dir:
        raise ValueError("--output_dir is required.")
    if files.exists(o.output_dir) and not files.isdir(o.output_dir):
        raise ValueError(f"--output_dir={o.output_dir} exists and is not a directory.")
    if not (o.do_train or o.do_predict or o.export_dir):
        raise ValueError("at least one of --do_train, --do_predict and --export_dir is needed.")
    if o.do_train and not o.train_file:
        raise ValueError("--do_train needs --train_file (a SQuAD JSON file).")
    if o.do_predict and not o.predict_file:
        raise ValueError("--do_predict needs --predict_file (a SQuAD JSON file).")
    if o.best_checkpoint and not (o.do_train and o.do_predict):
        raise ValueError("--best_checkpoint needs --do_train and --do_predict (it scores --predict_file at every "
                         "checkpoint of training).")
    for flag, path, on in (("train_file", o.train_file, o.do_train), ("predict_file", o.predict_file, o.do_predict)):
        if on and not files.isfile(path):
            raise ValueError(f"--{flag}={path} does not exist or is not a file.")
    check_model_source(o)
    if o.max_seq_length - o.max_query_length - 3 < 1:
        raise ValueError(f"--max_seq_length ({o.max_seq_length}) must exceed --max_query_length "
                         f"({o.max_query_length}) + 3 to leave room for the context.")
    if not 0 <= o.warmup_proportion <= 1:
        raise ValueError(f"--warmup_proportion must be in [0, 1], got {o.warmup_proportion}.")
    if o.version == "v2":
        for name in ("start_n_top", "end_n_top"):
            if getattr(o, name) <= 0:
                raise ValueError(f"--{name} must be positive, got {getattr(o, name)}.")
            if getattr(o, name) > o.max_seq_length:
                raise ValueError(f"--{name} ({getattr(o, name)}) exceeds --max_seq_length ({o.max_seq_length}).")
        if not 0 <= o.dropout_prob < 1:
            raise ValueError(f"--dropout_prob must be in [0, 1), got {o.dropout_prob}.")
    for flag, path in (("train_feature_file", o.train_feature_file), ("predict_feature_file", o.predict_feature_file)):
        if path and files.isdir(path):
            raise ValueError(f"--{flag}={path} is a directory; give a file path.")
    check_outputs(o, caches=(("train_feature_file", o.train_features_path, o.do_train),
                             ("predict_feature_file", o.predict_features_path, o.do_predict)),
                  inputs=(("train_file", o.train_file), ("predict_file", o.predict_file)))
    sessions.check_settings(o.output_dir, training.session)  # the run's previous training


def _feature_columns(arrays, with_labels):
    """features_to_arrays / read_feature_arrays layout -> the model's input names."""
    columns = {"input_word_ids": arrays["input_ids"], "input_mask": arrays["input_mask"],
               "input_type_ids": arrays["segment_ids"], "p_mask": arrays["p_mask"]}
    if with_labels:
        columns.update(start_positions=arrays["start_positions"], end_positions=arrays["end_positions"],
                       is_impossible=arrays["is_impossible"])
    return {k: np.asarray(v, np.int32) for k, v in columns.items()}


class SquadTask(Task):
    """SQuAD v1.1 / v2.0 fine-tuning (see module docstring).

    Args:
        options: SquadOptions.
        train_arrays: {name: array} of the training features (read_feature_arrays), or None.
        dev: with --best_checkpoint, the predict file's DevSet (its features, examples and
            answered questions): the driver's evaluation scores it at every checkpoint.
        keep_best: the run keeps (training) or predicts from (--do_predict alone) the best
            checkpoint, output_dir/best.
    """

    # the training input is from_tensor_slices of numpy arrays: the iterator is checkpointed
    checkpointable_input = True

    def __init__(self, options, train_arrays=None, dev=None, keep_best=False):
        self.options = options
        self.name = f"squad_{options.version}"
        self.train_arrays = train_arrays
        self.dev = dev
        # the official metric picks the best checkpoint (v2: at its best null-odds threshold,
        # as the release reports v2)
        self.best_metric = ("f1" if options.version == "v1" else "best_f1") if keep_best else None
        self._pretrainer = None

    # --- model -------------------------------------------------------------------------

    def build_model(self):
        from albert_tf.modeling.question_answering import AlbertForQuestionAnswering

        o = self.options
        encoder, self._pretrainer = encoder_for(o)
        return AlbertForQuestionAnswering(encoder, version=o.version, start_n_top=o.start_n_top,
                                          end_n_top=o.end_n_top, dropout_prob=o.dropout_prob)

    def initialize(self, model):
        from albert_tf.modeling.question_answering import QUESTION_ANSWERING_WEIGHTS, AlbertForQuestionAnswering

        o = self.options

        def same_version(directory):
            version = AlbertForQuestionAnswering.read_settings(directory)["version"]
            if version != o.version:
                raise ValueError(f"--init_checkpoint={directory} holds a SQuAD {version} head; this is "
                                 f"run_squad_{o.version}.")

        return initialize_from(o, model, self._pretrainer, QUESTION_ANSWERING_WEIGHTS, same_version)

    # --- data ----------------------------------------------------------------------------

    @property
    def widths(self):
        return bucket_widths(self.options.max_seq_length, self.options.length_buckets)

    def train_dataset(self, input_context, batch_size, skip_batches):
        columns = _feature_columns(self.train_arrays, with_labels=True)
        return bucketed_batches(columns, columns["input_mask"].sum(1), batch_size, self.widths,
                                cut_to_width(SEQUENCE_INPUTS, self.widths), training=True,
                                seed=self.options.random_seed, input_context=input_context,
                                skip_batches=skip_batches).prefetch(tf.data.AUTOTUNE)

    def predict_dataset(self, features, batch_size):
        """One finite pass over prediction features, by length (example_index restores the
        order; the last batch may be partial)."""
        from albert_tf.tasks.squad.features import features_to_arrays

        columns = _feature_columns(features_to_arrays(features), with_labels=False)
        columns[EXAMPLE_INDEX] = np.arange(len(features), dtype=np.int32)
        return bucketed_batches(columns, columns["input_mask"].sum(1), batch_size, self.widths,
                                cut_to_width(SEQUENCE_INPUTS, self.widths), training=False)

    # --- loss and metrics ----------------------------------------------------------------

    def loss_and_terms(self, model, batch, normalizers, training):
        from albert_tf.modeling.qa_heads import squad_v1_loss, squad_v2_loss

        inputs = {k: batch[k] for k in INPUT_NAMES}
        if self.options.version == "v1":
            out = model(inputs, training=training)
            rows = squad_v1_loss(out["start_logits"], out["end_logits"], batch["start_positions"],
                                 batch["end_positions"], per_example=True)
        else:
            inputs.update(p_mask=batch["p_mask"], start_positions=batch["start_positions"])
            out = model(inputs, training=training)
            rows = squad_v2_loss(out, batch["start_positions"], batch["end_positions"], batch["is_impossible"],
                                 per_example=True)
        total = tf.reduce_sum(rows)
        terms = {"loss_sum": total, "count": tf.cast(tf.size(rows), tf.float32)}
        return total / normalizers["examples"], terms

    def train_metrics(self, totals):
        return {"loss": totals["loss_sum"] / max(totals["count"], 1.0)}

    def eval_outputs(self, model, batch):
        inputs = {k: batch[k] for k in INPUT_NAMES}
        if self.options.version == "v2":
            inputs["p_mask"] = batch["p_mask"]
        out = model(inputs, training=False)
        out = {k: (tf.cast(v, tf.float32) if v.dtype.is_floating else v) for k, v in out.items()}
        if self.options.version == "v1":
            # back to [B, T] (the batch was cut to its bucket): padding never holds an answer
            pad = self.options.max_seq_length - tf.shape(out["start_logits"])[1]
            for key in ("start_logits", "end_logits"):
                out[key] = tf.pad(out[key], [[0, 0], [0, pad]], constant_values=PADDING_LOGIT)
        return out

    def eval_dataset(self, batch_size):
        return None if self.dev is None else self.predict_dataset(self.dev.features, batch_size)

    def eval_metrics(self, outputs):
        """The official metrics of the dev set's answers from the model's per-feature outputs
        (the same post-processing and scoring as `predict`, no files written)."""
        if self.dev is None:
            return {}
        result = self.answers(outputs, self.dev.features, self.dev.examples)
        metrics = self.score(self.dev.questions, result)
        return {k: v for k, v in metrics.items() if isinstance(v, (int, float, np.integer, np.floating))}

    # --- prediction ----------------------------------------------------------------------

    def windows(self, features, outputs):
        """Features + the model's per-feature outputs -> albert_tf.tasks.squad.postprocess windows."""
        keys = [k for k in outputs if k not in (EXAMPLE_INDEX, "_batches")]
        windows = []
        for k, feature in enumerate(features):
            window = feature.as_window()
            for key in keys:
                window[key] = outputs[key][k]
            windows.append(window)
        return windows

    def answers(self, outputs, features, examples):
        """The model's per-feature outputs (`features` order) -> {"predictions", "nbest",
        (v2) "null_odds"}, each keyed by question id in the order of `examples`."""
        from albert_tf.tasks.squad import postprocess as squad_postprocess

        o = self.options
        if len(outputs[EXAMPLE_INDEX]) != len(features):
            raise RuntimeError(f"prediction gave {len(outputs[EXAMPLE_INDEX])} outputs for {len(features)} features.")
        windows = self.windows(features, outputs)
        contexts = {e.qas_id: e.context_text for e in examples}
        if o.version == "v1":
            result = squad_postprocess.predict_v1(windows, contexts, o.n_best_size, o.max_answer_length)
        else:
            result = squad_postprocess.predict_v2(windows, contexts, o.n_best_size, o.max_answer_length)
        # questions whose every window was dropped still get an (empty) prediction
        for e in examples:
            if e.qas_id not in result["predictions"]:
                result["predictions"][e.qas_id] = ""
                result["nbest"][e.qas_id] = [{"text": "", "probability": 1.0}]
                if "null_odds" in result:
                    result["null_odds"][e.qas_id] = 0.0
        # the files in question order: the official v2 sweep breaks ties in null odds by file order
        for key in ("predictions", "nbest", "null_odds"):
            if key in result:
                result[key] = {e.qas_id: result[key][e.qas_id] for e in examples}
        return result

    def score(self, questions, result):
        """The official metrics of `result` (`answers`) against `questions`
        (tasks.squad.metrics.read_questions), or None when no question has a gold answer.
        v1.1 scores the questions that have answers (the others are predicted, not scored,
        and counted in questions_without_answers); v2.0 all of them, with the no-answer
        share."""
        from albert_tf.tasks.squad import metrics as squad_metrics
        from albert_tf.tasks.squad import postprocess as squad_postprocess

        answerable = [q for q in questions if q["answers"]]
        if not answerable:
            return None
        if self.options.version == "v1":
            metrics = squad_metrics.evaluate_v1(answerable, result["predictions"])
            metrics["questions_without_answers"] = len(questions) - len(answerable)
            return metrics
        metrics = squad_metrics.evaluate_v2(questions, result["predictions"], result["null_odds"])
        share = squad_postprocess.no_answer_share(result["null_odds"], 0.0)
        metrics["no_answer_share"] = share["share"]
        metrics["no_answer_questions"] = share["no_answer"]
        return metrics

    def predict(self, trainer, features, examples, predict_file, stream=None):
        """Runs the model over the prediction features and writes predictions.json,
        nbest_predictions.json, (v2) null_odds.json and, when `predict_file` holds
        answers, the official metrics (returned; None otherwise)."""
        from albert_tf.tasks.squad import metrics as squad_metrics
        from albert_tf.tasks.squad import postprocess as squad_postprocess

        o = self.options
        outputs = trainer.per_example_outputs(self.predict_dataset(features, o.predict_batch_size),
                                              o.predict_batch_size)
        outputs.pop("_batches", None)
        result = self.answers(outputs, features, examples)
        paths = squad_postprocess.write_prediction_files(o.output_dir, result)
        print(f"wrote {', '.join(paths)} ({len(result['predictions'])} questions, {len(features)} windows)",
              file=stream, flush=True)
        questions = squad_metrics.read_questions(predict_file)
        metrics = self.score(questions, result)
        if metrics is None:
            print(f"{predict_file} holds no answers: no metrics.", file=stream, flush=True)
            return None, result
        answerable = [q for q in questions if q["answers"]]
        if o.version == "v1":
            if metrics["questions_without_answers"]:
                print(f"{predict_file}: {metrics['questions_without_answers']} of {len(questions)} questions have no "
                      f"gold answer: predicted, not scored; the metrics cover the other {len(answerable)}.",
                      file=stream, flush=True)
        else:
            if metrics["no_answer_share"] >= NO_ANSWER_WARNING_SHARE:
                print(f"WARNING: the v2 head calls {metrics['no_answer_questions']} of {len(result['null_odds'])} "
                      f"questions unanswerable (null odds > 0) though {len(answerable)} have answers: the known "
                      "all-no-answer collapse (F1 ~ 50). Check --init_checkpoint, --learning_rate and the training "
                      "length.",
                      file=sys.stderr, flush=True)
            metrics.update(squad_postprocess.write_best_f1_predictions(o.output_dir, questions, result["predictions"],
                                                                       result["null_odds"]))
            if "best_f1_note" in metrics:
                print(f"NOTE: {squad_postprocess.BEST_F1_FILE} scores {metrics['best_f1_reachable']:.4f} at threshold "
                      f"{metrics['best_f1_reachable_thresh']!r}, best_f1 {metrics['best_f1']:.4f}: "
                      f"{metrics['best_f1_note']}.", file=stream, flush=True)
        return metrics, result


@dataclasses.dataclass
class DevSet:
    """What `SquadTask` scores at every checkpoint with --best_checkpoint."""

    features: list
    examples: list
    questions: list


def run(o, training, stream=None):
    """Trains and predicts as the options say.

    Args:
        o: SquadOptions (check_options passed).
        training: TrainingOptions (batch size, learning rate, checkpoints, ...); the
            number of steps and warmup are computed here from the training features.

    Returns:
        dict: final_step, initialized_from, num_train_features, num_train_steps,
        predictions (path), metrics (or None), export_dir (with --export_dir).
    """
    check_options(o, training)
    # a run refused for its starting weights (--init_checkpoint) leaves no output_dir it made
    with atomic.removed_if_refused(o.output_dir, CheckpointMismatchError):
        return _run(o, training, stream)


def _run(o, training, stream):
    from albert_tf.tasks.squad.cache import load_or_build_features, read_feature_arrays
    from albert_tf.tasks.squad.features import FeatureSettings
    from albert_tf.tasks.squad.metrics import read_questions
    from albert_tf.tasks.squad.reading import read_squad_examples
    from albert_tf.data.tokenization import SentencePieceTokenizer

    # read (and check) the input before anything is written
    if o.do_train:
        read_squad_examples(o.train_file, True, o.version)
    if o.do_predict:
        read_squad_examples(o.predict_file, False, o.version)
    questions = read_questions(o.predict_file) if o.best_checkpoint else None
    if questions is not None and not any(q["answers"] for q in questions):
        raise ValueError(f"--best_checkpoint: --predict_file={o.predict_file} holds no gold answers to score "
                         "checkpoints by.")
    tokenizer = SentencePieceTokenizer(spm_file_for(o), do_lower_case=o.do_lower_case)
    strategy = start_run(o)
    results = {}
    train_arrays = None
    steps, warmup = 1, 0
    if o.do_train:
        settings = FeatureSettings(o.max_seq_length, o.doc_stride, o.max_query_length, True, o.version)
        cache = load_or_build_features(o.train_file, o.train_features_path, tokenizer, settings)
        print(f"training features {cache.feature_file}: {cache.num_features} ({cache.reason})", file=stream,
              flush=True)
        if not cache.num_features:
            raise ValueError(f"--train_file={o.train_file} gave no training features.")
        train_arrays = read_feature_arrays(cache.feature_file)
        steps = int(cache.num_features / training.train_batch_size * o.num_train_epochs)
        if steps < 1:
            raise ValueError(f"{cache.num_features} training features / --train_batch_size="
                             f"{training.train_batch_size} x --num_train_epochs={o.num_train_epochs} is no step.")
        warmup = int(steps * o.warmup_proportion)
        results.update(num_train_features=cache.num_features, num_train_steps=steps)
        print(f"squad {o.version}: {cache.num_features} features, batch {training.train_batch_size}, {steps} steps "
              f"({o.num_train_epochs:g} epochs), lr {training.learning_rate:g}, warmup {warmup}", file=stream,
              flush=True)
    predict_cache = None
    if o.do_predict:
        settings = FeatureSettings(o.max_seq_length, o.doc_stride, o.max_query_length, False, o.version)
        predict_cache = load_or_build_features(o.predict_file, o.predict_features_path, tokenizer, settings)
        print(f"prediction features {predict_cache.feature_file}: {predict_cache.num_features} "
              f"({predict_cache.reason})", file=stream, flush=True)
        if not predict_cache.num_features:
            raise ValueError(f"--predict_file={o.predict_file} gave no features.")
    dev = None if questions is None else DevSet(predict_cache.features, predict_cache.examples, questions)
    # prediction alone in the output_dir of a --best_checkpoint run: from its best checkpoint, as
    # the training run predicted (the release's model.ckpt-best)
    from_best = not o.do_train and files.isdir(files.join(o.output_dir, BEST_DIR))
    training = dataclasses.replace(training, output_dir=o.output_dir, do_train=o.do_train, do_eval=dev is not None,
                                   num_train_steps=steps if o.do_train else max(training.num_train_steps, 1),
                                   num_warmup_steps=warmup, evaluate_every_checkpoint=dev is not None,
                                   keep_best=o.best_checkpoint or from_best, max_eval_steps=None,
                                   eval_batch_size=o.predict_batch_size)
    task = SquadTask(o, train_arrays, dev, keep_best=training.keep_best)
    outcome = train_and_evaluate(task, training, strategy, stream=stream)
    trainer = outcome["trainer"]
    results.update(final_step=outcome["final_step"], initialized_from=outcome["initialized_from"])
    if outcome["best"] is not None:
        results["best_step"] = outcome["best"]["step"]
        print(f"predicting from the best checkpoint, {files.join(BEST_DIR, outcome['best']['checkpoint'])} (step "
              f"{outcome['best']['step']} of {outcome['final_step']}, {task.best_metric} "
              f"{outcome['best']['metrics'][task.best_metric]:.4f})", file=stream, flush=True)
    if o.do_predict:
        _predict_and_score(task, trainer, outcome, predict_cache, results, stream)
    if o.export_dir:
        from albert_tf.tasks.squad.export import export_question_answering

        metrics = results.get("metrics") or {}
        # v2: the threshold of predictions_best_f1_thresh.json; none without metrics to find it
        extra = ({"null_threshold": float(metrics["best_f1_reachable_thresh"])}
                 if "best_f1_reachable_thresh" in metrics else {})
        results["export_dir"] = export_question_answering(
            trainer.model_in("float32"), spm_file_for(o), o.export_dir, do_lower_case=o.do_lower_case,
            max_seq_length=o.max_seq_length, doc_stride=o.doc_stride, max_query_length=o.max_query_length,
            n_best_size=o.n_best_size, max_answer_length=o.max_answer_length,
            widths=bucket_widths(o.max_seq_length, o.length_buckets),
            extra_info=dict(extra, global_step=outcome["final_step"], initialized_from=outcome["initialized_from"]),
            made_by=sessions.made_by(training.session, trainer.precision))
        print(f"exported the QA model (raw question and context in) to {results['export_dir']}", file=stream,
              flush=True)
    return results


def _predict_and_score(task, trainer, outcome, predict_cache, results, stream):
    """Prediction after training (SquadTask.predict: the files, the metrics), then
    eval_results.json / .txt and the eval line."""
    o = task.options
    if not outcome["resumed_from"] and not o.do_train:
        print(f"WARNING: --do_predict without --do_train and no checkpoint in {o.output_dir}: predicting with the "
              f"starting weights ({outcome['initialized_from']}).", file=sys.stderr, flush=True)
    metrics, _ = task.predict(trainer, predict_cache.features, predict_cache.examples, o.predict_file, stream=stream)
    results["predictions"] = files.join(o.output_dir, "predictions.json")
    results["metrics"] = metrics
    if metrics is not None:
        summary = {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in metrics.items()}
        summary.update(initialized_from=outcome["initialized_from"], global_step=outcome["final_step"],
                       task=task.name, predict_file=os.path.abspath(o.predict_file))
        if outcome["best"] is not None:  # the weights predicted with: the best checkpoint's
            summary.update(best_step=outcome["best"]["step"], metric=task.best_metric,
                           checkpoint=files.join("best", outcome["best"]["checkpoint"]))
        summary.update(outcome["precision"].as_dict())
        atomic.write_json(files.join(o.output_dir, "eval_results.json"), summary)
        atomic.write_text(files.join(o.output_dir, "eval_results.txt"),
                          "".join(f"{k} = {summary[k]}\n" for k in sorted(summary)))
        keys = ("exact_match", "f1") if o.version == "v1" else ("exact", "f1", "best_exact", "best_f1",
                                                                  "no_answer_share")
        print("eval: " + ", ".join(f"{k} {summary[k]:.4f}" for k in keys), file=stream, flush=True)
