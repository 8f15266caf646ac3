"""The SQuAD task (v1.1 and v2.0): for `python -m albert_tf.run_squad_v1` / `run_squad_v2`
(the release's recipe, the steps, which checkpoint predicts and what is written:
docs/squad.md). Prediction writes predictions.json, nbest_predictions.json, (v2)
null_odds.json and, when the predict file holds answers, the official metrics in
eval_results.json.

Shape legend: B batch, T max_seq_length, k1 start_n_top, k2 end_n_top.
"""

import collections
import dataclasses
import os
import sys

import numpy as np
import tensorflow as tf

from albert_tf.data.buckets import bucketed_batches, cut_to_width
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.modeling.question_answering import QUESTION_ANSWERING_WEIGHTS, AlbertForQuestionAnswering
from albert_tf.tasks.common import check_model_source, spm_file_for
from albert_tf.tasks.fine_tuning import FineTuningTask
from albert_tf.tasks.squad.options import SquadOptions  # noqa: F401 (re-exported)
from albert_tf.training.checkpoints import BEST_DIR
from albert_tf.training.driver import write_eval_results
from albert_tf.training.task import EXAMPLE_INDEX
from albert_tf.storage import files

SEQUENCE_INPUTS = INPUT_NAMES + ("p_mask",)
PADDING_LOGIT = -1e9
VERSIONS = ("v1", "v2")
NO_ANSWER_WARNING_SHARE = 0.95


def _feature_columns(arrays, with_labels):
    """features_to_arrays / read_feature_arrays layout -> the model's input names."""
    columns = {"input_word_ids": arrays["input_ids"], "input_mask": arrays["input_mask"],
               "input_type_ids": arrays["segment_ids"], "p_mask": arrays["p_mask"]}
    if with_labels:
        columns.update(start_positions=arrays["start_positions"], end_positions=arrays["end_positions"],
                       is_impossible=arrays["is_impossible"])
    return {k: np.asarray(v, np.int32) for k, v in columns.items()}


