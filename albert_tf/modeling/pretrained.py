"""The albert_tf pretrained directory: Keras' record of the model (model.json), its config
(albert_config.json) and its weights; 0.2.0's directories without model.json are read too
(docs/model_record.md). The classes are found in Keras' registry
(`register_keras_serializable(package="albert_tf")`): this module imports neither the
encoder nor the pretrainer.

Example:
```python
encoder = AlbertEncoder.from_pretrained("converted/albert_base")
pretrainer = AlbertPretrainer.from_pretrained("runs/base")
```
"""

import copy
import importlib
import logging
import os

import keras

from albert_tf.modeling.config import AlbertConfig
from albert_tf.storage import atomic, files, integrity
from albert_tf.storage.json_files import read_json
from albert_tf.storage.weights_file import load_weights_file

CONFIG_NAME = "albert_config.json"
logger = logging.getLogger("albert_tf")

PRETRAINER_WEIGHTS = "pretrainer.weights.h5"
ENCODER_WEIGHTS = "encoder.weights.h5"
MODEL_FILE = "model.json"
PACKAGE = "albert_tf"  # the models' package in Keras' registry: "albert_tf>AlbertEncoder"
RECORD_WHAT = "Keras' record of an albert_tf model (keras.saving.serialize_keras_object)"


def _weights_file(cls_or_model):
    name = getattr(cls_or_model, "WEIGHTS_FILE", None)
    if not name:
        raise TypeError(f"{type(cls_or_model).__name__}: no WEIGHTS_FILE; expected a PretrainedMixin model "
                        "(AlbertEncoder or AlbertPretrainer).")
    return name


def registered_models():
    """The albert_tf model classes in Keras' registry (those with a WEIGHTS_FILE), by name."""
    return {name.split(">", 1)[1]: cls for name, cls in keras.saving.get_custom_objects().items()
            if name.startswith(PACKAGE + ">") and isinstance(cls, type) and issubclass(cls, PretrainedMixin)
            and cls.__dict__.get("WEIGHTS_FILE")}


# ----------------------------------------------------------------------------------------------------------
# The record


def model_record(model):
    """Keras' record of `model` (`keras.saving.serialize_keras_object`, no compile settings):
    what model.json and run_info.json's "model" hold."""
    record = keras.saving.serialize_keras_object(model)
    record.pop("compile_config", None)
    return record


def record_class(record, source, expected=None):
    """The albert_tf model class `record` names (its module imported when not yet registered).

    Raises:
        ValueError: naming `source`: not a record of an albert_tf model (of class `expected`).
    """
    name = record.get("registered_name") if isinstance(record, dict) else None
    module = record.get("module") if isinstance(record, dict) else None
    if isinstance(name, str) and name not in keras.saving.get_custom_objects() and isinstance(module, str) \
            and module.split(".")[0] == PACKAGE:
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    cls = keras.saving.get_custom_objects().get(name) if isinstance(name, str) else None
    if cls is None or cls not in registered_models().values() or not isinstance(record.get("config"), dict):
        raise ValueError(f"{source}: not {RECORD_WHAT}: registered_name {name!r} is not one of "
                         f"{', '.join(PACKAGE + '>' + n for n in sorted(registered_models()))}, or no \"config\" "
                         "object; write the directory again with save_pretrained.")
    if expected is not None and not issubclass(cls, expected):
        raise ValueError(f"{source}: records an {cls.__name__}, not an {expected.__name__}.")
    return cls


def model_from_record(record, source, expected=None, **overrides):
    """A new model (initial weights) rebuilt from `record` by `keras.saving.deserialize_keras_object`,
    its constructor arguments updated by `overrides`, under the global dtype policy (a
    recorded encoder dtype is dropped).

    Raises:
        ValueError: naming `source`: not an albert_tf record, not of class `expected`, or
            arguments the class does not take.
    """
    cls = record_class(record, source, expected)
    record = copy.deepcopy(record)
    config = record["config"]
    config.pop("dtype", None)
    encoder = config.get("encoder")
    if isinstance(encoder, dict) and isinstance(encoder.get("config"), dict):
        encoder["config"].pop("dtype", None)
    config.update(overrides)
    try:
        return keras.saving.deserialize_keras_object(record)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise ValueError(f"{source}: the {cls.__name__} it records does not build ({e}); write the directory "
                         "again with save_pretrained.") from e


