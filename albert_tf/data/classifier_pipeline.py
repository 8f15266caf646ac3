"""tf.data for fine-tuning: classification Examples -> batches of encoder inputs and labels.

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


def classifier_dataset(examples, preprocess, seq_length, batch_size, labels=(), is_training=False, seed=12345,
                       input_context=None):
    """A dataset of (inputs dict [B, T], labels [B]) batches.

    Args:
        examples: list of `albert_tf.data.classifier_data.Example`.
        preprocess: the preprocessing object (see module docstring).
        seq_length: T.
        batch_size: B (per input pipeline).
        labels: the task's label list; empty for regression.
        is_training: shuffle, repeat forever and drop the last partial batch.
        seed: shuffle seed.
        input_context: tf.distribute.InputContext; each pipeline then reads its shard.

    Returns:
        tf.data.Dataset. Evaluation datasets keep the order of `examples` and their
        last partial batch.
    """
    pair = any(e.text_b is not None for e in examples)
    columns = {
        "text_a": np.array([e.text_a for e in examples], dtype=object),
        "label": label_ids(examples, labels),
    }
    if pair:
        columns["text_b"] = np.array([e.text_b or "" for e in examples], dtype=object)
    ds = tf.data.Dataset.from_tensor_slices(columns)
    if input_context is not None and input_context.num_input_pipelines > 1:
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if is_training:
        ds = ds.shuffle(len(examples), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(batch_size, drop_remainder=is_training)

    def to_inputs(batch):
        inputs = pack(preprocess, batch["text_a"], batch.get("text_b"), seq_length)
        return inputs, batch["label"]

    return ds.map(to_inputs, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
