"""The albert_tf pretrained directory: albert_config.json + Keras weights files.

    DIR/albert_config.json
    DIR/pretrainer.weights.h5   (AlbertPretrainer: encoder and both heads), or
    DIR/encoder.weights.h5      (AlbertEncoder only, from sources without heads)

Keras `.weights.h5` is backend-neutral, so loading needs Keras only. run_pretraining
writes pretrainer.weights.h5 beside its checkpoints, so a run's output_dir is such a
directory too; tools/convert writes them from TF1, Hugging Face and keras-hub weights.

Example:
```python
encoder = AlbertEncoder.from_pretrained("converted/albert_base")
pretrainer = AlbertPretrainer.from_pretrained("runs/base")
```
"""

import os

import keras

from albert_tf.modeling.config import AlbertConfig

CONFIG_NAME = "albert_config.json"
PRETRAINER_WEIGHTS = "pretrainer.weights.h5"
ENCODER_WEIGHTS = "encoder.weights.h5"


def _write_weights(model, path):
    tmp = path[: -len(".weights.h5")] + f".tmp-{os.getpid()}.weights.h5"
    model.save_weights(tmp)
    os.replace(tmp, path)


def save_pretrained(model, directory):
    """Writes `model` (AlbertEncoder or AlbertPretrainer) and its config into `directory`.

    Files are written under temporary names and renamed, so a reader never sees a half
    file.
    """
    from albert_tf.modeling.pretrainer import AlbertPretrainer

    os.makedirs(directory, exist_ok=True)
    model.config.to_json_file(os.path.join(directory, CONFIG_NAME))
    name = PRETRAINER_WEIGHTS if isinstance(model, AlbertPretrainer) else ENCODER_WEIGHTS
    _write_weights(model, os.path.join(directory, name))
    return directory


def load_pretrained(cls, directory, **kwargs):
    """Builds `cls` (AlbertEncoder or AlbertPretrainer) from a pretrained directory.

    Raises:
        ValueError: naming the directory and what is missing or does not match.
    """
    from albert_tf.modeling.pretrainer import AlbertPretrainer

    directory = os.fspath(directory)
    config_path = os.path.join(directory, CONFIG_NAME)
    if not os.path.isfile(config_path):
        raise ValueError(f"{directory}: no {CONFIG_NAME}; expected a directory written by albert_tf "
                         "(python -m albert_tf.convert, or a run_pretraining output_dir).")
    config = AlbertConfig.from_json_file(config_path)
    pretrainer_file = os.path.join(directory, PRETRAINER_WEIGHTS)
    encoder_file = os.path.join(directory, ENCODER_WEIGHTS)
    has_pretrainer, has_encoder = os.path.isfile(pretrainer_file), os.path.isfile(encoder_file)
    if issubclass(cls, AlbertPretrainer):
        if not has_pretrainer:
            raise ValueError(f"{directory}: no {PRETRAINER_WEIGHTS}" + (
                f" (only {ENCODER_WEIGHTS}: the source had no pretraining heads)." if has_encoder else "."))
        return _load(cls(config, **kwargs), pretrainer_file, directory)
    if has_encoder:
        return _load(cls(config, **kwargs), encoder_file, directory)
    if has_pretrainer:  # an encoder out of a pretrainer's weights
        return _load(AlbertPretrainer(config, **kwargs), pretrainer_file, directory).encoder
    raise ValueError(f"{directory}: neither {ENCODER_WEIGHTS} nor {PRETRAINER_WEIGHTS}.")


def _load(model, weights_file, directory):
    try:
        model.load_weights(weights_file)
    except ValueError as e:
        raise ValueError(f"{directory}: the weights do not match {CONFIG_NAME} ({e}).") from None
    return model


class PretrainedMixin:
    """Config round trip and pretrained directories for AlbertEncoder and AlbertPretrainer.

    `get_config` returns only the constructor arguments (`config` as a dict,
    `use_one_hot_embeddings`, and Keras' name, trainable, dtype).
    """

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
        """Writes albert_config.json and the weights into `directory`."""
        return save_pretrained(self, directory)
