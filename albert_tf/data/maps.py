"""`Dataset.map` without AutoGraph: the input functions are plain graph code (tf.cond /
tf.while_loop where they branch or loop), so converting their source buys nothing and
costs time at every command's start."""

import tensorflow as tf


def graph_map(dataset, fn, **kwargs):
    """`dataset.map(fn, **kwargs)` with `fn` traced as written (no AutoGraph conversion).

    `fn` takes one element's tensors and has no Python control flow on tensors; `kwargs` are
    `Dataset.map`'s (num_parallel_calls, deterministic, name).

    Example:
        >>> ds = graph_map(tf.data.Dataset.range(3), lambda x: x * 2)
        >>> [int(x) for x in ds]
        [0, 2, 4]
    """
    return dataset.map(tf.autograph.experimental.do_not_convert(fn), **kwargs)
