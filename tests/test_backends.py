"""The ALBERT models on Keras' JAX and PyTorch backends, where TensorFlow cannot be imported,
against the TensorFlow backend on the same weights (issue 53).

The pytest process (TensorFlow) builds the tiny models of tests/backend_cases.py (encoder,
pretraining heads, classifier, SQuAD v1 and v2, multiple choice; sharing modes "all",
"attention", "ffn", "none"; groups; remat; mixed_bfloat16), saves each as its pretrained
directory with its inputs, outputs and gradients; one process per backend
(tests/backends_worker.py, TensorFlow blocked) loads them, compares eager and jax.jit outputs
and gradients and saves them back, and TensorFlow reads those files back to the same outputs.

A backend that is not installed skips its tests, and fails them under CI=true; except torch where
requirements-torch.txt does not install it (its marker: Python 3.11 alone), where its tests skip.
"""

import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import backend_cases as cases

# every test reads a worker process on its backend: Keras reads KERAS_BACKEND when it starts, and the
# worker must run where TensorFlow cannot be imported
pytestmark = pytest.mark.real_process
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BACKENDS = ("jax", "torch")
def _xla_flags():
    """One thread, and XLA's cheapest compile: the models are tiny and compiling (each jitted
    function, and each op run eagerly) is most of the JAX process's time. The classic CPU emitters
    (use_fusion_emitters=false) compile in well under half the time of the MLIR fusion emitters;
    the flag is gone from jaxlib 0.12 (Python 3.12 and 3.13's pin, requirements.txt), whose XLA
    stops on a flag it does not know, so only an older jaxlib (Python 3.11's 0.10) is given it."""
    import importlib.metadata

    flags = ["--xla_cpu_multi_thread_eigen=false", "--xla_backend_optimization_level=0",
             "--xla_llvm_disable_expensive_passes=true", "--xla_cpu_parallel_codegen_split_count=1"]
    try:
        jaxlib = tuple(int(part) for part in importlib.metadata.version("jaxlib").split(".")[:2])
    except importlib.metadata.PackageNotFoundError:
        jaxlib = None
    return " ".join(flags + (["--xla_cpu_use_fusion_emitters=false"] if jaxlib and jaxlib < (0, 11) else []))


XLA_FLAGS = _xla_flags()


def _torch_below():
    """(major, minor) of requirements-torch.txt's torch line's marker, `python_version < "X.Y"`: the
    interpreters below it are those `make venv` installs torch on."""
    with open(os.path.join(ROOT, "requirements-torch.txt"), encoding="utf-8") as f:
        (line,) = [line for line in f if line.startswith("torch==")]
    match = re.fullmatch(r'torch==\S+; python_version < "(\d+)\.(\d+)"', line.strip())
    assert match, f"requirements-torch.txt: expected torch==VERSION; python_version < \"X.Y\", got {line!r}"
    return int(match[1]), int(match[2])


TORCH_BELOW = _torch_below()


@pytest.fixture(scope="module")
def tensorflow_side(tmp_path_factory):
    """DATA_DIR with each case's pretrained directory and <case>.npz (inputs, TensorFlow's
    outputs in inference and gradients of `cases.scalar` in training)."""
    import tensorflow as tf

    data = tmp_path_factory.mktemp("backends") / "tensorflow"
    for seed, name in enumerate(cases.CASES, start=100):
        model = cases.build(name, seed)
        directory = data / name
        directory.mkdir(parents=True)
        cases.save(model, str(directory))
        x = cases.inputs(name)
        outputs = _numpy(model(x, training=False))
        with tf.GradientTape() as tape:
            loss = cases.scalar(model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        arrays = {f"in/{k}": v for k, v in x.items()}
        arrays.update({f"out/{k}": v for k, v in outputs.items()})
        # a weight the scalar does not reach (the pooler under a SQuAD head): zeros
        arrays.update({f"grad/{v.path}": np.zeros(v.shape, "float32") if g is None else tf.convert_to_tensor(g).numpy()
                       for v, g in zip(model.trainable_variables, grads, strict=True)})
        assert len(arrays) == len(x) + len(outputs) + len(model.trainable_variables)  # variable paths unique
        np.savez(data / f"{name}.npz", **arrays)
    return data


def _numpy(outputs):
    return {k: np.asarray(v.numpy().astype("float32") if "float" in str(v.dtype) else v.numpy())
            for k, v in cases.flatten(outputs).items()}


@pytest.fixture(scope="module", params=BACKENDS)
def backend_run(request):
    """(backend, OUT_DIR, results.json) of one worker process on that backend (TensorFlow's side is
    built after the checks: a skipped backend costs nothing)."""
    backend = request.param
    if importlib.util.find_spec(backend) is None:
        if backend == "torch" and sys.version_info[:2] >= TORCH_BELOW:
            below = ".".join(map(str, TORCH_BELOW))
            pytest.skip(f"torch is installed below Python {below} alone (requirements-torch.txt: the CPU build "
                        f"this project's machines hold is for CPython 3.11); this is {platform.python_version()}")
        message = f"{backend} is not installed (requirements.txt; README 'Keras backends')"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    tensorflow_side = request.getfixturevalue("tensorflow_side")
    out = tensorflow_side.parent / backend
    out.mkdir()
    env = dict(os.environ, KERAS_BACKEND=backend,
               PYTHONPATH=os.pathsep.join([ROOT] + [os.path.join(ROOT, d) for d in ("tests", "benchmarks")]),
               JAX_PLATFORMS="cpu", OMP_NUM_THREADS="1",
               XLA_FLAGS=XLA_FLAGS)
    start = time.monotonic()
    process = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "backends_worker.py"), str(tensorflow_side),
                              str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stderr[-4000:]
    with open(out / "results.json", encoding="utf-8") as f:
        results = json.load(f)
    results["wall_s"] = round(time.monotonic() - start, 1)
    print(f"{backend} worker: {results['cpu_s']} CPU s, {results['wall_s']} s wall")
    return backend, out, results


