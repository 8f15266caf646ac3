"""tests/backend_cases.py's models on one Keras backend, where TensorFlow cannot be imported,
against the TensorFlow side's results (tests/test_backends.py starts it, one process per backend).

    KERAS_BACKEND=jax PYTHONPATH=ROOT:ROOT/tests:ROOT/benchmarks python tests/backends_worker.py DATA_DIR OUT_DIR

DATA_DIR/<case>/ is the case's pretrained directory as TensorFlow saved it, DATA_DIR/<case>.npz
its inputs (`in/...`), outputs in inference (`out/...`) and gradients of `backend_cases.scalar`
in training (`grad/<variable path>`) on TensorFlow. For each case the model is loaded from its
directory and run eagerly and, on JAX, under jax.jit (through `stateless_call`); its outputs and
gradients are compared with TensorFlow's (on JAX the eager gradients of EAGER_JAX_GRADIENTS'
cases only), and it is saved back as OUT_DIR/<case>/. The encoder case also checks padding
skipping (eager: the real positions TensorFlow gives; jax.jit: a clear refusal) and dropout drawn
from given seeds (the same masks with and without remat); albert_tf.modeling.lamb is checked
against a float64 numpy transcription of the release's formula.
OUT_DIR/results.json: {"backend", "tensorflow_blocked", "checks": [{"case", "check", "diff",
"allowed"} or with "error"]}.
"""

import importlib.abc
import sys

BLOCKED = ("tensorflow", "tf_keras", "tensorflow_text", "tensorflow_hub")


