"""run_race's options: the task's fields and the command's options record (`COMMAND`),
importable without TensorFlow (albert_tf.storage.options)."""

import dataclasses
import os

from albert_tf.storage.options import Command, option
from albert_tf.tasks.options import (DataDir, Evaluates, FineTuningOptions, HeadDropout, NamedTask, ReleaseTpuFlags,
                                     TrainPredictFiles)
from albert_tf.training.options import TrainingOptions


@dataclasses.dataclass(kw_only=True)
class MultipleChoiceOptions(ReleaseTpuFlags, FineTuningOptions, Evaluates, NamedTask, HeadDropout, DataDir,
                            TrainPredictFiles):
    """Everything run_race's flags say about the task (see its --help)."""

    eval_file: str = option(None, "Dev features cache (default output_dir/eval.tf_record).")
    max_qa_length: int = option(128, "The question-with-option part keeps its last this many pieces.", positive=True,
                                setting=True)
    high_only: bool = option(False, "Only the RACE-H part (high school).", setting=True)
    middle_only: bool = option(False, "Only the RACE-M part (middle school).", setting=True)

    def feature_file(self, split):
        given = {"train": self.train_file, "dev": self.eval_file, "test": self.predict_file}[split]
        return given or os.path.join(self.output_dir, {"train": "train", "dev": "eval",
                                                       "test": "predict"}[split] + ".tf_record")


COMMAND = Command("run_race", (
    (MultipleChoiceOptions, None),
    (TrainingOptions, ("dtype_policy", "train_batch_size", "eval_batch_size", "learning_rate", "num_train_steps",
                       "num_warmup_steps", "save_checkpoints_steps", "keep_checkpoint_max", "iterations_per_loop",
                       "gradient_accumulation_steps", "remat", "allow_changed_settings"))),
    defaults={"task_name": "race", "learning_rate": 1e-5, "num_train_steps": 12000, "num_warmup_steps": 1000,
              "iterations_per_loop": 1000})
