"""The albert_tf pretrained directory: albert_config.json + Keras weights files.

    DIR/albert_config.json
    DIR/pretrainer.weights.h5   (AlbertPretrainer: encoder and both heads), or
    DIR/encoder.weights.h5      (AlbertEncoder only, from sources without heads)

Keras `.weights.h5` is backend-neutral, so loading needs Keras only. run_pretraining
writes pretrainer.weights.h5 beside its checkpoints, so a run's output_dir is such a
directory too; tools/convert writes them from TF1, Hugging Face and keras-hub weights.

Each model class names its own weights file (`WEIGHTS_FILE`), and a class whose weights
hold another model names it in `SUBMODELS` (attribute -> that model's `WEIGHTS_FILE`):
`AlbertPretrainer.SUBMODELS = {"encoder": ENCODER_WEIGHTS}` lets an encoder load out of
pretrainer.weights.h5. Classes register themselves by subclassing `PretrainedMixin`, so
this module imports neither the encoder nor the pretrainer.

Example:
```python
encoder = AlbertEncoder.from_pretrained("converted/albert_base")
pretrainer = AlbertPretrainer.from_pretrained("runs/base")
```
"""

import logging
import os

import keras

from albert_tf.modeling.config import AlbertConfig
from albert_tf.storage import atomic, files
from albert_tf.storage.json_files import read_json
from albert_tf.storage.weights_file import load_weights_file

CONFIG_NAME = "albert_config.json"
logger = logging.getLogger("albert_tf")

PRETRAINER_WEIGHTS = "pretrainer.weights.h5"
ENCODER_WEIGHTS = "encoder.weights.h5"

# WEIGHTS_FILE -> the first PretrainedMixin subclass that declared it.
_CLASSES = {}


def _weights_file(cls_or_model):
    name = getattr(cls_or_model, "WEIGHTS_FILE", None)
    if not name:
        raise TypeError(f"{type(cls_or_model).__name__}: no WEIGHTS_FILE; expected a PretrainedMixin model "
                        "(AlbertEncoder or AlbertPretrainer).")
    return name


def save_pretrained(model, directory):
    """Writes `model` (AlbertEncoder or AlbertPretrainer) and its config into `directory`:
    albert_config.json and the model's `WEIGHTS_FILE`.

    Each file is written through `albert_tf.storage.atomic` (temporary name, then
    rename), so a reader never sees a half file.
    """
    directory = os.fspath(directory)
    name = _weights_file(model)
    model.config.to_json_file(files.join(directory, CONFIG_NAME))
    with atomic.output_path(files.join(directory, name)) as tmp:
        model.save_weights(tmp)
    return directory


def _containers_of(weights_file):
    """(container class, attribute) pairs whose weights hold a `weights_file` model."""
    return [(container, attribute) for container in _CLASSES.values()
            for attribute, held in container.SUBMODELS.items() if held == weights_file]


def load_pretrained(cls, directory, **kwargs):
    """Builds `cls` (AlbertEncoder or AlbertPretrainer) from a pretrained directory: from
    its own `WEIGHTS_FILE`, else out of the weights of a model holding it (an encoder out
    of pretrainer.weights.h5).

    Raises:
        ValueError: naming the directory and what is missing or does not match.
    """
    directory = os.fspath(directory)
    own = _weights_file(cls)
    config_path = files.join(directory, CONFIG_NAME)
    if not files.isfile(config_path):
        raise ValueError(f"{directory}: no {CONFIG_NAME}; expected a directory written by albert_tf "
                         "(python -m albert_tf.convert, or a run_pretraining output_dir).")
    config = AlbertConfig.from_json_file(config_path)

    def present(name):
        return files.isfile(files.join(directory, name))

    if present(own):
        return _load(cls(config, **kwargs), files.join(directory, own), directory)
    for container, attribute in _containers_of(own):
        if present(container.WEIGHTS_FILE):
            model = _load(container(config, **kwargs), files.join(directory, container.WEIGHTS_FILE), directory)
            return getattr(model, attribute)
    held = [name for name in getattr(cls, "SUBMODELS", {}).values() if present(name)]
    if held:
        raise ValueError(f"{directory}: no {own} (only {', '.join(held)}: the source had no "
                         f"{cls.EXTRA_PARTS}).")
    sources = [own] + [container.WEIGHTS_FILE for container, _ in _containers_of(own)]
    raise ValueError(f"{directory}: {'neither ' if len(sources) > 1 else 'no '}{' nor '.join(sources)}.")


