"""Fine-tunes ALBERT on SQuAD v1.1 and predicts (run_squad_v2 is the same for SQuAD 2.0).

    python -m albert_tf.run_squad_v1 --albert_config_file=converted/albert_base/albert_config.json \
        --spm_model_file=converted/albert_base/30k-clean.model --init_checkpoint=converted/albert_base \
        --train_file=train-v1.1.json --predict_file=dev-v1.1.json --output_dir=runs/squad1 \
        --do_train --do_predict --max_seq_length=384 --train_batch_size=48 --learning_rate=5e-5 \
        --num_train_epochs=2

Flags keep the release's names. Starting weights: --init_checkpoint (a run_pretraining
output_dir, a ckpt-N prefix, a converted pretrained directory, or a directory holding
question_answering.weights.h5 such as a converted release SQuAD checkpoint or
AlbertForQuestionAnswering.save_pretrained's), or --albert_hub_module_handle (an albert_tf
export: encoder/ with its config and SentencePiece model). A given start that cannot be
read or does not match is an error; neither: a WARNING and initialized_from "random".

Feature files (the release's names): --train_feature_file (default
output_dir/train.tf_record) and --predict_feature_file (default
output_dir/predict.tf_record) are TFRecords with a `<file>.json` sidecar recording the
settings, tokenizer and input that made them; they are reused only when all match.
--predict_feature_left_file is accepted for compatibility and unused: the release
pickled the prediction features' post-processing fields there; here they are in
`<predict_feature_file>.spans.json` beside the records.

Output in --output_dir: ckpt-N checkpoints (a run resumes from the newest; --do_predict
alone predicts with it), metrics.jsonl, TensorBoard (train/), training_curves.png,
predictions.json, nbest_predictions.json, (v2) null_odds.json and
predictions_best_f1_thresh.json, and, when --predict_file holds answers,
eval_results.json / .txt with the official metrics (v1: over the questions with a gold
answer; the others are predicted and counted in questions_without_answers). With --export_dir, a SavedModel that
answers raw (question, context) strings (albert_tf.export.qa_module: answer, score,
character span; v2 also no_answer_score), with qa_info.json beside it. --output_dir,
--export_dir and the feature files are new paths or albert_tf's own
(albert_tf.storage.outputs); anything else is refused with exit status 2 before any work.
"""


import sys

from absl import flags

from albert_tf import cli
from albert_tf.data.bucket_widths import DEFAULT_BUCKETS, FLAG_HELP, SQUAD_V1_FLAG_HELP


