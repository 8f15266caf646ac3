"""SQuAD context alignment: every piece of a context, as the release tokenizes it, with its
exact span in the original text (what features need to map an answer to pieces and pieces
back to text).

    context = tokenize_context(example.context_text, tokenizer)   # ContextTokens
    context.char_span_to_tokens(answer_start, answer_end)          # (first, last) piece

How the spans are found (exact, no LCS): docs/squad.md, "How the alignment works".
"""

import dataclasses
import difflib
import logging
import unicodedata

import numpy as np

from albert_tf.data.tokenization import (WORD_START, is_blank, is_combining, is_digit_comma_piece,
                                         preprocess_text, split_digit_comma)

logger = logging.getLogger("albert_tf")
# the characters SentencePiece treats as whitespace or removes, left out of piece spans
_is_blank = is_blank


def normalize_with_offsets(text, lower=True):
    """`preprocess_text(text, lower)` and, per normalised character, the [start, end) of the
    original characters it came from.

    Returns:
        (normalized, starts, ends): the string and two int lists of len(normalized).
    """
    # 1. whitespace runs -> one space, ends stripped (" ".join(text.strip().split()))
    chars, starts, ends = [], [], []
    space = None
    for i, c in enumerate(text):
        if c.isspace():
            space = (space[0], i + 1) if space else (i, i + 1)
            continue
        if space is not None and chars:
            chars.append(" ")
            starts.append(space[0])
            ends.append(space[1])
        space = None
        chars.append(c)
        starts.append(i)
        ends.append(i + 1)
    # 2. NFKD, characters of non-zero combining class dropped, character by character (docs/squad.md)
    if not all(c < "\x80" for c in chars):
        chars, starts, ends = _per_character(chars, starts, ends, lambda c: c if c < "\x80" else "".join(
            d for d in unicodedata.normalize("NFKD", c) if not is_combining(d)))
    normalized = "".join(chars)
    # 3. lower case: the whole string; per character only when one lower-cases to several (docs/squad.md)
    if lower:
        low = normalized.lower()
        if len(low) != len(normalized):
            _, starts, ends = _per_character(chars, starts, ends, str.lower)
        normalized = low
    return normalized, starts, ends


def _per_character(chars, starts, ends, replace):
    """(characters, starts, ends) with each character c replaced by the characters of
    replace(c), each keeping c's [start, end)."""
    out_c, out_s, out_e = [], [], []
    for c, s, e in zip(chars, starts, ends):
        for d in replace(c):
            out_c.append(d)
            out_s.append(s)
            out_e.append(e)
    return out_c, out_s, out_e


