"""LAMB and AdamWeightDecay against a NumPy transcription of the release's formula."""

import re

import numpy as np
import pytest

from albert_tf import AlbertPretrainer
from albert_tf.training.optimizer import LAMB, AdamWeightDecay, create_optimizer
from albert_tf.training.schedules import WarmupPolynomialDecay

EXCLUDED = re.compile("LayerNorm|layer_norm|bias")


def numpy_release_update(w, m, v, g, lr, excluded, trust, b1=0.9, b2=0.999, eps=1e-6, wd=0.01):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    u = m / (np.sqrt(v) + eps)
    if not excluded:
        u = u + wd * w
    r = 1.0
    if trust and not excluded:
        wn, un = np.linalg.norm(w), np.linalg.norm(u)
        r = wn / un if wn > 0 and un > 0 else 1.0
    return w - lr * r * u, m, v


@pytest.mark.parametrize("cls, trust", [(LAMB, True), (AdamWeightDecay, False)])
def test_matches_numpy_over_five_steps(tiny_config, cls, trust):
    model = AlbertPretrainer(tiny_config)
    variables = model.trainable_variables
    schedule = WarmupPolynomialDecay(0.05, num_train_steps=10, num_warmup_steps=2)
    optimizer = cls(learning_rate=schedule)
    optimizer.build(variables)
    rng = np.random.default_rng(0)
    state = {v.path: (np.asarray(v, np.float64), np.zeros(v.shape), np.zeros(v.shape)) for v in variables}
    # one variable starts at zero: its trust ratio must fall back to 1
    variables[-1].assign(np.zeros(variables[-1].shape, "float32"))
    state[variables[-1].path] = (np.zeros(variables[-1].shape), np.zeros(variables[-1].shape),
                                 np.zeros(variables[-1].shape))
    for step in range(5):
        grads = [rng.normal(scale=0.1, size=v.shape).astype("float32") for v in variables]
        lr = float(schedule(step))
        optimizer.apply(grads, variables)
        for v, g in zip(variables, grads):
            w, m, s = state[v.path]
            state[v.path] = numpy_release_update(w, m, s, g.astype(np.float64), lr, bool(EXCLUDED.search(v.path)),
                                                 trust)
    assert int(optimizer.iterations) == 5
    for v in variables:
        np.testing.assert_allclose(np.asarray(v), state[v.path][0], atol=1e-6, rtol=0, err_msg=v.path)


@pytest.mark.parametrize("trust", [True, False])
def test_the_functional_update_follows_numpy_and_the_optimizer(tiny_config, trust):
    """modeling.lamb.lamb_update (keras.ops, what the JAX benchmark steps with) over the same
    three steps as the optimizer: the NumPy formula's weights and the optimizer's."""
    from albert_tf.modeling.lamb import LambSettings, lamb_update

    model = AlbertPretrainer(tiny_config)
    variables = model.trainable_variables
    settings = LambSettings(use_trust_ratio=trust)
    optimizer = (LAMB if trust else AdamWeightDecay)(learning_rate=0.05)
    optimizer.build(variables)
    rng = np.random.default_rng(1)
    start = {v.path: np.asarray(v) for v in variables}
    functional = {p: (w, np.zeros_like(w), np.zeros_like(w)) for p, w in start.items()}
    reference = {p: (w.astype(np.float64), np.zeros(w.shape), np.zeros(w.shape)) for p, w in start.items()}
    for _ in range(3):
        grads = [rng.normal(scale=0.1, size=v.shape).astype("float32") for v in variables]
        optimizer.apply(grads, variables)
        for v, g in zip(variables, grads):
            decays, adapts = settings.flags(v.path)
            assert decays == (not EXCLUDED.search(v.path)) and adapts == (trust and decays), v.path
            functional[v.path] = tuple(np.asarray(t) for t in lamb_update(*(functional[v.path][:1]), g,
                                                                          *functional[v.path][1:], 0.05, settings,
                                                                          decays, adapts))
            w, m, s = reference[v.path]
            reference[v.path] = numpy_release_update(w, m, s, g.astype(np.float64), 0.05,
                                                     bool(EXCLUDED.search(v.path)), trust)
    moved = [p for p in start if np.abs(functional[p][0] - start[p]).max() > 1e-3]
    assert len(moved) == len(start)
    for v in variables:
        np.testing.assert_allclose(functional[v.path][0], reference[v.path][0], atol=1e-6, rtol=0, err_msg=v.path)
        np.testing.assert_array_equal(functional[v.path][0], np.asarray(v), err_msg=v.path)


