"""AlbertClassifier and the fine-tuning loss: config round trip, variable lengths, save/load,
dropout only in training, the release's losses."""

import numpy as np
import pytest
from conftest import random_inputs
from harness import check_config_round_trip, check_saved_model_round_trip, to_numpy

from albert_tf import AlbertEncoder
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.losses import classifier_nll


@pytest.mark.parametrize("num_classes", [3, 1])
def test_classifier_shapes_round_trips_and_dropout(tiny_config, tmp_path, num_classes):
    model = AlbertClassifier(AlbertEncoder(tiny_config), num_classes, dropout=0.5)
    for length in (5, 12):
        assert tuple(model(random_inputs(tiny_config, length=length)).shape) == (3, num_classes)
    assert [w.path for w in model.output_dense.weights] == ["output/kernel", "output/bias"]
    assert model.is_regression == (num_classes == 1)
    rebuilt = check_config_round_trip(model)
    assert set(rebuilt.get_config()) == {"name", "trainable", "encoder", "num_classes", "dropout",
                                         "initializer_range"}
    inputs = random_inputs(tiny_config)
    check_saved_model_round_trip(model, inputs, str(tmp_path))
    np.testing.assert_array_equal(model(inputs, training=False), model(inputs, training=False))
    assert not np.allclose(model(inputs, training=True), model(inputs, training=True))


@pytest.mark.parametrize("num_classes", [3, 1])
def test_classifier_logits_are_the_pooled_output_times_the_output_layer(tiny_config, num_classes):
    """logits = pooled_output . kernel + bias, in NumPy from the encoder's pooled output, with
    known weights (biases included) that make the rows' logits differ; padding changes nothing."""
    config = tiny_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = AlbertClassifier(AlbertEncoder(config), num_classes, dropout=0.5)
    rng = np.random.default_rng(3)
    for v in model.weights:
        v.assign(rng.normal(scale=0.3, size=v.shape).astype("float32") + (1.0 if "gamma" in v.path else 0.0))
    inputs = random_inputs(config, batch=4, length=12)
    logits = to_numpy(model(inputs, training=False))
    pooled = to_numpy(model.encoder(inputs, training=False)["pooled_output"]).astype("float64")  # [B, H]
    kernel, bias = (np.asarray(v, "float64") for v in model.output_dense.weights)  # [H, C], [C]
    assert kernel.shape == (config.hidden_size, num_classes) and bias.shape == (num_classes,)
    np.testing.assert_allclose(logits, pooled @ kernel + bias, atol=1e-5, rtol=0)
    assert np.ptp(logits, axis=0).min() > 0.1  # the rows differ by far more than the tolerance
    # input_mask 0 positions appended (rows 1 and 2 are padded already) change nothing
    padded = {k: np.pad(v, ((0, 0), (0, 6))) for k, v in inputs.items()}
    np.testing.assert_allclose(to_numpy(model(padded, training=False)), logits, atol=1e-5, rtol=0)


def test_classifier_kernel_initializer_is_the_releases(tiny_config):
    """output/kernel: truncated normal of stddev initializer_range (cut at 2 stddev), bias 0."""
    model = AlbertClassifier(AlbertEncoder(tiny_config), 64, initializer_range=0.05)
    kernel, bias = (np.asarray(v) for v in model.output_dense.weights)  # 32 x 64 values
    np.testing.assert_array_equal(bias, 0.0)
    # a normal cut at +-2 sigma has standard deviation 0.880 sigma
    assert abs(kernel.std() / 0.05 - 0.880) < 0.05, kernel.std()
    assert 1.9 * 0.05 < np.abs(kernel).max() <= 2 * 0.05 + 1e-7
    assert abs(kernel.mean()) < 0.005


def test_classifier_rejects_zero_classes(tiny_config):
    with pytest.raises(ValueError, match="num_classes must be at least 1"):
        AlbertClassifier(AlbertEncoder(tiny_config), 0)


def test_classifier_nll_cross_entropy_and_squared_error():
    logits = np.array([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]], "float32")
    expected = -np.log(np.exp(logits[[0, 1], [0, 2]]) / np.exp(logits).sum(-1))
    np.testing.assert_allclose(classifier_nll(logits, np.array([0, 2])), expected, rtol=1e-6)
    np.testing.assert_allclose(classifier_nll(np.array([[1.5], [0.0]], "float32"), np.array([1.0, 2.0])),
                               [0.25, 4.0], rtol=1e-6)


def test_the_head_keeps_an_encoders_float32_pooled_output_at_mixed_bfloat16():
    """Built under mixed_bfloat16 on an encoder with float32 outputs (as an export's
    EncoderTFSMLayer), the head's dropout and dense compute in float32: pooled values closer
    together than bf16's spacing keep their own logits, equal to the float32 product in NumPy.
    (Rounded to bf16 before the dense, the 8 rows below give one logit.)"""
    import keras

    class Float32Encoder(keras.layers.Layer):
        def call(self, inputs):
            ids = keras.ops.cast(inputs["input_word_ids"][:, :1], "float32")  # [B, 1]
            return {"pooled_output": 0.5 + 1e-4 * ids * keras.ops.ones((1, 4), "float32")}  # [B, 4]

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        model = AlbertClassifier(Float32Encoder(dtype="float32"), 2)
    finally:
        keras.config.set_dtype_policy(previous)
    ids = np.arange(8, dtype="int32")[:, None] * np.ones((1, 5), "int32")
    inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)}
    logits = to_numpy(model(inputs, training=False))
    kernel, bias = (to_numpy(w) for w in model.output_dense.weights)
    pooled = 0.5 + 1e-4 * np.arange(8, dtype="float32")[:, None] * np.ones((1, 4), "float32")
    assert logits.dtype == np.float32 and len(np.unique(logits[:, 0])) == 8
    np.testing.assert_allclose(logits, pooled @ kernel + bias, rtol=0, atol=1e-6)
