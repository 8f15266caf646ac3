"""The release's optimizers as Keras 3 optimizers: LAMB and AdamWeightDecay.

Both follow the original release (shared/ALBERT_REFERENCE.md section 5), not
keras.optimizers.Lamb (bias correction, eps 1e-7, decoupled decay, trust ratio on
every variable); the maths is `albert_tf.modeling.lamb.release_update` (keras.ops, shared
with the backends' own steps):

    m = b1 m + (1 - b1) g ;  v = b2 v + (1 - b2) g^2          (no bias correction)
    u = m / (sqrt(v) + eps) + wd * w                          (wd only when decayed)
    LAMB:  r = ||w|| / ||u|| (1 if either is 0; 1 when excluded);  w <- w - lr * r * u
    AdamW: w <- w - lr * u

Variables whose full path matches LayerNorm, layer_norm or bias are excluded from
weight decay and from the trust ratio. Slots are named `adam_m` and `adam_v`, as the
release's.

The training driver (`albert_tf.training.driver`) sums gradients over replicas and clips
them to the global norm itself (Keras would clip each replica's gradients before its own
all-reduce, which is not the release's clipping), then calls `apply_summed`, which skips
Keras' all-reduce. Everywhere else (`apply`, `apply_gradients`, `model.fit`) these
optimizers all-reduce like any Keras optimizer, so under MirroredStrategy the replicas'
gradients are summed.
"""


import keras
import tensorflow as tf
from keras import ops

from albert_tf.compat import OptimizerHooks
from albert_tf.modeling.lamb import EXCLUDE_FROM_DECAY, LambSettings, release_update


def dense(gradient):
    """A gradient as a dense tensor: an embedding lookup's tf.IndexedSlices holds one row per
    occurrence of a token, so a token seen twice in a batch has two rows. Squared row by row
    they would give v the sum of the squares instead of the square of the sum (the gradient's
    own square, which the release's dense tf.square computes); converting sums them first."""
    return tf.convert_to_tensor(gradient) if isinstance(gradient, tf.IndexedSlices) else gradient


class _ReleaseOptimizer(OptimizerHooks, keras.optimizers.Optimizer):
    """Shared state and update of LAMB and AdamWeightDecay."""

    use_trust_ratio = False

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
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
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

    # The large variables' updates run one after another on each device: each one's ops wait
    # for the previous one's delta (a control dependency, no other change), so that the
    # temporaries of one large update are alive at a time. Left to the executor, the updates
    # of all variables advance together and their temporaries (m, v, their squares, the
    # update, its norm inputs: each of the variable's size) are alive at once, several times
    # the model's weights at the peak of a step. Variables under `chain_min_size` elements
    # (biases, LayerNorm, small models' kernels) update freely: their temporaries are small
    # and running them in parallel keeps a small model's step fast.
    # Within one large update the stages also run in turn (m, then v, then the update, the
    # decay term, the two norms), each waiting for the previous stage's result: otherwise
    # the executor starts every stage that reads only the gradient, the slots or the variable
    # at once (m x beta_1, g^2, v x beta_2, w x decay, w^2, ...), about six temporaries of
    # the variable's size (docs/memory.md, "Optimizer updates in turn").
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

    def __init__(self, learning_rate=0.00176, name="lamb", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWeightDecay(_ReleaseOptimizer):
    """The release's AdamWeightDecayOptimizer (`--optimizer=adamw`): Adam without bias
    correction, weight decay added to the update, LayerNorm/bias excluded."""

    def __init__(self, learning_rate=0.00176, name="adamw", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)


def create_optimizer(name, learning_rate):
    """`--optimizer` (lamb | adamw) -> optimizer."""
    if name == "lamb":
        return LAMB(learning_rate=learning_rate)
    if name == "adamw":
        return AdamWeightDecay(learning_rate=learning_rate)
    raise ValueError(f"--optimizer must be lamb or adamw, got {name!r}.")
