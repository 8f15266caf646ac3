"""The release's LAMB / AdamWeightDecay update as keras.ops maths: one definition for
`albert_tf.training.optimizer` (the TensorFlow optimizers) and for any backend's own step
(a training step on JAX, say), loadable without TensorFlow.

    m = b1 m + (1 - b1) g ;  v = b2 v + (1 - b2) g^2          (no bias correction)
    u = m / (sqrt(v) + eps) + wd * w                          (wd only when decayed)
    LAMB:  r = ||w|| / ||u|| (1 if either is 0; 1 when excluded);  w <- w - lr * r * u
    AdamW: w <- w - lr * u

(shared/ALBERT_REFERENCE.md section 5). Variables whose full path matches LayerNorm,
layer_norm or bias are excluded from weight decay and from the trust ratio.
"""

import contextlib
import dataclasses
import re

from keras import ops

EXCLUDE_FROM_DECAY = ("LayerNorm", "layer_norm", "bias")


@dataclasses.dataclass(frozen=True)
class LambSettings:
    """The update's constants (the release's defaults).

    Args:
        beta_1, beta_2, epsilon, weight_decay_rate: 0.9, 0.999, 1e-6, 0.01.
        exclude_from_weight_decay: regexes of variable paths without weight decay.
        exclude_from_layer_adaptation: regexes without trust ratio (None: the same).
        use_trust_ratio: True for LAMB, False for AdamWeightDecay.

    Example:
    ```python
    settings = LambSettings()
    settings.flags("encoder/transformer/layer_norm/gamma")  # (False, False)
    ```
    """

    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6
    weight_decay_rate: float = 0.01
    exclude_from_weight_decay: tuple = EXCLUDE_FROM_DECAY
    exclude_from_layer_adaptation: tuple = None
    use_trust_ratio: bool = True

    def flags(self, path):
        """(decays, adapts) of the variable at `path`: weight decay applies, the trust ratio
        applies (always False without use_trust_ratio)."""
        adapt_excluded = (self.exclude_from_weight_decay if self.exclude_from_layer_adaptation is None
                          else self.exclude_from_layer_adaptation)
        decays = not any(re.search(p, path) for p in self.exclude_from_weight_decay or ())
        adapts = self.use_trust_ratio and not any(re.search(p, path) for p in adapt_excluded or ())
        return decays, adapts


def _no_order(*tensors):
    del tensors
    return contextlib.nullcontext()


def release_update(gradient, variable, m, v, settings, decays, adapts, after=_no_order):
    """One variable's update before the learning rate.

    Args:
        gradient, variable, m, v: tensors of the variable's shape and dtype (the gradient
            dense and cast to it).
        settings: `LambSettings`.
        decays, adapts: `settings.flags(path)` of the variable.
        after: (*tensors) -> context manager under which the next stage's ops are made (the
            TensorFlow optimizer orders a large variable's stages with it; the values do not
            depend on it).

    Returns:
        (update, m_new, v_new): the variable moves by -lr * update.
    """
    m_new = ops.add(ops.multiply(m, settings.beta_1), ops.multiply(gradient, 1.0 - settings.beta_1))
    with after(m_new):
        v_new = ops.add(ops.multiply(v, settings.beta_2), ops.multiply(ops.square(gradient), 1.0 - settings.beta_2))
    with after(v_new):
        update = ops.divide(m_new, ops.add(ops.sqrt(v_new), settings.epsilon))
    if decays and settings.weight_decay_rate:
        with after(update):
            update = ops.add(update, ops.multiply(variable, ops.cast(settings.weight_decay_rate, variable.dtype)))
    if adapts:
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
    return update, m_new, v_new


def lamb_update(variable, gradient, m, v, learning_rate, settings, decays, adapts):
    """A functional step of one variable: returns (variable, m, v) after it (any backend).

    Args:
        variable, gradient, m, v: tensors of one shape; the gradient is cast to the
            variable's dtype.
        learning_rate: float or scalar tensor.
        settings, decays, adapts: as `release_update`.
    """
    dtype = variable.dtype
    update, m_new, v_new = release_update(ops.cast(gradient, dtype), variable, m, v, settings, decays, adapts)
    return ops.subtract(variable, ops.multiply(ops.cast(learning_rate, dtype), update)), m_new, v_new
