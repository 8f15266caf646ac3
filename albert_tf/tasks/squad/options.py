"""run_squad_v1's and run_squad_v2's options: the task's fields and the commands' options
records (`COMMANDS`), importable without TensorFlow (albert_tf.storage.options)."""

import dataclasses
import os

from albert_tf.storage.options import Command, option
from albert_tf.tasks.options import FineTuningOptions, HeadDropout, ReleaseTpuFlags, TrainPredictFiles
from albert_tf.training.options import TrainingOptions


@dataclasses.dataclass(kw_only=True)
class SquadOptions(ReleaseTpuFlags, FineTuningOptions, HeadDropout, TrainPredictFiles):
    """Everything run_squad_v1/_v2's flags say about the task (see their --help); `version`
    is "v1" or "v2" (the command's)."""

    version: str
    train_feature_file: str = option(None, "Training features cache (default output_dir/train.tf_record).")
    predict_feature_file: str = option(None, "Prediction features cache (default output_dir/predict.tf_record).")
    predict_feature_left_file: str = option(None, "Accepted for compatibility; unused: the post-processing fields "
                                                  "the release pickled here are in <predict_feature_file>.spans.json.")
    doc_stride: int = option(128, "Stride between context windows, in pieces.", positive=True, setting=True)
    max_query_length: int = option(64, "The question keeps at most this many pieces.", positive=True, setting=True)
    num_train_epochs: float = option(3.0, "Training epochs over the training features.", positive=True, length=True)
    warmup_proportion: float = option(0.1, "Share of the steps with linear learning-rate warmup.", setting=True)
    n_best_size: int = option(20, "n-best predictions per question in nbest_predictions.json.", positive=True)
    max_answer_length: int = option(30, "Longest answer in pieces.", positive=True)
    start_n_top: int = option(5, "Starts kept by the v2 head at inference.")
    end_n_top: int = option(5, "Ends kept per start by the v2 head at inference.")
    best_checkpoint: bool = option(False, "Score --predict_file (it must hold answers) at every checkpoint of "
                                          "training with the official metric (v1 f1, v2 best_f1), keep the best "
                                          "checkpoint in output_dir/best and predict and export from it (the "
                                          "release's model.ckpt-best); needs --do_train and --do_predict.")

    @property
    def train_features_path(self):
        return self.train_feature_file or os.path.join(self.output_dir, "train.tf_record")

    @property
    def predict_features_path(self):
        return self.predict_feature_file or os.path.join(self.output_dir, "predict.tf_record")


_TRAINING = (TrainingOptions, ("dtype_policy", "train_batch_size", "learning_rate", "save_checkpoints_steps",
                               "keep_checkpoint_max", "iterations_per_loop", "gradient_accumulation_steps", "remat",
                               "allow_changed_settings"))
_DEFAULTS = {"max_seq_length": 384, "train_batch_size": 48, "iterations_per_loop": 1000}
# v1 has no v2 head: its settings keep their defaults
_V1 = tuple(f.name for f in dataclasses.fields(SquadOptions)
            if "help" in f.metadata and f.name not in ("start_n_top", "end_n_top", "dropout_prob"))
COMMANDS = {"v1": Command("run_squad_v1", ((SquadOptions, _V1), _TRAINING), defaults=_DEFAULTS),
            "v2": Command("run_squad_v2", ((SquadOptions, None), _TRAINING), defaults=_DEFAULTS)}