def test_exclusions_follow_full_paths(tiny_config):
    model = AlbertPretrainer(tiny_config)
    optimizer = LAMB()
    optimizer.build(model.trainable_variables)
    by_path = {v.path: v for v in model.trainable_variables}
    for path in ("embeddings/LayerNorm/gamma", "group_0_inner_group_0_attention/query/bias",
                 "predictions/output_bias", "predictions/transform_LayerNorm/beta", "seq_relationship/output_bias"):
        assert not optimizer.decays(by_path[path]) and not optimizer.adapts(by_path[path]), path
    for path in ("embeddings/word_embeddings", "group_0_inner_group_0_ffn/intermediate/kernel",
                 "seq_relationship/output_weights", "pooler/kernel"):
        assert optimizer.decays(by_path[path]) and optimizer.adapts(by_path[path]), path
    slots = {v.path.split("/")[-1] for v in optimizer.variables}
    assert any("adam_m" in s for s in slots) and any("adam_v" in s for s in slots)


def test_create_optimizer():
    assert isinstance(create_optimizer("lamb", 0.1), LAMB)
    assert isinstance(create_optimizer("adamw", 0.1), AdamWeightDecay)
    with pytest.raises(ValueError, match="--optimizer must be lamb or adamw"):
        create_optimizer("sgd", 0.1)


def test_schedule_hand_computed():
    s = WarmupPolynomialDecay(1.0, num_train_steps=100, num_warmup_steps=10)
    expected = {0: 0.0, 1: 0.1, 9: 0.9, 10: 0.9, 50: 0.5, 99: 0.01, 100: 0.0, 150: 0.0}
    for step, lr in expected.items():
        assert float(s(step)) == pytest.approx(lr, abs=1e-7), step
    shifted = WarmupPolynomialDecay(2.0, num_train_steps=100, num_warmup_steps=10, start_warmup_step=20, poly_power=2.0)
    assert float(shifted(25)) == pytest.approx(2.0 * 5 / 10)
    assert float(shifted(30)) == pytest.approx(2.0 * (1 - 0.3) ** 2)
    assert float(shifted(5)) == 0.0  # the release's formula went negative before warmup starts
    no_warmup = WarmupPolynomialDecay(1.0, num_train_steps=4)
    assert [round(float(no_warmup(i)), 6) for i in range(5)] == [1.0, 0.75, 0.5, 0.25, 0.0]


def test_under_model_fit_the_replicas_gradients_are_summed():
    """Outside the driver (which sums and clips itself, then calls apply_summed) the
    optimizers all-reduce like any Keras optimizer: model.fit on 2 replicas x 4 examples
    trains exactly as 1 x 8 (the CPU split in two logical devices: conftest)."""
    from distributed_helpers import fit_mirrored_vs_one_device

    data = fit_mirrored_vs_one_device()
    assert data["mirrored"]["replicas"] == 2 and data["one_device"]["replicas"] == 1
    np.testing.assert_allclose(data["mirrored"]["losses"], data["one_device"]["losses"], rtol=1e-5)
    assert data["mirrored"]["weights"] == pytest.approx(data["one_device"]["weights"], rel=1e-5)


@pytest.mark.parametrize("cls", [LAMB, AdamWeightDecay])
def test_embedding_gradients_with_repeated_tokens_update_as_their_dense_sum(cls):
    """An embedding lookup's gradient is a tf.IndexedSlices with one row per occurrence: a
    token seen twice gives two rows. The update must be the dense gradient's (rows summed
    first), as the release's dense tf.square computes it: squaring row by row would give v
    the sum of the squares and the token a larger step (found fine-tuning against keras-hub)."""
    import keras
    import tensorflow as tf

    from albert_tf.training.distribution import sum_and_clip

    rows = tf.constant([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.5, 0.5, 0.5]])
    sparse = tf.IndexedSlices(rows, tf.constant([1, 1, 3]), tf.constant([5, 3]))
    dense = tf.convert_to_tensor(sparse)
    assert dense.numpy()[1].tolist() == [2.0, 4.0, 6.0]
    results = []
    for gradient in (dense, sparse):
        variable = keras.Variable(np.ones((5, 3), "float32"), name="word_embeddings")
        optimizer = cls(learning_rate=0.1)
        for _ in range(3):
            optimizer.apply([gradient], [variable])
        results.append(np.asarray(variable))
    np.testing.assert_allclose(results[1], results[0], rtol=0, atol=1e-6)
    # Keras' own clipping (model.fit, keras-hub) sees the dense norm too: at clipnorm 6 the
    # summed gradient (norm 7.5) is clipped, its rows (norm 5.4) would not be; a second step
    # on row 3 then shows the first step's scale in Adam's history
    second = tf.constant([[0.0] * 3] * 3 + [[1.0, -1.0, 2.0], [0.0] * 3])
    clipped_steps = []
    for gradient in (dense, sparse):
        variable = keras.Variable(np.ones((5, 3), "float32"), name="word_embeddings")
        optimizer = cls(learning_rate=0.1, global_clipnorm=6.0)
        optimizer.apply([gradient], [variable])
        optimizer.apply([second], [variable])
        clipped_steps.append(np.asarray(variable))
    np.testing.assert_allclose(clipped_steps[1], clipped_steps[0], rtol=0, atol=1e-6)
    # the driver's clipping: the norm of the summed gradient, not of the rows
    strategy = tf.distribute.get_strategy()
    clipped = strategy.run(lambda: sum_and_clip([sparse], 1.0))[0]
    np.testing.assert_allclose(np.asarray(clipped), dense.numpy() / np.linalg.norm(dense.numpy()), atol=1e-6)


