"""The text normalisation in the graph: `albert_tf.data.tokenization.preprocess_text`, exactly.

    normalize(tf.constant(["  Crème ``brûlée''  ", "ΟΔΟΣ"]))  # [b"creme ``brulee''", b'\xce\xbf...\xcf\x82']

The same steps as Python (whitespace runs -> one space, ends stripped; NFKD; characters of
non-zero canonical combining class dropped; with `lower`, str.lower(), the final sigma
included), every decision about a character taken from albert_tf/data/unicode_tables.py, not
from RE2's, ICU's or TensorFlow's own Unicode data (why: docs/export.md): only the characters
Python decomposes (`DECOMPOSED`) go through ICU's NFKD, one by one; `COMBINING` is dropped;
lower-casing is the `LOWER` table plus the final-sigma context (`CASED`, `CASE_IGNORABLE`).
All-ASCII strings are lower-cased byte by byte. Plain TensorFlow and tensorflow_text ops.
"""

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.data import unicode_tables

# str.isspace() (what str.split() splits on), as an RE2 class of one character
SPACE = r"[\s\p{Z}\x{0b}\x{1c}-\x{1f}\x{85}]"
_SIGMA, _FINAL_SIGMA = 0x3A3, 0x3C2


def _lower_pairs():
    runs = unicode_tables.LOWER
    keys = np.concatenate([np.arange(first, last + 1, step, dtype=np.int32)
                           for first, last, step, _ in zip(runs[::4], runs[1::4], runs[2::4], runs[3::4])])
    deltas = np.concatenate([np.full(len(range(first, last + 1, step)), delta, np.int32)
                             for first, last, step, delta in zip(runs[::4], runs[1::4], runs[2::4], runs[3::4])])
    order = np.argsort(keys, kind="stable")
    return keys[order], (keys + deltas)[order]


_LOWER_KEYS, _LOWER_VALUES = _lower_pairs()


def in_set(code_points, bounds):
    """bool [N]: whether each code point (int32 [N]) is in a table's set (flat [start, end) bounds)."""
    index = tf.searchsorted(tf.constant(bounds, tf.int32), code_points, side="right")
    return tf.equal(tf.math.floormod(index, 2), 1)


def _decompose_some(code_points, decomposed, which):
    """The code points with those at `which` replaced by their NFKD -> (values, source)."""
    n = tf.size(code_points)
    strings = tf.strings.unicode_encode(tf.gather(code_points, which)[:, None], "UTF-8")
    parts = tf.strings.unicode_decode(tf_text.normalize_utf8(strings, "NFKD"), "UTF-8")  # [D, (k)]
    lengths = tf.tensor_scatter_nd_update(tf.ones([n], tf.int32), which[:, None],
                                          tf.cast(parts.row_lengths(), tf.int32))
    source = tf.repeat(tf.range(n), lengths)
    k = tf.range(tf.size(source)) - tf.gather(tf.cumsum(lengths, exclusive=True), source)
    # row of `parts` for the code points that were decomposed (D, a dummy row, for the others)
    rank = tf.where(decomposed, tf.cumsum(tf.cast(decomposed, tf.int32)) - 1, tf.size(which))
    part_starts = tf.concat([tf.cast(parts.row_starts(), tf.int32), [0]], 0)
    flat = tf.concat([parts.flat_values, [0]], 0)
    from_parts = tf.gather(decomposed, source)
    at = tf.where(from_parts, tf.gather(part_starts, tf.gather(rank, source)) + k, tf.size(flat) - 1)
    return tf.where(from_parts, tf.gather(flat, at), tf.gather(code_points, source)), source


def decompose(code_points):
    """NFKD, then the characters of non-zero combining class dropped, of int32 code points [N].

    Returns:
        (code_points [M] int32, source [M] int32): the result and, for each of its code points,
        the index of the input code point it came from.
    """
    code_points = tf.cast(code_points, tf.int32)
    decomposed = in_set(code_points, unicode_tables.DECOMPOSED)
    which = tf.cast(tf.where(decomposed)[:, 0], tf.int32)  # [D]
    values, source = tf.cond(tf.size(which) > 0, lambda: _decompose_some(code_points, decomposed, which),
                             lambda: (code_points, tf.range(tf.size(code_points))))
    keep = ~in_set(values, unicode_tables.COMBINING)
    return tf.boolean_mask(values, keep), tf.boolean_mask(source, keep)


