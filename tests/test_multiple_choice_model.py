"""AlbertForMultipleChoice and its head: [B, C, T] inputs for any C and T, the release's
variables (race_utils.create_model), logits against NumPy from the pooled output,
dropout only in training, the loss, config round trip, `.keras` save/load, pretrained
directories and their errors."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import random_inputs
from harness import (check_config_round_trip, check_fine_tuned_directory, check_saved_model_round_trip,
                     new_heads_from_pretrained, to_numpy)

from albert_tf import AlbertConfig, AlbertEncoder, AlbertForMultipleChoice, AlbertPretrainer
from albert_tf.convert.api import tf1_values
from albert_tf.modeling.multiple_choice import MULTIPLE_CHOICE_WEIGHTS, MultipleChoiceHead, multiple_choice_loss
from albert_tf.storage.report import CheckpointMismatchError

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def no_dropout(config):
    return config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def randomize(layer, seed=1):
    """Known, non-default weights everywhere (biases and LayerNorms included)."""
    rng = np.random.default_rng(seed)
    for v in layer.weights:
        v.assign(rng.normal(scale=0.3, size=v.shape).astype("float32") + (1.0 if "gamma" in v.path else 0.0))
    return layer


def mc_inputs(config, batch=2, options=4, length=12, seed=0):
    """[B, C, T] inputs: random_inputs of B*C sequences (some padded), folded by option."""
    flat = random_inputs(config, batch=batch * options, length=length, seed=seed, pad_from=(None, 7, 3, 10))
    return {k: v.reshape(batch, options, length) for k, v in flat.items()}


def pooled_of(model, inputs):
    """The encoder's pooled output of every option, [B, C, H], computed option by option."""
    batch, options, _ = inputs["input_word_ids"].shape
    return np.stack([np.stack([to_numpy(model.encoder({k: inputs[k][b, c][None] for k in ENCODER_KEYS},
                                                      training=False))["pooled_output"][0]
                               for c in range(options)]) for b in range(batch)])


# --- variables -----------------------------------------------------------------------------


def test_head_variables_are_the_releases(tiny_config):
    h = tiny_config.hidden_size
    model = AlbertForMultipleChoice(tiny_config)
    assert [(w.path, tuple(w.shape)) for w in model.head.weights] == [
        ("multiple_choice/output_weights", (1, h)), ("multiple_choice/output_bias", (1,))]
    assert model.head.name == "multiple_choice"
    assert [w.path for w in model.weights] == [w.path for w in model.encoder.weights] + [
        "multiple_choice/output_weights", "multiple_choice/output_bias"]
    # initial values: truncated normal (|x| <= 2 stddev) weights of stddev initializer_range (a
    # normal cut at 2 stddev has standard deviation 0.880 stddev; 32 values here), zero bias
    weights = np.asarray(model.head.output_weights)
    assert 0 < np.abs(weights).max() <= 2 * tiny_config.initializer_range + 1e-7
    assert 0.7 < weights.std() / tiny_config.initializer_range / 0.880 < 1.2, weights.std()
    np.testing.assert_array_equal(np.asarray(model.head.output_bias), 0.0)

    # the converter's rename: the release's top-level names, shapes and numbers
    randomize(model.head, seed=2)
    names = tf1_values(model)
    encoder_names = tf1_values(model.encoder)
    head = {n: v for n, v in names.items() if n not in encoder_names}
    assert sorted(head) == ["output_bias", "output_weights"]
    np.testing.assert_array_equal(head["output_weights"], np.asarray(model.head.output_weights))
    np.testing.assert_array_equal(head["output_bias"], np.asarray(model.head.output_bias))
    assert "bert/pooler/dense/kernel" in names  # the head reads the pooled output


