"""Shared pytest setup: quiet TensorFlow, deterministic seeds, tiny configs."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    import keras

    keras.utils.set_random_seed(1234)
    yield


@pytest.fixture
def tiny_config():
    from albert_tf import AlbertConfig

    return AlbertConfig.from_preset("albert_tiny")


def random_inputs(config, batch=3, length=12, seed=0, pad_from=(None, 7, 3)):
    """Random encoder inputs; row r is padded from position pad_from[r] (None: no padding)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, config.vocab_size, (batch, length)).astype("int32")
    mask = np.ones((batch, length), "int32")
    types = np.zeros((batch, length), "int32")
    for r in range(batch):
        start = pad_from[r % len(pad_from)]
        if start is not None:
            mask[r, start:] = 0
            ids[r, start:] = 0
        types[r, length // 2 :] = 1
    types *= mask
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
