"""The options every training command's task shares, each field declared once (its default,
help and properties: albert_tf.storage.options), importable without TensorFlow. A task's own
fields and its command's options record (`COMMAND`) are in its folder
(tasks/<task>/options.py); pretraining's are `PretrainingOptions` and `RUN_PRETRAINING` here.
"""

import dataclasses

from albert_tf.data.bucket_widths import DEFAULT_BUCKETS, FLAG_HELP as BUCKETS_HELP, SQUAD_V1_FLAG_HELP
from albert_tf.storage.options import Command, LowerCase, ModelFiles, RunDirectory, option
from albert_tf.tasks.classification.data import TASKS as CLASSIFICATION_TASKS
from albert_tf.training.options import TrainingOptions

STRATEGIES = ("tpu", "multi_worker_mirrored", "mirrored", "one_device", "default")
FINE_TUNING_STRATEGIES = ("mirrored", "one_device", "default")


@dataclasses.dataclass(kw_only=True)
class RunOptions(RunDirectory, ModelFiles):
    """What every training command's task takes (pretraining and fine-tuning)."""

    init_checkpoint: str = option(None, "Starting weights: a run_pretraining output_dir, a ckpt-N prefix, a converted "
                                        "pretrained directory, or (fine-tuning) a directory holding the task's "
                                        "fine-tuned weights (e.g. question_answering.weights.h5); export_litert, "
                                        "the model: an albert_tf model directory or a run directory.", setting=True)
    max_seq_length: int = option(512, "The maximum total input sequence length in pieces, after tokenization "
                                      "(create_pretraining_data: of the instances written; export_litert: the "
                                      "longest input the app will send, recorded in the JSON).",
                                 positive=True, setting=True)
    do_train: bool = option(False, "Whether to run training.")
    random_seed: int = option(12345, "Seed of the initialisation, dropout, shuffling and (pretraining) dynamic "
                                     "masking; of the data tools' sampling and masking (the same seed gives the "
                                     "same data).", setting=True,
                              names={"make_race_data": "seed", "make_squad_data": "seed"})
    strategy: str = option("default", "tpu | multi_worker_mirrored | mirrored | one_device | default (fine-tuning: "
                                      "mirrored, one_device or default; a TPU with --use_tpu).")
    export_dir: str = option(None, "Export the trained model here at the end (a new path or albert_tf's own export, "
                                   "replaced; anything else is refused): fine-tuning, a SavedModel that takes raw "
                                   "strings; run_pretraining, TF-Hub-style encoder/ and preprocess/ (needs "
                                   "--spm_model_file).")

    def strategy_and_tpu(self):
        """(the driver's strategy name, the TPU's name or address or None)."""
        return self.strategy, getattr(self, "tpu_name", None)


@dataclasses.dataclass(kw_only=True)
class Evaluates:
    """The commands that evaluate on a dev split while they train."""

    do_eval: bool = option(
        False, "Whether to evaluate on the dev set (fine-tuning: after every checkpoint).")


@dataclasses.dataclass(kw_only=True)
class TpuName:
    """The commands that train on TPUs."""

    tpu_name: str = option(
        None, "The TPU name or grpc:// address (with --use_tpu; run_pretraining's --tpu with --strategy=tpu).",
        names={"run_pretraining": "tpu"})


@dataclasses.dataclass(kw_only=True)
class ReleaseTpuFlags(TpuName):
    """The release's TPU flags of run_squad and run_race: --use_tpu maps to the driver's tpu
    strategy on --tpu_name (else --master); the rest are accepted and unused."""

    use_tpu: bool = option(False, "Train on a TPU (--tpu_name): the driver's tpu strategy.")
    tpu_zone: str = option(None, "Accepted for compatibility; unused (the TPU resolver finds it).")
    gcp_project: str = option(None, "Accepted for compatibility; unused.")
    master: str = option(None, "Accepted for compatibility; with --use_tpu and no --tpu_name, the TPU address.")
    num_tpu_cores: int = option(8, "Accepted for compatibility; the strategy counts the cores.")
    vocab_file: str = option(None, "The release's WordPiece vocabulary: accepted for compatibility, unused (the "
                                   "SentencePiece model is the vocabulary; create_pretraining_data refuses it without "
                                   "--spm_model_file).")

    def strategy_and_tpu(self):
        return ("tpu", self.tpu_name or self.master) if self.use_tpu else (self.strategy, None)


@dataclasses.dataclass(kw_only=True)
class FineTuningOptions(RunOptions, LowerCase):
    """What every fine-tuning command's task takes."""

    albert_hub_module_handle: str = option(None, "An albert_tf export (the directory with encoder/ and preprocess/) "
                                                 "to start from.", setting=True)
    do_predict: bool = option(False, "Whether to predict the test split (SQuAD: --predict_file).")
    predict_batch_size: int = option(8, "Total batch size for predict.", positive=True)
    length_buckets: str = option(DEFAULT_BUCKETS, BUCKETS_HELP, helps={"run_squad_v1": SQUAD_V1_FLAG_HELP})


