"""The ALBERT transformer block as two sub-layers, each sharable across layers (`AlbertConfig.sharing`),
post-LN as the original:

    h   = LayerNorm(x + dropout(attention(x)))        # AlbertAttention
    out = LayerNorm(h + dropout(W2 act(W1 h)))        # AlbertFeedForward

Shape legend: B batch, T sequence length, H hidden size, N heads, D = H / N, I
intermediate size.

Under a mixed policy the attention core and the residual stream compute in float32, only each
dense layer's input rounded to the compute dtype (docs/design_encoder.md#mixed-precision-in-the-block).

A sub-layer's dense layers, dropouts and token layout run through `run=`: called alone,
`PlainParts` (its Keras layers as they are, on [B, T, H]); in AlbertEncoder, the encoder's
run-time pieces (modeling/encoder_runtime.py `Parts`: rows, weights cast once, dropout seeds).
Design: docs/design_encoder.md
"""

import math

import keras
from keras import ops

from albert_tf.modeling.embeddings import check_rank, dense_layer, layer_norm
from albert_tf.modeling.encoder_runtime import add_bias, cast_dense  # noqa: F401  (add_bias: its old import path)

# Added to attention scores at padded key positions, as in the release.
_MASK_ADDER = -10000.0


class PlainParts:
    """A sub-layer's parts as they are: Keras layers on [B, T, H] (the `run=` of a sub-layer
    called alone; encoder_runtime.Parts has the same methods, with the encoder's pieces)."""

    def __init__(self, training):
        self.training = training

    def dense(self, layer, x):
        return layer(x)

    def dropout(self, layer, x):
        return layer(x, training=self.training)

    def tokens(self, x):
        return x

    def padded(self, x):
        return x


class SubLayer(keras.layers.Layer):
    """What the encoder asks of a sharable sub-layer: its Dense and Dropout layers, in call order
    (the attributes named in `DENSE` and `DROPOUT`). Its config: the attributes named in `CONFIG`."""

    CONFIG = ()
    DENSE = ()
    DROPOUT = ()

    def get_config(self):
        return {**super().get_config(), **{name: getattr(self, name) for name in self.CONFIG}}

    def compute_output_shape(self, x_shape, *args):
        return x_shape

    def dense_layers(self):
        return tuple(getattr(self, name) for name in self.DENSE)

    def dropout_layers(self):
        return tuple(getattr(self, name) for name in self.DROPOUT)

    def cast_weights(self, dtype):
        """[(kernel, bias)] of `dense_layers()` cast to `dtype`: for the encoder's cast_once piece."""
        return cast_dense(self.dense_layers(), dtype)


