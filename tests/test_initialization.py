"""Fresh weights: every weight its own truncated-normal draw at initializer_range (as the
release), biases 0, LayerNorm gamma 1 / beta 0, reproducible from the global seed.

A Keras 3 initializer returns the same values on every call, so one instance shared by
two weights makes the second a copy (or the first rows) of the first: position_embeddings
== word_embeddings[:P], the FFN output kernel == the intermediate kernel's numbers.
"""

import itertools
import math

import keras
import numpy as np
import pytest

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.embeddings import truncated_normal

STDDEV = 0.05  # not the default 0.02: the initializers must follow the config

# V*E, P*E, the [E, H] projection, [H, H], [H, I] and [I, H] kernels are all multiples of
# each other's rows, so any shared draw shows up as a prefix or a row-slice.
CONFIG = AlbertConfig(
    vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_hidden_groups=1,
    inner_group_num=1, num_attention_heads=4, intermediate_size=64, hidden_act="gelu",
    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=64,
    type_vocab_size=2, initializer_range=STDDEV, sharing="all",
)

# Truncated standard normal on [-2, 2]: std and kurtosis.
_Z = math.erf(2 / math.sqrt(2))  # P(|x| < 2)
_PHI2 = math.exp(-2.0) / math.sqrt(2 * math.pi)  # density at 2
_VAR = 1 - 2 * 2 * _PHI2 / _Z
TRUNCATED_STD = math.sqrt(_VAR)  # ~0.8796
_KURTOSIS = (3 - 2 * (2**3 + 3 * 2) * _PHI2 / _Z) / _VAR**2  # ~2.37


def _build(kind, config=CONFIG):
    if kind == "pretrainer":
        return AlbertPretrainer(config)
    if kind == "classifier":
        return AlbertClassifier(AlbertEncoder(config), num_classes=3, initializer_range=STDDEV)
    if kind == "unshared_pretrainer":
        return AlbertPretrainer(config.replace(sharing="none"))
    raise ValueError(kind)


def _random_weights(model):
    """path -> array for every weight drawn from the truncated normal (each variable once;
    the masked-LM head's tied table is the encoder's)."""
    out, seen = {}, set()
    for v in model.weights:
        if id(v) in seen:
            continue
        seen.add(id(v))
        if v.path.endswith(("kernel", "embeddings", "output_weights")):
            out[v.path] = np.asarray(v)
    return out


def _expected_random_paths(model):
    """Every weight of the model that is not a bias or LayerNorm parameter."""
    return sorted({v.path for v in model.weights}
                  - {v.path for v in model.weights if v.path.endswith(("bias", "gamma", "beta"))})