def align_offsets(target, source, starts, ends):
    """Offsets for `target` from those of a nearly equal `source` (difflib on characters):
    matched characters take their partner's span, unmatched ones the span between their
    matched neighbours. A fallback for a normalisation that differs from the one mirrored."""
    n = len(target)
    t_starts, t_ends = [None] * n, [None] * n
    matcher = difflib.SequenceMatcher(None, source, target, autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        for k in range(size):
            t_starts[b + k], t_ends[b + k] = starts[a + k], ends[a + k]
    total = ends[-1] if ends else 0
    prev_end = starts[0] if starts else 0
    for k in range(n):  # forward: unmatched start after the previous match
        if t_starts[k] is None:
            t_starts[k] = prev_end
        else:
            prev_end = t_ends[k]
    next_start = total
    for k in range(n - 1, -1, -1):  # backward: unmatched end before the next match
        if t_ends[k] is None:
            t_ends[k] = max(next_start, t_starts[k])
        else:
            next_start = t_starts[k]
    return t_starts, t_ends


def _encode_with_offsets(sp, text):
    """SentencePiece pieces of `text` with their [begin, end) CHARACTER offsets in `text`."""
    try:
        proto = sp.Encode(text, return_type="proto")
    except TypeError:  # sentencepiece < 0.2.1
        proto = sp.EncodeAsImmutableProto(text)
    pieces = proto.pieces
    if text.isascii():
        return [(p.id, p.piece, p.begin, p.end) for p in pieces]
    byte_pos = np.cumsum([0] + [len(c.encode("utf-8")) for c in text])
    out = []
    for p in pieces:
        b = int(np.searchsorted(byte_pos, p.begin, side="left"))
        e = int(np.searchsorted(byte_pos, p.end, side="left"))
        out.append((p.id, p.piece, b, e))
    return out


def _split_with_offsets(sp, piece, b, e, normalized, blank):
    """The release's pieces in place of digit-comma piece `piece` (`split_digit_comma`), which
    covers characters [b, e) of `normalized`, as (id, piece, begin, end) with character
    offsets in `normalized`: the comma gets its own character; the pieces before it the
    characters that encoding the text before the comma with offsets gives them, inside [b, e)
    (a bare "▁" the empty span before its text). Should SentencePiece's surface not spell the
    piece (its own normalisation changed a character), every piece gets [b, e)."""
    pieces = split_digit_comma(sp, piece)
    ids = [sp.PieceToId(p) for p in pieces]
    solid = [k for k in range(b, e) if not blank[k]]  # the piece's characters, "▁" excluded
    body = piece[:-1].replace(WORD_START, "")
    if "".join(normalized[k] for k in solid) != body + piece[-1]:
        return [(i, p, b, e) for i, p in zip(ids, pieces)]
    sub = _encode_with_offsets(sp, body)
    sub = sub[len(sub) - (len(pieces) - 1):]  # split_digit_comma dropped a first piece that was only "▁"
    out = []
    for piece_id, p, (_, _, sb, se) in zip(ids, pieces, sub):
        k = solid[min(sb, len(body) - 1)]
        out.append((piece_id, p, k, solid[se - 1] + 1 if se > sb else k))
    out.append((ids[-1], pieces[-1], solid[-1], solid[-1] + 1))
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class ContextTokens:
    """A context's pieces and their spans in the original text.

    text: the original context; normalized: preprocess_text(text); ids: int32 [P] (exactly
    tokenizer.encode(text)); pieces: the release's pieces (`encode_pieces`: SentencePiece's,
    digit-comma pieces split; unknown pieces keep their text); spans: int32 [P, 2], [start,
    end) in `text` (empty for a bare "▁" piece).
    """

    text: str
    normalized: str
    ids: np.ndarray
    pieces: tuple
    spans: np.ndarray

    def char_span_to_tokens(self, start, end):
        """(first, last) pieces of the smallest run of pieces covering characters [start, end)
        of the text; None when no piece covers any of them."""
        s, e = self.spans[:, 0], self.spans[:, 1]
        hit = np.nonzero((e > s) & (s < end) & (e > start))[0]
        if not len(hit):
            return None
        return int(hit[0]), int(hit[-1])

    def token_span_to_text(self, first, last):
        """The original text from piece `first` to piece `last` (inclusive)."""
        return self.text[int(self.spans[first, 0]):int(self.spans[last, 1])]


def tokenize_context(text, tokenizer):
    """A context -> ContextTokens (pieces of the normalised text, spans in the original)."""
    lower = tokenizer.do_lower_case
    normalized, starts, ends = normalize_with_offsets(text, lower)
    expected = preprocess_text(text, lower)
    if normalized != expected:  # never seen; keeps the spans sensible if preprocess_text changes
        logger.warning("squad alignment: normalisation mirror differs from preprocess_text; aligning by difflib.")
        starts, ends = align_offsets(expected, normalized, starts, ends)
        normalized = expected
    encoded = _encode_with_offsets(tokenizer.sp, normalized)
    n = len(normalized)
    blank = [_is_blank(c) for c in normalized]
    next_solid = [n] * (n + 1)  # next non-blank character at or after k
    for k in range(n - 1, -1, -1):
        next_solid[k] = k if not blank[k] else next_solid[k + 1]
    tail = ends[max((k for k in range(n) if not blank[k]), default=0)] if n else 0
    release = []  # the release's encode_pieces: digit-comma pieces split, each with its own offsets
    for piece_id, piece, b, e in encoded:
        if is_digit_comma_piece(piece):
            release.extend(_split_with_offsets(tokenizer.sp, piece, b, e, normalized, blank))
        else:
            release.append((piece_id, piece, b, e))
    ids, pieces, spans = [], [], []
    for piece_id, piece, b, e in release:
        while b < e and blank[b]:
            b += 1
        while e > b and blank[e - 1]:
            e -= 1
        if b < e:
            span = (starts[b], ends[e - 1])
        else:
            k = next_solid[min(e, n)]
            anchor = starts[k] if k < n else tail
            span = (anchor, anchor)
        ids.append(piece_id)
        pieces.append(piece)
        spans.append(span)
    return ContextTokens(text=text, normalized=normalized, ids=np.asarray(ids, np.int32), pieces=tuple(pieces),
                         spans=np.asarray(spans, np.int32).reshape(-1, 2))
