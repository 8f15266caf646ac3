"""In-graph SentencePiece pieces of one string with their character spans in the ORIGINAL text.

The TensorFlow twin of `albert_tf.tasks.squad.alignment.tokenize_context` (rules and how: docs/squad.md,
"How the alignment works"), for SavedModels that take raw text and answer with spans of it:

    tokenizer = ReleaseTokenizer(spm_bytes)  # albert_tf.export.release_tokenizer
    ids, starts, ends = context_pieces(tf.constant("Café  über 7, 2016, at"), tokenizer, lower=True)
    # ids [P] exactly `normalize` + the release's encode_pieces (SentencePieceTokenizer.encode);
    # text[starts[k]:ends[k]] is piece k's text (characters, i.e. Unicode code points, as
    # Python indexes str)

Everything is plain TensorFlow and tensorflow_text ops (no py_function), so it is saved
inside a SavedModel and runs in a fresh process after `import tensorflow_text`.
"""

import tensorflow as tf

from albert_tf.data import unicode_tables
from albert_tf.export import normalization


def _next_true(flags, positions):
    """For each position p: the first index >= p where `flags` is true (len(flags) if none)."""
    hits = tf.cast(tf.where(flags)[:, 0], tf.int32)
    n = tf.size(flags)
    k = tf.searchsorted(hits, positions, side="left")
    return tf.gather(tf.concat([hits, [n]], 0), k)


def _prev_true(flags, positions):
    """For each position p: the last index <= p where `flags` is true (-1 if none)."""
    hits = tf.cast(tf.where(flags)[:, 0], tf.int32)
    k = tf.searchsorted(hits, positions, side="right") - 1
    return tf.gather(tf.concat([[-1], hits], 0), k + 1)


def normalize_with_offsets(text, lower=True):
    """One string -> (normalised characters [M] string, starts [M], ends [M] int32): the
    original-character span of each normalised character (see module docstring)."""
    chars = tf.strings.unicode_split(text, "UTF-8")  # [N]
    n = tf.size(chars)
    index = tf.range(n)
    space = tf.strings.regex_full_match(chars, normalization.SPACE)
    solid = ~space
    solid_before = tf.cumsum(tf.cast(solid, tf.int32)) > 0
    solid_after = tf.reverse(tf.cumsum(tf.reverse(tf.cast(solid, tf.int32), [0])), [0]) > 0
    first_of_run = space & ~tf.concat([[False], space[:-1]], 0)
    keep = solid | (first_of_run & solid_before & solid_after)
    run_end = _next_true(solid, index)  # a kept space spans its whole run
    chars = tf.where(space, " ", chars)
    starts = index
    ends = tf.where(space, run_end, index + 1)
    chars, starts, ends = (tf.boolean_mask(x, keep) for x in (chars, starts, ends))
    code_points, source = normalization.decompose(tf.strings.unicode_decode(tf.strings.reduce_join(chars), "UTF-8"))
    starts, ends = tf.gather(starts, source), tf.gather(ends, source)
    if lower:  # one character to one: the spans stay
        code_points = normalization.lower_code_points(code_points, tf.zeros_like(code_points))
    chars = tf.strings.unicode_encode(code_points[:, None], "UTF-8")
    return chars, starts, ends


def context_pieces(text, tokenizer, lower=True):
    """One string -> (ids [P] int32, starts [P] int32, ends [P] int32); spans are character
    offsets in `text`, [start, end) (module docstring).

    Args:
        text: scalar string tensor.
        tokenizer: a `release_tokenizer.ReleaseTokenizer`.
        lower: lower-case (the model's do_lower_case).
    """
    chars, starts, ends = normalize_with_offsets(text, lower)
    m = tf.size(chars)
    byte_starts = tf.concat([[0], tf.cumsum(tf.strings.length(chars))], 0)  # [M + 1]
    ids, begin, end = tokenizer.tokenize_with_offsets(tf.strings.reduce_join(chars))
    begin = tf.searchsorted(byte_starts, tf.cast(begin, tf.int32), side="left")  # normalised characters
    end = tf.searchsorted(byte_starts, tf.cast(end, tf.int32), side="left")
    blank = normalization.in_set(tf.strings.unicode_decode(tf.strings.reduce_join(chars), "UTF-8"),
                                 unicode_tables.BLANK)
    first = _next_true(~blank, begin)
    has_solid = first < end
    last = _prev_true(~blank, tf.maximum(end - 1, 0))
    starts_ext = tf.concat([starts, [0]], 0)
    ends_ext = tf.concat([ends, [0]], 0)
    # a piece without a solid character: the empty span at the next solid one (or the tail)
    last_solid = _prev_true(~blank, [m - 1])[0]
    tail = tf.where(last_solid >= 0, tf.gather(ends_ext, tf.maximum(last_solid, 0)),
                    tf.where(m > 0, ends_ext[0], 0))
    anchor_index = _next_true(~blank, tf.minimum(end, m))
    anchor = tf.where(anchor_index < m, tf.gather(starts_ext, anchor_index), tail)
    span_start = tf.where(has_solid, tf.gather(starts_ext, first), anchor)
    span_end = tf.where(has_solid, tf.gather(ends_ext, tf.maximum(last, 0)), anchor)
    return tf.cast(ids, tf.int32), span_start, span_end
