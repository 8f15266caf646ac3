"""Length bucketing for fine-tuning and serving: each batch is padded only to its bucket, the
smallest of a few static widths (`--length_buckets`) that holds its longest example. Padding
is masked, so the logits of the real positions are the same as with full padding; what does
differ: docs/fine_tuning.md and bucket_widths.FLAG_HELP.

    widths = bucket_widths(128, "16,32,64")                 # (16, 32, 64, 128): data/bucket_widths.py
    ds = bucketed_batches(columns, lengths, 32, widths, finalize=cut_to_width(("input_word_ids",)),
                          training=True, seed=1)             # shuffled across buckets, repeats
    ds = bucketed_batches(columns, lengths, 32, widths, finalize=..., training=False)
    # one pass, examples sorted by length; `example_index` restores the order

Shape legend: N examples, B batch, T max_seq_length, W a bucket width (<= T).
"""

import numpy as np
import tensorflow as tf

from albert_tf.data.maps import graph_map

LENGTH = "_length"


def width_for(lengths, widths):
    """The smallest width >= max(lengths) (an int32 scalar tensor).

    Args:
        lengths: int [B] real lengths; widths: bucket_widths output.
    """
    table = tf.constant(widths, tf.int32)
    longest = tf.reduce_max(tf.cast(lengths, tf.int32))
    index = tf.searchsorted(table, tf.reshape(longest, [1]), side="left")[0]
    return tf.gather(table, tf.minimum(index, len(widths) - 1))


def cut_to_width(keys, widths):
    """A `finalize` for padded columns: cuts the last axis of `keys` to the batch's width.

    Args:
        keys: names of int columns [B, ..., T] padded to T.
        widths: bucket_widths output.
    """
    def finalize(batch):
        width = width_for(batch[LENGTH], widths)
        out = {k: v for k, v in batch.items() if k != LENGTH}
        for key in keys:
            out[key] = out[key][..., :width]
        return out

    return finalize


def take_rows(columns, order):
    """The rows `order` (int [M]) of each column: arrays [N, ...] or ragged tensors [N, (n)]."""
    return {k: tf.gather(v, order) if isinstance(v, tf.RaggedTensor) else np.asarray(v)[order]
            for k, v in columns.items()}


def bucketed_batches(columns, lengths, batch_size, widths, finalize, training, seed=0, input_context=None,
                     skip_batches=0):
    """Batches of `columns` grouped by length.

    Args:
        columns: dict of arrays with N rows (numbers, padded arrays or strings) or ragged [N, (n)].
        lengths: int [N], each example's real length.
        batch_size: B.
        widths: bucket_widths output; one width (T) gives plain batches.
        finalize: batch dict (with LENGTH [B]) -> model batch (e.g. cut_to_width(...)), traced
            without AutoGraph.
        training: True: shuffled (seed) and repeated forever, batches of exactly B drawn from
            one bucket each. False: one pass sorted by length (the last batch may be partial).
        seed: the shuffle's seed.
        input_context: tf.distribute.InputContext; each input pipeline reads its shard.
        skip_batches: training batches to skip at the start (a resumed run).
    Returns:
        tf.data.Dataset of finalized batches.
    """
    lengths = np.asarray(lengths, np.int32)
    columns = dict(columns, **{LENGTH: lengths})
    n = len(lengths)
    if not training:
        order = np.argsort(lengths, kind="stable")
        return graph_map(tf.data.Dataset.from_tensor_slices(take_rows(columns, order)).batch(batch_size), finalize)
    ds = tf.data.Dataset.from_tensor_slices(columns)
    if input_context is not None and input_context.num_input_pipelines > 1:
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    ds = ds.shuffle(n, seed=seed, reshuffle_each_iteration=True).repeat()
    if len(widths) == 1:
        ds = ds.batch(batch_size, drop_remainder=True)
    else:
        ds = ds.bucket_by_sequence_length(
            tf.autograph.experimental.do_not_convert(lambda row: row[LENGTH]),
            bucket_boundaries=[w + 1 for w in widths[:-1]], bucket_batch_sizes=[batch_size] * len(widths),
            no_padding=True, drop_remainder=True)
    ds = ds.skip(skip_batches) if skip_batches else ds
    return graph_map(ds, finalize, num_parallel_calls=tf.data.AUTOTUNE)