@dataclasses.dataclass(kw_only=True)
class NamedTask:
    """The commands that run one of several tasks."""

    task_name: str = option(
        None, f"run_classifier: {', '.join(CLASSIFICATION_TASKS)} or tsv; run_race: race or multiple_choice.",
        setting=True)


@dataclasses.dataclass(kw_only=True)
class DataDir:
    """The commands that read a directory of task files."""

    data_dir: str = option(
        None, "The input data: run_classifier, the task's .tsv files; run_race, "
        "RACE/{train,dev,test}/{middle,high} (or, for --task_name=multiple_choice, "
        "{train,dev,test}.jsonl).")


@dataclasses.dataclass(kw_only=True)
class TrainPredictFiles:
    """The release's --train_file / --predict_file (run_squad: the SQuAD JSON read; run_race:
    the feature caches written)."""

    train_file: str = option(None, "run_squad: SQuAD JSON for training; run_race: the training features cache "
                                   "(default output_dir/train.tf_record).")
    predict_file: str = option(None, "run_squad: SQuAD JSON for predictions (with answers: also the metrics); "
                                     "run_race: the test features cache (default output_dir/predict.tf_record).")


@dataclasses.dataclass(kw_only=True)
class HeadDropout:
    """The heads with a dropout of their own (RACE's option logit, SQuAD v2's answer class)."""

    dropout_prob: float = option(
        0.1, "Dropout in the head: on the pooled output before the option logit (RACE), in the v2 answer-class"
        " branch (SQuAD).", setting=True)


@dataclasses.dataclass
class PretrainingOptions(RunOptions):
    """What the pretraining task needs (run_pretraining builds it from its options record).

    Attributes:
        config: AlbertConfig.
        input_files, eval_files: training and evaluation TFRecord files (expanded).
        global_batch_size: G of training (the driver's train_batch_size).
        dynamic_masking: a `DynamicMasking` (re-draws masks every epoch) or None.
        max_seq_length, max_predictions_per_seq: T and P of the files.
        deterministic, random_seed, shuffle_buffer_size: the input order.
        init_checkpoint: weights to start a new run from, or None.
        use_one_hot_embeddings: one-hot word lookups (TPUs).
        sentence_loss: train the sentence head on the data's labels (SOP or NSP, as the
            data tool wrote them); False: masked LM only (the head is still evaluated).
    """

    config: "AlbertConfig"  # noqa: F821 (albert_tf.modeling.config, which imports TensorFlow)
    input_files: list
    eval_files: list = None
    global_batch_size: int = 4096
    dynamic_masking: object = None
    max_predictions_per_seq: int = option(20, "Maximum number of masked LM predictions per sequence.", positive=True,
                                          setting=True)
    deterministic: bool = option(False, "Deterministic input order and ops (exactly repeatable runs).")
    shuffle_buffer_size: int = option(10000, "Examples held for shuffling by run_pretraining's input pipeline.",
                                      helps={"create_pretraining_data": "Records held in memory by the global "
                                             "shuffle; more are spilled to --temp_dir and read back in order (the "
                                             "output does not depend on it)."})
    use_one_hot_embeddings: bool = option(False, "One-hot word-embedding lookups (faster on TPUs).")
    sentence_loss: bool = option(True, "Train the sentence head on the data's labels (sentence order, or next "
                                       "sentence for data written with --random_next_sentence); false: masked LM "
                                       "only (the paper's 'None' objective; the head is still evaluated).",
                                 setting=True)


@dataclasses.dataclass(kw_only=True)
class PretrainingRunOptions(Evaluates, TpuName):
    """run_pretraining's own flags: its inputs and what it makes of them (a declaration:
    the task's options are PretrainingOptions)."""

    input_file: str = option(None, "The input files (comma-separated files or globs): run_pretraining, TF example "
                                   "files; create_pretraining_data and train_sentencepiece, text (one sentence per "
                                   "line).")
    eval_input_file: str = option(None, "Evaluation TF example files (default: --input_file).")
    dynamic_masking: bool = option(False, "Re-draw the masked-LM masks every epoch in tf.data.", setting=True)
    export_seq_length: int = option(128, "Default sequence length of the exported preprocessing model (export_tfhub: "
                                         "at least 8).", positive=True, names={"export_tfhub": "seq_length"})


RUN_PRETRAINING = Command(
    "run_pretraining", ((PretrainingOptions, None), (PretrainingRunOptions, None), (TrainingOptions, None)),
    defaults={"do_train": True, "do_eval": True, "train_batch_size": 4096, "eval_batch_size": 64,
              "learning_rate": 0.00176, "num_train_steps": 125000, "num_warmup_steps": 3125, "optimizer": "lamb",
              "save_checkpoints_steps": 5000, "iterations_per_loop": 1000, "max_eval_steps": 100})
