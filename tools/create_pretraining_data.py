"""Creates ALBERT pretraining TFRecords from plain text: `albert_tf.create_pretraining_data`.

    python tools/create_pretraining_data.py --input_file=corpus.txt \
        --output_file=out/train.tfrecord --spm_model_file=spm.model \
        --max_seq_length=128 --dupe_factor=5 --num_workers=2

The same as `albert-create-pretraining-data` and `python -m albert_tf.create_pretraining_data`
(flags: see that module, or --helpfull).
"""

from albert_tf.create_pretraining_data import define_flags, entry, main, run  # noqa: F401

if __name__ == "__main__":
    entry()
