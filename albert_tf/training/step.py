"""One optimizer step on one replica: the driver's gradient pass, gradient accumulation
over slices of the batch, the cross-replica sum, clipping and the update. The K slices of
an accumulated step sum to the whole batch's gradients (docs/memory.md, "Gradient
accumulation").
"""

import tensorflow as tf

from albert_tf.training.distribution import sum_and_clip
from albert_tf.training.optimizer import dense


def gradients(task, model, batch, normalizers):
    """The gradient pass of one batch (XLA-compiled by the Trainer under jit_compile).

    Args:
        task: the driver's `Task`.
        model: its Keras model.
        batch: dict of tensors [B, ...].
        normalizers: dict of float32 scalars over the global batch.

    Returns:
        (gradients, one per model.trainable_variables: a tensor, a tf.IndexedSlices for
        an embedding lookup, or None for a variable the loss does not reach; the task's
        terms: dict of scalar sums).
    """
    with tf.GradientTape() as tape:
        loss, terms = task.loss_and_terms(model, batch, normalizers, training=True)
    return tape.gradient(loss, model.trainable_variables), terms


def zero_terms(specs):
    """Zeros of the terms dict a traced function returns (its structured_outputs' specs):
    the start of a sum over a graph loop of its calls."""
    return {k: tf.zeros(v.shape, v.dtype) for k, v in specs.items()}


def split_batch(batch, slices):
    """Each tensor [B, ...] of `batch` as [K, B / K, ...] (K = `slices`): slice i is rows
    i B / K to (i + 1) B / K. Static dimensions stay static."""
    out = {}
    for key, value in batch.items():
        static = value.shape.as_list()
        rows = None if static[0] is None else static[0] // slices
        split = tf.reshape(value, tf.concat([[slices, tf.shape(value)[0] // slices], tf.shape(value)[1:]], 0))
        split.set_shape([slices, rows] + static[1:])
        out[key] = split
    return out


def accumulated_gradients(gradients_fn, batch, normalizers, variables, slices):
    """The gradients and terms of `batch` computed in `slices` (K) slices of B / K rows.

    A tf.while_loop runs the slices one after another (parallel_iterations=1, so one
    slice's activations are alive at a time); the gradients are made dense and summed in
    float32, the terms added.

    Args:
        gradients_fn: a tf.function (slice, normalizers) -> (gradients, terms), as `gradients`.
        batch: dict of tensors [B, ...], B divisible by K.
        normalizers: dict of float32 scalars over the whole (global) batch.
        variables: the trainable variables, in the order of gradients_fn's gradients.
        slices: K >= 2.

    Returns:
        (gradients: float32 [variable shape] per variable, None where gradients_fn gives
        None; terms: dict of sums over the slices).
    """
    stacked = split_batch(batch, slices)
    # one trace of a slice tells which variables get no gradient and the terms' shapes
    first = {k: v[0] for k, v in stacked.items()}
    spec_gradients, spec_terms = gradients_fn.get_concrete_function(first, normalizers).structured_outputs
    present = [i for i, g in enumerate(spec_gradients) if g is not None]
    zero_gradients = [tf.zeros(variables[i].shape, tf.float32) for i in present]

    def body(i, sums, totals):
        piece = {k: tf.gather(v, i) for k, v in stacked.items()}
        grads, terms = gradients_fn(piece, normalizers)
        sums = [s + tf.cast(dense(grads[j]), tf.float32) for s, j in zip(sums, present, strict=True)]
        totals = {k: totals[k] + terms[k] for k in totals}
        return i + 1, sums, totals

    _, sums, totals = tf.while_loop(lambda i, sums, totals: i < slices, body,
                                    (tf.constant(0), zero_gradients, zero_terms(spec_terms)), parallel_iterations=1)
    summed = dict(zip(present, sums, strict=True))
    return [summed.get(i) for i in range(len(variables))], totals


def replica_step(task, model, optimizer, gradients_fn, batch, clip_norm, slices=1):
    """One optimizer step on this replica's batch (inside strategy.run); returns its terms.

    Args:
        task, model, optimizer: the Trainer's.
        gradients_fn: (batch, normalizers) -> (gradients, terms), as `gradients`; a
            tf.function when `slices` > 1.
        batch: dict of tensors [B, ...].
        clip_norm: global norm of the gradient after the cross-replica sum.
        slices: K, the gradient accumulation steps; 1 computes the batch in one pass
            (no loop in the graph).
    """
    ctx = tf.distribute.get_replica_context()
    normalizers = {k: tf.cast(v, tf.float32) for k, v in task.loss_normalizers(batch).items()}
    if ctx.num_replicas_in_sync > 1:
        normalizers = ctx.all_reduce(tf.distribute.ReduceOp.SUM, normalizers)
    variables = model.trainable_variables
    if slices == 1:
        grads, terms = gradients_fn(batch, normalizers)
    else:
        grads, terms = accumulated_gradients(gradients_fn, batch, normalizers, variables, slices)
    # variables the task's loss does not reach (e.g. the pooler under a SQuAD head)
    # get no gradient: they are left out of the sum, the clipping and the update
    pairs = [(g, v) for g, v in zip(grads, variables) if g is not None]
    clipped = sum_and_clip([g for g, _ in pairs], clip_norm)
    optimizer.apply_summed(clipped, [v for _, v in pairs])
    return terms
