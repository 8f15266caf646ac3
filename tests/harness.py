"""Shared checks for albert_tf models (as keras-hub's TestCase): config round trip,
variable sequence lengths, `.keras` save/load, a fine-tuned model's pretrained directory."""

import os

import keras
import numpy as np
import pytest


def to_numpy(structure):
    return keras.tree.map_structure(lambda t: keras.ops.convert_to_numpy(t), structure)


def assert_all_close(a, b, atol=1e-6):
    flat_a, flat_b = keras.tree.flatten(to_numpy(a)), keras.tree.flatten(to_numpy(b))
    assert len(flat_a) == len(flat_b)
    for x, y in zip(flat_a, flat_b):
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


def assert_same_weights(a, b):
    """Layers or models `a` and `b` hold the same variables, in order, with equal values."""
    for x, y in zip(a.weights, b.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=x.path)


def new_heads_from_pretrained(cls, pretrainer, tmp_path, **kwargs):
    """`pretrainer` saved as tmp_path/pretrainer and its encoder as tmp_path/encoder; yields
    `cls.from_pretrained(directory, **kwargs)` of each, checked to hold the pretrainer's
    encoder weights (the head is new)."""
    pretrainer.save_pretrained(tmp_path / "pretrainer")
    pretrainer.encoder.save_pretrained(tmp_path / "encoder")
    for directory in ("pretrainer", "encoder"):
        model = cls.from_pretrained(tmp_path / directory, **kwargs)
        assert_same_weights(pretrainer.encoder, model.encoder)
        yield model


def check_config_round_trip(model):
    """get_config holds only constructor arguments and rebuilds an equal model."""
    config = model.get_config()
    rebuilt = model.__class__.from_config(config)
    assert rebuilt.get_config() == config
    assert len(rebuilt.weights) == len(model.weights)
    assert [v.path for v in rebuilt.weights] == [v.path for v in model.weights]
    return rebuilt


def check_variable_lengths(model, make_inputs, lengths, sequence_keys=("sequence_output", "encoder_outputs"),
                           atol=1e-5):
    """The model runs for every length T, and its outputs are consistent across lengths.

    For each T: every output under `sequence_keys` (a tensor or a list of tensors) has
    shape [B, T, ...] and equals, position for position, the first T positions of the
    model's output for the same inputs zero-padded (input_mask 0) to the longest length;
    every other output has the same shape for every T and equals the padded run's.

    Args:
        model: maps a dict of int [B, T] inputs (with `input_mask`) to a dict of outputs.
        make_inputs: T -> that dict.
        lengths: at least two distinct lengths.
    """
    lengths = sorted(set(lengths))
    assert len(lengths) >= 2, "check_variable_lengths needs two lengths or more"
    longest = lengths[-1]
    other_shapes = {}
    for length in lengths:
        inputs = {k: np.asarray(v) for k, v in make_inputs(length).items()}
        assert all(v.shape[1] == length for v in inputs.values())
        padded = {k: np.pad(v, ((0, 0), (0, longest - length))) for k, v in inputs.items()}
        short = to_numpy(model(inputs, training=False))
        long = to_numpy(model(padded, training=False))
        assert set(short) == set(long)
        checked = 0
        for key in short:
            if key in sequence_keys:
                parts_short, parts_long = keras.tree.flatten(short[key]), keras.tree.flatten(long[key])
                assert len(parts_short) == len(parts_long) > 0, key
                for s, l in zip(parts_short, parts_long):
                    assert s.shape == (l.shape[0], length) + l.shape[2:], (key, length, s.shape)
                    assert l.shape[1] == longest, (key, l.shape)
                    np.testing.assert_allclose(s, l[:, :length], atol=atol, rtol=0, err_msg=f"{key}, T={length}")
                    checked += 1
            else:
                other_shapes.setdefault(key, np.shape(short[key]))
                assert np.shape(short[key]) == other_shapes[key], (key, length)
                np.testing.assert_allclose(short[key], long[key], atol=atol, rtol=0, err_msg=f"{key}, T={length}")
        assert checked > 0, f"none of {sequence_keys} among the outputs {sorted(short)}"


def check_saved_model_round_trip(model, inputs, tmp_dir):
    """`.keras` save then load gives identical outputs, in a fresh registered class."""
    path = os.path.join(tmp_dir, "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert type(restored) is type(model)
    assert_all_close(model(inputs, training=False), restored(inputs, training=False), atol=0)
    return restored


def check_fine_tuned_directory(model, tmp_path):
    """`model` (a fine-tuned model class's new head on the encoder saved in tmp_path/encoder)
    saved with save_pretrained loads again as the same weights; without the encoder's
    weights, or without albert_config.json, from_pretrained names what is missing. Returns
    the loaded model."""
    cls = type(model)
    model.save_pretrained(tmp_path / "fine_tuned")
    again = cls.from_pretrained(tmp_path / "fine_tuned")
    assert_same_weights(model, again)
    os.remove(tmp_path / "encoder" / "encoder.weights.h5")
    with pytest.raises(ValueError, match=f"encoder: none of {cls.WEIGHTS_FILE}, encoder.weights.h5, "
                                         "pretrainer.weights.h5"):
        cls.from_pretrained(tmp_path / "encoder")
    with pytest.raises(ValueError, match="no albert_config.json"):
        cls.from_pretrained(tmp_path)
    return again
