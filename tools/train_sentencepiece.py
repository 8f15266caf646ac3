"""Trains a SentencePiece model with the ALBERT release's recipe.

    python tools/train_sentencepiece.py --input_file=data/sample_corpus.txt \
        --model_prefix=data/spm --vocab_size=8000

Recipe (shared/ALBERT_REFERENCE.md section 4, `albert_tf.data.spm_training`): unigram,
pad_id=0, unk_id=1, bos/eos off, control symbols [CLS],[SEP],[MASK], user symbols
( ) " - . – £ €, character_coverage 0.99995, text normalised by `preprocess_text`.
Writes MODEL_PREFIX.model and MODEL_PREFIX.vocab atomically: each new, or replacing the
one this tool made (its marker); anything else there is refused (exit status 2) before
training (albert_tf.storage.outputs).
"""

import contextlib
import os

from absl import flags

from albert_tf import entry_points
from albert_tf.data.files import InputError, expand_input_files
from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece
from albert_tf.storage import outputs


def define_flags(flag_values):
    flags.DEFINE_string("input_file", None, "Comma-separated text files or globs (one sentence per line).",
                        flag_values=flag_values)
    flags.DEFINE_string("model_prefix", None, "Output prefix: writes PREFIX.model and PREFIX.vocab.",
                        flag_values=flag_values)
    flags.DEFINE_integer("vocab_size", 30000, "Vocabulary size.", flag_values=flag_values)
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (must match create_pretraining_data).",
                      flag_values=flag_values)
    flags.DEFINE_float("character_coverage", 0.99995, "Share of characters the model covers.", flag_values=flag_values)
    flags.DEFINE_string("model_type", "unigram", "unigram (the release), bpe, char or word.", flag_values=flag_values)
    flags.DEFINE_integer("input_sentence_size", 10_000_000, "Sentences sampled for training (0: all).",
                         flag_values=flag_values)
    flags.DEFINE_integer("num_threads", os.cpu_count() or 1, "Training threads.", flag_values=flag_values)
    flags.DEFINE_integer("random_seed", 12345, "Seed of SentencePiece's sampling.", flag_values=flag_values)


def run(f):
    if not f.input_file or not f.model_prefix:
        raise InputError("--input_file and --model_prefix are required.")
    files = expand_input_files(f.input_file)
    items = [outputs.Output("--model_prefix", f"{f.model_prefix}{suffix}", outputs.SENTENCEPIECE_MODEL)
             for suffix in (".model", ".vocab")]
    outputs.check(items, [outputs.Input("--input_file", path) for path in files])  # before training
    options = SentencePieceOptions(
        vocab_size=f.vocab_size, do_lower_case=f.do_lower_case, character_coverage=f.character_coverage,
        model_type=f.model_type, input_sentence_size=f.input_sentence_size, num_threads=f.num_threads,
        random_seed=f.random_seed)
    with contextlib.ExitStack() as marked:
        for item in items:
            marked.enter_context(outputs.replacing_file(item.path, item.kind, item.flag))
        path = train_sentencepiece(files, f.model_prefix, options)
    print(f"wrote {path} ({options.vocab_size} pieces)")
    return 0


main, entry = entry_points.command("train_sentencepiece", define_flags, run)


if __name__ == "__main__":
    entry()