def define_flags(flag_values=None, version="v1"):
    """The release's run_squad_v1 (version "v1") or run_squad_v2 ("v2") flags, plus
    --strategy, --random_seed and --keep_checkpoint_max."""
    fv = {"flag_values": flags.FLAGS if flag_values is None else flag_values}
    flags.DEFINE_string("albert_config_file", None, "The albert_config.json of the pre-trained model.", **fv)
    flags.DEFINE_string("vocab_file", None, "Accepted for compatibility; unused (the SentencePiece model is the "
                        "vocabulary).", **fv)
    flags.DEFINE_string("spm_model_file", None, "The SentencePiece model of the pre-trained model (default with "
                        "--albert_hub_module_handle: the export's).", **fv)
    flags.DEFINE_string("output_dir", None, "Checkpoints, predictions and metrics go here.", **fv)
    flags.DEFINE_string("train_file", None, "SQuAD JSON for training.", **fv)
    flags.DEFINE_string("predict_file", None, "SQuAD JSON for predictions (with answers: also the metrics).", **fv)
    flags.DEFINE_string("train_feature_file", None, "Training features cache (default output_dir/train.tf_record).",
                        **fv)
    flags.DEFINE_string("predict_feature_file", None,
                        "Prediction features cache (default output_dir/predict.tf_record).", **fv)
    flags.DEFINE_string("predict_feature_left_file", None,
                        "Accepted for compatibility; unused: the post-processing fields the release pickled here "
                        "are in <predict_feature_file>.spans.json.", **fv)
    flags.DEFINE_string("init_checkpoint", None, "Starting weights: run_pretraining output_dir, ckpt-N prefix, "
                        "converted pretrained directory, or a directory with question_answering.weights.h5.", **fv)
    flags.DEFINE_string("albert_hub_module_handle", None, "An albert_tf export (encoder/) to start from.", **fv)
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (must match pretraining).", **fv)
    flags.DEFINE_integer("max_seq_length", 384, "Maximum total input length in pieces.", **fv)
    flags.DEFINE_integer("doc_stride", 128, "Stride between context windows, in pieces.", **fv)
    flags.DEFINE_integer("max_query_length", 64, "The question keeps at most this many pieces.", **fv)
    flags.DEFINE_bool("do_train", False, "Whether to run training.", **fv)
    flags.DEFINE_bool("do_predict", False, "Whether to predict on --predict_file.", **fv)
    flags.DEFINE_integer("train_batch_size", 48, "Total batch size for training.", **fv)
    flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predictions.", **fv)
    flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for AdamW.", **fv)
    flags.DEFINE_float("num_train_epochs", 3.0, "Training epochs over the training features.", **fv)
    flags.DEFINE_float("warmup_proportion", 0.1, "Share of the steps with linear learning-rate warmup.", **fv)
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.", **fv)
    flags.DEFINE_integer("keep_checkpoint_max", 5, "How many checkpoints to keep.", **fv)
    flags.DEFINE_integer("iterations_per_loop", 1000, "Steps per tf.function call (and per progress line).", **fv)
    flags.DEFINE_bool("best_checkpoint", False, "Score --predict_file (it must hold answers) at every checkpoint of "
                      "training with the official metric (v1 f1, v2 best_f1), keep the best checkpoint in "
                      "output_dir/best and predict and export from it (the release's model.ckpt-best); needs "
                      "--do_train and --do_predict.", **fv)
    flags.DEFINE_integer("n_best_size", 20, "n-best predictions per question in nbest_predictions.json.", **fv)
    flags.DEFINE_integer("max_answer_length", 30, "Longest answer in pieces.", **fv)
    flags.DEFINE_string("export_dir", None, "Export the fine-tuned model here at the end: a SavedModel that takes "
                        "raw strings (question, context) and returns the answer text, score and character span.", **fv)
    flags.DEFINE_string("length_buckets", DEFAULT_BUCKETS, SQUAD_V1_FLAG_HELP if version == "v1" else FLAG_HELP, **fv)
    cli.define_tpu_flags(fv["flag_values"])
    cli.define_dtype_policy_flag(fv["flag_values"])
    cli.define_gradient_accumulation_flag(fv["flag_values"])
    cli.define_remat_flag(fv["flag_values"])
    cli.define_allow_changed_settings_flag(fv["flag_values"])
    flags.DEFINE_integer("random_seed", 12345, "Seed of the head initialisation, dropout and shuffling.", **fv)
    if version == "v2":
        flags.DEFINE_integer("start_n_top", 5, "Starts kept by the v2 head at inference.", **fv)
        flags.DEFINE_integer("end_n_top", 5, "Ends kept per start by the v2 head at inference.", **fv)
        flags.DEFINE_float("dropout_prob", 0.1, "Dropout in the v2 answer-class branch.", **fv)


# the flags that change a training's result: a run directory continues only with the same
# (albert_tf.training.sessions; --num_train_epochs may change)
SETTINGS = ("learning_rate", "warmup_proportion", "train_batch_size", "gradient_accumulation_steps",
            "max_seq_length", "doc_stride", "max_query_length", "random_seed", "init_checkpoint",
            "albert_hub_module_handle", "dtype_policy")
V2_SETTINGS = ("dropout_prob",)
POSITIVE = ("train_batch_size", "predict_batch_size", "save_checkpoints_steps", "keep_checkpoint_max",
            "iterations_per_loop")


def check_flags(f):
    """Flag values alone; the task checks its inputs in tasks.squad.check_options."""
    cli.check_fine_tuning_flags(f, POSITIVE, warmup=False)


def options_from_flags(f, version):
    """-> (SquadOptions, TrainingOptions)."""
    from albert_tf.tasks.squad import SquadOptions

    # v1 has no --start_n_top, --end_n_top, --dropout_prob: those keep SquadOptions' defaults
    task = cli.task_options(SquadOptions, f, version=version, **cli.tpu_strategy(f))
    training = cli.training_options(f, eval_batch_size=f.predict_batch_size, optimizer="adamw",
                                    keep_checkpoint_max=f.keep_checkpoint_max,
                                    session=cli.session(f, f"run_squad_{version}",
                                                        SETTINGS + (V2_SETTINGS if version == "v2" else ()),
                                                        "num_train_epochs", f.do_train, tpu=f.use_tpu))
    return task, training


def run(f, stream=None, version="v1"):
    """Trains and predicts as the flags say; returns a dict of results."""
    check_flags(f)
    from albert_tf.tasks import squad

    return cli.run_task(squad, *options_from_flags(f, version), stream)


def main(argv=None):
    """`run_squad_v1 ARGV` in this process: returns its exit status
    (albert_tf.cli.main: its own flags, the process's state put back; not undone:
    cli.IRREVERSIBLE).

    Args:
        argv: the arguments, without the program name (default sys.argv[1:]).
    """
    return cli.main("run_squad_v1", define_flags, run, argv)


def entry():
    sys.exit(main())


if __name__ == "__main__":
    entry()
