"""Special token ids, read from the SentencePiece model (never typed in as numbers: the
release's recipe gives <pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4, a model trained otherwise
other ids). create_pretraining_data records them in its summary.

    tokens = SpecialTokens.from_sentencepiece("spm.model")
    tokens.cls_id, tokens.mask_id, tokens.first_ordinary_id
"""

import dataclasses
import os

from albert_tf.storage import files

# The pieces looked up by name: field of SpecialTokens -> SentencePiece piece.
PIECES = {"pad_id": "<pad>", "unk_id": "<unk>", "cls_id": "[CLS]", "sep_id": "[SEP]", "mask_id": "[MASK]"}


def dataclass_values(cls, values, source, what):
    """The fields of dataclass `cls` read from dict `values` (a JSON record); ValueError
    naming `source` and `what` when a field is missing."""
    names = [f.name for f in dataclasses.fields(cls)]
    missing = [n for n in names if n not in values]
    if missing:
        raise ValueError(f"{source}: {what} lacks {', '.join(missing)}.")
    return {n: values[n] for n in names}


def load_processor(model_file, model_bytes=None):
    """A sentencepiece.SentencePieceProcessor of `model_file` (through the file layer), or of
    its bytes read before; ValueError naming the file when it is missing or not a model."""
    import sentencepiece as spm

    model_file = os.fspath(model_file)
    if model_bytes is None and not files.isfile(model_file):
        raise ValueError(f"spm_model_file {model_file!r} does not exist or is not a file.")
    processor = spm.SentencePieceProcessor()
    try:
        processor.Load(model_proto=files.read_bytes(model_file) if model_bytes is None else model_bytes)
    except (OSError, RuntimeError) as e:
        raise ValueError(f"spm_model_file {model_file!r} is not a SentencePiece model ({e}).") from None
    return processor


@dataclasses.dataclass(frozen=True)
class SpecialTokens:
    """Ids of <pad>, <unk>, [CLS], [SEP], [MASK] and the range of ordinary ids.

    Attributes:
        pad_id, unk_id, cls_id, sep_id, mask_id: ids of the pieces of `PIECES`.
        first_ordinary_id: the first id above every control and unknown piece; random
            replacements of masking are drawn from [first_ordinary_id, vocab_size).
        vocab_size: pieces in the SentencePiece model.
    """

    pad_id: int
    unk_id: int
    cls_id: int
    sep_id: int
    mask_id: int
    first_ordinary_id: int
    vocab_size: int

    @classmethod
    def from_processor(cls, processor, source):
        """From a loaded `sentencepiece.SentencePieceProcessor`; `source` names it in errors."""
        size = processor.GetPieceSize()
        ids, missing = {}, []
        for field, piece in PIECES.items():
            i = processor.PieceToId(piece)
            if processor.IdToPiece(i) != piece:
                missing.append(piece)
            ids[field] = i
        if missing:
            raise ValueError(
                f"spm_model_file {source!r} lacks the pieces {', '.join(missing)}; train it with "
                "tools/train_sentencepiece.py (pad <pad>, unk <unk>, control symbols [CLS],[SEP],[MASK]).")
        special = [i for i in range(size) if processor.IsControl(i) or processor.IsUnknown(i)]
        first = max(special) + 1
        if first >= size:
            raise ValueError(f"spm_model_file {source!r} has no ordinary piece after its last control piece "
                             f"(id {first - 1} of {size}).")
        return cls(first_ordinary_id=first, vocab_size=size, **ids)

    @classmethod
    def from_sentencepiece(cls, path):
        """Reads the ids from a SentencePiece `.model` file; ValueError naming the file
        when it is missing, not a model, or lacks one of the pieces."""
        return cls.from_processor(load_processor(path), os.fspath(path))

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values, source):
        """The inverse of to_dict; ValueError naming `source` when a field is missing."""
        return cls(**{n: int(v) for n, v in dataclass_values(cls, values, source, "special_tokens").items()})
