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

# the flags that change a training's result: a run directory continues only with the same
# (albert_tf.training.sessions; --train_step may change)
SETTINGS = ("learning_rate", "warmup_step", "train_batch_size", "gradient_accumulation_steps", "max_seq_length",
            "max_qa_length", "random_seed", "init_checkpoint", "albert_hub_module_handle", "dtype_policy",
            "dropout_prob", "task_name", "high_only", "middle_only")
POSITIVE = ("train_batch_size", "eval_batch_size", "predict_batch_size", "save_checkpoints_steps",
            "num_keep_checkpoint", "iterations_per_loop", "train_step")


# the training flags taken from TrainingOptions' fields (--num_keep_checkpoint: the release's name);
# those whose defaults are run_race's own are MultipleChoiceOptions' fields
TRAINING_FLAGS = ("save_checkpoints_steps", "keep_checkpoint_max", "gradient_accumulation_steps", "remat")
RELEASE_NAMES = {"keep_checkpoint_max": "num_keep_checkpoint"}
TRAINING_HELP = {"save_checkpoints_steps": "How often to save (and evaluate) a checkpoint."}


def define_flags(flag_values=None):
    """The release's run_race flags, plus --strategy, --random_seed and --export_dir, made
    from the fields of tasks.options.MultipleChoiceOptions and training.options.TrainingOptions
    (each default written once, there), and the TPU flags."""
    from albert_tf.tasks.options import MultipleChoiceOptions
    from albert_tf.training.options import TrainingOptions

    fv = flags.FLAGS if flag_values is None else flag_values
    cli.define_options(fv, MultipleChoiceOptions)
    cli.define_options(fv, TrainingOptions, names=TRAINING_FLAGS, flag_names=RELEASE_NAMES, helps=TRAINING_HELP)
    flags.DEFINE_string("vocab_file", None, "Accepted for compatibility; unused (the SentencePiece model is the "
                        "vocabulary).", flag_values=fv)
    cli.define_tpu_flags(fv)
    cli.define_allow_changed_settings_flag(fv)


def check_flags(f):
    """Flag values alone; the task checks its inputs in tasks.race.check_options."""
    cli.check_fine_tuning_flags(f, POSITIVE)


def options_from_flags(f):
    """-> (MultipleChoiceOptions, TrainingOptions)."""
    from albert_tf.tasks.race.task import MultipleChoiceOptions

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
    from albert_tf.tasks.race import task as race

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
