"""Pretraining heads: the tied masked-LM head and the sentence-order head.

Shape legend: B batch, T sequence length, P predictions per sequence, H hidden size,
E embedding size, V vocabulary size.
"""

import keras
from keras import ops

from albert_tf.modeling.embeddings import LAYER_NORM_EPSILON, check_rank, dense_layer, truncated_normal
from albert_tf.modeling.encoder_block import get_activation


def gather_positions(sequence, positions):
    """[B, T, H] gathered at int [B, P] -> [B, P, H]."""
    check_rank(sequence, 3, "sequence_output")
    check_rank(positions, 2, "masked_lm_positions")
    index = ops.expand_dims(ops.cast(positions, "int32"), -1)  # [B, P, 1]
    return ops.take_along_axis(sequence, index, axis=1)


class OutputWeightsHead(keras.layers.Layer):
    """The release's output layer of a head: logits = x . output_weights^T + output_bias, with
    `output_weights` [UNITS, H] (truncated normal, stddev `initializer_range`, its own
    initializer instance) and `output_bias` [UNITS] (zeros); float32 unless given a dtype.

    Args:
        hidden_size: int. H.
        initializer_range: float. Truncated-normal stddev of `output_weights`.
    """

    UNITS = 2

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        kwargs.setdefault("dtype", "float32")  # logits in float32 under a mixed policy too
        super().__init__(**kwargs)
        self.hidden_size = int(hidden_size)
        self.initializer_range = float(initializer_range)

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(name="output_weights", shape=(self.UNITS, self.hidden_size),
                                              initializer=truncated_normal(self.initializer_range))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.UNITS,), initializer="zeros")
        self.built = True

    def logits(self, x):
        """float [..., H] -> [..., UNITS]."""
        return ops.matmul(x, ops.transpose(self.output_weights)) + self.output_bias

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range)
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMaskedLMHead(keras.layers.Layer):
    """Masked-LM head tied to the input word embeddings.

    x = LayerNorm(act(dense_{H->E}(gather(sequence_output, positions))))
    logits = x . word_embeddings^T + output_bias

    Variables: `transform/kernel` [H, E], `transform/bias` [E], `transform_LayerNorm`
    (gamma, beta [E]), `output_bias` [V]; `word_embeddings` is the encoder's.

    Args:
        embeddings: the encoder's `AlbertEmbeddings` layer (its `word_embeddings` [V, E]
            is the output projection).
        hidden_act: str. Activation of the transform, from the config.
        initializer_range: float. Truncated-normal stddev.

    Call args:
        sequence_output: float [B, T, H].
        masked_lm_positions: int [B, P].

    Returns:
        float32 [B, P, V] logits: the head computes in float32 (its default dtype) whatever
        the encoder's policy (a [B, P] gather, a tiny share of the work).

    Example:
    ```python
    encoder = AlbertEncoder(AlbertConfig.from_preset("albert_tiny"))
    head = AlbertMaskedLMHead(encoder.embeddings)
    head(np.ones((2, 5, 32), "float32"), np.array([[1, 2], [0, 4]])).shape  # (2, 2, 1000)
    ```
    """

    def __init__(self, embeddings, hidden_act="gelu", initializer_range=0.02, **kwargs):
        kwargs.setdefault("dtype", "float32")  # logits in float32 under a mixed policy too
        super().__init__(**kwargs)
        self.embeddings = embeddings
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.transform = dense_layer(embeddings.embedding_size, initializer_range, self.dtype_policy, "transform",
                                     activation=get_activation(hidden_act))
        self.transform_layer_norm = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy,
                                                                    name="transform_LayerNorm")

    def build(self, sequence_output_shape, masked_lm_positions_shape=None):
        self.transform.build((None, None, sequence_output_shape[-1]))
        self.transform_layer_norm.build((None, None, self.embeddings.embedding_size))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.embeddings.vocab_size,), initializer="zeros")
        self.built = True

    def call(self, sequence_output, masked_lm_positions):
        x = gather_positions(sequence_output, masked_lm_positions)  # [B, P, H]
        x = self.transform_layer_norm(self.transform(x))  # [B, P, E]
        table = ops.cast(self.embeddings.word_embeddings, self.compute_dtype)  # [V, E]
        logits = ops.matmul(x, ops.transpose(table)) + self.output_bias  # [B, P, V]
        return logits

    def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape):
        return tuple(masked_lm_positions_shape) + (self.embeddings.vocab_size,)

    def get_config(self):
        # The embeddings layer is shared with the encoder; the pretrainer rebuilds both.
        config = super().get_config()
        config.update(hidden_act=self.hidden_act, initializer_range=self.initializer_range)
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSentenceOrderHead(OutputWeightsHead):
    """Sentence-order (SOP) classifier: logits = pooled . W^T + b.

    Label 0: segments in order; 1: swapped. Variables as the release:
    `output_weights` [2, H], `output_bias` [2].

    Args:
        hidden_size: int. H.
        initializer_range: float. Truncated-normal stddev.

    Call args:
        pooled_output: float [B, H].

    Returns:
        float32 [B, 2] logits (float32 under a mixed policy too).

    Example:
    ```python
    AlbertSentenceOrderHead(8)(np.ones((3, 8), "float32")).shape  # (3, 2)
    ```
    """

    def call(self, pooled_output):
        check_rank(pooled_output, 2, "pooled_output")
        return self.logits(pooled_output)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], 2)