class _BlockTensorFlow(importlib.abc.MetaPathFinder):
    """Refuses to import TensorFlow and its packages (a machine without them)."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: TensorFlow must not be needed here)")
        return None


sys.meta_path.insert(0, _BlockTensorFlow())
for _name in BLOCKED:
    # importlib.util.find_spec(name) answers None, as where it is not installed (torch asks)
    sys.modules[_name] = None

import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

import backend_cases as cases  # noqa: E402

BACKEND = keras.config.backend()
# On JAX every case's outputs and gradients come from one jax.jit-compiled function (one compile:
# seconds per case); gradients are taken eagerly as well (jax.grad op by op, which compiles each op)
# only for these cases
EAGER_JAX_GRADIENTS = ("encoder",)


def numpy(tensor):
    """A backend tensor as numpy; floats as float32 (bf16 outputs included)."""
    if "float" in str(tensor.dtype):
        tensor = ops.cast(tensor, "float32")
    return np.asarray(ops.convert_to_numpy(tensor))


def compare(got, expected, tolerance, scale="each"):
    """(largest |difference|, allowed, None or what differs) over the arrays of two dicts.
    Floats: within tolerance x the scale, each array's largest |value| (scale "each": outputs)
    or the largest of all the arrays (scale "all": gradients, where a weight's gradient may be
    near 0); integers equal. Keys or shapes that differ: difference inf."""
    if sorted(got) != sorted(expected):
        return float("inf"), 0.0, f"keys differ: {sorted(set(got) ^ set(expected))}"
    overall = max(float(np.max(np.abs(v), initial=0.0)) for v in expected.values())
    worst, worst_allowed, worst_ratio, worst_key = 0.0, 0.0, -1.0, None
    for key, want in expected.items():
        have = np.asarray(got[key])
        if have.shape != want.shape:
            return float("inf"), 0.0, f"{key}: shape {have.shape}, expected {want.shape}"
        if want.dtype.kind in "iu":
            diff, allowed = float(np.max(np.abs(have.astype("int64") - want.astype("int64")), initial=0)), 0.0
        else:
            diff = float(np.max(np.abs(have.astype("float64") - want.astype("float64")), initial=0.0))
            allowed = tolerance * (overall if scale == "all" else float(np.max(np.abs(want), initial=0.0)))
        ratio = diff / allowed if allowed else (0.0 if diff == 0 else float("inf"))
        if ratio > worst_ratio:
            worst, worst_allowed, worst_ratio, worst_key = diff, allowed, ratio, key
    return worst, worst_allowed, None if worst <= worst_allowed else f"largest at {worst_key}"


class Runner:
    """Forward and gradient of a model on this backend, eager and (JAX) compiled."""

    def __init__(self, model):
        self.model = model

    def outputs(self, x, training=False):
        return {k: numpy(v) for k, v in cases.flatten(self.model(x, training=training)).items()}

    def gradients(self, x):
        model = self.model
        if BACKEND == "jax":
            import jax

            values = jax.grad(self._jax_loss)(*self._jax_state(), x)
        else:
            for variable in model.trainable_variables:
                variable.value.grad = None
            cases.scalar(model(x, training=True)).backward()
            values = [variable.value.grad for variable in model.trainable_variables]
        # a weight the scalar does not reach (the pooler under a SQuAD head): zeros, as JAX gives
        return {v.path: np.zeros(v.shape, "float32") if g is None else numpy(g)
                for v, g in zip(model.trainable_variables, values, strict=True)}

    # --- JAX: stateless calls, eager and under jax.jit -----------------------------------------
    def _jax_state(self):
        return ([v.value for v in self.model.trainable_variables],
                [v.value for v in self.model.non_trainable_variables])

    def _jax_forward(self, trainable, non_trainable, x):
        return self.model.stateless_call(trainable, non_trainable, x, training=False)[0]

    def _jax_loss(self, trainable, non_trainable, x):
        return cases.scalar(self.model.stateless_call(trainable, non_trainable, x, training=True)[0])

    def jit_outputs_and_gradients(self, x):
        """Outputs (inference) and gradients (training) from one jax.jit-compiled function."""
        import jax

        def both(trainable, non_trainable, x):
            return self._jax_forward(trainable, non_trainable, x), jax.grad(self._jax_loss)(trainable, non_trainable, x)

        outputs, grads = jax.jit(both)(*self._jax_state(), x)
        return ({k: numpy(v) for k, v in cases.flatten(outputs).items()},
                {v.path: numpy(g) for v, g in zip(self.model.trainable_variables, grads, strict=True)})

    def jit_outputs(self, x):
        import jax

        out = jax.jit(self._jax_forward)(*self._jax_state(), x)
        return {k: numpy(v) for k, v in cases.flatten(out).items()}


def encoder_checks(name, model, x, expected, check):
    """Padding skipping and seeded dropout on the encoder case."""
    tolerance = cases.tolerance(name)
    real = x["input_mask"].astype(bool)
    with model.runtime_options(skip_padding=True):
        def real_positions():
            skipped = Runner(model).outputs(x)
            return compare(
                {"pooled_output": skipped["pooled_output"], "sequence_output": skipped["sequence_output"][real]},
                {"pooled_output": expected["pooled_output"], "sequence_output": expected["sequence_output"][real]},
                tolerance)

        check("skip_padding eager, real positions", real_positions)
        if BACKEND == "jax":
            def refused():
                try:
                    Runner(model).jit_outputs(x)
                except ValueError as e:
                    return (0.0, 0.0, None) if "jax.jit" in str(e) else (float("inf"), 0.0, f"message: {e}")
                return float("inf"), 0.0, "skip_padding ran under jax.jit"
            check("skip_padding under jax.jit refused", refused)

    # dropout from given seeds: the same masks with and without remat, and masks at all
    from albert_tf.modeling.encoder import AlbertEncoder

    config = cases.config(name)
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.2
    dropped = AlbertEncoder(config)
    dropped.set_weights(model.get_weights())
    state = [ops.copy(v.value) for v in dropped.non_trainable_variables]
    runner = Runner(dropped)

    def at_state(fn):
        for variable, value in zip(dropped.non_trainable_variables, state, strict=True):
            variable.assign(value)
        return fn()

    def same_masks_with_remat():
        plain = at_state(lambda: runner.gradients(x))
        with dropped.runtime_options(remat=True):
            remat = at_state(lambda: runner.gradients(x))
        return compare(remat, plain, 1e-5, "all")

    def masks_drawn():
        trained = at_state(lambda: runner.outputs(x, training=True))["sequence_output"]
        differs = float(np.max(np.abs(trained - expected["sequence_output"])))
        return (0.0, 0.0, None) if differs > 0.01 else (float("inf"), 0.0, f"training outputs within {differs}")

    check("dropout: gradients with remat equal plain", same_masks_with_remat)
    check("dropout: masks drawn in training", masks_drawn)


def lamb_check(compiled):
    """albert_tf.modeling.lamb.lamb_update on this backend, 3 steps at lr 0.05 (eagerly, or each
    step under jax.jit), against the float64 numpy transcription of the release's formula."""
    from albert_tf.modeling.lamb import LambSettings, lamb_update

    def step(w, m, v, g, decay, trust):
        return lamb_update(w, g, m, v, 0.05, LambSettings(use_trust_ratio=trust), decay, trust)

    weights, grads = cases.lamb_problem()
    got, want = {}, {}
    for i, (decay, trust, _) in enumerate(cases.LAMB_VARIABLES):
        fn = step
        if compiled:
            import jax

            fn = jax.jit(step, static_argnums=(4, 5))
        w, m, v = (ops.convert_to_tensor(weights[i]),) + (ops.zeros(weights[i].shape),) * 2
        ref = (weights[i].astype("float64"), 0.0, 0.0)
        for step_grads in grads:
            w, m, v = fn(w, m, v, ops.convert_to_tensor(step_grads[i]), decay, trust)
            ref = cases.numpy_release_update(*ref, step_grads[i].astype("float64"), 0.05, decay, trust)
        got[str(i)], want[str(i)] = numpy(w), ref[0]
    return compare(got, want, 1e-6, "all")


