"""Text normalisation and the SentencePiece tokenizer, as the release uses them: the one
normalisation before SentencePiece (`preprocess_text`; in the graph,
albert_tf.export.normalization does the same) and SentencePiece followed by the release's
digit-comma rule (`encode_pieces`). Which characters are dropped and which are digits comes
from unicode_tables.py, which the graph reads too. docs/export.md.
"""

import os
import unicodedata

from albert_tf.data import unicode_tables
from albert_tf.data.vocab import SpecialTokens, load_processor

WORD_START = "\u2581"  # SentencePiece's word-start marker
# The version of the text -> ids mapping, recorded with every feature cache (a cache of another one is
# rebuilt): 2 is the release's preprocess_text and encode_pieces; 1 (caches without it) was not.
TOKENIZATION_VERSION = 2
_PUNCTUATION = set('!"#$%&\'()*+,-./:;?@[\\]^_`{|}~') | {"\u20ac", "\u00a3", "\u2013"}
_PLAIN = set("abcdefghijklmnopqrstuvwxyz0123456789")


def is_start_piece(piece):
    """The release's rule (`_is_start_piece_sp`): a piece begins a word when it starts
    with the word-start marker or "<", is punctuation, or holds anything but ASCII
    letters and digits."""
    return (
        piece.startswith(WORD_START)
        or piece.startswith("<")
        or piece in _PUNCTUATION
        or not all(c.lower() in _PLAIN for c in piece.lstrip(WORD_START))
    )


def _members(bounds):
    return (c for start, end in zip(bounds[::2], bounds[1::2]) for c in range(start, end))


# str.translate table deleting the characters of non-zero combining class
_DROP_MARKS = dict.fromkeys(_members(unicode_tables.COMBINING))
_BLANK = frozenset(chr(c) for c in _members(unicode_tables.BLANK))


def is_combining(c):
    """True for a character of non-zero canonical combining class (dropped after NFKD)."""
    return ord(c) in _DROP_MARKS


def is_blank(c):
    """True for what SentencePiece treats as blank: str.isspace() or category Cc, Cf, Zs, Zl,
    Zp (unicode_tables.BLANK)."""
    return c in _BLANK


def preprocess_text(text, lower=True):
    """The release's `preprocess_text` of one string: whitespace collapsed, NFKD, every
    character of non-zero canonical combining class dropped, lower-cased with `lower`
    (`` and '' are not mapped to ", as in the release)."""
    text = " ".join(text.strip().split())
    if not text.isascii():  # ASCII is its own NFKD and has no marks
        text = unicodedata.normalize("NFKD", text).translate(_DROP_MARKS)
    return text.lower() if lower else text


def is_digit_comma_piece(piece):
    """The release's test in `encode_pieces`: longer than one character, ends in "," after a
    character for which str.isdigit() holds."""
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def split_digit_comma(sp, piece):
    """The pieces the release puts in place of a digit-comma piece (`is_digit_comma_piece`).

    EncodeAsPieces of the piece without its comma and with every "▁" removed; its first piece
    loses a leading "▁" when `piece` did not start with one (dropped when it was only "▁");
    then ",". `sp` is a SentencePieceProcessor.
    """
    pieces = sp.EncodeAsPieces(piece[:-1].replace(WORD_START, ""))
    if not piece.startswith(WORD_START) and pieces and pieces[0].startswith(WORD_START):
        pieces = pieces[1:] if len(pieces[0]) == 1 else [pieces[0][1:]] + pieces[1:]
    return pieces + [piece[-1]]


def apply_digit_comma(sp, pieces):
    """The release's rule over a list of pieces (see `split_digit_comma`)."""
    return [part for p in pieces for part in (split_digit_comma(sp, p) if is_digit_comma_piece(p) else (p,))]


def encode_pieces(sp, text):
    """The release's `encode_pieces` of already normalised text: EncodeAsPieces, then the
    digit-comma rule ("on february 7, 2016, at" gives "▁2016" ","). `sp` is a
    SentencePieceProcessor."""
    return apply_digit_comma(sp, sp.EncodeAsPieces(text))


def strip_machine_paths(model_bytes):
    """A SentencePiece model without the trainer's input and output paths (`trainer_spec.input`,
    `model_prefix`: exported models must not carry the exporting machine's paths)."""
    from albert_tf.data.spm_model_proto import ModelProto

    proto = ModelProto.FromString(model_bytes)
    proto.trainer_spec.ClearField("input")
    proto.trainer_spec.model_prefix = ""
    return proto.SerializeToString()


class SentencePieceTokenizer:
    """A SentencePiece model with the release's special pieces.

    Args:
        model_file: path of a `.model` file with the pieces <pad>, <unk>, [CLS], [SEP],
            [MASK] (any ids: they are looked up by name, `SpecialTokens`).
        do_lower_case: bool. Lower-case before encoding (must match training).
        model_bytes: the model file's bytes, already read (then `model_file` only names it).

    Attributes:
        special_tokens: `SpecialTokens` of the model.
        vocab_size, pad_id, unk_id, cls_id, sep_id, mask_id: the same ids.
        word_start: list of bool per id, `is_start_piece` of its piece.

    Example:
    ```python
    tok = SentencePieceTokenizer("sample.model")
    tok.encode("The quick brown fox.")  # [ids]
    ```
    """

    def __init__(self, model_file, do_lower_case=True, model_bytes=None):
        model_file = os.fspath(model_file)
        self.sp = load_processor(model_file, model_bytes)
        self.model_file = model_file
        self.do_lower_case = do_lower_case
        self.special_tokens = SpecialTokens.from_processor(self.sp, model_file)
        t = self.special_tokens
        self.vocab_size = t.vocab_size
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            t.pad_id, t.unk_id, t.cls_id, t.sep_id, t.mask_id)
        self.word_start = [is_start_piece(self.sp.IdToPiece(i)) for i in range(self.vocab_size)]
        self._comma_ids = frozenset(
            [i for i in range(self.vocab_size) if is_digit_comma_piece(self.sp.IdToPiece(i))] + [self.unk_id])

    def tokenize(self, text):
        """Text -> list of pieces: `preprocess_text`, then `encode_pieces` (the release's)."""
        return encode_pieces(self.sp, preprocess_text(text, self.do_lower_case))

    def encode(self, text):
        """Text -> list of ids: the ids of `tokenize`'s pieces (the release's `encode_ids`)."""
        text = preprocess_text(text, self.do_lower_case)
        return self._release_ids(self.sp.EncodeAsIds(text), text)

    def encode_batch(self, texts):
        """Texts -> a list of id lists, each `encode(text)` (one call per text: SentencePiece's
        list form starts a thread pool per call, several times slower on a few sentences)."""
        return [self.encode(t) for t in texts]

    def _release_ids(self, ids, text):
        # SentencePiece's ids are the release's unless a piece is a digit-comma one: a known
        # piece of that form, or an unknown one (its surface is not in the vocabulary).
        if self._comma_ids.isdisjoint(ids):
            return ids
        return [self.sp.PieceToId(p) for p in encode_pieces(self.sp, text)]

    def is_word_start(self, token_id):
        """True when the piece begins a word (`is_start_piece`)."""
        return self.word_start[token_id]

    def id_to_piece(self, token_id):
        return self.sp.IdToPiece(int(token_id))

    def decode(self, ids):
        return self.sp.DecodeIds([int(i) for i in ids])
