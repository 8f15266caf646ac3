"""Training a SentencePiece model, by default with the ALBERT release's recipe
(shared/ALBERT_REFERENCE.md section 4: unigram, pad 0, unk 1, [CLS] [SEP] [MASK] as control
symbols, the release's user symbols); text goes through `preprocess_text` first, as
everywhere else. Every consumer reads the special ids from the model (`SpecialTokens`).

    path = train_sentencepiece(["corpus.txt"], "data/spm", SentencePieceOptions(vocab_size=8000))
"""

import dataclasses
import tempfile

from albert_tf.data.files import InputError
from albert_tf.data.tokenization import preprocess_text, strip_machine_paths
from albert_tf.storage import atomic
from albert_tf.storage import files as file_layer

USER_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")
CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")


@dataclasses.dataclass(frozen=True)
class SentencePieceOptions:
    """SentencePiece trainer settings (defaults: the release's recipe, 30000 pieces)."""

    vocab_size: int = 30000
    do_lower_case: bool = True
    character_coverage: float = 0.99995
    model_type: str = "unigram"
    input_sentence_size: int = 10_000_000
    num_threads: int = 1
    random_seed: int = 12345
    pad_id: int = 0
    unk_id: int = 1
    control_symbols: tuple = CONTROL_SYMBOLS
    user_symbols: tuple = USER_SYMBOLS


def _write_normalized(files, path, do_lower_case):
    """Writes the normalised lines of `files` to `path`; returns how many."""
    lines = 0
    with file_layer.open(path, "w") as out:  # a local scratch file
        for name in files:
            with file_layer.open(name, encoding="utf-8", errors="replace") as f:  # a URL too
                for line in f:
                    line = preprocess_text(line, lower=do_lower_case)
                    if line:
                        out.write(line + "\n")
                        lines += 1
    return lines


def train_sentencepiece(files, model_prefix, options):
    """Trains on `files` and writes MODEL_PREFIX.model and MODEL_PREFIX.vocab (each
    atomically; the model without this machine's paths). Returns the .model path.

    Raises InputError when the files hold no text or SentencePiece refuses the settings.
    """
    import sentencepiece as spm

    # SentencePiece's trainer writes local files: atomic's temporary names beside a local
    # output, a local temporary directory for a URL
    local = None if not file_layer.is_url(model_prefix) else tempfile.mkdtemp(prefix="albert_tf_spm_")
    beside = model_prefix if local is None else file_layer.join(local, "spm")
    normalized = atomic.temporary_name(f"{beside}.normalized.txt")
    scratch_prefix = atomic.temporary_name(beside)
    scratch = [normalized, f"{scratch_prefix}.model", f"{scratch_prefix}.vocab"]
    file_layer.makedirs(file_layer.dirname(file_layer.abspath(model_prefix)))
    try:
        if _write_normalized(files, normalized, options.do_lower_case) == 0:
            raise InputError(f"--input_file: {', '.join(files)} hold no text.")
        spm.set_random_generator_seed(options.random_seed)
        try:
            spm.SentencePieceTrainer.Train(
                input=normalized, model_prefix=scratch_prefix, vocab_size=options.vocab_size,
                model_type=options.model_type, character_coverage=options.character_coverage,
                pad_id=options.pad_id, unk_id=options.unk_id, bos_id=-1, eos_id=-1,
                control_symbols=list(options.control_symbols), user_defined_symbols=list(options.user_symbols),
                input_sentence_size=options.input_sentence_size, shuffle_input_sentence=True,
                num_threads=options.num_threads, normalization_rule_name="nmt_nfkc", minloglevel=2,
            )
        except RuntimeError as e:
            raise InputError(f"SentencePiece training failed: {e}. With a small corpus, lower --vocab_size.") from None
        model = file_layer.read_bytes(f"{scratch_prefix}.model")
        atomic.write_bytes(f"{model_prefix}.model", strip_machine_paths(model))
        atomic.write_bytes(f"{model_prefix}.vocab", file_layer.read_bytes(f"{scratch_prefix}.vocab"))
    finally:
        for path in scratch:  # SentencePiece's own output files in our scratch names
            atomic.remove_own(path)
        if local is not None:
            atomic.remove_own(local)
    return f"{model_prefix}.model"
