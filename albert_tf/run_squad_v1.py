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



from albert_tf import entry_points, option_flags
from albert_tf.tasks.squad.options import COMMANDS, SquadOptions


def define_flags(flag_values, version="v1"):
    """The flags of run_squad_v1 (`version` "v1") or run_squad_v2 ("v2": also --start_n_top,
    --end_n_top, --dropout_prob), made from their options records (tasks.squad.options.COMMANDS)."""
    option_flags.define_command(flag_values, COMMANDS[version])


def options_from_flags(f, version="v1"):
    """-> (SquadOptions, TrainingOptions), every field from its flag (the record's positive
    values checked); the driver evaluates in --predict_batch_size."""
    return option_flags.records(f, COMMANDS[version], SquadOptions, version=version,
                                training_given={"eval_batch_size": f.predict_batch_size})


def check_flags(f, version="v1"):
    """The checks of the training values alone (tasks.common.check_training; the task's
    check_options runs them with the rest before any work)."""
    from albert_tf.tasks.common import check_training

    check_training(*options_from_flags(f, version), warmup=False)


def run(f, stream=None, version="v1"):
    """Trains and predicts as the flags say; returns a dict of results (every check first:
    tasks.squad.task.check_options)."""
    task, training = options_from_flags(f, version)
    from albert_tf.tasks.squad import task as squad

    return squad.run(task, training, stream=stream)


main, entry = entry_points.command("run_squad_v1", define_flags, run)


if __name__ == "__main__":
    entry()
