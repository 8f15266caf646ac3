"""The one fine-tuning lifecycle, `run(task_class, options, training)`: every fine-tuning
command (run_classifier, run_race, run_squad_v1/v2) is it; a task brings what differs
through the named hooks of `FineTuningTask` (docs/fine_tuning.md, "One lifecycle")."""

import dataclasses

import tensorflow as tf

from albert_tf.data.bucket_widths import bucket_widths
from albert_tf.storage import atomic, files
from albert_tf.storage.report import CheckpointMismatchError
from albert_tf.tasks.common import check_outputs, check_training, encoder_for, initialize_from, start_run
from albert_tf.training import sessions
from albert_tf.training.driver import train_and_evaluate
from albert_tf.training.task import Task

# the splits a run reads, each with the option that asks for it
SPLIT_OPTIONS = (("train", "do_train"), ("dev", "do_eval"), ("test", "do_predict"))


def wanted_splits(o):
    """The splits the options ask for, in reading order."""
    return [split for split, flag in SPLIT_OPTIONS if getattr(o, flag, False)]


def choice_terms(logits, labels, nll, normalizers, accuracy=True):
    """(this replica's share of the loss, its terms) of a task choosing one of several
    classes or options: logits [B, C], labels [B], per-example losses nll [B]; the terms
    nll_sum, count and (`accuracy`) correct_sum that `choice_metrics` reads."""
    terms = {"nll_sum": tf.reduce_sum(nll), "count": tf.cast(tf.size(nll), tf.float32)}
    if accuracy:
        correct = tf.equal(tf.argmax(logits, -1, output_type=tf.int32), tf.cast(labels, tf.int32))
        terms["correct_sum"] = tf.reduce_sum(tf.cast(correct, tf.float32))
    return terms["nll_sum"] / normalizers["examples"], terms


def choice_metrics(totals):
    """loss and (where counted) accuracy of summed `choice_terms`."""
    count = max(totals["count"], 1.0)
    metrics = {"loss": totals["nll_sum"] / count}
    if "correct_sum" in totals:
        metrics["accuracy"] = totals["correct_sum"] / count
    return metrics


class FineTuningTask(Task):
    """The driver's contract (albert_tf.training.task.Task) and the hooks `run` calls, in order:

        check_task(o)                  the task's own checks (ValueError naming the flag)
        feature_caches(o), data_inputs(o)   its caches (flag, path, used) and inputs (flag, path)
        read(o, stream)                every input read and checked, before anything is written
        prepare(o, inputs, training, stream)   the task, once the run directory is claimed
        driver_options(training)       the TrainingOptions the driver runs with
        describe_training(training)    the line printed before training (None: none)
        report(outcome, results, stream)            the lines and results after training
        predict(outcome, training, results, stream) the prediction files
        export(outcome, results, made_by)           the serving SavedModel (`served` names it)

    The defaults are those of a task with train, dev and test `splits` ({split: examples}):
    it evaluates `split_dataset("dev", B)` after every checkpoint, keeps the best checkpoint
    and writes `prediction_files` ({split: (file name, results key or None)}) with
    `write_predictions(split, outputs, path)`. A model on the ALBERT encoder is the task's
    `head(encoder)`; `weights_file`: its fine-tuned weights, which --init_checkpoint may hold.
    """

    served = "the model"
    prediction_files = {}
    predicted = "predictions"  # what the test predictions are counted in
    weights_file = None
    splits = {}
    _pretrainer = None  # build_model's AlbertPretrainer, which --init_checkpoint may fill

    @classmethod
    def check_options(cls, o, training):
        """The command's checks, in one place, before anything is written: the training values,
        the task's own (`check_task`), the outputs and the run's previous training."""
        check_training(o, training)
        cls.check_task(o)
        check_outputs(o, caches=cls.feature_caches(o), inputs=cls.data_inputs(o))
        sessions.check_settings(o.output_dir, training.session)  # the run's previous training

    @staticmethod
    def check_task(o):
        pass

    @staticmethod
    def feature_caches(o):
        return ()

    @staticmethod
    def data_inputs(o):
        return (("data_dir", o.data_dir),)

    def driver_options(self, training):
        o = self.options
        return dataclasses.replace(training, output_dir=o.output_dir, do_train=o.do_train, do_eval=o.do_eval,
                                   evaluate_every_checkpoint=True, keep_best=True)

    def describe_training(self, training):
        return None

    @property
    def widths(self):
        return bucket_widths(self.options.max_seq_length, self.options.length_buckets)

    def build_model(self):
        encoder, self._pretrainer = encoder_for(self.options)
        return self.head(encoder)

    def initialize(self, model):
        return initialize_from(self.options, model, self._pretrainer, self.weights_file, self.check_init_directory)

    def check_init_directory(self, directory):
        """Refuses an --init_checkpoint directory of the task's weights (ValueError)."""

    def eval_dataset(self, batch_size):
        return self.split_dataset("dev", batch_size) if "dev" in self.splits else None

    def report(self, outcome, results, stream):
        pass

    def predict(self, outcome, training, results, stream):
        """The prediction files of `prediction_files` from the weights the driver left (the best
        dev checkpoint's)."""
        o = self.options
        for split, (name, key) in self.prediction_files.items():
            if split not in self.splits:
                continue
            batch_size = training.eval_batch_size if split == "dev" else o.predict_batch_size
            outputs = outcome["trainer"].per_example_outputs(self.split_dataset(split, batch_size), batch_size)
            path = files.join(o.output_dir, name)
            self.write_predictions(split, outputs, path)
            if key:
                results[key] = path
            if split == "test":
                print(f"wrote {path} ({len(self.splits[split])} {self.predicted})", file=stream, flush=True)


def run(task_class, o, training, stream=None):
    """Checks, trains, evaluates, predicts and exports as `o` (the options of `task_class`, a
    FineTuningTask) and `training` (TrainingOptions) say. Returns a dict: task, final_step,
    initialized_from, eval (the dev summary, when evaluated), curves, the task's own results
    (`report`, `predict`) and export_dir."""
    task_class.check_options(o, training)
    # a run refused for its starting weights (--init_checkpoint) leaves no output_dir it made
    with atomic.removed_if_refused(o.output_dir, CheckpointMismatchError):
        inputs = task_class.read(o, stream)
        strategy = start_run(o)
        task = task_class.prepare(o, inputs, training, stream)
        training = task.driver_options(training)
        line = task.describe_training(training) if o.do_train else None
        if line:
            print(line, file=stream, flush=True)
        outcome = train_and_evaluate(task, training, strategy, stream=stream)
        results = {"task": task.name, "final_step": outcome["final_step"],
                   "initialized_from": outcome["initialized_from"]}
        for key, name in (("eval", "summary"), ("curves", "curves")):
            if name in outcome:
                results[key] = outcome[name]
        task.report(outcome, results, stream)
        task.predict(outcome, training, results, stream)
        if o.export_dir:
            made_by = sessions.made_by(training.session, outcome["trainer"].precision)
            results["export_dir"] = task.export(outcome, results, made_by)
            print(f"exported {task.served} to {results['export_dir']}", file=stream, flush=True)
        return results
