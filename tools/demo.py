"""The end-to-end demo behind `make demo`, on the built-in sample corpus.

    python tools/demo.py --output_dir=demo_output

Steps so far: sample corpus -> SentencePiece -> pretraining TFRecords (MLM + SOP) ->
a tf.data batch with dynamic masking -> parameter table -> a forward pass of a tiny
ALBERT on a real sentence. Each step prints what it did and how long it took;
results are written under --output_dir.
"""

import os
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, ROOT)

from absl import app, flags  # noqa: E402


def define_flags():
    """Defines this tool's flags (only when run as a script, so it can be imported)."""
    flags.DEFINE_string("output_dir", "demo_output", "Where the demo writes its files.")
    flags.DEFINE_integer("vocab_size", 5000, "SentencePiece vocabulary of the demo.")


SENTENCE = "Return the first release in which this feature was recognized."


def _step(number, total, title, argv):
    print(f"\n[{number}/{total}] {title}", flush=True)
    start = time.time()
    subprocess.run([sys.executable, *argv], cwd=ROOT, check=True)
    print(f"      done in {time.time() - start:.1f}s", flush=True)


def forward_pass(spm_model, vocab_size):
    """Tokenizes SENTENCE and runs albert_tiny on it; prints what came out."""
    import numpy as np

    from albert_tf import AlbertConfig, AlbertEncoder
    from albert_tf.data.tokenization import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(spm_model)
    pieces = tokenizer.tokenize(SENTENCE)
    ids = [tokenizer.cls_id] + tokenizer.encode(SENTENCE) + [tokenizer.sep_id]
    length = 32
    inputs = {
        "input_word_ids": np.array([ids + [0] * (length - len(ids))], "int32"),
        "input_mask": np.array([[1] * len(ids) + [0] * (length - len(ids))], "int32"),
        "input_type_ids": np.zeros((1, length), "int32"),
    }
    config = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=vocab_size)
    encoder = AlbertEncoder(config)
    outputs = encoder(inputs, training=False)
    print(f"      sentence: {SENTENCE}")
    print(f"      pieces:   {' '.join(pieces)}")
    print(f"      ids:      {ids}")
    print(f"      sequence_output {tuple(outputs['sequence_output'].shape)}, "
          f"pooled_output {tuple(outputs['pooled_output'].shape)}, "
          f"encoder_outputs {len(outputs['encoder_outputs'])} x {tuple(outputs['encoder_outputs'][0].shape)}")
    first = ", ".join(f"{v:+.4f}" for v in np.asarray(outputs["pooled_output"])[0, :4])
    print(f"      pooled_output[0, :4] = [{first}]")
    print(f"      albert_tiny (V={vocab_size}): {encoder.count_params():,} parameters")


def read_batch(pattern, vocab_size, spm_model):
    """Reads one batch through the tf.data pipeline, re-masked in the graph."""
    from albert_tf.data.pipeline import DynamicMasking, pretraining_dataset
    from albert_tf.data.tokenization import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(spm_model)
    ds = pretraining_dataset(pattern, batch_size=8, max_seq_length=128, max_predictions_per_seq=20,
                             dynamic_masking=DynamicMasking(vocab_size=vocab_size))
    batch = {k: v.numpy() for k, v in next(iter(ds)).items()}
    print("      " + ", ".join(f"{k} {v.shape}" for k, v in batch.items()))
    ids = batch["input_word_ids"][0][: batch["input_mask"][0].sum()]
    print(f"      example: {tokenizer.sp.DecodePieces([tokenizer.id_to_piece(i) for i in ids[:40]])} ...")
    print(f"      masked positions {batch['masked_lm_positions'][0][batch['masked_lm_weights'][0] > 0].tolist()}, "
          f"sentence-order label {batch['next_sentence_labels'][0, 0]}")


def main(argv):
    del argv
    out = os.path.abspath(flags.FLAGS.output_dir)
    os.makedirs(out, exist_ok=True)
    total = 6
    start = time.time()
    corpus = os.path.join(out, "sample_corpus.txt")
    _step(1, total, "sample corpus from installed Python docstrings",
          ["tools/make_sample_corpus.py", f"--output_file={corpus}"])
    prefix = os.path.join(out, "spm")
    _step(2, total, f"SentencePiece ({flags.FLAGS.vocab_size} pieces, the release's recipe)",
          ["tools/train_sentencepiece.py", f"--input_file={corpus}", f"--model_prefix={prefix}",
           f"--vocab_size={flags.FLAGS.vocab_size}"])
    records = os.path.join(out, "pretrain", "train.tfrecord")
    _step(3, total, "pretraining TFRecords (seq 128, dupe 2, 2 workers, 4 shards)",
          ["tools/create_pretraining_data.py", f"--input_file={corpus}", f"--output_file={records}",
           f"--spm_model_file={prefix}.model", "--max_seq_length=128", "--max_predictions_per_seq=20",
           "--dupe_factor=2", "--num_workers=2", "--num_output_shards=4"])
    print(f"\n[4/{total}] one tf.data batch with dynamic masking", flush=True)
    read_batch(records + "-*", flags.FLAGS.vocab_size, prefix + ".model")
    _step(5, total, "parameter table (paper Tables 1 and 5)",
          ["-m", "albert_tf.param_table", f"--output_dir={out}"])
    print(f"\n[6/{total}] forward pass of a tiny ALBERT on a real sentence", flush=True)
    forward_pass(prefix + ".model", flags.FLAGS.vocab_size)
    print(f"\ndemo finished in {time.time() - start:.0f}s; files in {out}")


if __name__ == "__main__":
    define_flags()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    app.run(main)
