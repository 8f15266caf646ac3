"""Fine-tunes ALBERT on SQuAD 2.0 and predicts: run_squad_v1 with the v2 (XLNet-style)
head, plus --start_n_top, --end_n_top and --dropout_prob. See albert_tf.run_squad_v1 for
the flags and outputs; v2 also writes null_odds.json (each question's null score, the
minimum answer-class logit over its windows), predictions_best_f1_thresh.json, and the
official v2 metrics (exact, f1, HasAns_*, NoAns_*, best_exact(_thresh), best_f1(_thresh))
with best_f1_reachable(_thresh) (the F1 of predictions_best_f1_thresh.json and its
threshold, with best_f1_note when they differ from best_f1(_thresh)) and the share of
questions the head calls unanswerable (a WARNING when nearly all).

    python -m albert_tf.run_squad_v2 --init_checkpoint=converted/albert_base \
        --spm_model_file=converted/albert_base/30k-clean.model --train_file=train-v2.0.json \
        --predict_file=dev-v2.0.json --output_dir=runs/squad2 --do_train --do_predict \
        --learning_rate=3e-5 --num_train_epochs=2
"""

from albert_tf.tasks.squad.options import COMMANDS, SquadOptions
from albert_tf.tasks.commands import fine_tuning_command

define_flags, options_from_flags, check_flags, run, main, entry = fine_tuning_command(
    __name__, COMMANDS, SquadOptions, "albert_tf.tasks.squad.task:SquadTask", "v2")


if __name__ == "__main__":
    entry()
