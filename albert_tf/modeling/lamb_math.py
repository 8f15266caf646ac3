"""The release's LAMB and AdamWeightDecay update of one variable, as keras.ops maths.

One definition: albert_tf.training.optimizer's Keras optimizers (TensorFlow) compute their
update with it, and it runs on every Keras backend without TensorFlow (a JAX training step).
The formula is the ALBERT release's (shared/ALBERT_REFERENCE.md section 5), not
keras.optimizers.Lamb's (no bias correction, eps 1e-6, decay inside the update):

    m' = b1 m + (1 - b1) g ;  v' = b2 v + (1 - b2) g^2
    u  = m' / (sqrt(v') + eps) + wd w              (the decay term only where it applies)
    LAMB: u <- r u, r = ||w|| / ||u|| (1 if either norm is 0, or where excluded)
    w <- w - lr u

Example:
```python
m, v, update = release_update(g, w, m, v, decay=True, trust_ratio=True)
w = w - learning_rate * update
```
"""

import contextlib

from keras import ops


def _no_wait(*tensors):
    return contextlib.nullcontext()


def release_update(gradient, variable, m, v, beta_1=0.9, beta_2=0.999, epsilon=1e-6, weight_decay_rate=0.01,
                   decay=True, trust_ratio=True, after=None):
    """One variable's step of the release's optimizer.

    Args:
        gradient: g, dense, the variable's shape and dtype.
        variable: w, a tensor or a Keras variable (its value).
        m, v: the first and second moments, the variable's shape and dtype.
        beta_1, beta_2, epsilon, weight_decay_rate: floats (the release's 0.9, 0.999, 1e-6, 0.01).
        decay: bool. Whether weight decay applies to this variable (not to LayerNorm or bias).
        trust_ratio: bool. Whether the LAMB trust ratio applies (LAMB, and not LayerNorm or
            bias); False: AdamWeightDecay's update.
        after: None, or a callable(*tensors) -> context manager in which the next stage's ops
            are made (the TensorFlow optimizer's control dependencies, which make each stage
            wait for the previous one's result to bound its memory); the values are the same.
    Returns:
        (m', v', u): the new moments and the update before the learning rate (w <- w - lr u),
        each the variable's shape and dtype.
    """
    after = after or _no_wait
    m_new = ops.add(ops.multiply(m, beta_1), ops.multiply(gradient, 1.0 - beta_1))
    with after(m_new):
        v_new = ops.add(ops.multiply(v, beta_2), ops.multiply(ops.square(gradient), 1.0 - beta_2))
    with after(v_new):
        update = ops.divide(m_new, ops.add(ops.sqrt(v_new), epsilon))
    if decay and weight_decay_rate:
        with after(update):
            update = ops.add(update, ops.multiply(variable, ops.cast(weight_decay_rate, update.dtype)))
    if trust_ratio:
        with after(update):
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
        with after(w_norm):
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
        ratio = ops.where(
            ops.logical_and(ops.greater(w_norm, 0.0), ops.greater(u_norm, 0.0)),
            ops.divide(w_norm, ops.maximum(u_norm, 1e-30)),
            ops.ones_like(w_norm),
        )
        update = ops.multiply(update, ratio)
    return m_new, v_new, update
