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

from albert_tf.tasks.squad.options import COMMANDS, SquadOptions
from albert_tf.tasks.commands import fine_tuning_command

define_flags, options_from_flags, check_flags, run, main, entry = fine_tuning_command(
    __name__, COMMANDS, SquadOptions, "albert_tf.tasks.squad.task:SquadTask", "v1")


if __name__ == "__main__":
    entry()
