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
from albert_tf.data.bucket_widths import DEFAULT_BUCKETS, FLAG_HELP


def define_flags(flag_values=None):
    """The release's run_classifier flags, plus the tsv columns, --strategy and a few more.

    Args:
        flag_values: an absl FlagValues to define them in (default: the global FLAGS).
    """
    fv = {"flag_values": flags.FLAGS if flag_values is None else flag_values}
    flags.DEFINE_string("task_name", None, "cola, sst-2, mrpc, sts-b, qqp, mnli, mismnli, qnli, rte, wnli or tsv.", **fv)
    flags.DEFINE_string("data_dir", None, "The input data dir: the task's .tsv files.", **fv)
    flags.DEFINE_string("output_dir", None, "The output directory for checkpoints, metrics and predictions.", **fv)
    flags.DEFINE_string("albert_hub_module_handle", None,
                        "An albert_tf export (directory with encoder/ and preprocess/) to start from.", **fv)
    flags.DEFINE_string("init_checkpoint", None,
                        "An albert_tf checkpoint (run_pretraining output_dir, ckpt-N prefix or converted directory).", **fv)
    flags.DEFINE_string("albert_config_file", None, "The albert_config.json (with --init_checkpoint).", **fv)
    flags.DEFINE_string("spm_model_file", None, "The SentencePiece model (with --init_checkpoint).", **fv)
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (with --init_checkpoint; an export carries its own).", **fv)
    flags.DEFINE_integer("max_seq_length", 512, "The maximum total input sequence length after tokenization.", **fv)
    flags.DEFINE_bool("do_train", False, "Whether to run training.", **fv)
    flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set (every --save_checkpoints_steps).", **fv)
    flags.DEFINE_bool("do_predict", False, "Whether to run the model on the test set.", **fv)
    flags.DEFINE_string("length_buckets", DEFAULT_BUCKETS, FLAG_HELP, **fv)
    flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.", **fv)
    flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.", **fv)
    flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.", **fv)
    flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for the optimizer.", **fv)
    flags.DEFINE_integer("train_step", 1000, "Total number of training steps to perform.", **fv)
    flags.DEFINE_integer("warmup_step", 0, "Number of steps to perform linear learning rate warmup for.", **fv)
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint (and evaluate with --do_eval).", **fv)
    flags.DEFINE_integer("keep_checkpoint_max", 5, "How many checkpoints to keep.", **fv)
    flags.DEFINE_integer("iterations_per_loop", 100, "Steps per tf.function call (and per progress line).", **fv)
    flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer for fine-tuning.", **fv)
    flags.DEFINE_float("classifier_dropout", 0.1, "Dropout on pooled_output during training.", **fv)
    flags.DEFINE_string("export_dir", None, "Export the fine-tuned classifier (raw strings in) here at the end.", **fv)
    flags.DEFINE_string("text_a_column", "text_a", "--task_name=tsv: header name of the first text.", **fv)
    flags.DEFINE_string("text_b_column", None, "--task_name=tsv: header name of the second text; empty: single "
                        "sentences.", **fv)
    flags.DEFINE_string("label_column", "label", "--task_name=tsv: header name of the label.", **fv)
    flags.DEFINE_list("labels", None, "--task_name=tsv: the label values (comma-separated); omit for regression.", **fv)
    flags.DEFINE_string("strategy", "default", "mirrored | one_device | default.", **fv)
    flags.DEFINE_integer("random_seed", 12345, "Seed of the classifier initialisation, dropout and shuffling.", **fv)
    cli.define_dtype_policy_flag(fv["flag_values"])
    cli.define_gradient_accumulation_flag(fv["flag_values"])
    cli.define_remat_flag(fv["flag_values"])
    cli.define_allow_changed_settings_flag(fv["flag_values"])


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
    from albert_tf.tasks.classification import ClassificationOptions

    task = cli.task_options(ClassificationOptions, f)
    training = cli.training_options(f, eval_batch_size=f.eval_batch_size, num_train_steps=f.train_step,
                                    num_warmup_steps=f.warmup_step, optimizer=f.optimizer,
                                    keep_checkpoint_max=f.keep_checkpoint_max,
                                    session=cli.session(f, "run_classifier", SETTINGS, "train_step", f.do_train))
    return task, training


def run(f, stream=None):
    """Trains, evaluates, predicts and exports as the flags say; returns a dict of results."""
    check_flags(f)
    from albert_tf.tasks import classification

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