def test_models_on_backend_equal_tensorflow(backend_run):
    """Every case's outputs (eager; on JAX also jax.jit) and gradients (PyTorch eager; JAX under
    jax.jit, the encoder's eagerly too) within the case's bound of TensorFlow's (float32 1e-5,
    mixed_bfloat16 2e-2 of the scale; integer outputs equal); padding skipping right eagerly and
    refused under jax.jit; seeded dropout the same with remat; the keras.ops LAMB step equal to
    numpy's; TensorFlow never imported there."""
    backend, _, results = backend_run
    assert results["backend"] == backend
    assert results["tensorflow_blocked"], results["tensorflow_modules"]
    failed = [c for c in results["checks"] if "error" in c]
    assert not failed, json.dumps(failed, indent=1)
    done = {(c["case"], c["check"]) for c in results["checks"]}
    expected = {(name, "eager outputs") for name in cases.CASES} | {("encoder", "eager gradients")}
    expected |= {("encoder", "skip_padding eager, real positions"), ("encoder", "dropout: masks drawn in training"),
                 ("encoder", "dropout: gradients with remat equal plain"), ("lamb", "lamb_update eager, 3 steps")}
    if backend == "jax":
        expected |= {(name, what) for name in cases.CASES for what in ("jit outputs", "jit gradients")}
        expected |= {("encoder", "skip_padding under jax.jit refused"),
                     ("lamb", "lamb_update under jax.jit, 3 steps"),
                     ("bench", "jax_train_step_bench at a tiny size")}
    else:
        expected |= {(name, "eager gradients") for name in cases.CASES}
    assert expected <= done, sorted(expected - done)


def test_jax_train_step_bench_runs_both_models_where_tensorflow_is_missing(backend_run):
    """benchmarks/jax_train_step_bench.py at a tiny size in the JAX worker (TensorFlow blocked):
    albert_tf's and keras-hub's steps, each lowering its loss on the fixed batch over its three
    updates (so the jitted LAMB step trains), rates and the peak fraction recorded."""
    backend, out, results = backend_run
    if backend != "jax":
        pytest.skip("the benchmark runs on JAX")
    for skipped in (c["skipped"] for c in results["checks"] if "skipped" in c):
        pytest.skip(skipped)
    with open(out / "bench" / "results.json", encoding="utf-8") as f:
        bench = json.load(f)
    assert bench["settings"]["accumulation"] == 2 and bench["settings"]["platform"] == "cpu"
    assert bench["not_started"] == []
    rows = {r["model"]: r for r in bench["results"]}
    assert set(rows) == {"albert_tf", "keras_hub"}
    for name, row in rows.items():
        assert row["case"] == "albert_base:128" and row["batch_size"] == 8, row
        assert row["loss_last_step"] < row["loss_first_step"], (name, row)
        assert row["examples_per_second"] > 0 and 0 < row["fraction_of_matmul_peak"], (name, row)
    # the same sizes on both sides: albert_tf has the sentence-order head and the pooler on top
    assert rows["albert_tf"]["parameters"] > rows["keras_hub"]["parameters"]


def test_weights_saved_on_backend_load_on_tensorflow(backend_run, tensorflow_side):
    """The pretrained directory each case was saved back to on the backend: the same
    .weights.h5 layout (variable paths and shapes) as TensorFlow's, and TensorFlow reads it to
    the outputs of the weights it wrote."""
    from albert_tf.storage.weights_file import weights_file_variables

    _, out, _ = backend_run
    for name in cases.CASES:
        model = cases.load(name, str(out / name))
        file_name = cases.weights_file(model)
        assert weights_file_variables(out / name / file_name) == \
            weights_file_variables(tensorflow_side / name / file_name), name
        expected = np.load(tensorflow_side / f"{name}.npz")
        outputs = _numpy(model(cases.inputs(name), training=False))
        for key, value in outputs.items():
            np.testing.assert_array_equal(value, expected[f"out/{key}"], err_msg=f"{name} {key}")
