"""AlbertClassifier and the fine-tuning loss: config round trip, variable lengths, save/load,
dropout only in training, the release's losses."""

import numpy as np
import pytest
from conftest import random_inputs
from harness import check_config_round_trip, check_saved_model_round_trip

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


def test_classifier_rejects_zero_classes(tiny_config):
    with pytest.raises(ValueError, match="num_classes must be at least 1"):
        AlbertClassifier(AlbertEncoder(tiny_config), 0)


def test_classifier_nll_cross_entropy_and_squared_error():
    logits = np.array([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]], "float32")
    expected = -np.log(np.exp(logits[[0, 1], [0, 2]]) / np.exp(logits).sum(-1))
    np.testing.assert_allclose(classifier_nll(logits, np.array([0, 2])), expected, rtol=1e-6)
    np.testing.assert_allclose(classifier_nll(np.array([[1.5], [0.0]], "float32"), np.array([1.0, 2.0])),
                               [0.25, 4.0], rtol=1e-6)