def read_record(directory):
    """(model.json's record, its path), or (None, None) in a directory without one (0.2.0's).

    Raises:
        ValueError (JsonFileError): model.json is no JSON object, or no albert_tf record.
    """
    path = files.join(os.fspath(directory), MODEL_FILE)
    if not files.isfile(path):
        return None, None
    record = read_json(path, RECORD_WHAT)
    record_class(record, path)
    return record, path


# ----------------------------------------------------------------------------------------------------------
# Directories


def save_pretrained(model, directory):
    """Writes `model` into `directory`: model.json (`model_record`), albert_config.json and the
    model's `WEIGHTS_FILE`.

    Each file is written through `albert_tf.storage.atomic` (temporary name, then
    rename), so a reader never sees a half file; the weights file carries the sha256 of its
    weights, checked whenever it is loaded (`albert_tf.storage.integrity`).
    """
    directory = os.fspath(directory)
    name = _weights_file(model)
    atomic.write_json(files.join(directory, MODEL_FILE), model_record(model))
    if model.config is not None:
        model.config.to_json_file(files.join(directory, CONFIG_NAME))
    with atomic.output_path(files.join(directory, name)) as tmp:
        model.save_weights(tmp)
        integrity.seal_weights_file(tmp)
    return directory


def _containers_of(weights_file):
    """(container class, attribute) pairs whose weights hold a `weights_file` model."""
    return [(container, attribute) for container in registered_models().values()
            for attribute, held in container.SUBMODELS.items() if held == weights_file]


def _no_config(directory):
    return ValueError(f"{directory}: no {CONFIG_NAME} (nor {MODEL_FILE}); expected a directory written by "
                      "albert_tf (python -m albert_tf.convert, or a run_pretraining output_dir).")


def load_pretrained(cls, directory, **kwargs):
    """Builds `cls` (AlbertEncoder or AlbertPretrainer) from a pretrained directory: from
    its own `WEIGHTS_FILE`, else out of the weights of a model holding it (an encoder out
    of pretrainer.weights.h5); the model from model.json, else (0.2.0) albert_config.json.

    Raises:
        ValueError: naming the directory and what is missing or does not match.
    """
    directory = os.fspath(directory)
    own = _weights_file(cls)
    record, source = read_record(directory)
    config_path = files.join(directory, CONFIG_NAME)
    if record is None and not files.isfile(config_path):
        raise _no_config(directory)

    def present(name):
        return files.isfile(files.join(directory, name))

    def build(model_class):
        if record is not None:
            return model_from_record(record, source, model_class, **kwargs)
        return model_class(AlbertConfig.from_json_file(config_path), **kwargs)

    if present(own):
        return _load(build(cls), files.join(directory, own), directory, source)
    for container, attribute in _containers_of(own):
        if present(container.WEIGHTS_FILE):
            model = _load(build(container), files.join(directory, container.WEIGHTS_FILE), directory, source)
            return getattr(model, attribute)
    held = [name for name in getattr(cls, "SUBMODELS", {}).values() if present(name)]
    if held:
        raise ValueError(f"{directory}: no {own} (only {', '.join(held)}: the source had no "
                         f"{cls.EXTRA_PARTS}).")
    sources = [own] + [container.WEIGHTS_FILE for container, _ in _containers_of(own)]
    raise ValueError(f"{directory}: {'neither ' if len(sources) > 1 else 'no '}{' nor '.join(sources)}.")


def _load(model, weights_file, directory, record_path=None, legacy=None):
    with_files = MODEL_FILE if record_path else " and ".join((CONFIG_NAME,) + ((legacy,) if legacy else ()))
    load_weights_file(model, weights_file, f"{directory} (with its {with_files})")
    return model


class PretrainedMixin:
    """Config round trip and pretrained directories for AlbertEncoder and AlbertPretrainer.

    Class attributes a model sets:
        WEIGHTS_FILE: str. Its file in a pretrained directory, e.g. "encoder.weights.h5".
        SUBMODELS: dict. Attribute -> `WEIGHTS_FILE` of a PretrainedMixin model it holds
            (and whose weights its own file therefore contains).
        EXTRA_PARTS: str. What it holds beyond its SUBMODELS, for error messages.

    Each class is registered with `keras.saving.register_keras_serializable(package="albert_tf")`
    (the one registry of model classes). `get_config` returns only the constructor arguments
    (`config` as a dict, `use_one_hot_embeddings`, and Keras' name, trainable, dtype).
    """

    WEIGHTS_FILE = None
    SUBMODELS = {}
    EXTRA_PARTS = "weights"

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
        """Writes model.json, albert_config.json and the weights (`WEIGHTS_FILE`) into `directory`."""
        return save_pretrained(self, directory)


