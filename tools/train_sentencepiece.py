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
import dataclasses
import os


from albert_tf import entry_points, option_flags
from albert_tf.data.files import InputError, expand_input_files
from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece
from albert_tf.storage import outputs
from albert_tf.storage.options import Command, LowerCase, VocabSize, option
from albert_tf.tasks.options import PretrainingRunOptions, RunOptions


@dataclasses.dataclass(kw_only=True)
class TrainSentencePieceOptions:
    """train_sentencepiece's own flags (the rest are the fields it shares: RECORD); the tool
    builds albert_tf.data.spm_training.SentencePieceOptions from them by field name."""

    model_prefix: str = option(None, "Output prefix: writes PREFIX.model and PREFIX.vocab.")
    character_coverage: float = option(0.99995, "Share of characters the model covers.")
    model_type: str = option("unigram", "unigram (the release), bpe, char or word.")
    input_sentence_size: int = option(10_000_000, "Sentences sampled for training (0: all).")
    num_threads: int = option(os.cpu_count() or 1, "Training threads (default: this machine's cores).")


RECORD = Command("train_sentencepiece", (
    (PretrainingRunOptions, ("input_file",)), (TrainSentencePieceOptions, ("model_prefix",)), (VocabSize, None),
    (LowerCase, None), (TrainSentencePieceOptions, ("character_coverage", "model_type", "input_sentence_size",
                                                    "num_threads")), (RunOptions, ("random_seed",))))


def define_flags(flag_values):
    option_flags.define_command(flag_values, RECORD)


def run(f):
    files, items, options = check_options(f)  # before training
    with contextlib.ExitStack() as marked:
        for item in items:
            marked.enter_context(outputs.replacing_file(item.path, item.kind, item.flag))
        path = train_sentencepiece(files, f.model_prefix, options)
    print(f"wrote {path} ({options.vocab_size} pieces)")
    return 0


def check_options(f):
    """Every check of the tool, before training: the flags and the paths (InputError,
    OutputRefused naming the flag). Returns (input files, the outputs, SentencePieceOptions)."""
    found = option_flags.values(f, RECORD)
    if not f.input_file or not f.model_prefix:
        raise InputError("--input_file and --model_prefix are required.")
    files = expand_input_files(f.input_file)
    items = [outputs.Output("--model_prefix", f"{f.model_prefix}{suffix}", outputs.SENTENCEPIECE_MODEL)
             for suffix in (".model", ".vocab")]
    outputs.check(items, [outputs.Input("--input_file", path) for path in files])
    return files, items, option_flags.build(SentencePieceOptions, found)


main, entry = entry_points.command("train_sentencepiece", define_flags, run)


if __name__ == "__main__":
    entry()
