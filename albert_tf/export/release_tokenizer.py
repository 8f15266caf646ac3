"""The release's `encode_pieces` in the graph: SentencePiece, then the digit-comma rule.

    tokenizer = ReleaseTokenizer(spm_bytes)
    tokenizer.tokenize(normalize(tf.constant(["on february 7, 2016, at"])))
    # [[▁on ▁february ▁7 , ▁2016 , ▁at]] as ids: `SentencePieceTokenizer.encode`'s

The one tokenizer of every SavedModel that takes text (the preprocessing model, and through it
the classifier; the QA, multiple-choice and raw-text models; aligned_tokens' spans). Its ids
are `albert_tf.data.tokenization.SentencePieceTokenizer.encode`'s for the same normalised
text, decided the same way:

- SentencePiece's ids; a string none of whose pieces is watched (a piece ending in "," after a
  digit, `is_digit_comma_piece`, or <unk>, whose surface may end so) keeps them;
- the other strings are tokenized again to pieces (strings) and take the id of each piece
  (`string_to_id`, Python's PieceToId); a piece longer than one character whose last
  character is "," and whose second-to-last is a digit (`unicode_tables.DIGIT`, Python's
  str.isdigit) is replaced by the pieces of its text before the comma with every "▁"
  removed (all such texts tokenized in one call), the first of them without its leading "▁"
  when the piece did not start with one (dropped when it was only "▁"), then ",".

Offsets (`tokenize_with_offsets`, bytes of the input string) of a split piece's parts: the
comma gets the piece's last byte; the other parts their offsets in the re-tokenized text,
counted back from the comma and kept inside the piece's own span.

Plain TensorFlow and tensorflow_text ops: saved inside SavedModels (the SentencePiece model is
one resource, `sentencepiece`).
"""

import copy

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.data import unicode_tables
from albert_tf.data.tokenization import WORD_START, is_digit_comma_piece
from albert_tf.export.normalization import in_set

_COMMA = ord(",")


