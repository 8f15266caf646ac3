"""Fine-tunes ALBERT on RACE (or users' own multiple-choice data) and evaluates / predicts.

    python -m albert_tf.run_race --data_dir=data --albert_config_file=converted/albert_base/albert_config.json \
        --spm_model_file=converted/albert_base/30k-clean.model --init_checkpoint=converted/albert_base \
        --output_dir=runs/race --do_train --do_eval --max_seq_length=512 --max_qa_length=128 \
        --train_batch_size=32 --learning_rate=1e-5 --train_step=12000 --warmup_step=1000

Flags keep the release's names. --data_dir holds RACE/{train,dev,test}/{middle,high}/ with
the official download's one JSON article per *.txt, or the release's all.txt (one article
per line); --task_name=multiple_choice reads --data_dir/{train,dev,test}.jsonl instead
(context, question, options, answer per line; any number of options from 2, the same in a
file). --train_file, --eval_file and --predict_file are the feature caches (TFRecords,
default output_dir/{train,eval,predict}.tf_record) with a `<file>.json` sidecar; they are
reused only when the settings, tokenizer and input all match.

Starting weights: --init_checkpoint (a run_pretraining output_dir, a ckpt-N prefix, a
converted pretrained directory, or a directory holding multiple_choice.weights.h5 such as
a converted release RACE checkpoint), or --albert_hub_module_handle (an albert_tf export).
A given start that cannot be read or does not match is an error; neither: a WARNING and
initialized_from "random".

Output in --output_dir: ckpt-N checkpoints (a run resumes from the newest) and best/,
metrics.jsonl, TensorBoard, training_curves.png, eval_results.json (accuracy,
accuracy_middle, accuracy_high, counts, initialized_from; a level without questions, such as
high with --middle_only, has count 0 and no accuracy), dev_predictions.jsonl and
predictions.jsonl (per question: article id, question index, chosen letter, the option
probabilities). --export_dir: a SavedModel answering raw (article, question, options).
--output_dir, --export_dir and the feature caches are new paths or albert_tf's own
(albert_tf.storage.outputs); anything else is refused with exit status 2 before any work.
"""


import sys

from absl import flags

from albert_tf import cli
from albert_tf.data.bucket_widths import DEFAULT_BUCKETS, FLAG_HELP

# the flags that change a training's result: a run directory continues only with the same
# (albert_tf.training.sessions; --train_step may change)
SETTINGS = ("learning_rate", "warmup_step", "train_batch_size", "gradient_accumulation_steps", "max_seq_length",
            "max_qa_length", "random_seed", "init_checkpoint", "albert_hub_module_handle", "dtype_policy",
            "dropout_prob", "task_name", "high_only", "middle_only")
POSITIVE = ("train_batch_size", "eval_batch_size", "predict_batch_size", "save_checkpoints_steps",
            "num_keep_checkpoint", "iterations_per_loop", "train_step")