class SquadTask(FineTuningTask):
    """SQuAD v1.1 / v2.0 fine-tuning (see module docstring).

    Args:
        options: SquadOptions.
        train_arrays: {name: array} of the training features (read_feature_arrays), or None.
        dev: with --best_checkpoint, the predict file's DevSet (its features, examples and
            answered questions): the driver's evaluation scores it at every checkpoint.
        keep_best: the run keeps (training) or predicts from (--do_predict alone) the best
            checkpoint, output_dir/best.
    """

    served = "the QA model (raw question and context in)"
    weights_file = QUESTION_ANSWERING_WEIGHTS

    def __init__(self, options, train_arrays=None, dev=None, keep_best=False):
        self.options = options
        self.name = f"squad_{options.version}"
        self.train_arrays = train_arrays
        self.dev = dev
        self.keep_best = keep_best
        # the official metric picks the best checkpoint (v2: at its best null-odds threshold,
        # as the release reports v2)
        self.best_metric = ("f1" if options.version == "v1" else "best_f1") if keep_best else None
        self.predict_cache = None  # the prediction features (load_or_build_features' answer)
        self.schedule = None  # (steps, warmup) of the training features
        self.counts = {}  # num_train_features, num_train_steps

    def head(self, encoder):
        o = self.options
        return AlbertForQuestionAnswering(encoder, version=o.version, start_n_top=o.start_n_top,
                                          end_n_top=o.end_n_top, dropout_prob=o.dropout_prob)

    def check_init_directory(self, directory):
        version = AlbertForQuestionAnswering.read_settings(directory)["version"]
        if version != self.options.version:
            raise ValueError(f"--init_checkpoint={directory} holds a SQuAD {version} head; this is "
                             f"run_squad_{self.options.version}.")

    @staticmethod
    def check_task(o):
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
        for flag, on in (("train_file", o.do_train), ("predict_file", o.do_predict)):
            path = getattr(o, flag)
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
        for flag in ("train_feature_file", "predict_feature_file"):
            path = getattr(o, flag)
            if path and files.isdir(path):
                raise ValueError(f"--{flag}={path} is a directory; give a file path.")

    @staticmethod
    def feature_caches(o):
        return (("train_feature_file", o.train_features_path, o.do_train),
                ("predict_feature_file", o.predict_features_path, o.do_predict))

    @staticmethod
    def data_inputs(o):
        return (("train_file", o.train_file), ("predict_file", o.predict_file))

    @classmethod
    def read(cls, o, stream):
        from albert_tf.data.tokenization import SentencePieceTokenizer
        from albert_tf.tasks.squad.metrics import read_questions
        from albert_tf.tasks.squad.reading import read_squad_examples

        if o.do_train:
            read_squad_examples(o.train_file, True, o.version)
        if o.do_predict:
            read_squad_examples(o.predict_file, False, o.version)
        questions = read_questions(o.predict_file) if o.best_checkpoint else None
        if questions is not None and not any(q["answers"] for q in questions):
            raise ValueError(f"--best_checkpoint: --predict_file={o.predict_file} holds no gold answers to score "
                             "checkpoints by.")
        return questions, SentencePieceTokenizer(spm_file_for(o), do_lower_case=o.do_lower_case)

    @classmethod
    def prepare(cls, o, inputs, training, stream):
        from albert_tf.tasks.squad.cache import load_or_build_features, read_feature_arrays
        from albert_tf.tasks.squad.features import FeatureSettings

        questions, tokenizer = inputs
        train_arrays, schedule, counts = None, None, {}
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
            schedule = steps, int(steps * o.warmup_proportion)
            counts = {"num_train_features": cache.num_features, "num_train_steps": steps}
            print(f"squad {o.version}: {cache.num_features} features, batch {training.train_batch_size}, {steps} "
                  f"steps ({o.num_train_epochs:g} epochs), lr {training.learning_rate:g}, warmup {schedule[1]}",
                  file=stream, flush=True)
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
        task = cls(o, train_arrays, dev, keep_best=o.best_checkpoint or from_best)
        task.predict_cache, task.schedule, task.counts = predict_cache, schedule, counts
        return task

    def driver_options(self, training):
        o, evaluates = self.options, self.dev is not None
        steps, warmup = self.schedule or (max(training.num_train_steps, 1), 0)
        return dataclasses.replace(training, output_dir=o.output_dir, do_train=o.do_train, do_eval=evaluates,
                                   num_train_steps=steps, num_warmup_steps=warmup, evaluate_every_checkpoint=evaluates,
                                   keep_best=self.keep_best, max_eval_steps=None, eval_batch_size=o.predict_batch_size)

    def report(self, outcome, results, stream):
        results.update(self.counts)
        best = outcome["best"]
        if best is not None:
            results["best_step"] = best["step"]
            print(f"predicting from the best checkpoint, {files.join(BEST_DIR, best['checkpoint'])} (step "
                  f"{best['step']} of {outcome['final_step']}, {self.best_metric} "
                  f"{best['metrics'][self.best_metric]:.4f})", file=stream, flush=True)

    def export(self, outcome, results, made_by):
        from albert_tf.tasks.squad.export import export_question_answering

        o = self.options
        metrics = results.get("metrics") or {}
        # v2: the threshold of predictions_best_f1_thresh.json; none without metrics to find it
        extra = ({"null_threshold": float(metrics["best_f1_reachable_thresh"])}
                 if "best_f1_reachable_thresh" in metrics else {})
        return export_question_answering(
            outcome["trainer"].model_in("float32"), spm_file_for(o), o.export_dir, do_lower_case=o.do_lower_case,
            max_seq_length=o.max_seq_length, doc_stride=o.doc_stride, max_query_length=o.max_query_length,
            n_best_size=o.n_best_size, max_answer_length=o.max_answer_length, widths=self.widths,
            extra_info=dict(extra, global_step=outcome["final_step"], initialized_from=outcome["initialized_from"]),
            made_by=made_by)

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

    def windows(self, features, outputs):
        """Features + the model's per-feature outputs -> albert_tf.tasks.squad.postprocess windows."""
        keys = [key for key in outputs if key not in (EXAMPLE_INDEX, "_batches")]
        return [dict(feature.as_window(), **{key: outputs[key][k] for key in keys})
                for k, feature in enumerate(features)]

    def answers(self, outputs, features, examples):
        """The model's per-feature outputs (`features` order) -> {"predictions", "nbest",
        (v2) "null_odds"}, each keyed by question id in the order of `examples`."""
        from albert_tf.tasks.squad import postprocess as squad_postprocess

        o = self.options
        if len(outputs[EXAMPLE_INDEX]) != len(features):
            raise RuntimeError(f"prediction gave {len(outputs[EXAMPLE_INDEX])} outputs for {len(features)} features.")
        windows = self.windows(features, outputs)
        contexts = {e.qas_id: e.context_text for e in examples}
        predict = squad_postprocess.predict_v1 if o.version == "v1" else squad_postprocess.predict_v2
        result = predict(windows, contexts, o.n_best_size, o.max_answer_length)
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

    def predict(self, outcome, training, results, stream):
        """With --do_predict: predictions.json, nbest_predictions.json, (v2) null_odds.json and,
        when --predict_file holds answers, the official metrics (results["metrics"], None
        otherwise) in eval_results.json / .txt."""
        o = self.options
        if not o.do_predict:
            return
        if not outcome["resumed_from"] and not o.do_train:
            print(f"WARNING: --do_predict without --do_train and no checkpoint in {o.output_dir}: predicting with the "
                  f"starting weights ({outcome['initialized_from']}).", file=sys.stderr, flush=True)
        results["predictions"] = files.join(o.output_dir, "predictions.json")
        results["metrics"] = metrics = self._answer_and_score(outcome["trainer"], stream)
        if metrics is not None:
            self._write_eval_results(metrics, outcome, stream)

    def _answer_and_score(self, trainer, stream):
        """The prediction files and (None without gold answers) the official metrics."""
        from albert_tf.tasks.squad import metrics as squad_metrics
        from albert_tf.tasks.squad import postprocess as squad_postprocess

        o = self.options
        features, examples, predict_file = self.predict_cache.features, self.predict_cache.examples, o.predict_file
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
            return None
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
        return metrics

    def _write_eval_results(self, metrics, outcome, stream):
        """eval_results.json / .txt of the predictions' metrics, and the eval line."""
        o = self.options
        summary = {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in metrics.items()}
        summary.update(initialized_from=outcome["initialized_from"], global_step=outcome["final_step"],
                       task=self.name, predict_file=os.path.abspath(o.predict_file))
        if outcome["best"] is not None:  # the weights predicted with: the best checkpoint's
            summary.update(best_step=outcome["best"]["step"], metric=self.best_metric,
                           checkpoint=files.join("best", outcome["best"]["checkpoint"]))
        summary.update(outcome["precision"].as_dict())
        write_eval_results(o.output_dir, summary)
        keys = ("exact_match", "f1") if o.version == "v1" else ("exact", "f1", "best_exact", "best_f1",
                                                                  "no_answer_share")
        print("eval: " + ", ".join(f"{k} {summary[k]:.4f}" for k in keys), file=stream, flush=True)


# what `SquadTask` scores at every checkpoint with --best_checkpoint
DevSet = collections.namedtuple("DevSet", ("features", "examples", "questions"))


check_options = SquadTask.check_options
