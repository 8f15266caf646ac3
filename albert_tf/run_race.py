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

from albert_tf.tasks.race.options import COMMAND, MultipleChoiceOptions
from albert_tf.tasks.commands import fine_tuning_command

define_flags, options_from_flags, check_flags, run, main, entry = fine_tuning_command(
    __name__, {None: COMMAND}, MultipleChoiceOptions, "albert_tf.tasks.race.task:MultipleChoiceTask")


if __name__ == "__main__":
    entry()
