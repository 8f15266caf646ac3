"""What the fine-tuned models share (AlbertForQuestionAnswering, AlbertForMultipleChoice):
an encoder given or built from a config, a head built in the constructor, the head's
settings in a JSON file beside the weights of a pretrained directory, and the config round
trip.

    DIR/albert_config.json
    DIR/<SETTINGS_FILE>        the constructor arguments beside the encoder (HEAD_SETTINGS)
    DIR/<WEIGHTS_FILE>         encoder and head

A subclass sets WEIGHTS_FILE, EXTRA_PARTS (pretrained.PretrainedMixin), SETTINGS_FILE,
HEAD_SETTINGS (the attributes saved, in that order) and SETTINGS_HOLD (what the settings
file holds, for the message when it is missing); its constructor calls
`super().__init__(encoder, **kwargs)`, then makes its head and `_build_head`s it.
"""

import os

import keras

from albert_tf.modeling import pretrained
from albert_tf.modeling.config import AlbertConfig
from albert_tf.modeling.encoder import INPUT_NAMES, AlbertEncoder
from albert_tf.modeling.runtime import RuntimeOptions
from albert_tf.storage import atomic, files


class FineTunedModel(pretrained.PretrainedMixin, RuntimeOptions, keras.Model):
    """An ALBERT encoder (`self.encoder`) with a task head (`self.head`).

    Args:
        encoder: an `AlbertEncoder`, or an `AlbertConfig` (or a dict of its keys) to
            build a new one (named "encoder").

    Run-time options of the encoder (padding skipping, rematerialization, ...):
    `configure_runtime` / `runtime_options` (modeling.runtime.RuntimeOptions).
    """

    SETTINGS_FILE = None
    HEAD_SETTINGS = ()
    SETTINGS_HOLD = "the head's settings"

    def __init__(self, encoder, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(encoder, keras.layers.Layer):
            encoder = AlbertEncoder(AlbertConfig.from_dict(encoder), name="encoder")
        if not isinstance(getattr(encoder, "config", None), AlbertConfig):
            raise TypeError(f"encoder must be an AlbertEncoder (or an AlbertConfig), got {type(encoder).__name__}.")
        self.encoder = encoder

    def _build_head(self):
        # built here, outside any name scope: the head's variable paths are `<head name>/...`
        self.head.build((None, None, self.encoder.config.hidden_size))
        self.built = True

    @property
    def config(self):
        """The encoder's AlbertConfig."""
        return self.encoder.config

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
        """The constructor arguments beside the encoder (SETTINGS_FILE)."""
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
        """Writes albert_config.json, SETTINGS_FILE and WEIGHTS_FILE into `directory`
        (each atomically)."""
        directory = os.fspath(directory)
        atomic.write_json(files.join(directory, self.SETTINGS_FILE), self.head_settings())
        return pretrained.save_pretrained(self, directory)

    @classmethod
    def read_settings(cls, directory):
        """SETTINGS_FILE of a pretrained directory holding WEIGHTS_FILE, checked
        (pretrained.read_head_settings)."""
        return pretrained.read_head_settings(directory, cls.SETTINGS_FILE, cls.HEAD_SETTINGS, cls.WEIGHTS_FILE,
                                             cls.SETTINGS_HOLD)

    @classmethod
    def _load_pretrained(cls, directory, overrides, new_head, settings=None):
        """from_pretrained's work (pretrained.load_head_model): `settings()` (default
        read_settings) updated by `overrides`, or a new head (`new_head`) on the encoder."""
        return pretrained.load_head_model(cls, AlbertEncoder, directory, cls.SETTINGS_FILE,
                                          settings or (lambda: cls.read_settings(directory)), overrides, new_head)