def _load(model, weights_file, directory):
    load_weights_file(model, weights_file, f"{directory} (with its {CONFIG_NAME})")
    return model


class PretrainedMixin:
    """Config round trip and pretrained directories for AlbertEncoder and AlbertPretrainer.

    Class attributes a model sets:
        WEIGHTS_FILE: str. Its file in a pretrained directory, e.g. "encoder.weights.h5".
        SUBMODELS: dict. Attribute -> `WEIGHTS_FILE` of a PretrainedMixin model it holds
            (and whose weights its own file therefore contains).
        EXTRA_PARTS: str. What it holds beyond its SUBMODELS, for error messages.

    `get_config` returns only the constructor arguments (`config` as a dict,
    `use_one_hot_embeddings`, and Keras' name, trainable, dtype).
    """

    WEIGHTS_FILE = None
    SUBMODELS = {}
    EXTRA_PARTS = "weights"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("WEIGHTS_FILE")
        if name:
            _CLASSES.setdefault(name, cls)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "config": self.config.to_dict(),
            "use_one_hot_embeddings": self.use_one_hot_embeddings,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    @classmethod
    def from_pretrained(cls, directory, **kwargs):
        """Builds the model from an albert_tf pretrained directory, e.g. a converted
        release or a run_pretraining output_dir."""
        return load_pretrained(cls, directory, **kwargs)

    def save_pretrained(self, directory):
        """Writes albert_config.json and the weights (`WEIGHTS_FILE`) into `directory`."""
        return save_pretrained(self, directory)


def read_head_settings(directory, settings_name, keys, weights_name, what):
    """The head settings JSON of a fine-tuned model's directory (e.g. question_answering.json).

    Args:
        directory: the pretrained directory.
        settings_name, weights_name: the file names (for the message).
        keys: the exact keys expected.
        what: what the settings hold, for the message (e.g. "the head's version").
    Raises:
        ValueError: missing, not JSON, or other keys (the path named).
    """
    path = files.join(directory, settings_name)
    if not files.isfile(path):
        raise ValueError(f"{directory}: {weights_name} without {settings_name} (which holds {what}).")
    settings = read_json(path, f"{settings_name} ({what})")
    if set(settings) != set(keys):
        raise ValueError(f"{path}: expected exactly the keys {', '.join(keys)}.")
    return settings


def load_head_model(cls, encoder_class, directory, settings_name, settings, overrides, new_head):
    """A fine-tuned model class's `from_pretrained`: with cls.WEIGHTS_FILE in `directory`,
    that model (its config, `settings()` updated by `overrides`, the weights through the
    matching report); otherwise the encoder of encoder.weights.h5 / pretrainer.weights.h5
    under a new head (`new_head` is the constructor's keyword arguments for it).

    Args:
        cls: the class (WEIGHTS_FILE, EXTRA_PARTS; built as cls(encoder_or_config, **kwargs)).
        encoder_class: AlbertEncoder (passed in: this module does not import the encoder).
        directory: the pretrained directory.
        settings_name: the head settings file's name (named in errors).
        settings: () -> the head settings of the directory (read only when its weights are there).
        overrides: keyword arguments given to from_pretrained (None values dropped).
        new_head: keyword arguments for a new head.
    """
    directory = os.fspath(directory)
    overrides = {k: v for k, v in overrides.items() if v is not None}
    weights = files.join(directory, cls.WEIGHTS_FILE)
    config_path = files.join(directory, CONFIG_NAME)
    if not files.isfile(weights):
        encoder_sources = (ENCODER_WEIGHTS, PRETRAINER_WEIGHTS)
        if files.isfile(config_path) and not any(files.isfile(files.join(directory, name))
                                                   for name in encoder_sources):
            raise ValueError(f"{directory}: none of {cls.WEIGHTS_FILE}, {', '.join(encoder_sources)}.")
        encoder = encoder_class.from_pretrained(directory)
        logger.info("%s: no %s; a new %s on the pretrained encoder.", directory, cls.WEIGHTS_FILE, cls.EXTRA_PARTS)
        return cls(encoder, **dict(new_head, **overrides))
    kwargs = dict(settings(), **overrides)
    if not files.isfile(config_path):
        raise ValueError(f"{directory}: no {CONFIG_NAME}; expected a directory written by albert_tf.")
    model = cls(AlbertConfig.from_json_file(config_path), **kwargs)
    load_weights_file(model, weights, f"{directory} (with its {CONFIG_NAME} and {settings_name})")
    return model