def define_flags(flag_values=None):
    """The release's run_race flags, plus --strategy, --random_seed and --export_dir."""
    fv = {"flag_values": flags.FLAGS if flag_values is None else flag_values}
    flags.DEFINE_string("data_dir", None, "RACE/{train,dev,test}/{middle,high} lives here (or, for "
                        "--task_name=multiple_choice, {train,dev,test}.jsonl).", **fv)
    flags.DEFINE_string("albert_config_file", None, "The albert_config.json of the pre-trained model.", **fv)
    flags.DEFINE_string("task_name", "race", "race | multiple_choice.", **fv)
    flags.DEFINE_string("vocab_file", None, "Accepted for compatibility; unused (the SentencePiece model is the "
                        "vocabulary).", **fv)
    flags.DEFINE_string("spm_model_file", None, "The SentencePiece model of the pre-trained model (default with "
                        "--albert_hub_module_handle: the export's).", **fv)
    flags.DEFINE_string("train_file", None, "Training features cache (default output_dir/train.tf_record).", **fv)
    flags.DEFINE_string("eval_file", None, "Dev features cache (default output_dir/eval.tf_record).", **fv)
    flags.DEFINE_string("predict_file", None, "Test features cache (default output_dir/predict.tf_record).", **fv)
    flags.DEFINE_string("output_dir", None, "Checkpoints, metrics and predictions go here.", **fv)
    flags.DEFINE_string("init_checkpoint", None, "Starting weights: run_pretraining output_dir, ckpt-N prefix, "
                        "converted pretrained directory, or a directory with multiple_choice.weights.h5.", **fv)
    flags.DEFINE_string("albert_hub_module_handle", None, "An albert_tf export (encoder/) to start from.", **fv)
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (must match pretraining).", **fv)
    flags.DEFINE_float("dropout_prob", 0.1, "Dropout on the pooled output before the option logit.", **fv)
    flags.DEFINE_integer("max_seq_length", 512, "Maximum total input length in pieces.", **fv)
    flags.DEFINE_integer("max_qa_length", 128, "The question-with-option part keeps its last this many pieces.",
                         **fv)
    flags.DEFINE_integer("num_keep_checkpoint", 5, "How many checkpoints to keep.", **fv)
    flags.DEFINE_bool("high_only", False, "Only the RACE-H part (high school).", **fv)
    flags.DEFINE_bool("middle_only", False, "Only the RACE-M part (middle school).", **fv)
    flags.DEFINE_bool("do_train", False, "Whether to run training.", **fv)
    flags.DEFINE_bool("do_eval", False, "Whether to evaluate on the dev split (after every checkpoint).", **fv)
    flags.DEFINE_bool("do_predict", False, "Whether to predict the test split.", **fv)
    flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training (questions).", **fv)
    flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for evaluation.", **fv)
    flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predictions.", **fv)
    flags.DEFINE_float("learning_rate", 1e-5, "The initial learning rate for AdamW.", **fv)
    flags.DEFINE_integer("train_step", 12000, "Training steps.", **fv)
    flags.DEFINE_integer("warmup_step", 1000, "Steps of linear learning-rate warmup.", **fv)
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save (and evaluate) a checkpoint.", **fv)
    flags.DEFINE_integer("iterations_per_loop", 1000, "Steps per tf.function call (and per progress line).", **fv)
    flags.DEFINE_string("export_dir", None, "Export the fine-tuned model here at the end: a SavedModel that takes "
                        "raw strings (article, question, options) and returns the option probabilities.", **fv)
    flags.DEFINE_string("length_buckets", DEFAULT_BUCKETS, FLAG_HELP, **fv)
    cli.define_tpu_flags(fv["flag_values"])
    cli.define_dtype_policy_flag(fv["flag_values"])
    cli.define_gradient_accumulation_flag(fv["flag_values"])
    cli.define_remat_flag(fv["flag_values"])
    cli.define_allow_changed_settings_flag(fv["flag_values"])
    flags.DEFINE_integer("random_seed", 12345, "Seed of the head initialisation, dropout and shuffling.", **fv)


def check_flags(f):
    """Flag values alone; the task checks its inputs in tasks.race.check_options."""
    cli.check_fine_tuning_flags(f, POSITIVE)


def options_from_flags(f):
    """-> (MultipleChoiceOptions, TrainingOptions)."""
    from albert_tf.tasks.race import MultipleChoiceOptions

    task = cli.task_options(MultipleChoiceOptions, f, **cli.tpu_strategy(f))
    training = cli.training_options(f, eval_batch_size=f.eval_batch_size, num_train_steps=f.train_step,
                                    num_warmup_steps=f.warmup_step, optimizer="adamw",
                                    keep_checkpoint_max=f.num_keep_checkpoint,
                                    session=cli.session(f, "run_race", SETTINGS, "train_step", f.do_train,
                                                        tpu=f.use_tpu))
    return task, training


def run(f, stream=None):
    """Trains, evaluates, predicts and exports as the flags say; returns a dict of results."""
    check_flags(f)
    from albert_tf.tasks import race

    return cli.run_task(race, *options_from_flags(f), stream)


def main(argv=None):
    """`run_race ARGV` in this process: returns its exit status
    (albert_tf.cli.main: its own flags, the process's state put back; not undone:
    cli.IRREVERSIBLE).

    Args:
        argv: the arguments, without the program name (default sys.argv[1:]).
    """
    return cli.main("run_race", define_flags, run, argv)


def entry():
    sys.exit(main())


if __name__ == "__main__":
    entry()
