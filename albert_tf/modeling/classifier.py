"""AlbertClassifier: a sentence(-pair) classification or regression head on an encoder.

Shape legend: B batch, T sequence length, H hidden size, C classes (1 for regression).
"""

import keras

from albert_tf.modeling.embeddings import truncated_normal
from albert_tf.modeling.encoder import INPUT_NAMES, encoder_inputs
from albert_tf.modeling.runtime import RuntimeOptions


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertClassifier(RuntimeOptions, keras.Model):
    """The release's classifier: dropout on `pooled_output`, then a dense `output` layer.

    logits = dense_{H->C}(dropout(encoder(inputs)["pooled_output"]))

    Args:
        encoder: a Keras layer mapping the dict of int32 [B, T] `input_word_ids`,
            `input_mask`, `input_type_ids` to a dict holding `pooled_output` [B, H]:
            an `AlbertEncoder`, or an exported encoder loaded with
            `albert_tf.export.keras3.EncoderTFSMLayer`.
        num_classes: int. C; 1 makes a regression head (STS-B).
        dropout: float. Dropout rate on pooled_output during training (release: 0.1).
        initializer_range: float. Truncated-normal stddev of the output kernel.

    Inputs: the encoder's dict [B, T].

    Outputs: float32 logits [B, C] (scores [B, 1] for regression). The head (dropout and
    dense) computes in float32 under any policy, so a float32 `pooled_output` (an export's)
    is not rounded to bf16 before it.

    Run-time options of the encoder (padding skipping, rematerialization, ...):
    `configure_runtime` / `runtime_options` (modeling.runtime.RuntimeOptions; an exported
    encoder takes none).

    Example:
    ```python
    encoder = AlbertEncoder(AlbertConfig.from_preset("albert_tiny"))
    model = AlbertClassifier(encoder, num_classes=3)
    model({
        "input_word_ids": np.array([[2, 15, 27, 3, 0]], "int32"),
        "input_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
        "input_type_ids": np.zeros((1, 5), "int32"),
    }).shape  # (1, 3)
    ```
    """

    # the head's constructor arguments (as the fine-tuned models' HEAD_SETTINGS; modeling/records.py)
    HEAD_SETTINGS = ("num_classes", "dropout", "initializer_range")

    def __init__(self, encoder, num_classes, dropout=0.1, initializer_range=0.02, **kwargs):
        if int(num_classes) < 1:
            raise ValueError(f"num_classes must be at least 1 (1 = regression), got {num_classes}.")
        kwargs.setdefault("name", "albert_classifier")

        # === Layers === (attributes only once the Keras model exists: a PyTorch module takes
        # sub-modules after its own __init__)
        output_dropout = keras.layers.Dropout(dropout, dtype="float32", name="output_dropout")
        output_dense = keras.layers.Dense(
            int(num_classes), kernel_initializer=truncated_normal(initializer_range), dtype="float32", name="output"
        )

        # === Functional model ===
        inputs = encoder_inputs()
        pooled = encoder({k: inputs[k] for k in INPUT_NAMES})["pooled_output"]  # [B, H]
        logits = output_dense(output_dropout(pooled))  # [B, C]
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.encoder = encoder
        self.output_dropout = output_dropout
        self.output_dense = output_dense

        # === Config ===
        self.num_classes = int(num_classes)
        self.dropout = float(dropout)
        self.initializer_range = float(initializer_range)

    @property
    def config(self):
        """The encoder's AlbertConfig (None for an encoder without one, e.g. an export's TFSMLayer)."""
        return getattr(self.encoder, "config", None)

    @property
    def is_regression(self):
        return self.num_classes == 1

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "num_classes": self.num_classes,
            "dropout": self.dropout,
            "initializer_range": self.initializer_range,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
