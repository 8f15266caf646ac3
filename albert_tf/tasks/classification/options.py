"""run_classifier's options: the task's fields and the command's options record (`COMMAND`),
importable without TensorFlow (albert_tf.storage.options)."""

import dataclasses

from albert_tf.storage.options import Command, option
from albert_tf.tasks.options import DataDir, Evaluates, FineTuningOptions, NamedTask
from albert_tf.training.options import TrainingOptions


@dataclasses.dataclass(kw_only=True)
class ClassificationOptions(FineTuningOptions, Evaluates, NamedTask, DataDir):
    """Everything run_classifier's flags say about the task (see its --help)."""

    classifier_dropout: float = option(0.1, "Dropout on pooled_output during training.", setting=True)
    text_a_column: str = option("text_a", "--task_name=tsv: header name of the first text.")
    text_b_column: str = option(None, "--task_name=tsv: header name of the second text; empty: single sentences.")
    label_column: str = option("label", "--task_name=tsv: header name of the label.")
    labels: list = option(None, "--task_name=tsv: the label values (comma-separated); omit for regression.")


COMMAND = Command("run_classifier", (
    (ClassificationOptions, None),
    (TrainingOptions, ("dtype_policy", "train_batch_size", "eval_batch_size", "learning_rate", "num_train_steps",
                       "num_warmup_steps", "optimizer", "save_checkpoints_steps", "keep_checkpoint_max",
                       "iterations_per_loop", "gradient_accumulation_steps", "remat", "allow_changed_settings"))))
