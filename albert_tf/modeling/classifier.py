"""AlbertClassifier: a sentence(-pair) classification or regression head on an encoder.

Shape legend: B batch, T sequence length, H hidden size, C classes (1 for regression).

Its pretrained directory (`save_pretrained` / `from_pretrained`): modeling/finetuned.py.
"""

import os

import keras

from albert_tf.compat import FunctionalWeightsLayout
from albert_tf.modeling.embeddings import truncated_normal
from albert_tf.modeling.encoder import encoder_inputs
from albert_tf.modeling.finetuned import FineTunedModel
from albert_tf.storage import files

CLASSIFIER_WEIGHTS = "classifier.weights.h5"


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertClassifier(FunctionalWeightsLayout, FineTunedModel):
    """The release's classifier: dropout on `pooled_output`, then a dense `output` layer.

    logits = dense_{H->C}(dropout(encoder(inputs)["pooled_output"]))

    Args:
        encoder: an `AlbertEncoder` (or an `AlbertConfig` / dict of its keys to build one),
            or an exported encoder loaded with `albert_tf.export.keras3.EncoderTFSMLayer`:
            a Keras layer mapping the dict of int32 [B, T] `input_word_ids`, `input_mask`,
            `input_type_ids` to a dict holding `pooled_output` [B, H].
        num_classes: int. C; 1 makes a regression head (STS-B).
        dropout: float. Dropout rate on pooled_output during training (release: 0.1).
        initializer_range: float. Truncated-normal stddev of the output kernel.

    Inputs: the encoder's dict [B, T] (other keys ignored).

    Outputs: float32 logits [B, C] (scores [B, 1] for regression). The head (dropout and
    dense) computes in float32 under any policy, so a float32 `pooled_output` (an export's)
    is not rounded to bf16 before it. Variable paths: the encoder's, then `output/kernel`,
    `output/bias`; checkpoint objects `encoder`, `output_dense`.

    Called as in `AlbertEncoder`'s example, on the same input dict.
    """

    WEIGHTS_FILE = CLASSIFIER_WEIGHTS
    HEAD_SETTINGS = ("num_classes", "dropout", "initializer_range")
    EXTRA_PARTS = "classifier head"
    ENCODER_NEEDS_CONFIG = False  # an export's TFSMLayer has none

    def __init__(self, encoder, num_classes, dropout=0.1, initializer_range=0.02, **kwargs):
        if int(num_classes) < 1:
            raise ValueError(f"num_classes must be at least 1 (1 = regression), got {num_classes}.")
        kwargs.setdefault("name", "albert_classifier")
        super().__init__(encoder, **kwargs)

        # === Layers ===
        self.output_dropout = keras.layers.Dropout(dropout, dtype="float32", name="output_dropout")
        self.output_dense = keras.layers.Dense(
            int(num_classes), kernel_initializer=truncated_normal(initializer_range), dtype="float32", name="output"
        )
        config = self.config
        if config is not None:
            hidden_size = config.hidden_size
        else:  # an export's encoder: its pooled_output's width, from a symbolic call
            hidden_size = self.encoder(encoder_inputs())["pooled_output"].shape[-1]
        self.output_dense.build((None, hidden_size))  # outside any name scope: `output/kernel`, `output/bias`
        self.built = True

        # === Config ===
        self.num_classes = int(num_classes)
        self.dropout = float(dropout)
        self.initializer_range = float(initializer_range)

    def call(self, inputs, training=None):
        pooled = self.encoder(self._encoder_inputs(inputs), training=training)["pooled_output"]  # [B, H]
        return self.output_dense(self.output_dropout(pooled, training=training))  # [B, C]

    @property
    def is_regression(self):
        return self.num_classes == 1

    @classmethod
    def from_pretrained(cls, directory, num_classes=None, dropout=None):
        """Builds the model from an albert_tf pretrained directory.

        With classifier.weights.h5 there: that model (`dropout`, when given, overrides the
        record's; a different `num_classes` is an error). Otherwise the encoder of
        encoder.weights.h5 or pretrainer.weights.h5 under a new head of `num_classes`.

        Raises:
            ValueError: naming the directory and what is missing or does not match.
        """
        directory = os.fspath(directory)

        def check(found):
            if num_classes is not None and int(num_classes) != found["num_classes"]:
                raise ValueError(f"{directory}: holds a head of {found['num_classes']} classes, not {num_classes}.")

        if num_classes is None and not files.isfile(files.join(directory, cls.WEIGHTS_FILE)):
            raise ValueError(f"{directory}: no {cls.WEIGHTS_FILE}; a new head on its encoder needs num_classes.")
        return cls._load_pretrained(directory, {"dropout": dropout}, new_head={"num_classes": num_classes},
                                    check=check)
