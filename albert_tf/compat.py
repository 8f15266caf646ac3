"""Every use of a private Keras or TensorFlow name, each with why no public API serves
(tests/test_compat.py fails when one moves). Keras and TensorFlow are imported by the
function that needs them, so storage/ and modeling/ (on any backend) can import this module.
"""

import contextlib

# --- Keras ------------------------------------------------------------------------------------


def keras_global_seed():
    """Keras' global random seed (`keras.utils.set_random_seed`'s), or None.

    Why private: no public getter; cli.py puts it back after an in-process call."""
    from keras.src.backend.common import global_state

    return global_state.get_global_attribute("global_random_seed")


def set_keras_global_seed(seed):
    """Sets Keras' global random seed to `seed`, None included.

    Why private: `keras.utils.set_random_seed` refuses None and also reseeds Python and NumPy,
    which putting a seed back must not do."""
    from keras.src.backend.common import global_state

    global_state.set_global_attribute("global_random_seed", seed)


@contextlib.contextmanager
def keras_pending_variables_kept():
    """Puts back Keras' list of variables left uninitialized by a
    `keras.StatelessScope(initialize_variables=False)` when the block ends.

    Why private: a later top-level StatelessScope initializes them all, and counting a
    model's parameters (modeling.encoder.count_params) must leave nothing to allocate."""
    from keras.src.backend.common import global_state

    pending = global_state.get_global_attribute("uninitialized_variables")
    pending = None if pending is None else list(pending)
    try:
        yield
    finally:
        global_state.set_global_attribute("uninitialized_variables", pending)


class FunctionalWeightsLayout:
    """Mixin for a subclassed `keras.Model` whose `.weights.h5` files keep the layout of the
    functional model it was (its layers in tracking order under `layers/`).

    Why private: Keras' weights writer picks the layout from `_obj_type()`; 0.2.0's files
    (tests/data/v0_2_0) have the functional layout. Put it before `keras.Model` in the bases."""

    def _obj_type(self):
        return "Functional"


def all_layers(model):
    """`model` and every layer inside it, depth first, in tracking order.

    Why private: `Layer._flatten_layers` is the walk Keras itself uses; the public `layers`
    property lists a Model's direct children only, and not those of a plain Layer."""
    return list(model._flatten_layers(include_self=True, recursive=True))


def seed_generators(layer):
    """The `keras.random.SeedGenerator`s a layer owns (dropout's), [] for none.

    Why private: no public list; checkpoints save their states (training.checkpoints),
    which TensorFlow's tracking does not reach."""
    return list(getattr(layer, "_seed_generators", []))


# The attribute of `keras.layers.TFSMLayer` holding the loaded SavedModel object: a checkpoint of
# a model around a TFSMLayer names the export's variables under it (modeling/records.py).
TFSM_LOADED_OBJECT = "_reloaded_obj"


def reloaded_savedmodel(tfsm_layer):
    """The loaded SavedModel object behind a `keras.layers.TFSMLayer` (None for any other layer).

    Why private: no accessor; the model record reads the export's own record from it, and a
    run's checkpoint names the export's variables under that attribute."""
    return getattr(tfsm_layer, TFSM_LOADED_OBJECT, None)


class PlainVariableNames:
    """Mixin for `keras.layers.TFSMLayer`: the restored variables are tracked under their
    names without TensorFlow's ":0" suffix (and "/" made "_").

    Why private: TFSMLayer wraps each restored variable through `_add_existing_weight` with
    `tf.Variable.name` ("kernel:0"); optimizers with slots derive slot names from it and
    TensorFlow refuses ":" in a name, so fine-tuning an export with Adam or LAMB would fail.
    `_track_variable` is how a Layer adopts a variable it did not create. Put it before
    TFSMLayer in the bases."""

    def _add_existing_weight(self, weight):
        import keras

        variable = keras.Variable(initializer=weight, trainable=weight.trainable, dtype=weight.dtype,
                                  shape=weight.shape, name=weight.name.split(":")[0].replace("/", "_"))
        self._track_variable(variable)


class OptimizerHooks:
    """Mixin for a `keras.optimizers.Optimizer` subclass on the TensorFlow backend.

    Why private (both are underscore methods of Keras' TensorFlow optimizer):
    - `_trackable_children`: Keras keeps a list of the model's variables on the optimizer; as
      a checkpoint dependency it would give every model variable the name
      `optimizer/_trainable_variables/N` besides its `model/...` path, so it is left out.
    - `_all_reduce_sum_gradients`: inside a tf.distribute replica context Keras sums the
      gradients over replicas in `apply`; the driver's step (training/step.py) has summed them
      already, and sets `_gradients_summed` around `apply` so they are not summed twice.
    Put it before the optimizer class in the bases."""

    _gradients_summed = False

    def _trackable_children(self, save_type="checkpoint", **kwargs):
        children = super()._trackable_children(save_type, **kwargs)
        children.pop("_trainable_variables", None)
        return children

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if self._gradients_summed:
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)


@contextlib.contextmanager
def keras_default_save_signatures_off():
    """While the block runs, Keras models answer None for `_default_save_signature`.

    Why private: Keras 3's TensorFlow layer class defines that property; `tf.saved_model.save`
    reads it on every Keras model it saves and traces the whole forward once more for a
    function no albert_tf export serves (export/savedmodel.py)."""
    from keras.src.backend.tensorflow.layer import TFLayer

    saved = TFLayer.__dict__["_default_save_signature"]
    TFLayer._default_save_signature = property(lambda self: None)
    try:
        yield
    finally:
        TFLayer._default_save_signature = saved


# --- TensorFlow -------------------------------------------------------------------------------


def is_tensorflow_error(error):
    """Whether `error` is a `tf.errors.OpError`, without importing TensorFlow (public:
    TensorFlow imported means `tf.errors` is there)."""
    import sys

    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(error, tf.errors.OpError)


def tensorflow_global_seed():
    """TensorFlow's global seed (`tf.random.set_seed`'s), or None.

    Why private: TensorFlow has no public getter; `tf.compat.v1.random.get_seed` advances
    the op-seed counter as a side effect."""
    from tensorflow.python.eager import context

    return context.global_seed()


def op_determinism_enabled():
    """Whether `tf.config.experimental.enable_op_determinism()` is in force.

    Why private: only the enabling call is public; the command wrapper (cli.py) must undo a
    command's `--deterministic` after an in-process call."""
    from tensorflow.python.framework import config

    return config.is_op_determinism_enabled()


def disable_op_determinism():
    """Undoes `tf.config.experimental.enable_op_determinism()` (no public counterpart)."""
    from tensorflow.python.framework import config

    config.disable_op_determinism()


def save_context(options):
    """The context `tf.saved_model.save(..., options=options)` traces functions in.

    Why private: tf.function's trace cache is keyed on it, so functions traced before the save
    would be traced again while saving; tracing inside it (export/savedmodel.py) traces once."""
    from tensorflow.python.saved_model.save_context import save_context as context

    return context(options)


def variables_to_constants(concrete_function):
    """`concrete_function` with its variables made constants of its graph (a frozen graph).

    Why private: no public export (the TFLite converter uses it itself); the LiteRT export
    converts each quantization from one frozen graph (export/litert_model.py)."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    return convert_variables_to_constants_v2(concrete_function)
