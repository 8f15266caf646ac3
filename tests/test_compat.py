"""albert_tf/compat.py: every private Keras or TensorFlow name albert_tf uses is there and still
does what albert_tf relies on (each test fails when the next release moves or renames it), and
no other module of the package uses one."""

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf import compat

ROOT = Path(__file__).resolve().parents[1]
PRIVATE_IMPORT = re.compile(r"\b(keras\.src|tensorflow\.python|tf_keras\.src)\b")


def test_no_other_module_imports_a_private_name():
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "albert_tf").rglob("*.py"))
             if path.name != "compat.py"
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if PRIVATE_IMPORT.search(line.split("#")[0]) and not line.lstrip().startswith(("#", '"', "`"))]
    assert not found, f"private Keras/TensorFlow modules used outside albert_tf/compat.py: {found}"


def test_no_other_class_overrides_a_private_method():
    """No class of albert_tf defines an underscore method that a Keras or TensorFlow base class
    defines (an override of a private method), except through compat's mixins."""
    overrides = []
    for info in pkgutil.walk_packages(albert_tf.__path__, "albert_tf."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__ or module is compat:
                continue
            for attr in vars(cls):
                if not attr.startswith("_") or attr.startswith("__"):
                    continue
                owners = [base for base in cls.__mro__[1:] if attr in vars(base)]
                if owners and owners[0].__module__.split(".")[0] in ("keras", "tensorflow", "tf_keras"):
                    overrides.append(f"{cls.__module__}.{cls.__name__}.{attr}")
    assert not overrides, f"private methods overridden outside albert_tf/compat.py: {overrides}"


@pytest.mark.real_process  # only a fresh process shows what importing compat loads
def test_compat_imports_no_framework_at_load():
    """The lowest rooms (storage/, modeling/ on the JAX and PyTorch backends) import compat: it
    must load without TensorFlow or Keras and import nothing of albert_tf."""
    code = ("import sys; import albert_tf.compat; "
            "bad = [m for m in ('tensorflow', 'keras') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    source = (ROOT / "albert_tf" / "compat.py").read_text()
    assert not re.search(r"^\s*(from|import) albert_tf", source, re.M)


def test_keras_global_seed_round_trip():
    before = compat.keras_global_seed()
    try:
        keras.utils.set_random_seed(1234)
        assert compat.keras_global_seed() == 1234
        compat.set_keras_global_seed(None)
        assert compat.keras_global_seed() is None
        compat.set_keras_global_seed(77)
        assert compat.keras_global_seed() == 77
    finally:
        compat.set_keras_global_seed(before)


def test_pending_variables_kept():
    """A variable made uninitialized inside the block is not left for Keras to allocate."""
    with compat.keras_pending_variables_kept():
        before = _pending()
        with keras.StatelessScope(initialize_variables=False):
            keras.layers.Dense(3).build((None, 4))
        assert len(_pending()) == len(before) + 2  # what the block drops: the name still holds the list
    assert len(_pending()) == len(before)


def _pending():
    from keras.src.backend.common import global_state  # the test's own look at what compat puts back

    return list(global_state.get_global_attribute("uninitialized_variables") or [])


class _Inner(keras.layers.Layer):
    def build(self, shape):
        self.dense = keras.layers.Dense(2, name="dense")
        self.dense.build(shape)
        self.dropout = keras.layers.Dropout(0.1, seed=3)

    def call(self, x):
        return self.dropout(self.dense(x))


class _Plain(keras.Model):
    def __init__(self):
        super().__init__()
        self.inner = _Inner()
        self.head = keras.layers.Dense(1, name="head")
        self.inner.build((None, 3))
        self.head.build((None, 2))
        self.built = True

    def call(self, x):
        return self.head(self.inner(x))


class _Subclassed(compat.FunctionalWeightsLayout, _Plain):
    pass


def test_functional_weights_layout(tmp_path):
    """Keras' weights writer lays the model out as a functional one: its layers under layers/."""
    model = _Subclassed()
    model.save_weights(tmp_path / "m.weights.h5")
    with h5py.File(tmp_path / "m.weights.h5") as f:
        assert sorted(f["layers"].keys()) == ["__inner", "dense"]  # Keras names them by class
    plain = _Plain()
    plain.save_weights(tmp_path / "p.weights.h5")
    with h5py.File(tmp_path / "p.weights.h5") as f:
        assert "layers" not in f  # without the mixin Keras writes another layout: the mixin is what changes it


def test_all_layers_and_seed_generators():
    model = _Subclassed()
    layers = compat.all_layers(model)
    assert layers[0] is model
    assert {type(layer).__name__ for layer in layers} >= {"_Inner", "Dense", "Dropout"}
    dropout = model.inner.dropout
    generators = compat.seed_generators(dropout)
    assert len(generators) == 1 and isinstance(generators[0], keras.random.SeedGenerator)
    assert compat.seed_generators(model.head) == []


def _saved_module(path):
    module = tf.Module()
    module.kernel = tf.Variable(np.arange(6, dtype="float32").reshape(2, 3), name="dense/kernel")
    module.serve = tf.function(lambda x: {"y": tf.matmul(x, module.kernel)},
                               input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return str(path)


def test_tfsm_layer_names_and_loaded_object(tmp_path):
    path = _saved_module(tmp_path / "sm")

    class Named(compat.PlainVariableNames, keras.layers.TFSMLayer):
        pass

    layer = Named(path, call_endpoint="serving_default", trainable=True)
    assert [w.name for w in layer.weights] == ["dense_kernel"]
    plain = keras.layers.TFSMLayer(path, call_endpoint="serving_default", trainable=True)
    assert ":" in plain.weights[0].name  # what the mixin fixes is still there to fix
    loaded = compat.reloaded_savedmodel(layer)
    assert loaded is not None and hasattr(loaded, "serve")
    assert compat.reloaded_savedmodel(keras.layers.Dense(1)) is None
    # the checkpoint path run records name (modeling/records.py) is that attribute's
    names = [name for name, _ in tf.train.list_variables(
        tf.train.Checkpoint(layer=layer).write(str(tmp_path / "ckpt")))]
    assert any(name.startswith(f"layer/{compat.TFSM_LOADED_OBJECT}/") for name in names), names


def test_optimizer_hooks(tmp_path):
    from albert_tf.training.optimizer import LAMB

    variable = keras.Variable(np.ones((2, 2), "float32"), name="w")
    optimizer = LAMB(learning_rate=0.1)
    optimizer.build([variable])
    names = [name for name, _ in tf.train.list_variables(
        tf.train.Checkpoint(optimizer=optimizer, w=variable).write(str(tmp_path / "ckpt")))]
    assert not any("_trainable_variables" in name for name in names), names
    assert any(name.startswith("optimizer/") for name in names)

    seen = []

    class Spy(LAMB):  # Keras' own apply must still reach the hook compat overrides
        def _all_reduce_sum_gradients(self, grads_and_vars):
            result = super()._all_reduce_sum_gradients(grads_and_vars)
            seen.append(result is not None and not self._gradients_summed)
            return result

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        v = keras.Variable(np.ones(2, "float32"))
        spy = Spy(learning_rate=0.1)
        spy.build([v])
    strategy.run(tf.function(lambda: spy.apply([tf.ones(2)], [v])))
    assert seen == [True]
    strategy.run(tf.function(lambda: spy.apply_summed([tf.ones(2)], [v])))
    assert seen == [True, False]  # summed: compat's hook returned them as given


def test_default_save_signatures_off():
    model = _Subclassed()
    owner = next(c for c in type(model).__mro__ if "_default_save_signature" in vars(c))
    original = vars(owner)["_default_save_signature"]
    assert isinstance(original, property)
    with compat.keras_default_save_signatures_off():
        assert model._default_save_signature is None
    assert vars(owner)["_default_save_signature"] is original


def test_tensorflow_error_and_seed():
    assert compat.is_tensorflow_error(tf.errors.NotFoundError(None, None, "x"))
    assert not compat.is_tensorflow_error(ValueError("x"))
    before = compat.tensorflow_global_seed()
    try:
        tf.random.set_seed(4321)
        assert compat.tensorflow_global_seed() == 4321
    finally:
        tf.random.set_seed(before)


def test_op_determinism_toggle():
    assert not compat.op_determinism_enabled()
    tf.config.experimental.enable_op_determinism()
    try:
        assert compat.op_determinism_enabled()
    finally:
        compat.disable_op_determinism()
    assert not compat.op_determinism_enabled()


def test_save_context_and_frozen_graph(tmp_path):
    variable = tf.Variable([[2.0], [3.0]])
    fn = tf.function(lambda x: tf.matmul(x, variable), input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    concrete = fn.get_concrete_function()
    frozen = compat.variables_to_constants(concrete)
    assert not frozen.graph.variables and not frozen.captured_inputs
    x = tf.constant([[1.0, 1.0]])
    result = frozen(x)
    np.testing.assert_array_equal(result[0] if isinstance(result, list) else result, [[5.0]])
    options = tf.saved_model.SaveOptions()
    with compat.save_context(options):
        from tensorflow.python.saved_model import save_context as probe  # the test's own look

        assert probe.in_save_context() and probe.get_save_options() is options
    assert not probe.in_save_context()


@pytest.mark.parametrize("name", [n for n in dir(compat) if not n.startswith("_")])
def test_every_name_is_documented(name):
    obj = getattr(compat, name)
    if inspect.isfunction(obj) or inspect.isclass(obj):
        assert "Why private" in (obj.__doc__ or "") or "public" in (obj.__doc__ or ""), name
