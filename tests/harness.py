"""Shared checks for albert_tf models (as keras-hub's TestCase): config round trip,
variable sequence lengths, `.keras` save/load."""

import os

import keras
import numpy as np


def to_numpy(structure):
    return keras.tree.map_structure(lambda t: keras.ops.convert_to_numpy(t), structure)


def assert_all_close(a, b, atol=1e-6):
    flat_a, flat_b = keras.tree.flatten(to_numpy(a)), keras.tree.flatten(to_numpy(b))
    assert len(flat_a) == len(flat_b)
    for x, y in zip(flat_a, flat_b):
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


def check_config_round_trip(model):
    """get_config holds only constructor arguments and rebuilds an equal model."""
    config = model.get_config()
    rebuilt = model.__class__.from_config(config)
    assert rebuilt.get_config() == config
    assert len(rebuilt.weights) == len(model.weights)
    assert [v.path for v in rebuilt.weights] == [v.path for v in model.weights]
    return rebuilt


def check_variable_lengths(model, make_inputs, lengths):
    """The model runs for every length and each output keeps that length on axis 1."""
    for length in lengths:
        outputs = model(make_inputs(length), training=False)
        seq = outputs.get("sequence_output")
        if seq is not None:
            assert seq.shape[1] == length


def check_saved_model_round_trip(model, inputs, tmp_dir):
    """`.keras` save then load gives identical outputs, in a fresh registered class."""
    path = os.path.join(tmp_dir, "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert type(restored) is type(model)
    assert_all_close(model(inputs, training=False), restored(inputs, training=False), atol=0)
    return restored