def test_every_weight_has_its_own_initializer(tiny_config):
    keras.utils.set_random_seed(7)
    model = AlbertForMultipleChoice(tiny_config)
    head = np.asarray(model.head.output_weights)[0]  # [H]
    # no other truncated-normal weight repeats the head's draw (a shared initializer
    # instance would: Keras 3 seeded initializers return the same values on every call)
    for w in model.encoder.weights:
        value = np.asarray(w).reshape(-1)
        if value.size >= head.size and np.any(value):
            assert not np.array_equal(value[:head.size], head), w.path
    # every [.., H]-sized kernel differs from every other
    kernels = [np.asarray(w).reshape(-1) for w in model.weights if w.path.endswith(("kernel", "output_weights"))]
    starts = [k[:8].tobytes() for k in kernels]
    assert len(set(starts)) == len(starts)
    # two heads built one after the other differ; the same seed rebuilds the same head
    other = MultipleChoiceHead(tiny_config.hidden_size)
    other.build((None, None, tiny_config.hidden_size))
    assert not np.array_equal(np.asarray(other.output_weights)[0], head)
    keras.utils.set_random_seed(7)
    again = AlbertForMultipleChoice(tiny_config)
    np.testing.assert_array_equal(np.asarray(again.head.output_weights)[0], head)


# --- outputs -------------------------------------------------------------------------------


@pytest.mark.parametrize("options, length", [(2, 12), (4, 12), (4, 7), (3, 16)])
def test_logits_are_the_pooled_output_times_the_head(tiny_config, options, length):
    config = no_dropout(tiny_config)
    model = randomize(AlbertForMultipleChoice(config), seed=3)
    inputs = mc_inputs(config, batch=2, options=options, length=length)
    out = to_numpy(model(inputs))
    assert set(out) == {"logits"}
    assert out["logits"].shape == (2, options) and out["logits"].dtype == np.float32
    pooled = pooled_of(model, inputs).astype("float64")  # [B, C, H]
    w = np.asarray(model.head.output_weights).astype("float64")  # [1, H]
    b = np.asarray(model.head.output_bias).astype("float64")  # [1]
    # race_utils.create_model: [B*C, H] . W^T + b, reshaped to [B, C]
    expected = (pooled.reshape(-1, config.hidden_size) @ w.T + b).reshape(2, options)
    np.testing.assert_allclose(out["logits"], expected, atol=1e-4, rtol=0)
    assert np.ptp(expected, axis=1).min() > 1000 * 1e-4  # each example's options differ far beyond it


def test_options_are_independent_and_padding_is_ignored(tiny_config):
    config = no_dropout(tiny_config)
    model = randomize(AlbertForMultipleChoice(config), seed=4)
    inputs = mc_inputs(config, batch=2, options=4, length=10)
    logits = to_numpy(model(inputs))["logits"]
    assert np.ptp(logits, axis=1).min() > 1000 * 1e-5  # options of distinct logits: a mix-up would show
    # options reordered: logits reordered the same way
    order = np.array([2, 0, 3, 1])
    shuffled = to_numpy(model({k: v[:, order] for k, v in inputs.items()}))["logits"]
    np.testing.assert_allclose(shuffled, logits[:, order], atol=1e-5, rtol=0)
    # a subset of the options: the same logits for those options
    np.testing.assert_allclose(to_numpy(model({k: v[:, :2] for k, v in inputs.items()}))["logits"],
                               logits[:, :2], atol=1e-5, rtol=0)
    # padding (input_mask 0) added at the end changes nothing
    padded = {k: np.pad(v, ((0, 0), (0, 0), (0, 5))) for k, v in inputs.items()}
    np.testing.assert_allclose(to_numpy(model(padded))["logits"], logits, atol=1e-5, rtol=0)


def test_dynamic_shapes_in_a_tf_function(tiny_config):
    config = no_dropout(tiny_config)
    model = randomize(AlbertForMultipleChoice(config), seed=5)
    spec = {k: tf.TensorSpec([None, None, None], tf.int32) for k in ENCODER_KEYS}
    traced = tf.function(lambda x: model(x, training=False)["logits"], input_signature=[spec])
    for batch, options, length in ((2, 4, 12), (3, 2, 9), (1, 5, 6)):
        inputs = mc_inputs(config, batch=batch, options=options, length=length, seed=batch)
        out = traced({k: tf.constant(v) for k, v in inputs.items()}).numpy()
        assert out.shape == (batch, options)
        np.testing.assert_allclose(out, to_numpy(model(inputs))["logits"], atol=1e-5, rtol=0)


