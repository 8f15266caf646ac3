"""What the fine-tuned models share (AlbertClassifier, AlbertForQuestionAnswering,
AlbertForMultipleChoice): an encoder given or built from a config, a head built in the
constructor, the config round trip and the pretrained directory (modeling/pretrained.py,
docs/model_record.md; 0.2.0's directories hold LEGACY_SETTINGS_FILE instead of model.json).

A subclass sets WEIGHTS_FILE, EXTRA_PARTS (pretrained.PretrainedMixin), HEAD_SETTINGS (its
constructor arguments besides the encoder, in order: `get_config`), LEGACY_SETTINGS_FILE
and SETTINGS_HOLD (0.2.0's file and what it holds, for the message when it is missing);
its constructor calls `super().__init__(encoder, **kwargs)`, then makes its head and
`_build_head`s it.
"""

import os

import keras

from albert_tf.modeling import pretrained
from albert_tf.modeling.config import AlbertConfig
from albert_tf.modeling.encoder import INPUT_NAMES, AlbertEncoder
from albert_tf.modeling.runtime import RuntimeOptions


class FineTunedModel(pretrained.PretrainedMixin, RuntimeOptions, keras.Model):
    """An ALBERT encoder (`self.encoder`) with a task head.

    Args:
        encoder: an `AlbertEncoder`, or an `AlbertConfig` (or a dict of its keys) to
            build a new one (named "encoder"); a class with ENCODER_NEEDS_CONFIG False
            (AlbertClassifier) also takes another Keras layer (an export's TFSMLayer).

    Run-time options of the encoder (padding skipping, rematerialization, ...):
    `configure_runtime` / `runtime_options` (modeling.runtime.RuntimeOptions).
    """

    HEAD_SETTINGS = ()
    LEGACY_SETTINGS_FILE = None
    SETTINGS_HOLD = "the head's settings"
    ENCODER_NEEDS_CONFIG = True

    def __init__(self, encoder, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(encoder, keras.layers.Layer):
            encoder = AlbertEncoder(AlbertConfig.from_dict(encoder), name="encoder")
        if self.ENCODER_NEEDS_CONFIG and not isinstance(getattr(encoder, "config", None), AlbertConfig):
            raise TypeError(f"encoder must be an AlbertEncoder (or an AlbertConfig), got {type(encoder).__name__}.")
        self.encoder = encoder

    def _build_head(self):
        # built here, outside any name scope: the head's variable paths are `<head name>/...`
        self.head.build((None, None, self.encoder.config.hidden_size))
        self.built = True

    @property
    def config(self):
        """The encoder's AlbertConfig (None for an encoder without one, e.g. an export's TFSMLayer)."""
        config = getattr(self.encoder, "config", None)
        return config if isinstance(config, AlbertConfig) else None

    def build(self, input_shape=None):
        # every weight exists from __init__ on
        self.built = True

    def _encoder_inputs(self, inputs):
        """{name: inputs[name]} of the encoder's INPUT_NAMES; ValueError naming those missing."""
        missing = [name for name in INPUT_NAMES if name not in inputs]
        if missing:
            raise ValueError(f"{type(self).__name__}: missing inputs {', '.join(missing)} "
                             f"(got {', '.join(sorted(inputs))}).")
        return {name: inputs[name] for name in INPUT_NAMES}

    def head_settings(self):
        """The constructor arguments besides the encoder (HEAD_SETTINGS)."""
        return {name: getattr(self, name) for name in self.HEAD_SETTINGS}

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            **self.head_settings(),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        encoder = config["encoder"]
        if isinstance(encoder, dict) and "class_name" in encoder:
            config["encoder"] = keras.saving.deserialize_keras_object(encoder)
        return cls(**config)

    def save_pretrained(self, directory):
        """Writes model.json, albert_config.json and WEIGHTS_FILE into `directory` (each atomically)."""
        return pretrained.save_pretrained(self, os.fspath(directory))

    @classmethod
    def read_settings(cls, directory):
        """The HEAD_SETTINGS of a pretrained directory holding WEIGHTS_FILE: its model.json's,
        else 0.2.0's LEGACY_SETTINGS_FILE (pretrained.read_head_settings). Raises ValueError."""
        return pretrained.read_head_settings(cls, directory, *pretrained.read_record(directory))

    @classmethod
    def _load_pretrained(cls, directory, overrides, new_head, check=None):
        """from_pretrained's work (pretrained.load_head_model): the directory's model with
        its head settings updated by `overrides` (`check` raising for one that may not
        differ), or a new head (`new_head`) on the encoder."""
        return pretrained.load_head_model(cls, AlbertEncoder, directory, overrides, new_head, check)
