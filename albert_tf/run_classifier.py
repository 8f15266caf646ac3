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

from albert_tf.tasks.classification.options import COMMAND, ClassificationOptions
from albert_tf.tasks.commands import fine_tuning_command

define_flags, options_from_flags, check_flags, run, main, entry = fine_tuning_command(
    __name__, {None: COMMAND}, ClassificationOptions, "albert_tf.tasks.classification.task:ClassificationTask")


if __name__ == "__main__":
    entry()
