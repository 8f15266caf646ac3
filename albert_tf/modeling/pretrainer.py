"""AlbertPretrainer: encoder + tied masked-LM head + sentence-order head.

Shape legend: B batch, T sequence length, P predictions per sequence, V vocabulary.
"""

import keras

from albert_tf.modeling.config import AlbertConfig
from albert_tf.modeling.encoder import AlbertEncoder, _deserialize_dtype, encoder_inputs
from albert_tf.modeling.heads import AlbertMaskedLMHead, AlbertSentenceOrderHead
from albert_tf.modeling.pretrained import ENCODER_WEIGHTS, PRETRAINER_WEIGHTS, PretrainedMixin
from albert_tf.modeling.runtime import RuntimeOptions


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPretrainer(PretrainedMixin, RuntimeOptions, keras.Model):
    """ALBERT with its two pretraining heads (masked LM tied to the embeddings, SOP).

    Args:
        config: `AlbertConfig` or a dict of its keys.
        use_one_hot_embeddings: bool. One-hot matmul word lookup (TPU friendly).
        dtype: a Keras dtype policy name or object, e.g. "mixed_bfloat16": the encoder
            computes in it; both heads compute in float32 (float32 logits for the losses).
        runtime: the encoder's run-time options (AlbertEncoder's `runtime`; not part of
            `get_config`); `configure_runtime` / `runtime_options` change them later
            (modeling.runtime.RuntimeOptions).

    Inputs: dict of int32 `input_word_ids`, `input_mask`, `input_type_ids` [B, T] and
    `masked_lm_positions` [B, P].

    Outputs: dict float32 `mlm_logits` [B, P, V], `sop_logits` [B, 2].

    Losses and metrics: `albert_tf.modeling.losses` (`pretraining_terms`,
    `pretraining_loss`, `pretraining_metrics`), used by training and evaluation.

    Called as in `AlbertEncoder`'s example, `masked_lm_positions` added to the dict.
    """

    # its file in a pretrained directory; the encoder's weights are inside it
    WEIGHTS_FILE = PRETRAINER_WEIGHTS
    SUBMODELS = {"encoder": ENCODER_WEIGHTS}
    EXTRA_PARTS = "pretraining heads"

    def __init__(self, config, use_one_hot_embeddings=False, dtype=None, runtime=None, **kwargs):
        config = AlbertConfig.from_dict(config)
        dtype = _deserialize_dtype(dtype)
        kwargs.setdefault("name", "albert_pretrainer")

        # === Layers === (attributes only once the Keras model exists: a PyTorch module takes
        # sub-modules after its own __init__)
        encoder = AlbertEncoder(config, use_one_hot_embeddings=use_one_hot_embeddings, dtype=dtype, runtime=runtime,
                                name="encoder")
        masked_lm_head = AlbertMaskedLMHead(encoder.embeddings, hidden_act=config.hidden_act,
                                            initializer_range=config.initializer_range, name="predictions")
        sentence_order_head = AlbertSentenceOrderHead(config.hidden_size, initializer_range=config.initializer_range,
                                                      name="seq_relationship")

        # === Functional model ===
        inputs = encoder_inputs()
        inputs["masked_lm_positions"] = keras.Input(shape=(None,), dtype="int32", name="masked_lm_positions")
        encoded = encoder({k: inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})
        mlm_logits = masked_lm_head(encoded["sequence_output"], inputs["masked_lm_positions"])
        sop_logits = sentence_order_head(encoded["pooled_output"])
        super().__init__(inputs=inputs, outputs={"mlm_logits": mlm_logits, "sop_logits": sop_logits}, dtype=dtype,
                         **kwargs)
        self.encoder = encoder
        self.masked_lm_head = masked_lm_head
        self.sentence_order_head = sentence_order_head

        # === Config ===
        self.config = config
        self.use_one_hot_embeddings = use_one_hot_embeddings
