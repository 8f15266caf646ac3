"""The release's optimizers as Keras 3 optimizers: LAMB and AdamWeightDecay.

Both follow the original release, not keras.optimizers.Lamb: the update, and the variables
excluded from weight decay and the trust ratio, are `albert_tf.modeling.lamb`'s. Slots are
named `adam_m` and `adam_v`, as the release's. `apply_summed` takes gradients the driver has
summed over replicas and clipped (the release's clipping) and does not all-reduce them
again; `apply`, `apply_gradients` and `model.fit` all-reduce like any Keras optimizer.
"""

import keras
import tensorflow as tf
from keras import ops

from albert_tf.compat import OptimizerHooks
from albert_tf.modeling.lamb import EXCLUDE_FROM_DECAY, LambSettings, release_update


def dense(gradient):
    """A gradient as a dense tensor: an embedding lookup's tf.IndexedSlices (one row per
    occurrence of a token) summed, so that v gets the square of the sum, as the release's."""
    return tf.convert_to_tensor(gradient) if isinstance(gradient, tf.IndexedSlices) else gradient


class _ReleaseOptimizer(OptimizerHooks, keras.optimizers.Optimizer):
    """Shared state and update of LAMB and AdamWeightDecay."""

    use_trust_ratio = False
    default_name = None

    def __init__(
        self,
        learning_rate=0.00176,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        weight_decay_rate=0.01,
        exclude_from_weight_decay=EXCLUDE_FROM_DECAY,
        exclude_from_layer_adaptation=None,
        name=None,
        **kwargs,
    ):
        super().__init__(learning_rate=learning_rate, name=name or self.default_name, **kwargs)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.weight_decay_rate = weight_decay_rate
        self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
        self.exclude_from_layer_adaptation = tuple(
            exclude_from_weight_decay if exclude_from_layer_adaptation is None else exclude_from_layer_adaptation
        )

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v, self._decay, self._adapt = [], [], [], []
        for var in var_list:
            self._m.append(self.add_variable_from_reference(var, "adam_m"))
            self._v.append(self.add_variable_from_reference(var, "adam_v"))
            decays, adapts = self._settings.flags(var.path)
            self._decay.append(decays)
            self._adapt.append(adapts)

    def decays(self, variable):
        """Whether weight decay applies to `variable` (after build)."""
        return self._decay[self._get_variable_index(variable)]

    def adapts(self, variable):
        """Whether the trust ratio applies to `variable` (after build)."""
        return self.use_trust_ratio and self._adapt[self._get_variable_index(variable)]

    # The large variables' updates (from `chain_min_size` elements) run one after another on
    # each device, and the stages of one update in turn (docs/memory.md, "Optimizer updates in turn").
    chain_min_size = 1 << 20
    _chain = None

    def update_step(self, gradient, variable, learning_rate):
        if (self._chain is None or not tf.inside_function()
                or (variable.shape.num_elements() or 0) < self.chain_min_size):
            self.assign_sub(variable, self._update(gradient, variable, learning_rate))
            return
        with tf.control_dependencies(self._chain.get(variable.device, [])):
            delta = self._update(gradient, variable, learning_rate, in_turn=True)
        self._chain[variable.device] = [delta]
        self.assign_sub(variable, delta)

    def _update(self, gradient, variable, learning_rate, in_turn=False):
        """The update of one variable (modeling.lamb.release_update); returns lr x update (the
        delta to subtract). With `in_turn` (inside a tf.function) each stage's ops wait for
        the previous stage's result; the values are the same."""
        index = self._get_variable_index(variable)
        dtype = variable.dtype

        def after(*tensors):
            return tf.control_dependencies(list(tensors) if in_turn else [])

        update, m_new, v_new = release_update(ops.cast(dense(gradient), dtype), variable, self._m[index],
                                              self._v[index], self._settings, self._decay[index],
                                              self.use_trust_ratio and self._adapt[index], after)
        self.assign(self._m[index], m_new)
        self.assign(self._v[index], v_new)
        return ops.multiply(ops.cast(learning_rate, dtype), update)

    @property
    def _settings(self):
        return LambSettings(self.beta_1, self.beta_2, self.epsilon, self.weight_decay_rate,
                            self.exclude_from_weight_decay, self.exclude_from_layer_adaptation,
                            self.use_trust_ratio)

    def apply(self, grads, trainable_variables=None):
        """Keras' apply with embedding gradients made dense first, so that Keras' own clipping
        (clipnorm, global_clipnorm, under model.fit) sees the gradient's norm, not its rows';
        in a graph the large variables' updates run in turn (see `chain_min_size`)."""
        self._chain = {}
        try:
            return super().apply([None if g is None else dense(g) for g in grads], trainable_variables)
        finally:
            self._chain = None

    def apply_summed(self, grads, trainable_variables=None):
        """`apply` for gradients already summed over replicas (the driver's step)."""
        self._gradients_summed = True
        try:
            return self.apply(grads, trainable_variables)
        finally:
            self._gradients_summed = False

    def get_config(self):
        config = super().get_config()
        config.update(
            beta_1=self.beta_1,
            beta_2=self.beta_2,
            epsilon=self.epsilon,
            weight_decay_rate=self.weight_decay_rate,
            exclude_from_weight_decay=list(self.exclude_from_weight_decay),
            exclude_from_layer_adaptation=list(self.exclude_from_layer_adaptation),
        )
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class LAMB(_ReleaseOptimizer):
    """LAMB as the ALBERT release (no bias correction, eps 1e-6, decay inside the update,
    trust ratio, LayerNorm/bias excluded from both).

    Args:
        learning_rate: float or a LearningRateSchedule.
        beta_1, beta_2, epsilon, weight_decay_rate: the release's 0.9, 0.999, 1e-6, 0.01.
        exclude_from_weight_decay: regexes of variable paths without weight decay.
        exclude_from_layer_adaptation: regexes without trust ratio (default: the same).

    Example:
    ```python
    optimizer = LAMB(learning_rate=warmup_poly_decay(0.00176, 125000, 3125))
    ```
    """

    use_trust_ratio = True
    default_name = "lamb"


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWeightDecay(_ReleaseOptimizer):
    """The release's AdamWeightDecayOptimizer (`--optimizer=adamw`): Adam without bias
    correction, weight decay added to the update, LayerNorm/bias excluded."""

    default_name = "adamw"


def create_optimizer(name, learning_rate):
    """`--optimizer` (lamb | adamw) -> optimizer."""
    if name == "lamb":
        return LAMB(learning_rate=learning_rate)
    if name == "adamw":
        return AdamWeightDecay(learning_rate=learning_rate)
    raise ValueError(f"--optimizer must be lamb or adamw, got {name!r}.")