def _final_sigmas(code_points, rows, sigmas):
    """Whether each capital sigma at `sigmas` [S] is in str.lower()'s final-sigma context: a
    cased letter before it and none after it, case-ignorable characters skipped both ways,
    within its own string."""
    solid_at = tf.cast(tf.where(~in_set(code_points, unicode_tables.CASE_IGNORABLE))[:, 0], tf.int32)
    cased = in_set(code_points, unicode_tables.CASED)
    row = tf.gather(rows, sigmas)

    def cased_at(index):  # index -1: none
        safe = tf.maximum(index, 0)
        return (index >= 0) & tf.equal(tf.gather(rows, safe), row) & tf.gather(cased, safe)

    before = tf.gather(tf.concat([[-1], solid_at], 0), tf.searchsorted(solid_at, sigmas, side="left"))
    after = tf.gather(tf.concat([solid_at, [-1]], 0), tf.searchsorted(solid_at, sigmas, side="right"))
    return cased_at(before) & ~cased_at(after)


def lower_code_points(code_points, rows):
    """str.lower() of normalised text as int32 code points [N]; `rows` [N] says which string
    each belongs to (the final sigma looks at its neighbours in the same string only)."""
    code_points = tf.cast(code_points, tf.int32)
    rows = tf.cast(rows, tf.int32)
    keys = tf.constant(_LOWER_KEYS)
    i = tf.minimum(tf.searchsorted(keys, code_points, side="left"), len(_LOWER_KEYS) - 1)
    hit = tf.equal(tf.gather(keys, i), code_points)
    lowered = tf.where(hit, tf.gather(tf.constant(_LOWER_VALUES), i), code_points)
    sigmas = tf.cast(tf.where(tf.equal(code_points, _SIGMA))[:, 0], tf.int32)
    return tf.cond(
        tf.size(sigmas) > 0,
        lambda: tf.tensor_scatter_nd_update(
            lowered, sigmas[:, None],
            tf.where(_final_sigmas(code_points, rows, sigmas), _FINAL_SIGMA, tf.gather(lowered, sigmas))),
        lambda: lowered)


def _normalize_code_points(text, lower):
    """NFKD, marks dropped and lower-casing of a string tensor [N] (after the whitespace step)."""
    chars = tf.strings.unicode_decode(text, "UTF-8", errors="replace")  # [N, (n)]
    values, source = decompose(chars.flat_values)
    rows = tf.gather(tf.cast(chars.value_rowids(), tf.int32), source)
    if lower:
        values = lower_code_points(values, rows)
    out = tf.RaggedTensor.from_value_rowids(values, rows, nrows=chars.nrows(out_type=tf.int32))
    return tf.strings.unicode_encode(out, "UTF-8")


def normalize(text, lower=True):
    """`preprocess_text` of every string of a string tensor (any shape; the same shape back)."""
    text = tf.convert_to_tensor(text, tf.string)
    shape = tf.shape(text)
    flat = tf.reshape(text, [-1])
    flat = tf.strings.regex_replace(flat, SPACE + "+", " ")
    flat = tf.strings.regex_replace(flat, r"^ | $", "")
    # ASCII is its own NFKD, has no marks and lower-cases byte by byte: only the other
    # strings take the code point path
    ascii_only = tf.strings.regex_full_match(flat, r"[\x00-\x7f]*")
    plain = tf.strings.lower(flat) if lower else flat
    others = tf.cast(tf.where(~ascii_only)[:, 0], tf.int32)
    out = tf.cond(tf.size(others) > 0,
                  lambda: tf.dynamic_stitch([tf.range(tf.size(flat)), others],
                                            [plain, _normalize_code_points(tf.gather(flat, others), lower)]),
                  lambda: plain)
    return tf.reshape(out, shape)
