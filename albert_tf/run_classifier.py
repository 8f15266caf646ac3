"""Fine-tunes ALBERT on GLUE (or any TSV) classification and regression tasks.

    python -m albert_tf.run_classifier --task_name=MRPC --data_dir=glue_data/MRPC \
        --albert_hub_module_handle=export/albert_base --output_dir=runs/mrpc \
        --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=32 \
        --learning_rate=2e-5 --train_step=800 --warmup_step=200 --export_dir=runs/mrpc/export

Flags keep the release's names. The model starts from an export (--albert_hub_module_handle:
the directory holding `encoder/` and `preprocess/`, as written by albert_tf.export_tfhub),
or from an albert_tf checkpoint (--init_checkpoint with --albert_config_file and
--spm_model_file). Tasks: cola, sst-2, mrpc, sts-b, qqp, mnli, mismnli, qnli, rte, wnli
(case-insensitive) in the GLUE TSV layout, or `tsv` with columns named by
--text_a_column/--text_b_column/--label_column and --labels.

Output in --output_dir: `ckpt-N` checkpoints (a run resumes from the newest), `best/`
(the checkpoint with the best dev metric), `metrics.jsonl` (train loss and every dev
evaluation), `eval_results.json` / `eval_results.txt` (dev metrics of the best
checkpoint), `dev_predictions.tsv`, `test_results.tsv` (GLUE submission layout),
`training_curves.png`, TensorBoard (`train/`, `eval/`); with --export_dir a SavedModel that takes raw strings.
--output_dir and --export_dir are new paths or albert_tf's own (albert_tf.storage.outputs);
anything else is refused with exit status 2 before any work.
"""


import sys

from absl import flags

from albert_tf import cli


# the training flags taken from TrainingOptions' fields (their defaults are run_classifier's),
# under the release's names where they differ
TRAINING_FLAGS = ("train_batch_size", "eval_batch_size", "learning_rate", "num_train_steps", "num_warmup_steps",
                  "save_checkpoints_steps", "keep_checkpoint_max", "iterations_per_loop", "optimizer",
                  "gradient_accumulation_steps", "remat")
RELEASE_NAMES = {"num_train_steps": "train_step", "num_warmup_steps": "warmup_step"}


def define_flags(flag_values=None):
    """The release's run_classifier flags, plus the tsv columns, --strategy and a few more,
    made from the fields of tasks.options.ClassificationOptions and
    training.options.TrainingOptions (each default written once, there).

    Args:
        flag_values: an absl FlagValues to define them in (default: the global FLAGS).
    """
    from albert_tf.tasks.options import ClassificationOptions
    from albert_tf.training.options import TrainingOptions

    fv = flags.FLAGS if flag_values is None else flag_values
    cli.define_options(fv, ClassificationOptions)
    cli.define_options(fv, TrainingOptions, names=TRAINING_FLAGS, flag_names=RELEASE_NAMES)
    cli.define_allow_changed_settings_flag(fv)


# the flags that change a training's result: a run directory continues only with the same
# (albert_tf.training.sessions; --train_step may change)
SETTINGS = ("learning_rate", "warmup_step", "train_batch_size", "gradient_accumulation_steps", "max_seq_length",
            "optimizer", "random_seed", "init_checkpoint", "albert_hub_module_handle", "dtype_policy",
            "classifier_dropout", "task_name")
POSITIVE = ("max_seq_length", "train_batch_size", "eval_batch_size", "predict_batch_size", "train_step",
            "save_checkpoints_steps", "keep_checkpoint_max", "iterations_per_loop")


def check_flags(f):
    """Flag values alone (numbers, choices); the task checks its inputs (files, export,
    config) in tasks.classification.check_options, also before anything is written."""
    cli.check_fine_tuning_flags(f, POSITIVE, tpu=False)


def options_from_flags(f):
    """-> (ClassificationOptions, TrainingOptions)."""
    from albert_tf.tasks.classification.task import ClassificationOptions

    task = cli.task_options(ClassificationOptions, f)
    training = cli.training_options(f, eval_batch_size=f.eval_batch_size, num_train_steps=f.train_step,
                                    num_warmup_steps=f.warmup_step, optimizer=f.optimizer,
                                    keep_checkpoint_max=f.keep_checkpoint_max,
                                    session=cli.session(f, "run_classifier", SETTINGS, "train_step", f.do_train))
    return task, training


def run(f, stream=None):
    """Trains, evaluates, predicts and exports as the flags say; returns a dict of results."""
    check_flags(f)
    from albert_tf.tasks.classification import task as classification

    return cli.run_task(classification, *options_from_flags(f), stream)


def main(argv=None):
    """`run_classifier ARGV` in this process: returns its exit status
    (albert_tf.cli.main: its own flags, the process's state put back; not undone:
    cli.IRREVERSIBLE).

    Args:
        argv: the arguments, without the program name (default sys.argv[1:]).
    """
    return cli.main("run_classifier", define_flags, run, argv)


def entry():
    sys.exit(main())


if __name__ == "__main__":
    entry()