def test_dropout_only_in_training(tiny_config):
    config = no_dropout(tiny_config)  # only the head's dropout
    model = randomize(AlbertForMultipleChoice(config, dropout_prob=0.5), seed=6)
    inputs = mc_inputs(config)
    default = to_numpy(model(inputs))["logits"]
    np.testing.assert_array_equal(default, to_numpy(model(inputs, training=False))["logits"])
    np.testing.assert_array_equal(default, to_numpy(model(inputs, training=False))["logits"])
    first, second = (to_numpy(model(inputs, training=True))["logits"] for _ in range(2))
    assert not np.allclose(first, default) and not np.allclose(first, second)
    # with dropout_prob 0 training changes nothing (the encoder's dropout is 0 here)
    plain = AlbertForMultipleChoice(model.encoder, dropout_prob=0.0)
    plain.head.set_weights(model.head.get_weights())
    np.testing.assert_allclose(to_numpy(plain(inputs, training=True))["logits"], default, atol=1e-6, rtol=0)


def test_loss_by_hand_and_gradients(tiny_config):
    logits = np.array([[1.0, 2.0, 0.5, -1.0], [0.0, 0.0, 3.0, 1.0]], "float32")
    labels = np.array([1, 3])

    def ce(row, label):
        return np.log(np.exp(row).sum()) - row[label]

    expected = [ce(logits[0], 1), ce(logits[1], 3)]
    np.testing.assert_allclose(to_numpy(multiple_choice_loss(logits, labels, per_example=True)), expected,
                               rtol=1e-6)
    np.testing.assert_allclose(float(multiple_choice_loss(logits, labels)), np.mean(expected), rtol=1e-6)
    np.testing.assert_allclose(float(multiple_choice_loss(np.zeros((2, 4)), [1, 3])), np.log(4), rtol=1e-6)

    model = AlbertForMultipleChoice(tiny_config)
    inputs = mc_inputs(tiny_config)
    with tf.GradientTape() as tape:
        loss = multiple_choice_loss(model(inputs, training=True)["logits"], np.array([0, 2]))
    grads = tape.gradient(loss, model.trainable_weights)
    missing = [w.path for w, g in zip(model.trainable_weights, grads) if g is None or not np.any(np.asarray(g))]
    assert missing == []  # the pooler is used, unlike SQuAD


def test_bad_inputs_and_arguments(tiny_config):
    import albert_tf

    assert "AlbertForMultipleChoice" in albert_tf.__all__
    model = albert_tf.AlbertForMultipleChoice(tiny_config.to_dict())
    assert model.config == tiny_config and model.encoder.name == "encoder"
    flat = random_inputs(tiny_config)
    with pytest.raises(ValueError, match=r"`input_word_ids` must have rank 3, \[B, C, T\] \(batch, options, "
                                         r"tokens\), got shape \(3, 12\)"):
        model(flat)
    with pytest.raises(ValueError, match="missing inputs input_type_ids"):
        model({k: v for k, v in mc_inputs(tiny_config).items() if k != "input_type_ids"})
    with pytest.raises(TypeError, match="must be an AlbertEncoder"):
        AlbertForMultipleChoice(keras.layers.Dense(3))
    with pytest.raises(ValueError, match=r"dropout_prob must be in \[0, 1\), got 1.0"):
        AlbertForMultipleChoice(tiny_config, dropout_prob=1.0)
    with pytest.raises(ValueError, match="`pooled_output` must have rank 3"):
        model.head(np.zeros((2, tiny_config.hidden_size), "float32"))


# --- Keras contract and pretrained directories ----------------------------------------------


def test_config_round_trip_and_keras_save_load(tiny_config, tmp_path):
    model = AlbertForMultipleChoice(AlbertEncoder(tiny_config, name="encoder"), dropout_prob=0.2)
    rebuilt = check_config_round_trip(model)
    assert set(rebuilt.get_config()) == {"name", "trainable", "encoder", "dropout_prob"}
    assert rebuilt.dropout_prob == 0.2 and rebuilt.head.dropout_prob == 0.2
    restored = check_saved_model_round_trip(randomize(model, seed=8), mc_inputs(tiny_config, options=3),
                                            str(tmp_path))
    assert restored.dropout_prob == 0.2
    head = MultipleChoiceHead(8, dropout_prob=0.3, initializer_range=0.05)
    assert MultipleChoiceHead.from_config(head.get_config()).get_config() == head.get_config()