def gelu_tanh(x):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): the original "gelu"."""
    return keras.activations.gelu(x, approximate=True)


def gelu_exact(x):
    return keras.activations.gelu(x, approximate=False)


def get_activation(name):
    """Maps an albert_config `hidden_act` to a Keras activation callable."""
    table = {
        "gelu": gelu_tanh,
        "gelu_new": gelu_tanh,
        "gelu_exact": gelu_exact,
        "relu": keras.activations.relu,
        "tanh": keras.activations.tanh,
        "swish": keras.activations.silu,
        "silu": keras.activations.silu,
        "linear": keras.activations.linear,
    }
    if name not in table:
        raise ValueError(f"unknown hidden_act {name!r}; expected one of {', '.join(table)}.")
    return table[name]


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertAttention(SubLayer):
    """Multi-head self-attention with residual and LayerNorm.

    Variables: `query`, `key`, `value`, `dense` (each kernel [H, H], bias [H]),
    `LayerNorm` (gamma, beta [H]).

    Args:
        hidden_size: int. H.
        num_attention_heads: int. N; divides H.
        attention_probs_dropout_prob: float. Dropout on the attention probabilities.
        hidden_dropout_prob: float. Dropout on the output before the residual.
        initializer_range: float. Truncated-normal stddev.

    Call args:
        x: float [B, T, H] (in the encoder, its rows: `run`).
        input_mask: int or bool [B, T], 1 for real tokens, 0 for padding.
        training: bool.
        run: None (`PlainParts`), or the encoder's parts for this application (module doc).

    Returns:
        float, the shape of x.

    Example:
    ```python
    layer = AlbertAttention(hidden_size=8, num_attention_heads=2)
    layer(np.ones((2, 5, 8), "float32"), np.ones((2, 5), "int32")).shape  # (2, 5, 8)
    ```
    """

    CONFIG = ("hidden_size", "num_attention_heads", "attention_probs_dropout_prob", "hidden_dropout_prob",
              "initializer_range")
    DENSE = ("query", "key", "value", "dense")
    DROPOUT = ("probs_dropout", "output_dropout")

    def __init__(self, hidden_size, num_attention_heads, attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_attention_heads "
                             f"{num_attention_heads}.")
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.hidden_dropout_prob = hidden_dropout_prob
        self.initializer_range = initializer_range
        self.head_size = hidden_size // num_attention_heads

        self.query = dense_layer(hidden_size, initializer_range, self.dtype_policy, "query")
        self.key = dense_layer(hidden_size, initializer_range, self.dtype_policy, "key")
        self.value = dense_layer(hidden_size, initializer_range, self.dtype_policy, "value")
        self.dense = dense_layer(hidden_size, initializer_range, self.dtype_policy, "dense")
        self.layer_norm = layer_norm()
        # float32: the attention core computes in float32 under every policy (module doc)
        self.probs_dropout = keras.layers.Dropout(attention_probs_dropout_prob, dtype="float32")
        self.output_dropout = keras.layers.Dropout(hidden_dropout_prob, dtype=self.dtype_policy)

    def build(self, x_shape, input_mask_shape=None):
        shape = (None, None, self.hidden_size)
        for layer in (self.query, self.key, self.value, self.dense, self.layer_norm):
            layer.build(shape)
        self.built = True

    def call(self, x, input_mask, training=None, run=None):
        check_rank(input_mask, 2, "input_mask")
        run = run or PlainParts(training)
        batch, length = ops.shape(input_mask)[0], ops.shape(input_mask)[1]

        def heads(t):  # -> [B, N, T, D], float32 (the core's dtype)
            t = ops.reshape(ops.cast(run.padded(t), "float32"), (batch, length, self.num_attention_heads, -1))
            return ops.transpose(t, (0, 2, 1, 3))

        q, k, v = (heads(run.dense(layer, x)) for layer in (self.query, self.key, self.value))
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(self.head_size))  # [B, N, T, T]
        # [B, 1, 1, T]; expand_dims, not [:, None, None, :]: LiteRT's StridedSlice takes no new axes
        # at dynamic shapes (export/litert_model.py)
        mask = ops.expand_dims(ops.expand_dims(ops.cast(input_mask, "float32"), 1), 1)
        scores = scores + (1.0 - mask) * _MASK_ADDER
        probs = run.dropout(self.probs_dropout, ops.softmax(scores, axis=-1))
        context = ops.matmul(probs, v)  # [B, N, T, D]
        context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (batch, length, self.hidden_size))
        context = run.tokens(ops.cast(context, self.compute_dtype))
        out = run.dropout(self.output_dropout, run.dense(self.dense, context))
        return self.layer_norm(ops.cast(x, "float32") + ops.cast(out, "float32"))


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertFeedForward(SubLayer):
    """Position-wise feed-forward network with residual and LayerNorm.

    Variables: `intermediate` (kernel [H, I], bias [I]), `output_dense` (kernel [I, H],
    bias [H]), `LayerNorm` (gamma, beta [H]).

    Args:
        hidden_size: int. H.
        intermediate_size: int. I.
        hidden_act: str. An albert_config activation name ("gelu" = tanh approximation).
        hidden_dropout_prob: float. Dropout on the output before the residual.
        initializer_range: float. Truncated-normal stddev.

    Call args:
        x: float [B, T, H] (in the encoder, its rows: every op is per token).
        training: bool.
        run: None (`PlainParts`), or the encoder's parts for this application (module doc).

    Returns:
        float, x's shape.

    Example:
    ```python
    layer = AlbertFeedForward(hidden_size=8, intermediate_size=32)
    layer(np.ones((2, 5, 8), "float32")).shape  # (2, 5, 8)
    ```
    """

    CONFIG = ("hidden_size", "intermediate_size", "hidden_act", "hidden_dropout_prob", "initializer_range")
    DENSE = ("intermediate", "output_dense")
    DROPOUT = ("output_dropout",)

    def __init__(self, hidden_size, intermediate_size, hidden_act="gelu", hidden_dropout_prob=0.0,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.initializer_range = initializer_range

        self.intermediate = dense_layer(intermediate_size, initializer_range, self.dtype_policy, "intermediate",
                                        activation=get_activation(hidden_act))
        self.output_dense = dense_layer(hidden_size, initializer_range, self.dtype_policy, "output_dense")
        self.layer_norm = layer_norm()
        self.output_dropout = keras.layers.Dropout(hidden_dropout_prob, dtype=self.dtype_policy)

    def build(self, input_shape):
        self.intermediate.build((None, None, self.hidden_size))
        self.output_dense.build((None, None, self.intermediate_size))
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, x, training=None, run=None):
        if len(x.shape) not in (2, 3):
            raise ValueError(f"`x` must have rank 3 ([B, T, H]) or 2 ([R, H]), got shape {tuple(x.shape)}.")
        run = run or PlainParts(training)
        out = run.dropout(self.output_dropout, run.dense(self.output_dense, run.dense(self.intermediate, x)))
        return self.layer_norm(ops.cast(x, "float32") + ops.cast(out, "float32"))
