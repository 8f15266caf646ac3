"""The end-to-end demo behind `make demo`, on the built-in sample corpus.

    python tools/demo.py --output_dir=demo_output

Steps so far: sample corpus -> SentencePiece -> parameter table -> a forward pass of a
tiny ALBERT on a real sentence. Each step prints what it did and how long it took;
results are written under --output_dir.
"""

import os
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, ROOT)

from absl import app, flags  # noqa: E402

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


def main(argv):
    del argv
    out = os.path.abspath(flags.FLAGS.output_dir)
    os.makedirs(out, exist_ok=True)
    total = 4
    start = time.time()
    corpus = os.path.join(out, "sample_corpus.txt")
    _step(1, total, "sample corpus from installed Python docstrings",
          ["tools/make_sample_corpus.py", f"--output_file={corpus}"])
    prefix = os.path.join(out, "spm")
    _step(2, total, f"SentencePiece ({flags.FLAGS.vocab_size} pieces, the release's recipe)",
          ["tools/train_sentencepiece.py", f"--input_file={corpus}", f"--model_prefix={prefix}",
           f"--vocab_size={flags.FLAGS.vocab_size}"])
    _step(3, total, "parameter table (paper Tables 1 and 5)",
          ["-m", "albert_tf.param_table", f"--output_dir={out}"])
    print(f"\n[4/{total}] forward pass of a tiny ALBERT on a real sentence", flush=True)
    forward_pass(prefix + ".model", flags.FLAGS.vocab_size)
    print(f"\ndemo finished in {time.time() - start:.0f}s; files in {out}")


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    app.run(main)
