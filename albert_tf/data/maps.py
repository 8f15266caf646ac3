"""`Dataset.map` without AutoGraph: the input functions are plain graph code (tf.cond /
tf.while_loop where they branch or loop), so converting their source buys nothing and
costs time at every command's start. And the options every input pipeline takes
(`without_autotune`)."""

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


def without_autotune():
    """tf.data options that turn autotuning off (parallel calls and prefetch buffers then keep
    their starting sizes). The driver's training and evaluation input take them: deleting an
    iterator waits for the autotuning thread's current period, up to 60 s (docs/pretraining.md,
    "Scaling out")."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return options
