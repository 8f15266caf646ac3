"""The release's `encode_pieces` in the graph: SentencePiece, then the digit-comma rule.

    tokenizer = ReleaseTokenizer(spm_bytes)
    tokenizer.tokenize(normalize(tf.constant(["on february 7, 2016, at"])))
    # [[▁on ▁february ▁7 , ▁2016 , ▁at]] as ids: `SentencePieceTokenizer.encode`'s

The one tokenizer of every SavedModel that takes text; its ids are
`albert_tf.data.tokenization.SentencePieceTokenizer.encode`'s for the same normalised text
(how, and the offsets of a split piece's parts: docs/export.md). Plain TensorFlow and
tensorflow_text ops, saved inside SavedModels.
"""

import copy

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.data import unicode_tables
from albert_tf.data.tokenization import WORD_START, is_digit_comma_piece
from albert_tf.export.normalization import in_set

def watched_ids(model_bytes):
    """Sorted int32 ids of a SentencePiece model whose pieces may be split: the digit-comma
    pieces (`is_digit_comma_piece`) and the unknown ids."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=model_bytes)
    ids = [i for i in range(sp.GetPieceSize()) if sp.IsUnknown(i) or is_digit_comma_piece(sp.IdToPiece(i))]
    return np.array(ids, np.int32)


class ReleaseTokenizer(tf.Module):
    """SentencePiece with the release's digit-comma rule.

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
        # one function for every call site (traced once, saved once)
        self._batch = tf.function(self._tokenize_batch, input_signature=[tf.TensorSpec([None], tf.string)],
                                  autograph=False)

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
            ids, starts, ends = self._batch(text[None])
            return ids.values, starts.values, ends.values
        return self._batch(text)

    def _tokenize_batch(self, text):
        ids, starts, ends = self.sentencepiece.tokenize_with_offsets(text)
        flat, splits = ids.flat_values, ids.row_splits
        row = _rows_of(splits, tf.size(flat))
        watched = tf.constant(self._watched)
        at = tf.minimum(tf.searchsorted(watched, flat), len(self._watched) - 1)
        rows = tf.unique(tf.gather(row, tf.where(tf.equal(tf.gather(watched, at), flat))[:, 0]))[0]  # ascending
        parts = (flat, starts.flat_values, ends.flat_values, splits)
        flat, begin, end, splits = tf.cond(tf.size(rows) > 0, lambda: self._release(text, parts, row, rows),
                                           lambda: parts)
        return tuple(tf.RaggedTensor.from_row_splits(x, splits, validate=False) for x in (flat, begin, end))

    def _release(self, text, parts, row, rows):
        """The rows `rows` as the release tokenizes them (module docstring) -> the flat ids,
        starts, ends and the row splits of all rows."""
        flat, begin, end, splits = parts
        tokenizer = self._pieces()
        pieces = tokenizer.tokenize(tf.gather(text, rows))  # [R, (s)]: the same pieces as the ids
        count = tf.size(pieces.flat_values)
        sub_splits = tf.cast(pieces.row_splits, tf.int32)
        sub_row = _rows_of(sub_splits, count)
        where = (tf.gather(tf.cast(tf.gather(splits, rows), tf.int32), sub_row) + tf.range(count)
                 - tf.gather(sub_splits, sub_row))  # their flat positions
        pieces = pieces.flat_values
        flat = tf.tensor_scatter_nd_update(flat, where[:, None], self.string_to_id(pieces))
        # the digit-comma pieces among them: two characters or more, the last ",", the one
        # before it a digit
        comma_ended = tf.strings.regex_full_match(pieces, "(?s).+,")
        before = tf.where(comma_ended, tf.strings.regex_replace(pieces, "(?s)^.*(.),$", "\\1"), "a")
        before = tf.strings.unicode_decode(before, "UTF-8", errors="replace").flat_values  # one each
        chosen = tf.cast(tf.where(comma_ended & in_set(before, unicode_tables.DIGIT))[:, 0], tf.int32)  # [F]
        chosen_count = tf.size(chosen)
        piece = tf.gather(pieces, chosen)
        at = tf.gather(where, chosen)
        size = tf.strings.length(piece)
        head = tf.strings.regex_replace(tf.strings.substr(piece, tf.zeros_like(size), size - 1), WORD_START, "")
        sub, sub_begin, sub_end = tokenizer.tokenize_with_offsets(head)  # [F, (r)]
        part_splits = tf.cast(sub.row_splits, tf.int32)
        part_row = _rows_of(part_splits, tf.size(sub.flat_values))
        # the first part loses its "▁" where the piece had none (and goes if that was all)
        first = tf.equal(tf.range(tf.size(part_row)), tf.gather(part_splits, part_row))
        bare = tf.gather(~tf.strings.regex_full_match(piece, WORD_START + "(?s).*"), part_row)
        strip = first & bare & tf.strings.regex_full_match(sub.flat_values, WORD_START + "(?s).*")
        stripped = tf.where(strip, tf.strings.regex_replace(sub.flat_values, "^" + WORD_START, ""), sub.flat_values)
        keep = tf.where(~(strip & tf.equal(stripped, "")))[:, 0]
        part_row = tf.gather(part_row, keep)
        part_ids = self.string_to_id(tf.gather(stripped, keep))
        part_count = tf.math.unsorted_segment_sum(tf.ones_like(part_row), part_row, chosen_count)
        # their offsets: counted back from the comma, inside the piece's span
        piece_begin, piece_end = tf.gather(begin, at), tf.gather(end, at)
        comma = tf.maximum(piece_end - 1, piece_begin)
        shift = tf.gather(comma - tf.cast(tf.strings.length(head), begin.dtype), part_row)
        low, high = tf.gather(piece_begin, part_row), tf.gather(comma, part_row)
        part_begin = tf.clip_by_value(tf.gather(sub_begin.flat_values, keep) + shift, low, high)
        part_end = tf.clip_by_value(tf.gather(sub_end.flat_values, keep) + shift, low, high)
        # splice: piece m becomes counts[m] pieces (the parts of a split one, then its comma)
        m = tf.size(flat)
        counts = tf.tensor_scatter_nd_update(tf.ones([m], tf.int32), at[:, None], part_count + 1)
        ends_at = tf.cumsum(counts)
        total = tf.size(flat) + tf.reduce_sum(part_count)
        source = tf.searchsorted(ends_at, tf.range(total), side="right")
        k = tf.range(total) - tf.gather(ends_at - counts, source)
        which = tf.gather(tf.tensor_scatter_nd_update(tf.fill([m], -1), at[:, None], tf.range(chosen_count)),
                          source)  # the split piece it comes from, -1 for none
        is_split = which >= 0
        which = tf.maximum(which, 0)
        is_part = is_split & (k < tf.gather(tf.concat([part_count, [0]], 0), which))
        part = tf.where(is_part, tf.gather(tf.concat([tf.cumsum(part_count, exclusive=True), [0]], 0), which) + k,
                        tf.size(part_ids))

        def pick(part_values, comma_value, own):
            part_values = tf.concat([part_values, tf.zeros([1], part_values.dtype)], 0)
            return tf.where(is_part, tf.gather(part_values, part),
                            tf.where(is_split, comma_value, tf.gather(own, source)))

        comma_id = self.string_to_id(tf.constant(","))
        at_comma = tf.gather(tf.concat([comma, [0]], 0), which)
        at_end = tf.gather(tf.concat([piece_end, [0]], 0), which)
        lengths = tf.math.unsorted_segment_sum(counts, row, tf.size(splits) - 1)
        splits = tf.concat([[0], tf.cumsum(tf.cast(lengths, splits.dtype))], 0)
        return (pick(part_ids, comma_id, flat), pick(part_begin, at_comma, begin), pick(part_end, at_end, end), splits)


def _rows_of(splits, count):
    """int32 [count]: the row of each value of a ragged tensor with row splits `splits`."""
    return tf.searchsorted(splits[1:], tf.range(tf.cast(count, splits.dtype)), side="right")
