"""What each task's command says about it: the options dataclasses of the tasks, importable
without TensorFlow. Each field with help is the source of its command's flag of the same
name (albert_tf.cli.define_options: the field's default and help are the flag's), so every
default is written once. A task's options also own the training settings whose default
differs from albert_tf.training.options.TrainingOptions' (e.g. run_race's --learning_rate):
the command passes their values on to TrainingOptions; the task itself does not read them.
"""

import dataclasses
import os

from albert_tf.data.bucket_widths import DEFAULT_BUCKETS, FLAG_HELP as BUCKETS_HELP
from albert_tf.storage.options import option, required
from albert_tf.training.options import OPTIMIZERS
from albert_tf.training.precision import policy_option

STRATEGY_HELP = "mirrored | one_device | default (ignored with --use_tpu)."
TPU_NAME_HELP = "The TPU name or grpc:// address (with --use_tpu)."
SPM_HELP = ("The SentencePiece model of the pre-trained model (default with --albert_hub_module_handle: the "
            "export's).")
HUB_HELP = "An albert_tf export (encoder/) to start from."
LOWER_CASE_HELP = "Lower-case the input (must match pretraining)."
HEAD_SEED_HELP = "Seed of the head initialisation, dropout and shuffling."
LOOP_HELP = "Steps per tf.function call (and per progress line)."


@dataclasses.dataclass
class ClassificationOptions:
    """Everything run_classifier's flags say about the task (see its --help); its
    training settings are TrainingOptions' fields (cli.training_options)."""

    task_name: str = required("cola, sst-2, mrpc, sts-b, qqp, mnli, mismnli, qnli, rte, wnli or tsv.")
    data_dir: str = required("The input data dir: the task's .tsv files.")
    output_dir: str = required("The output directory for checkpoints, metrics and predictions.")
    albert_hub_module_handle: str = option(None, "An albert_tf export (directory with encoder/ and preprocess/) to "
                                                 "start from.")
    init_checkpoint: str = option(None, "An albert_tf checkpoint (run_pretraining output_dir, ckpt-N prefix or "
                                        "converted directory).")
    albert_config_file: str = option(None, "The albert_config.json (with --init_checkpoint).")
    spm_model_file: str = option(None, "The SentencePiece model (with --init_checkpoint).")
    do_lower_case: bool = option(True, "Lower-case the input (with --init_checkpoint; an export carries its own).")
    max_seq_length: int = option(512, "The maximum total input sequence length after tokenization.")
    do_train: bool = option(False, "Whether to run training.")
    do_eval: bool = option(False, "Whether to run eval on the dev set (every --save_checkpoints_steps).")
    do_predict: bool = option(False, "Whether to run the model on the test set.")
    predict_batch_size: int = option(8, "Total batch size for predict.")
    classifier_dropout: float = option(0.1, "Dropout on pooled_output during training.")
    text_a_column: str = option("text_a", "--task_name=tsv: header name of the first text.")
    text_b_column: str = option(None, "--task_name=tsv: header name of the second text; empty: single sentences.")
    label_column: str = option("label", "--task_name=tsv: header name of the label.")
    labels: list = option(None, "--task_name=tsv: the label values (comma-separated); omit for regression.")
    random_seed: int = option(12345, "Seed of the classifier initialisation, dropout and shuffling.")
    strategy: str = option("default", "mirrored | one_device | default.")
    export_dir: str = option(None, "Export the fine-tuned classifier (raw strings in) here at the end.")
    length_buckets: str = option(DEFAULT_BUCKETS, BUCKETS_HELP)
    dtype_policy: str = policy_option()


