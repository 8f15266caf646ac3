"""Fine-tuning inputs shared by the classification task and the exported classifier:
label ids and in-graph packing of raw strings into encoder inputs.

Tokenization and packing run in the graph through a preprocessing object with the TF-Hub
preprocessing interface (`.tokenize(strings)` -> ragged ids, `.bert_pack_inputs(segments,
seq_length)`): the exported `preprocess/` SavedModel loaded with tf.saved_model.load, or
an in-memory `albert_tf.export.preprocess_module.PreprocessModule`. Training and the
exported classifier therefore tokenize identically.

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


def _packed_lengths(segments, seq_length):
    """Lengths [B] of [CLS] A [SEP] (B [SEP]) after the round-robin trim to seq_length."""
    specials = len(segments) + 1
    total = tf.add_n([tf.cast(s.row_lengths(), tf.int32) for s in segments])
    return tf.minimum(total, seq_length - specials) + specials


def pack(preprocess, text_a, text_b, seq_length, widths=None):
    """String tensors [B] (text_b may be None) -> dict of int32 encoder inputs [B, T], or
    with `widths` (albert_tf.data.buckets.bucket_widths) [B, W]: padded only to the
    smallest width that holds the batch's longest input (the same ids, masked padding)."""
    segments = [preprocess.tokenize(text_a)]
    if text_b is not None:
        segments.append(preprocess.tokenize(text_b))
    width = seq_length if widths is None else width_for(_packed_lengths(segments, seq_length), widths)
    packed = preprocess.bert_pack_inputs(segments, seq_length=tf.cast(width, tf.int32))
    out = {}
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        tensor = tf.cast(packed[name], tf.int32)
        tensor.set_shape([None, seq_length if widths is None else None])
        out[name] = tensor
    return out


def packed_lengths(preprocess, text_a, text_b, seq_length, chunk=1024):
    """Each example's packed length (what it needs of the width), int32 [N], tokenizing
    `chunk` strings at a time.

    Args:
        text_a, text_b: sequences of N strings (text_b None for single-text tasks).
    """
    out = []
    for start in range(0, len(text_a), chunk):
        segments = [preprocess.tokenize(tf.constant(list(text_a[start:start + chunk])))]
        if text_b is not None:
            segments.append(preprocess.tokenize(tf.constant(list(text_b[start:start + chunk]))))
        out.append(_packed_lengths(segments, seq_length).numpy())
    return np.concatenate(out) if out else np.zeros([0], np.int32)
