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

NO_LABEL = -1  # test sets


def label_ids(examples, labels):
    """Examples -> int32 [N] class ids (labels = the task's label list), float32 [N]
    targets (labels empty: regression); NO_LABEL where an example has none."""
    if not labels:
        return np.array([NO_LABEL if e.label is None else float(e.label) for e in examples], np.float32)
    index = {label: i for i, label in enumerate(labels)}
    return np.array([NO_LABEL if e.label is None else index[e.label] for e in examples], np.int32)


def pack(preprocess, text_a, text_b, seq_length):
    """String tensors [B] (text_b may be None) -> dict of int32 [B, T] encoder inputs."""
    segments = [preprocess.tokenize(text_a)]
    if text_b is not None:
        segments.append(preprocess.tokenize(text_b))
    packed = preprocess.bert_pack_inputs(segments, seq_length=tf.constant(seq_length, tf.int32))
    out = {}
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        tensor = tf.cast(packed[name], tf.int32)
        tensor.set_shape([None, seq_length])
        out[name] = tensor
    return out