def _ancestors(op):
    """Every op `op` depends on, through data and control inputs."""
    seen, stack = set(), [op]
    while stack:
        current = stack.pop()
        for parent in [t.op for t in current.inputs] + list(current.control_inputs):
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return seen


@pytest.mark.parametrize("cls, trust", [(LAMB, True), (AdamWeightDecay, False)])
def test_in_a_graph_each_update_waits_for_the_previous_one_and_computes_the_same(cls, trust):
    """In a tf.function (the driver's step) the large variables' updates run one after
    another: each one's delta depends on the previous one's (so one large variable's
    temporaries are alive at a time: issue 31's memory), small ones update freely; the
    values are the release's, as in eager mode."""
    import keras
    import tensorflow as tf

    rng = np.random.default_rng(1)
    shapes = {"kernel_a": (6, 5), "bias": (5,), "kernel_b": (5, 7), "LayerNorm_gamma": (7,)}
    variables = [keras.Variable(rng.normal(size=s).astype("float32"), name=n) for n, s in shapes.items()]
    optimizer = cls(learning_rate=0.01)
    optimizer.build(variables)
    grads = [tf.constant(rng.normal(scale=0.1, size=v.shape).astype("float32")) for v in variables]
    state = {v.path: (np.asarray(v, np.float64), np.zeros(v.shape), np.zeros(v.shape)) for v in variables}

    def deltas_of(step):
        graph = step.get_concrete_function().graph
        deltas = [op.inputs[1].op for op in graph.get_operations() if op.type == "AssignSubVariableOp"]
        assert len(deltas) == len(variables)
        return deltas

    # these variables are under the default chain_min_size: their updates are independent
    deltas = deltas_of(tf.function(lambda: optimizer.apply(grads, variables)))
    assert not any(earlier in _ancestors(later) for earlier, later in zip(deltas, deltas[1:]))
    optimizer.chain_min_size = 0  # as if every variable were large
    step = tf.function(lambda: optimizer.apply(grads, variables))
    deltas = deltas_of(step)  # the trace that step() runs below
    for earlier, later in zip(deltas, deltas[1:]):
        assert earlier in _ancestors(later), (earlier.name, later.name)
    assert deltas[-1] not in _ancestors(deltas[0])
    if trust:  # and within one update the stages run in turn: g^2 (v), w^2 (|w|), u^2 (|u|)
        previous = set()
        for delta, variable in zip(deltas, variables, strict=True):  # the graph updates in the list's order
            ops_of_update = _ancestors(delta) - previous
            squares = sorted((op for op in ops_of_update if op.type == "Square"),
                             key=lambda op: len(_ancestors(op)))
            assert len(squares) == (3 if optimizer.adapts(variable) else 1), (variable.path,
                                                                              [op.name for op in squares])
            for earlier, later in zip(squares, squares[1:]):
                assert earlier in _ancestors(later), (earlier.name, later.name)
            previous |= ops_of_update | {delta}

    for _ in range(2):
        step()
        for v, g in zip(variables, grads):
            w, m, s = state[v.path]
            state[v.path] = numpy_release_update(w, m, s, np.asarray(g, np.float64), 0.01,
                                                 bool(EXCLUDED.search(v.path)), trust)
    for v in variables:
        np.testing.assert_allclose(np.asarray(v), state[v.path][0], atol=1e-6, rtol=0, err_msg=v.path)
