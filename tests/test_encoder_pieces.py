"""The encoder's run-time pieces (modeling/encoder_runtime.py) beside its plain forward: each
piece on or off gives the same outputs at real positions and the same gradients, and the
default pieces compute what the encoder computed before they moved out of its forward.

The reference is commit d5fa711's encoder (before the pieces moved out), extracted from this
checkout's git history and run by tests/encoder_reference.py in a process of its own on this
machine, so both sides sum in this CPU's order; without that history the test skips (fails
under CI=true).
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import encoder_reference
from conftest import extract_archive, random_inputs

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.modeling.runtime import EncoderRuntime

HERE = os.path.dirname(os.path.abspath(__file__))
BASE_COMMIT = "d5fa711"  # the last commit whose encoder ran its pieces inside the forward
PIECES = ("rows", "skip_padding", "cast_once", "ordered_gradients", "remat", "dropout_seeds")
TOLERANCE = 1e-6  # float32, per array: max |difference| <= TOLERANCE * max(1, max |reference|)


def base_reference(tmp_path, v0_2_0_dir):
    """encoder_reference's record computed by BASE_COMMIT's albert_tf (git archive), or a skip
    (a failure under CI=true) where this checkout has no such commit."""
    base = tmp_path / "base"
    base.mkdir()
    archive = subprocess.run(["git", "archive", "--format=tar", BASE_COMMIT, "albert_tf"], cwd=os.path.dirname(HERE),
                             capture_output=True)
    if archive.returncode:
        message = f"no git history with commit {BASE_COMMIT} here: {archive.stderr.decode()[-300:]}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
    output = tmp_path / "reference.npz"
    done = subprocess.run([sys.executable, os.path.join(HERE, "encoder_reference.py"), f"--v0_2_0={v0_2_0_dir}",
                           f"--output={output}"], env=dict(os.environ, PYTHONPATH=str(base)), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(output) as data:
        return dict(data)


@pytest.mark.real_process  # the base commit's albert_tf runs in a process of its own
def test_default_path_is_bit_equal_to_the_base_commit(tmp_path):
    extract_archive(os.path.join(HERE, "data", "v0_2_0", "fixtures.tar.xz"), tmp_path)
    want = base_reference(tmp_path, str(tmp_path / "v0_2_0"))
    for case, (encoder, inputs) in encoder_reference.cases(str(tmp_path / "v0_2_0")).items():
        assert encoder.runtime == EncoderRuntime()
        got = encoder_reference.record(case, encoder_reference.values(encoder, inputs))
        for group in ("inference", "training", "gradient"):
            sums = f"{case}/{group}/sums"
            assert got[f"{case}/{group}/sha256"] == want[f"{case}/{group}/sha256"], (
                sums, np.abs(got[sums] - want[sums]).max())


def config():
    """albert_tiny (E 16 != H 32: the projection) with 3 layers sharing one pair, no dropout."""
    return AlbertConfig.from_preset("albert_tiny").replace(num_hidden_layers=3, num_hidden_groups=1,
                                                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def outputs_and_gradients(encoder, inputs, runtime):
    """The outputs (zeros at padded positions) and the gradients of a loss on the real positions,
    in training, with the run-time pieces of `runtime`."""
    real = inputs["input_mask"][..., None] > 0
    probe = np.random.default_rng(1).normal(size=real.shape[:2] + (encoder.config.hidden_size,)).astype("float32")
    encoder._runtime = runtime
    with tf.GradientTape() as tape:
        out = encoder(inputs, training=True)
        states = [tf.where(real, x, 0.0) for x in out["encoder_outputs"]]
        loss = tf.reduce_sum(states[-1] * probe) + tf.reduce_sum(out["pooled_output"] ** 2)
    grads = tape.gradient(loss, encoder.trainable_variables)
    values = {f"encoder_outputs_{i}": x for i, x in enumerate(states)}
    values["pooled_output"] = out["pooled_output"]
    values.update({v.path: tf.convert_to_tensor(g) for v, g in zip(encoder.trainable_variables, grads)})
    return {k: np.asarray(v) for k, v in values.items()}


def assert_agree(got, want, what):
    assert got.keys() == want.keys()
    for key, reference in want.items():
        difference = np.abs(got[key] - reference).max()
        assert difference <= TOLERANCE * max(1.0, np.abs(reference).max()), (what, key, difference)


@pytest.mark.parametrize("piece", PIECES)
def test_each_piece_on_and_off_gives_the_same_outputs_and_gradients(piece):
    """From the plain forward (every piece off) and from the default pieces, switching one piece
    changes nothing beyond float rounding (float32, dropout off, real positions)."""
    encoder = AlbertEncoder(config())
    inputs = random_inputs(config(), batch=3, length=12, pad_from=(None, 7, 2))
    plain = outputs_and_gradients(encoder, inputs, EncoderRuntime.plain())
    assert_agree(outputs_and_gradients(encoder, inputs, EncoderRuntime.plain(**{piece: True})), plain, "plain")
    default = EncoderRuntime()
    assert_agree(outputs_and_gradients(encoder, inputs, default.replace(**{piece: not getattr(default, piece)})),
                 outputs_and_gradients(encoder, inputs, default), "default")
    assert_agree(outputs_and_gradients(encoder, inputs, default), plain, "default against plain")


def test_the_plain_forward_calls_keras_layers_as_they_are():
    """Every piece off: each Dense a Keras layer on [B, T, H] (a tensordot, not a matmul of rows), and each
    Dropout layer drawing its masks from its own generator (with the seeds, one draw of the
    first generator per forward)."""
    cfg = config().replace(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    encoder = AlbertEncoder(cfg)
    inputs = random_inputs(cfg)
    spec = {k: tf.TensorSpec([None, None], tf.int32) for k in inputs}
    for runtime, rows in ((EncoderRuntime(), True), (EncoderRuntime.plain(), False)):
        encoder._runtime = runtime
        graph = tf.function(lambda x: encoder(x)["sequence_output"]).get_concrete_function(spec).graph
        tensordots = [op for op in graph.get_operations() if "Tensordot" in op.name and "embeddings" not in op.name]
        assert bool(tensordots) is not rows, runtime
    generators = [layer.seed_generator for layer in encoder.dropout_layers()]
    for runtime, drawn in ((EncoderRuntime(), [1, 0, 0, 0]), (EncoderRuntime.plain(), [1, 3, 3, 3])):
        encoder._runtime = runtime
        before = [int(g.state[1]) for g in generators]
        training, inference = (np.asarray(encoder(inputs, training=t)["sequence_output"]) for t in (True, False))
        assert np.abs(training - inference).max() > 1e-3  # dropout acts
        assert [int(g.state[1]) - b for g, b in zip(generators, before)] == drawn, runtime


def test_remat_draws_the_seeds_whatever_dropout_seeds_says():
    """A rematerialized application recomputes its forward with its first pass's masks: with
    dropout on and `dropout_seeds` off, remat still draws the seeds, so its outputs and gradients
    are the default forward's from the same generator state."""
    cfg = config().replace(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.2)
    encoder = AlbertEncoder(cfg)
    inputs = random_inputs(cfg)
    results = []
    for runtime in (EncoderRuntime(), EncoderRuntime(remat=True, dropout_seeds=False)):
        encoder.dropout_layers()[0].seed_generator.state.assign([5, 0])
        results.append(outputs_and_gradients(encoder, inputs, runtime))
    assert_agree(results[1], results[0], "remat")


def test_pieces_are_switches_of_the_runtime():
    assert EncoderRuntime.plain() == EncoderRuntime(rows=False, cast_once=False, ordered_gradients=False,
                                                    dropout_seeds=False)
    assert EncoderRuntime.plain(remat=True).remat
    with pytest.raises(TypeError, match="unknown encoder run-time option"):
        EncoderRuntime.plain(rowz=True)