def watched_ids(model_bytes):
    """Sorted int32 ids of a SentencePiece model whose pieces may be split: the digit-comma
    pieces (`is_digit_comma_piece`) and the unknown ids."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=model_bytes)
    ids = [i for i in range(sp.GetPieceSize()) if sp.IsUnknown(i) or is_digit_comma_piece(sp.IdToPiece(i))]
    return np.array(ids, np.int32)


class ReleaseTokenizer(tf.Module):
    """SentencePiece with the release's digit-comma rule (module docstring).

    Args:
        model_bytes: the serialized SentencePiece model.

    `tokenize` and `tokenize_with_offsets` take a string tensor of rank 0 or 1 (already
    normalised, `albert_tf.export.normalization.normalize`) and give int32 ids ([n], or a
    RaggedTensor [N, (n)]), as tensorflow_text's SentencepieceTokenizer does.
    """

    def __init__(self, model_bytes):
        super().__init__()
        self.sentencepiece = tf_text.SentencepieceTokenizer(model=model_bytes, out_type=tf.int32)
        self._watched = watched_ids(model_bytes)

    def _pieces(self):
        """The same SentencePiece resource, giving pieces as strings (a view, not tracked)."""
        view = copy.copy(self.sentencepiece)
        view.out_type = tf.string
        return view

    def string_to_id(self, pieces):
        return self.sentencepiece.string_to_id(pieces)

    def tokenize(self, text):
        return self.tokenize_with_offsets(text)[0]

    def tokenize_with_offsets(self, text):
        """-> (ids, starts, ends): int32 ids and int64 byte offsets into `text`, [n] for a
        scalar, RaggedTensor [N, (n)] for a vector."""
        text = tf.convert_to_tensor(text, tf.string)
        if text.shape.rank == 0:
            ids, starts, ends = self.tokenize_with_offsets(text[None])
            return ids.values, starts.values, ends.values
        ids, starts, ends = self.sentencepiece.tokenize_with_offsets(text)
        flat = ids.flat_values
        watched = tf.constant(self._watched)
        at = tf.minimum(tf.searchsorted(watched, flat), len(self._watched) - 1)
        hit = tf.equal(tf.gather(watched, at), flat)
        rows = tf.unique(tf.boolean_mask(tf.cast(ids.value_rowids(), tf.int32), hit))[0]  # ascending
        parts = (flat, starts.flat_values, ends.flat_values, ids.row_lengths())
        flat, begin, end, lengths = tf.cond(tf.size(rows) > 0, lambda: self._release(text, ids, rows, parts),
                                            lambda: parts)
        return tuple(tf.RaggedTensor.from_row_lengths(x, lengths, validate=False) for x in (flat, begin, end))

    def _release(self, text, ids, rows, parts):
        """The rows `rows` as the release tokenizes them (module docstring) -> the flat ids,
        starts, ends and the row lengths of all rows."""
        flat, begin, end, _ = parts
        tokenizer = self._pieces()
        pieces = tokenizer.tokenize(tf.gather(text, rows)).flat_values  # [S]: the same pieces as their ids
        splits = tf.cast(ids.row_splits, tf.int32)
        where = tf.ragged.range(tf.gather(splits, rows), tf.gather(splits, rows + 1)).flat_values  # [S]
        flat = tf.tensor_scatter_nd_update(flat, where[:, None], self.string_to_id(pieces))
        # the digit-comma pieces among them
        chars = tf.strings.unicode_decode(pieces, "UTF-8", errors="replace")
        count = tf.cast(chars.row_lengths(), tf.int32)
        limit = tf.cast(chars.row_limits(), tf.int32)
        values = tf.concat([chars.flat_values, [0]], 0)
        last = tf.gather(values, tf.where(count >= 1, limit - 1, tf.size(values) - 1))
        before = tf.gather(values, tf.where(count >= 2, limit - 2, tf.size(values) - 1))
        split = (count > 1) & tf.equal(last, _COMMA) & in_set(before, unicode_tables.DIGIT)
        chosen = tf.cast(tf.where(split)[:, 0], tf.int32)  # [F]
        piece = tf.gather(pieces, chosen)
        at = tf.gather(where, chosen)  # their flat positions
        size = tf.strings.length(piece)
        head = tf.strings.regex_replace(tf.strings.substr(piece, tf.zeros_like(size), size - 1), WORD_START, "")
        sub, sub_begin, sub_end = tokenizer.tokenize_with_offsets(head)  # [F, (r)]
        # the first piece loses its "▁" where the piece had none (and goes if that was all)
        first = tf.equal(tf.ragged.range(sub.row_lengths()).flat_values, 0)
        bare = tf.gather(~tf.strings.regex_full_match(piece, WORD_START + "(?s).*"), sub.value_rowids())
        strip = first & bare & tf.strings.regex_full_match(sub.flat_values, WORD_START + "(?s).*")
        stripped = tf.where(strip, tf.strings.regex_replace(sub.flat_values, "^" + WORD_START, ""), sub.flat_values)
        keep = ~(strip & tf.equal(stripped, ""))
        sub_row = tf.cast(tf.boolean_mask(sub.value_rowids(), keep), tf.int32)
        sub_ids = self.string_to_id(tf.boolean_mask(stripped, keep))
        # their offsets: counted back from the comma, inside the piece's span
        piece_begin, piece_end = tf.gather(begin, at), tf.gather(end, at)
        comma = tf.maximum(piece_end - 1, piece_begin)
        shift = tf.gather(comma - tf.cast(tf.strings.length(head), begin.dtype), sub_row)
        low, high = tf.gather(piece_begin, sub_row), tf.gather(comma, sub_row)
        sub_begin = tf.clip_by_value(tf.boolean_mask(sub_begin.flat_values, keep) + shift, low, high)
        sub_end = tf.clip_by_value(tf.boolean_mask(sub_end.flat_values, keep) + shift, low, high)
        sub_count = tf.math.bincount(sub_row, minlength=tf.size(chosen), maxlength=tf.size(chosen), dtype=tf.int32)
        # splice: piece m becomes counts[m] pieces (the parts of a split one, then its comma)
        m = tf.size(flat)
        counts = tf.tensor_scatter_nd_update(tf.ones([m], tf.int32), at[:, None], sub_count + 1)
        source = tf.repeat(tf.range(m), counts)
        k = tf.range(tf.size(source)) - tf.gather(tf.cumsum(counts, exclusive=True), source)
        which = tf.gather(tf.tensor_scatter_nd_update(tf.fill([m], -1), at[:, None], tf.range(tf.size(chosen))),
                          source)  # the split piece it comes from, -1 for none
        is_split = which >= 0
        which = tf.maximum(which, 0)
        is_part = is_split & (k < tf.gather(tf.concat([sub_count, [0]], 0), which))
        part = tf.where(is_part, tf.gather(tf.concat([tf.cumsum(sub_count, exclusive=True), [0]], 0), which) + k,
                        tf.size(sub_ids))

        def pick(parts_values, comma_value, own):
            parts_values = tf.concat([parts_values, tf.zeros([1], parts_values.dtype)], 0)
            return tf.where(is_part, tf.gather(parts_values, part),
                            tf.where(is_split, comma_value, tf.gather(own, source)))

        comma_id = self.string_to_id(tf.constant(","))
        at_comma = tf.gather(tf.concat([comma, [0]], 0), which)
        at_end = tf.gather(tf.concat([piece_end, [0]], 0), which)
        lengths = tf.math.unsorted_segment_sum(tf.cast(counts, tf.int64), ids.value_rowids(), ids.nrows())
        return (pick(sub_ids, comma_id, flat), pick(sub_begin, at_comma, begin), pick(sub_end, at_end, end), lengths)
