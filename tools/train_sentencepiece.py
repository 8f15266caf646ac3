"""Trains a SentencePiece model with the ALBERT release's recipe.

    python tools/train_sentencepiece.py --input_file=data/sample_corpus.txt \
        --model_prefix=data/spm --vocab_size=8000

Recipe (shared/ALBERT_REFERENCE.md section 4): unigram, pad_id=0, unk_id=1, bos/eos
off, control symbols [CLS],[SEP],[MASK] (ids 2, 3, 4), user symbols ( ) " - . – £ €,
character_coverage 0.99995. Text goes through `albert_tf.data.tokenization.preprocess_text`
first (accents stripped; lower-cased with --do_lower_case), exactly as
create_pretraining_data and the exported preprocessing model do. Writes
MODEL_PREFIX.model and MODEL_PREFIX.vocab atomically.
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from absl import app, flags  # noqa: E402

from albert_tf.data.tokenization import preprocess_text, strip_machine_paths  # noqa: E402
from albert_tf.data.writer import expand_input_files  # noqa: E402


def define_flags():
    """Defines this tool's flags (only when run as a script, so it can be imported)."""
    flags.DEFINE_string("input_file", None, "Comma-separated text files or globs (one sentence per line).")
    flags.DEFINE_string("model_prefix", None, "Output prefix: writes PREFIX.model and PREFIX.vocab.")
    flags.DEFINE_integer("vocab_size", 30000, "Vocabulary size.")
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (must match create_pretraining_data).")
    flags.DEFINE_float("character_coverage", 0.99995, "Share of characters the model covers.")
    flags.DEFINE_string("model_type", "unigram", "unigram (the release), bpe, char or word.")
    flags.DEFINE_integer("input_sentence_size", 10_000_000, "Sentences sampled for training (0: all).")
    flags.DEFINE_integer("num_threads", os.cpu_count() or 1, "Training threads.")
    flags.DEFINE_integer("random_seed", 12345, "Seed of SentencePiece's sampling.")


USER_SYMBOLS = ["(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"]
CONTROL_SYMBOLS = ["[CLS]", "[SEP]", "[MASK]"]


def train(files, model_prefix, vocab_size, do_lower_case=True, character_coverage=0.99995,
          model_type="unigram", input_sentence_size=10_000_000, num_threads=1, random_seed=12345):
    """Trains and writes MODEL_PREFIX.{model,vocab}; returns the .model path."""
    import sentencepiece as spm

    out_dir = os.path.dirname(os.path.abspath(model_prefix))
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        text = os.path.join(tmp, "normalized.txt")
        lines = 0
        with open(text, "w", encoding="utf-8") as out:
            for path in files:
                with open(path, encoding="utf-8", errors="replace") as f:
                    for line in f:
                        line = preprocess_text(line, lower=do_lower_case)
                        if line:
                            out.write(line + "\n")
                            lines += 1
        if lines == 0:
            raise ValueError(f"--input_file: {', '.join(files)} hold no text.")
        prefix = os.path.join(tmp, "spm")
        spm.set_random_generator_seed(random_seed)
        try:
            spm.SentencePieceTrainer.Train(
                input=text, model_prefix=prefix, vocab_size=vocab_size, model_type=model_type,
                character_coverage=character_coverage, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
                control_symbols=CONTROL_SYMBOLS, user_defined_symbols=USER_SYMBOLS,
                input_sentence_size=input_sentence_size, shuffle_input_sentence=True,
                num_threads=num_threads, normalization_rule_name="nmt_nfkc",
                minloglevel=2,
            )
        except RuntimeError as e:
            raise ValueError(
                f"SentencePiece training failed: {e}. With a small corpus, lower --vocab_size."
            ) from None
        with open(f"{prefix}.model", "rb") as f:
            model = strip_machine_paths(f.read())  # no temporary paths inside the model
        with open(f"{prefix}.model", "wb") as f:
            f.write(model)
        for ext in ("model", "vocab"):
            os.replace(f"{prefix}.{ext}", f"{model_prefix}.{ext}")
    return f"{model_prefix}.model"


def main(argv):
    del argv
    f = flags.FLAGS
    try:
        if not f.input_file or not f.model_prefix:
            raise ValueError("--input_file and --model_prefix are required.")
        files = expand_input_files(f.input_file)
        path = train(files, f.model_prefix, f.vocab_size, f.do_lower_case, f.character_coverage,
                     f.model_type, f.input_sentence_size, f.num_threads, f.random_seed)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path} ({f.vocab_size} pieces)")
    return 0


if __name__ == "__main__":
    define_flags()
    app.run(main)