KINDS = ["pretrainer", "unshared_pretrainer", "classifier"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_weight_is_its_own_draw(kind):
    model = _build(kind)
    weights = _random_weights(model)
    assert sorted(weights) == _expected_random_paths(model)
    n_blocks = 2 if kind == "unshared_pretrainer" else 1
    # embeddings 3 + projection + n*(q, k, v, dense, intermediate, output_dense) + pooler + heads
    heads = {"pretrainer": 2, "unshared_pretrainer": 2, "classifier": 1}[kind]
    assert len(weights) == 3 + 1 + 6 * n_blocks + 1 + heads, sorted(weights)
    for (name_a, a), (name_b, b) in itertools.permutations(weights.items(), 2):
        flat_a, flat_b = a.ravel(), b.ravel()
        if flat_a.size > flat_b.size:
            continue
        # the shared-initializer bug: the smaller weight is the other's first values
        assert not np.array_equal(flat_a, flat_b[: flat_a.size]), (name_a, name_b)
        # ... or its first rows (position_embeddings vs word_embeddings[:P])
        if a.ndim == b.ndim == 2 and a.shape[1] == b.shape[1]:
            assert not np.array_equal(a, b[: a.shape[0]]), (name_a, name_b)
        # any copy, slice, transpose or permutation shares (nearly) all its values; two
        # independent draws share at most a few float32 values by coincidence
        shared = np.isin(flat_a, flat_b).sum()
        assert shared <= max(3, flat_a.size // 100), (name_a, name_b, shared, flat_a.size)


def test_the_bug_cases_are_not_copies():
    """The three cases the shared initializer produced, checked by name."""
    model = _build("pretrainer")
    emb = model.encoder.embeddings
    word = np.asarray(emb.word_embeddings)
    position, token_type = np.asarray(emb.position_embeddings), np.asarray(emb.token_type_embeddings)
    assert word.shape[0] > position.shape[0] > token_type.shape[0]
    assert not np.allclose(position, word[: position.shape[0]])
    assert not np.allclose(token_type, word[: token_type.shape[0]])
    assert not np.allclose(token_type, position[: token_type.shape[0]])
    ffn = model.encoder.ffn_layers[0]
    intermediate, output = np.asarray(ffn.intermediate.kernel), np.asarray(ffn.output_dense.kernel)
    assert intermediate.size == output.size
    assert not np.allclose(intermediate.ravel(), output.ravel())
    assert not np.allclose(intermediate, output.T)
    attention = model.encoder.attention_layers[0]
    kernels = [np.asarray(getattr(attention, n).kernel) for n in ("query", "key", "value", "dense")]
    for x, y in itertools.combinations(kernels, 2):
        assert not np.allclose(x, y)


def test_truncated_normal_returns_a_new_initializer_each_call():
    a, b = truncated_normal(STDDEV), truncated_normal(STDDEV)
    assert a is not b
    assert not np.allclose(np.asarray(a((50, 4))), np.asarray(b((50, 4))))


@pytest.mark.parametrize("kind", KINDS)
def test_weights_follow_a_truncated_normal_at_initializer_range(kind):
    model = _build(kind)
    expected_std = TRUNCATED_STD * STDDEV
    for name, w in _random_weights(model).items():
        n = w.size
        assert np.abs(w).max() <= 2 * STDDEV + 1e-7, name  # cut at two stddev
        # standard errors of the sample mean and std of n draws; 5 of them as tolerance
        mean_se = expected_std / math.sqrt(n)
        std_se = expected_std * math.sqrt((_KURTOSIS - 1) / (4 * n))
        assert abs(w.mean()) < 5 * mean_se, (name, w.mean(), mean_se)
        assert abs(w.std() - expected_std) < 5 * std_se, (name, w.std(), expected_std, std_se)


def test_truncated_std_constant():
    # the std of a 2-sigma truncated normal, from the closed form, against a large draw
    assert TRUNCATED_STD == pytest.approx(0.8796, abs=1e-4)
    draw = np.asarray(keras.random.truncated_normal((200_000,), stddev=1.0, seed=3))
    assert draw.std() == pytest.approx(TRUNCATED_STD, abs=5e-3)


@pytest.mark.parametrize("kind", KINDS)
def test_biases_and_layer_norms_start_at_zero_and_one(kind):
    model = _build(kind)
    checked = 0
    for v in model.weights:
        value = np.asarray(v)
        if v.path.endswith(("bias", "beta")):
            np.testing.assert_array_equal(value, 0, err_msg=v.path)
            checked += 1
        elif v.path.endswith("gamma"):
            np.testing.assert_array_equal(value, 1, err_msg=v.path)
            checked += 1
    assert checked == len(model.weights) - len(_random_weights(model))


def _all_weights(kind, seed):
    keras.utils.set_random_seed(seed)
    model = _build(kind)
    return [(v.path, np.asarray(v)) for v in model.weights]


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_model_other_seed_other_model(kind):
    first, again, other = _all_weights(kind, 7), _all_weights(kind, 7), _all_weights(kind, 8)
    assert len(first) == len(again) == len(other)
    for (path, a), (path_again, b), (path_other, c) in zip(first, again, other):
        assert path == path_again == path_other
        np.testing.assert_array_equal(a, b, err_msg=path)
        if path.endswith(("kernel", "embeddings", "output_weights")):
            assert not np.allclose(a, c), path  # every random weight changes with the seed
        else:
            np.testing.assert_array_equal(a, c, err_msg=path)  # zeros and ones stay