@dataclasses.dataclass
class MultipleChoiceOptions:
    """Everything run_race's flags say about the task (see its --help), and the training
    settings whose defaults are run_race's own (learning_rate, train_step, warmup_step,
    iterations_per_loop, dtype_policy)."""

    data_dir: str = required("RACE/{train,dev,test}/{middle,high} lives here (or, for --task_name=multiple_choice, "
                             "{train,dev,test}.jsonl).")
    output_dir: str = required("Checkpoints, metrics and predictions go here.")
    task_name: str = option("race", "race | multiple_choice.")
    albert_config_file: str = option(None, "The albert_config.json of the pre-trained model.")
    spm_model_file: str = option(None, SPM_HELP)
    train_file: str = option(None, "Training features cache (default output_dir/train.tf_record).")
    eval_file: str = option(None, "Dev features cache (default output_dir/eval.tf_record).")
    predict_file: str = option(None, "Test features cache (default output_dir/predict.tf_record).")
    init_checkpoint: str = option(None, "Starting weights: run_pretraining output_dir, ckpt-N prefix, converted "
                                        "pretrained directory, or a directory with multiple_choice.weights.h5.")
    albert_hub_module_handle: str = option(None, HUB_HELP)
    do_lower_case: bool = option(True, LOWER_CASE_HELP)
    dropout_prob: float = option(0.1, "Dropout on the pooled output before the option logit.")
    max_seq_length: int = option(512, "Maximum total input length in pieces.")
    max_qa_length: int = option(128, "The question-with-option part keeps its last this many pieces.")
    high_only: bool = option(False, "Only the RACE-H part (high school).")
    middle_only: bool = option(False, "Only the RACE-M part (middle school).")
    do_train: bool = option(False, "Whether to run training.")
    do_eval: bool = option(False, "Whether to evaluate on the dev split (after every checkpoint).")
    do_predict: bool = option(False, "Whether to predict the test split.")
    train_batch_size: int = option(32, "Total batch size for training (questions).")
    eval_batch_size: int = option(8, "Total batch size for evaluation.")
    predict_batch_size: int = option(8, "Total batch size for predictions.")
    random_seed: int = option(12345, HEAD_SEED_HELP)
    strategy: str = option("default", STRATEGY_HELP)
    tpu_name: str = option(None, TPU_NAME_HELP)
    export_dir: str = option(None, "Export the fine-tuned model here at the end: a SavedModel that takes raw strings "
                                   "(article, question, options) and returns the option probabilities.")
    length_buckets: str = option(DEFAULT_BUCKETS, BUCKETS_HELP)
    learning_rate: float = option(1e-5, "The initial learning rate for AdamW.")
    train_step: int = option(12000, "Training steps.")
    warmup_step: int = option(1000, "Steps of linear learning-rate warmup.")
    iterations_per_loop: int = option(1000, LOOP_HELP)
    dtype_policy: str = policy_option()

    def feature_file(self, split):
        given = {"train": self.train_file, "dev": self.eval_file, "test": self.predict_file}[split]
        return given or os.path.join(self.output_dir, {"train": "train", "dev": "eval",
                                                       "test": "predict"}[split] + ".tf_record")


# the fields of SquadOptions only run_squad_v2 makes flags of (v1 keeps their defaults)
SQUAD_V2_ONLY = ("start_n_top", "end_n_top", "dropout_prob")


@dataclasses.dataclass
class SquadOptions:
    """Everything run_squad_v1/_v2's flags say about the task (see their --help), and the
    training settings whose defaults are theirs (iterations_per_loop, dtype_policy)."""

    version: str
    output_dir: str = required("Checkpoints, predictions and metrics go here.")
    train_file: str = option(None, "SQuAD JSON for training.")
    predict_file: str = option(None, "SQuAD JSON for predictions (with answers: also the metrics).")
    train_feature_file: str = option(None, "Training features cache (default output_dir/train.tf_record).")
    predict_feature_file: str = option(None, "Prediction features cache (default output_dir/predict.tf_record).")
    predict_feature_left_file: str = option(None, "Accepted for compatibility; unused: the post-processing fields "
                                                  "the release pickled here are in <predict_feature_file>.spans.json.")
    albert_config_file: str = option(None, "The albert_config.json of the pre-trained model.")
    spm_model_file: str = option(None, SPM_HELP)
    init_checkpoint: str = option(None, "Starting weights: run_pretraining output_dir, ckpt-N prefix, converted "
                                        "pretrained directory, or a directory with question_answering.weights.h5.")
    albert_hub_module_handle: str = option(None, HUB_HELP)
    do_lower_case: bool = option(True, LOWER_CASE_HELP)
    max_seq_length: int = option(384, "Maximum total input length in pieces.")
    doc_stride: int = option(128, "Stride between context windows, in pieces.")
    max_query_length: int = option(64, "The question keeps at most this many pieces.")
    do_train: bool = option(False, "Whether to run training.")
    do_predict: bool = option(False, "Whether to predict on --predict_file.")
    train_batch_size: int = option(48, "Total batch size for training.")
    predict_batch_size: int = option(8, "Total batch size for predictions.")
    num_train_epochs: float = option(3.0, "Training epochs over the training features.")
    warmup_proportion: float = option(0.1, "Share of the steps with linear learning-rate warmup.")
    n_best_size: int = option(20, "n-best predictions per question in nbest_predictions.json.")
    max_answer_length: int = option(30, "Longest answer in pieces.")
    start_n_top: int = option(5, "Starts kept by the v2 head at inference.")
    end_n_top: int = option(5, "Ends kept per start by the v2 head at inference.")
    dropout_prob: float = option(0.1, "Dropout in the v2 answer-class branch.")
    random_seed: int = option(12345, HEAD_SEED_HELP)
    strategy: str = option("default", STRATEGY_HELP)
    tpu_name: str = option(None, TPU_NAME_HELP)
    export_dir: str = option(None, "Export the fine-tuned model here at the end: a SavedModel that takes raw strings "
                                   "(question, context) and returns the answer text, score and character span.")
    length_buckets: str = option(DEFAULT_BUCKETS, BUCKETS_HELP)
    best_checkpoint: bool = option(False, "Score --predict_file (it must hold answers) at every checkpoint of "
                                          "training with the official metric (v1 f1, v2 best_f1), keep the best "
                                          "checkpoint in output_dir/best and predict and export from it (the "
                                          "release's model.ckpt-best); needs --do_train and --do_predict.")
    iterations_per_loop: int = option(1000, LOOP_HELP)
    dtype_policy: str = policy_option()

    @property
    def train_features_path(self):
        return self.train_feature_file or os.path.join(self.output_dir, "train.tf_record")

    @property
    def predict_features_path(self):
        return self.predict_feature_file or os.path.join(self.output_dir, "predict.tf_record")


