"""Fine-tuning inputs shared by the classification task and the exported classifier:
label ids and in-graph packing of raw strings into encoder inputs.

Tokenization and packing run in the graph through a preprocessing object with the TF-Hub
preprocessing interface (`.tokenize(strings)` -> ragged ids, `.bert_pack_inputs(segments,
seq_length)`): the exported `preprocess/` SavedModel, or an in-memory
`albert_tf.export.preprocess_module.PreprocessModule`. The exported classifier packs raw
strings per request (`pack`); fine-tuning tokenizes each split once (`tokenize_segments`)
and packs those pieces (`pack_segments`).

Shape legend: B batch, T seq_length.
"""

import numpy as np
import tensorflow as tf

from albert_tf.data.buckets import width_for

NO_LABEL = -1  # test sets


def label_ids(examples, labels):
    """Examples -> int32 [N] class ids (labels = the task's label list), float32 [N]
    targets (labels empty: regression); NO_LABEL where an example has none."""
    if not labels:
        return np.array([NO_LABEL if e.label is None else float(e.label) for e in examples], np.float32)
    index = {label: i for i, label in enumerate(labels)}
    return np.array([NO_LABEL if e.label is None else index[e.label] for e in examples], np.int32)


def packed_lengths(segments, seq_length):
    """Lengths int32 [B] of [CLS] A [SEP] (B [SEP]) after the round-robin trim to seq_length
    (what each example needs of the width): segments = [ids_a] or [ids_a, ids_b], ragged."""
    specials = len(segments) + 1
    total = tf.add_n([tf.cast(s.row_lengths(), tf.int32) for s in segments])
    return tf.minimum(total, seq_length - specials) + specials


def pack(preprocess, text_a, text_b, seq_length, widths=None):
    """String tensors [B] (text_b may be None) -> dict of int32 encoder inputs [B, T], or
    with `widths` (albert_tf.data.bucket_widths.bucket_widths) [B, W]: padded only to the
    smallest width that holds the batch's longest input (the same ids, masked padding)."""
    segments = [preprocess.tokenize(text_a)]
    if text_b is not None:
        segments.append(preprocess.tokenize(text_b))
    return pack_segments(preprocess, segments, seq_length, widths)


def pack_segments(preprocess, segments, seq_length, widths=None):
    """`pack` of text already tokenized: segments = [ids_a] or [ids_a, ids_b], int ragged
    [B, (n)] each (from `tokenize_segments`)."""
    width = seq_length if widths is None else width_for(packed_lengths(segments, seq_length), widths)
    packed = preprocess.bert_pack_inputs(segments, seq_length=tf.cast(width, tf.int32))
    out = {}
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        tensor = tf.cast(packed[name], tf.int32)
        tensor.set_shape([None, seq_length if widths is None else None])
        out[name] = tensor
    return out


def tokenize_segments(preprocess, text_a, text_b, seq_length, chunk=1024):
    """The pieces of N examples, tokenized `chunk` strings at a time: [ids_a] or [ids_a,
    ids_b], int32 ragged [N, (n)] each (the tokenizer's ids), every row cut to its first
    seq_length pieces (packing keeps at most seq_length - 2 of any one segment, so the cut
    changes no packed input).

    Args:
        text_a, text_b: sequences of N strings (text_b None for single-text tasks).
    """
    segments = []
    for text in [text_a] if text_b is None else [text_a, text_b]:
        parts = [preprocess.tokenize(tf.constant(list(text[start:start + chunk]), tf.string))[:, :seq_length]
                 for start in range(0, max(len(text), 1), chunk)]  # one empty part for no text
        segments.append(tf.concat(parts, axis=0))
    return segments
