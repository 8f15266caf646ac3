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
answers raw (question, context) strings (albert_tf.tasks.squad.export: answer, score,
character span; v2 also no_answer_score), with qa_info.json beside it. --output_dir,
--export_dir and the feature files are new paths or albert_tf's own
(albert_tf.storage.outputs); anything else is refused with exit status 2 before any work.
"""


import sys

from absl import flags

from albert_tf import cli
from albert_tf.data.bucket_widths import SQUAD_V1_FLAG_HELP


# the training flags taken from TrainingOptions' fields; those whose defaults are
# run_squad's own are SquadOptions' fields
TRAINING_FLAGS = ("learning_rate", "save_checkpoints_steps", "keep_checkpoint_max", "gradient_accumulation_steps",
                  "remat")
TRAINING_HELP = {"learning_rate": "The initial learning rate for AdamW.",
                 "save_checkpoints_steps": "How often to save a checkpoint."}


def define_flags(flag_values=None, version="v1"):
    """The release's run_squad_v1 (version "v1") or run_squad_v2 ("v2": also --start_n_top,
    --end_n_top, --dropout_prob) flags, plus --strategy, --random_seed and
    --keep_checkpoint_max, made from the fields of tasks.options.SquadOptions and
    training.options.TrainingOptions (each default written once, there), and the TPU flags."""
    from albert_tf.tasks.options import SQUAD_V2_ONLY, SquadOptions
    from albert_tf.training.options import TrainingOptions

    fv = flags.FLAGS if flag_values is None else flag_values
    cli.define_options(fv, SquadOptions, exclude=SQUAD_V2_ONLY if version == "v1" else (),
                       helps={"length_buckets": SQUAD_V1_FLAG_HELP} if version == "v1" else None)
    cli.define_options(fv, TrainingOptions, names=TRAINING_FLAGS, helps=TRAINING_HELP)
    flags.DEFINE_string("vocab_file", None, "Accepted for compatibility; unused (the SentencePiece model is the "
                        "vocabulary).", flag_values=fv)
    cli.define_tpu_flags(fv)
    cli.define_allow_changed_settings_flag(fv)


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
    from albert_tf.tasks.squad.task import SquadOptions

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
    from albert_tf.tasks.squad import task as squad

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