@dataclasses.dataclass
class PretrainingOptions:
    """What the pretraining task needs (run_pretraining fills it from its flags).

    Attributes:
        config: AlbertConfig.
        input_files: training TFRecord files (expanded).
        eval_files: evaluation TFRecord files (expanded; default: input_files).
        max_seq_length, max_predictions_per_seq: T and P of the files.
        global_batch_size: G of training (--train_batch_size).
        deterministic, random_seed, shuffle_buffer_size: the input order.
        dynamic_masking: a `DynamicMasking` (re-draws masks every epoch) or None.
        init_checkpoint: weights to start a new run from, or None.
        use_one_hot_embeddings: one-hot word lookups (TPUs).
        sentence_loss: train the sentence head on the data's labels (SOP or NSP, as the
            data tool wrote them); False: masked LM only (the head is still evaluated).
        eval_batch_size, optimizer, learning_rate, num_train_steps, num_warmup_steps,
            save_checkpoints_steps, iterations_per_loop, max_eval_steps, dtype_policy: the
            training settings whose defaults are the release's run_pretraining's (its flags
            are made from them; run_pretraining gives their values to TrainingOptions, which
            the driver reads; the task does not).
    """

    config: "AlbertConfig"  # noqa: F821 (albert_tf.modeling.config, which imports TensorFlow)
    input_files: list
    eval_files: list = None
    max_seq_length: int = option(512, "The maximum total input sequence length after tokenization.")
    max_predictions_per_seq: int = option(20, "Maximum number of masked LM predictions per sequence.")
    global_batch_size: int = option(4096, "Total batch size for training.")
    deterministic: bool = option(False, "Deterministic input order and ops (exactly repeatable runs).")
    random_seed: int = option(12345, "Seed of initialisation, shuffling and dynamic masking.")
    shuffle_buffer_size: int = option(10000, "Examples in the input shuffle buffer.")
    dynamic_masking: object = None
    init_checkpoint: str = option(None, "Initial checkpoint (usually from a pre-trained ALBERT model).")
    use_one_hot_embeddings: bool = option(False, "One-hot word-embedding lookups (faster on TPUs).")
    sentence_loss: bool = option(True, "Train the sentence head on the data's labels (sentence order, or next "
                                       "sentence for data written with --random_next_sentence); false: masked LM "
                                       "only (the paper's 'None' objective; the head is still evaluated).")
    eval_batch_size: int = option(64, "Total batch size for eval.")
    optimizer: str = option("lamb", "The optimizer for training.", choices=OPTIMIZERS)
    learning_rate: float = option(0.00176, "The initial learning rate.")
    num_train_steps: int = option(125000, "Number of training steps.")
    num_warmup_steps: int = option(3125, "Number of warmup steps.")
    save_checkpoints_steps: int = option(5000, "How often to save the model checkpoint.")
    iterations_per_loop: int = option(1000, "Steps per tf.function call (and per log line).")
    max_eval_steps: int = option(100, "Maximum number of eval steps.")
    dtype_policy: str = policy_option()