def read_head_settings(cls, directory, record, source):
    """The HEAD_SETTINGS of fine-tuned model class `cls` in `directory`, which holds its
    WEIGHTS_FILE: from model.json's `record` (read from `source`), else (None) from 0.2.0's
    cls.LEGACY_SETTINGS_FILE.

    Raises:
        ValueError: a record of another class; no record and no settings file, one that is
            not JSON or holds other keys (the path named).
    """
    if record is not None:
        record_class(record, source, cls)
        return {k: record["config"].get(k) for k in cls.HEAD_SETTINGS}
    if not cls.LEGACY_SETTINGS_FILE:
        raise ValueError(f"{directory}: {cls.WEIGHTS_FILE} without {MODEL_FILE} ({RECORD_WHAT}).")
    path, what = files.join(directory, cls.LEGACY_SETTINGS_FILE), cls.SETTINGS_HOLD
    if not files.isfile(path):
        raise ValueError(f"{directory}: {cls.WEIGHTS_FILE} without {cls.LEGACY_SETTINGS_FILE} (which holds {what}) "
                         f"or {MODEL_FILE} ({RECORD_WHAT}).")
    settings = read_json(path, f"{cls.LEGACY_SETTINGS_FILE} ({what})")
    if set(settings) != set(cls.HEAD_SETTINGS):
        raise ValueError(f"{path}: expected exactly the keys {', '.join(cls.HEAD_SETTINGS)}.")
    return settings


def load_head_model(cls, encoder_class, directory, overrides, new_head, check=None):
    """A fine-tuned model class's `from_pretrained`: with cls.WEIGHTS_FILE in `directory`,
    that model (from model.json, else 0.2.0's albert_config.json and cls.LEGACY_SETTINGS_FILE;
    its head settings updated by `overrides`; the weights through the matching report);
    otherwise the encoder of encoder.weights.h5 / pretrainer.weights.h5 under a new head
    (`new_head` is the constructor's keyword arguments for it).

    Args:
        cls: the class (WEIGHTS_FILE, EXTRA_PARTS, HEAD_SETTINGS, LEGACY_SETTINGS_FILE).
        encoder_class: AlbertEncoder (passed in: this module does not import the encoder).
        directory: the pretrained directory.
        overrides: keyword arguments given to from_pretrained (None values dropped).
        new_head: keyword arguments for a new head.
        check: (found head settings) -> None, raising ValueError for an argument that
            may not differ from the directory's.
    """
    directory = os.fspath(directory)
    overrides = {k: v for k, v in overrides.items() if v is not None}
    weights = files.join(directory, cls.WEIGHTS_FILE)
    config_path = files.join(directory, CONFIG_NAME)
    record, source = read_record(directory)
    if not files.isfile(weights):
        encoder_sources = (ENCODER_WEIGHTS, PRETRAINER_WEIGHTS)
        if (record is not None or files.isfile(config_path)) and not any(
                files.isfile(files.join(directory, name)) for name in encoder_sources):
            raise ValueError(f"{directory}: none of {cls.WEIGHTS_FILE}, {', '.join(encoder_sources)}.")
        encoder = encoder_class.from_pretrained(directory)
        logger.info("%s: no %s; a new %s on the pretrained encoder.", directory, cls.WEIGHTS_FILE, cls.EXTRA_PARTS)
        return cls(encoder, **dict(new_head, **overrides))
    settings = read_head_settings(cls, directory, record, source)
    if check:
        check(settings)
    if record is not None:
        return _load(model_from_record(record, source, cls, **overrides), weights, directory, source)
    if not files.isfile(config_path):
        raise ValueError(f"{directory}: no {CONFIG_NAME}; expected a directory written by albert_tf.")
    model = cls(AlbertConfig.from_json_file(config_path), **dict(settings, **overrides))
    return _load(model, weights, directory, legacy=cls.LEGACY_SETTINGS_FILE)