def test_save_and_from_pretrained(tiny_config, tmp_path):
    config = no_dropout(tiny_config)
    model = randomize(AlbertForMultipleChoice(config, dropout_prob=0.2), seed=9)
    model.save_pretrained(tmp_path / "mc")
    assert sorted(os.listdir(tmp_path / "mc")) == ["albert_config.json", "model.json", MULTIPLE_CHOICE_WEIGHTS]
    assert AlbertForMultipleChoice.WEIGHTS_FILE == "multiple_choice.weights.h5"
    assert json.load(open(tmp_path / "mc" / "model.json"))["config"]["dropout_prob"] == 0.2
    loaded = AlbertForMultipleChoice.from_pretrained(tmp_path / "mc")
    assert loaded.head_settings() == {"dropout_prob": 0.2} and loaded.config == config
    for a, b in zip(model.weights, loaded.weights, strict=True):
        assert a.path == b.path
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    inputs = mc_inputs(config, options=3)
    np.testing.assert_array_equal(to_numpy(loaded(inputs))["logits"], to_numpy(model(inputs))["logits"])
    assert AlbertForMultipleChoice.from_pretrained(tmp_path / "mc", dropout_prob=0.0).dropout_prob == 0.0

    # weights that do not fit albert_config.json: the variables are named
    other = AlbertForMultipleChoice(config.replace(hidden_size=48, intermediate_size=96, num_attention_heads=4))
    other.save_pretrained(tmp_path / "wider")
    os.replace(tmp_path / "wider" / MULTIPLE_CHOICE_WEIGHTS, tmp_path / "mc" / MULTIPLE_CHOICE_WEIGHTS)
    with pytest.raises(CheckpointMismatchError, match=r"mc \(with its model.json\)"
                                                      r"[^\n]*does not match the model") as error:
        AlbertForMultipleChoice.from_pretrained(tmp_path / "mc")
    assert "shape mismatches" in str(error.value) and "[48]" in str(error.value)

    # the directory as albert_tf 0.2.0 wrote it: multiple_choice.json, no model.json
    os.remove(tmp_path / "mc" / "model.json")
    (tmp_path / "mc" / "multiple_choice.json").write_text('{"dropout_prob": 0.2}')
    with pytest.raises(CheckpointMismatchError, match=r"mc \(with its albert_config.json and multiple_choice.json\)"
                                                      r"[^\n]*does not match the model") as error:
        AlbertForMultipleChoice.from_pretrained(tmp_path / "mc")
    os.replace(tmp_path / "mc" / MULTIPLE_CHOICE_WEIGHTS, tmp_path / "wider" / MULTIPLE_CHOICE_WEIGHTS)
    model.save_weights(tmp_path / "mc" / MULTIPLE_CHOICE_WEIGHTS)
    old = AlbertForMultipleChoice.from_pretrained(tmp_path / "mc")
    assert old.get_config() == model.get_config()
    np.testing.assert_array_equal(to_numpy(old(inputs))["logits"], to_numpy(model(inputs))["logits"])

    os.remove(tmp_path / "mc" / "multiple_choice.json")
    with pytest.raises(ValueError, match="multiple_choice.weights.h5 without multiple_choice.json"):
        AlbertForMultipleChoice.from_pretrained(tmp_path / "mc")
    (tmp_path / "mc" / "multiple_choice.json").write_text('{"dropout_prob": 0.1, "version": "v1"}')
    with pytest.raises(ValueError, match="expected exactly the keys dropout_prob"):
        AlbertForMultipleChoice.from_pretrained(tmp_path / "mc")


def test_from_a_pretrained_encoder_or_pretrainer_directory_a_new_head(tiny_config, tmp_path):
    pretrainer = randomize(AlbertPretrainer(tiny_config), seed=10)
    for model in new_heads_from_pretrained(AlbertForMultipleChoice, pretrainer, tmp_path, dropout_prob=0.3):
        assert model.dropout_prob == 0.3
        # the head is new: initial values
        np.testing.assert_array_equal(np.asarray(model.head.output_bias), 0.0)
        assert 0 < np.abs(np.asarray(model.head.output_weights)).max() <= 2 * tiny_config.initializer_range
    fresh = AlbertForMultipleChoice.from_pretrained(tmp_path / "encoder")
    assert fresh.dropout_prob == 0.1
    again = check_fine_tuned_directory(fresh, tmp_path)
    assert isinstance(AlbertConfig.from_dict(again.get_config()["encoder"]["config"]["config"]), AlbertConfig)