def bench_check(output_dir):
    """benchmarks/jax_train_step_bench.py in this process at a tiny size (its suite check:
    both models, gradient accumulation in 2 slices); the test reads its results.json (benchmarks/
    is on PYTHONPATH, as on the tests' sys.path: pytest.ini)."""
    import jax_train_step_bench

    code = jax_train_step_bench.main(["--tiny", "--cases=albert_base:128", "--steps=1", "--repeats=1",
                                      "--peak_n=128", "--batch_size=8", "--accumulation=2",
                                      f"--output_dir={output_dir}"])
    return (0.0, 0.0, None) if code == 0 else (float("inf"), 0.0, f"the bench exited {code}")


def keras_hub_needs_tensorflow():
    """Why the bench cannot run in this worker, or None: keras-hub 0.25.1 (requirements-lower.txt, the
    newest on Keras 3.10) imports TensorFlow, which the worker blocks; requirements.txt's does not."""
    try:
        import keras_hub  # noqa: F401
    except ModuleNotFoundError as e:
        if e.name != "tensorflow":
            raise
        from importlib.metadata import version

        return f"keras-hub {version('keras-hub')} imports TensorFlow, which this worker blocks"
    return None


def main(data_dir, out_dir):
    checks = []

    def check(case, what, fn):
        start = time.process_time()
        try:
            diff, allowed, error = fn()
        except Exception as e:  # recorded, the other checks still run
            diff, allowed, error = float("inf"), 0.0, f"{type(e).__name__}: {e}"
        entry = {"case": case, "check": what, "diff": diff, "allowed": allowed,
                 "cpu_s": round(time.process_time() - start, 2)}
        if error or not diff <= allowed:
            entry["error"] = error or "difference above the allowed"
        checks.append(entry)

    for name in cases.CASES:
        data = np.load(os.path.join(data_dir, f"{name}.npz"))
        part = {p: {k[len(p) + 1:]: data[k] for k in data.files if k.startswith(p + "/")}
                for p in ("in", "out", "grad")}
        x, expected, gradients = part["in"], part["out"], part["grad"]
        tolerance = cases.tolerance(name)
        try:
            model = cases.load(name, os.path.join(data_dir, name))
        except Exception as e:
            check(name, "load", lambda e=e: (float("inf"), 0.0, f"{type(e).__name__}: {e}"))
            continue
        runner = Runner(model)
        check(name, "eager outputs", lambda: compare(runner.outputs(x), expected, tolerance))
        if BACKEND != "jax" or name in EAGER_JAX_GRADIENTS:
            check(name, "eager gradients", lambda: compare(runner.gradients(x), gradients, tolerance, "all"))
        if BACKEND == "jax":
            compiled = {}

            def jit_outputs():
                compiled["outputs"], compiled["gradients"] = runner.jit_outputs_and_gradients(x)
                return compare(compiled["outputs"], expected, tolerance)

            check(name, "jit outputs", jit_outputs)
            check(name, "jit gradients", lambda: compare(compiled["gradients"], gradients, tolerance, "all"))
        if name == "encoder":
            encoder_checks(name, model, x, expected, lambda what, fn: check(name, what, fn))
        directory = os.path.join(out_dir, name)
        os.makedirs(directory)
        cases.save(model, directory)

    check("lamb", "lamb_update eager, 3 steps", lambda: lamb_check(False))
    if BACKEND == "jax":
        check("lamb", "lamb_update under jax.jit, 3 steps", lambda: lamb_check(True))
        skipped = keras_hub_needs_tensorflow()
        if skipped:
            checks.append({"case": "bench", "check": "jax_train_step_bench at a tiny size", "skipped": skipped})
        else:
            check("bench", "jax_train_step_bench at a tiny size", lambda: bench_check(os.path.join(out_dir, "bench")))

    loaded = sorted(m for m, v in sys.modules.items() if m.split(".")[0] in BLOCKED and v is not None)
    result = {"backend": BACKEND, "tensorflow_blocked": not loaded, "tensorflow_modules": loaded, "checks": checks,
              "cpu_s": round(time.process_time(), 1)}
    with open(os.path.join(out_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
