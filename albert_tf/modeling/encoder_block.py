"""The ALBERT transformer block as two sharable sub-layers (post-LN, as the original).

    h   = LayerNorm(x + dropout(attention(x)))        # AlbertAttention
    out = LayerNorm(h + dropout(W2 act(W1 h)))        # AlbertFeedForward

A "block" is one attention sub-layer followed by one feed-forward sub-layer; either, both
or neither can be shared across layers (`AlbertConfig.sharing`, paper Table 5).

Shape legend: B batch, T sequence length, H hidden size, N heads, D = H / N, I
intermediate size, R the real (unpadded) tokens of a batch.

Both sub-layers take [B, T, H] or tokens flattened to rows, [R, H]: every per-token op (the
four attention projections, the feed-forward, the layer norms) then works on 2-D rows, and
only the attention itself is done on [B, T] after placing the tokens back. AlbertEncoder
always calls them with rows: every position (R = B * T, a reshape) or, skipping padding, the
real tokens alone (`indices=`, from `padding_indices`). Each real token's result is the same
as with padding (padded keys are masked out either way).

Mixed precision (a bf16 compute dtype, float32 variables): the attention core (scores,
softmax, dropout on the probabilities, probabilities x values) computes in float32; the
residual stream is float32 (each sub-layer adds and normalizes in float32, so only each
dense layer's input is rounded to bf16); every bf16 dense layer's bias gradient is
accumulated in float32 (`add_bias`); `cast_weights` gives the (kernel, bias) pairs in the
compute dtype once per forward, passed to every application (`cast=`).

Dropout: called alone, each sub-layer draws its masks from its own Dropout layers'
SeedGenerators; given `seeds=` (AlbertEncoder gives every site of every application its
own), it draws each mask statelessly from its seed at the layer's rate
(`modeling.dropout.dropout`): the same seed gives the same mask.

Design (why rows, why these parts in float32, the seeds): docs/design_encoder.md
"""

import math

import keras
from keras import ops

from albert_tf.modeling.dropout import dropout
from albert_tf.modeling.embeddings import LAYER_NORM_EPSILON, check_rank, truncated_normal

# Added to attention scores at padded key positions, as in the release.
_MASK_ADDER = -10000.0


def padding_indices(input_mask):
    """Where the real tokens of a padded batch are, for the padding-skipping forward.

    Args:
        input_mask: int or bool [B, T], 1 for real tokens.
    Returns:
        (token_index int32 [R]: flat position b * T + t of each real token, in order;
         padded_index int32 [B * T]: for each flat position, its row in the [R] tokens, or
         R for padding, i.e. the zero row that `to_padded` appends).
    Raises:
        ValueError: input_mask traced by JAX (jax.jit): R would be a data-dependent shape.
    """
    if _is_jax_tracer(input_mask):
        raise ValueError("skip_padding cannot run under jax.jit (or another JAX transformation of the input "
                         "mask): the number of real tokens R sets a shape, which a traced function cannot have "
                         "data-dependent. Run it eagerly, or with configure_runtime(skip_padding=False).")
    flat = ops.reshape(ops.not_equal(input_mask, 0), (-1,))  # [B*T]
    token_index = ops.cast(ops.nonzero(flat)[0], "int32")
    count = ops.shape(token_index)[0]
    position = ops.cumsum(ops.cast(flat, "int32")) - 1
    padded_index = ops.where(flat, position, ops.cast(count, "int32"))
    return token_index, padded_index


def _is_jax_tracer(x):
    """Whether x is a JAX tracer (a value traced by jax.jit, not a concrete array); no JAX import."""
    return any(cls.__name__ == "Tracer" and cls.__module__.startswith("jax") for cls in type(x).__mro__)


def to_tokens(x, token_index=None):
    """[B, T, C] -> the real tokens' rows [R, C] (token_index None: every position, [B * T, C])."""
    rows = ops.reshape(x, (-1, ops.shape(x)[-1]))
    return rows if token_index is None else ops.take(rows, token_index, axis=0)


def to_padded(x, padded_index, batch, length):
    """[R, C] -> [B, T, C], zeros at padding (padded_index None: x is every position's row)."""
    if padded_index is not None:
        x = ops.take(ops.concatenate([x, ops.zeros_like(x[:1])], axis=0), padded_index, axis=0)
    return ops.reshape(x, (batch, length, ops.shape(x)[-1]))


def cast_dense(layers, dtype):
    """[(kernel, bias)] of built Dense `layers`, each cast to `dtype` once (see module doc)."""
    return [(ops.cast(layer.kernel, dtype), ops.cast(layer.bias, dtype)) for layer in layers]


@ops.custom_gradient
def add_bias(y, bias):
    """y + bias ([..., C] + [C], one dtype) whose gradient for `bias` is accumulated in
    float32 and rounded once.

    Keras' add of a bias vector is TensorFlow's BiasAdd (fused with the matmul before it),
    whose gradient kernel on CPU, BiasAddGrad, sums a bf16 gradient over the rows with large
    errors (benchmarks/README.md, "Figures moved out of docstrings"), and Adam turns such a
    gradient into a full-size step in a wrong direction. Here the rows are summed by a matmul
    with a row of ones, which accumulates in float32 (oneDNN on CPUs, cuBLAS' float32 compute
    type on GPUs, the MXU on TPUs) and rounds the sum once, as the float32 sum rounded to bf16
    is. The forward is the same BiasAdd.
    """

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        if upstream.dtype == "float32":
            rows = tuple(range(len(upstream.shape) - 1))
            return upstream, ops.cast(ops.sum(upstream, axis=rows), bias.dtype)
        # ones [1, N] x upstream [N, C]: the matmul accumulates its products in float32 and
        # rounds the sum once (to bias.dtype, as a float32 sum cast back would), reading the
        # bf16 rows once, without a float32 copy of them (faster than cast-and-sum)
        flat = ops.reshape(upstream, (-1, upstream.shape[-1]))
        ones = ops.ones((1, ops.shape(flat)[0]), dtype=upstream.dtype)
        return upstream, ops.cast(ops.matmul(ones, flat)[0], bias.dtype)

    return ops.add(y, bias), grad


def _is_indexed_slices(gradient):
    """Whether a gradient is TensorFlow's IndexedSlices (rows `.values` at `.indices`); by name, without
    TensorFlow (a PyTorch tensor also has `indices` and `values`: its sparse methods)."""
    return type(gradient).__name__ == "IndexedSlices"


@ops.custom_gradient
def dense_gradient(x):
    """x itself, whose gradient reaches the ops before it as a dense tensor.

    The gradient of a gather (`to_padded` under padding skipping: ops.take) comes as
    IndexedSlices, rows `.values` at `.indices`. TensorFlow's recompute_grad (keras.remat)
    accepts only dense gradients for the outputs of the function it wraps, so the encoder
    passes each rematerialized application's output through this, which sums such rows
    into a dense [R, C] gradient.

    Args:
        x: float [R, C].
    Returns:
        x.
    """
    rows = ops.shape(x)[0]

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        if _is_indexed_slices(upstream):
            upstream = ops.segment_sum(upstream.values, upstream.indices, num_segments=rows)
        return upstream

    return x, grad


def ordered_gradients(x, weights):
    """x and `weights` themselves (identities), whose backward pass goes in order.

    For one application of a shared sub-layer: x [R, H] its input, `weights` its (kernel,
    bias) pairs, which the application uses instead of the ones given (the next application
    chains from them). The gradient reaching x, i.e. the backward pass of everything before
    this application, is made to depend on the complete gradient of these weights (this
    application's contribution added to the later ones'), through a term that is 0 (0 x one
    element of each weight gradient). So the per-application weight gradients of a shared
    sub-layer are added up one application after another, and at most about two of them are
    alive at a time, instead of TensorFlow computing all L as soon as it can and summing
    them at the end (docs/design_encoder.md#ordered-gradients-of-shared-weights). Forward values and
    gradients are unchanged (a non-finite weight gradient makes the step non-finite either way).

    On PyTorch both are returned as they are: its autograd engine already adds the gradients
    of a tensor used several times into one buffer as they arrive, and Keras' PyTorch
    custom_gradient takes the gradient of one output only (its autograd Function's backward
    has a single grad_output), not of this function's several.

    Args:
        x: float [R, H].
        weights: list of (kernel, bias) pairs.
    Returns:
        (x, weights) of the same structure.
    """
    if keras.config.backend() == "torch":
        return x, weights
    outputs = _ordered(x, *flatten_pairs(weights))
    return outputs[0], unflatten_pairs(outputs[1:])


def flatten_pairs(pairs):
    """(kernel, bias) pairs -> one flat list of tensors (for functions that take tensors as
    positional arguments: custom gradients, keras.remat)."""
    return [t for pair in pairs for t in pair]


def unflatten_pairs(flat):
    """`flatten_pairs`' inverse: a flat list [k0, b0, k1, b1, ...] -> [(k0, b0), (k1, b1), ...]."""
    return list(zip(flat[0::2], flat[1::2], strict=True))


@ops.custom_gradient
def _ordered(x, *flat):
    def grad(*args, upstream=None):
        upstream = args if upstream is None else upstream
        if len(upstream) == 1 and isinstance(upstream[0], (tuple, list)):
            upstream = upstream[0]  # JAX: the outputs' cotangents as one tuple (TensorFlow: one argument each)
        dx, gradients = upstream[0], list(upstream[1:])
        if _is_indexed_slices(dx):  # summed into rows
            dx = ops.segment_sum(dx.values, dx.indices, num_segments=ops.shape(x)[0])
        anchor = [ops.cast(ops.reshape(g, (-1,))[0], "float32") for g in gradients if g is not None]
        if anchor:
            dx = dx + ops.cast(ops.sum(ops.stack(anchor)) * 0.0, dx.dtype)
        return (dx, *gradients)

    return (ops.copy(x), *[ops.copy(t) for t in flat]), grad


def apply_dense(layer, x, cast=None):
    """`layer(x)`, or with `cast` = its (kernel, bias) in the compute dtype: x cast to it, then
    the same matmul, bias add (in bf16 `add_bias`: the bias gradient summed in float32) and
    activation."""
    if cast is None:
        return layer(x)
    kernel, bias = cast
    y = ops.matmul(ops.cast(x, kernel.dtype), kernel)
    # float32: Keras Dense's own bias add (its gradient is exact there)
    y = ops.add(y, bias) if kernel.dtype == "float32" else add_bias(y, bias)
    return y if layer.activation is None else layer.activation(y)


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
class AlbertAttention(keras.layers.Layer):
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
        x: float [B, T, H], or rows [R, H]: every position's (R = B * T, in order) when
            `indices` is None, the real tokens' when it is given.
        input_mask: int or bool [B, T], 1 for real tokens, 0 for padding.
        training: bool.
        indices: None, or `padding_indices(input_mask)` with x [R, H] (padding skipped).
        cast: None, or `self.cast_weights(dtype)`: the projections' weights already in the
            compute dtype (a shared layer's, cast once per forward by the encoder).
        seeds: None (each Dropout layer draws from its own SeedGenerator), or int32 [2, 2]:
            the seeds of this call's two dropout sites, the attention probabilities' then
            the output's (module doc, "Dropout seeds").

    Returns:
        float, the shape of x.

    Example:
    ```python
    layer = AlbertAttention(hidden_size=8, num_attention_heads=2)
    layer(np.ones((2, 5, 8), "float32"), np.ones((2, 5), "int32")).shape  # (2, 5, 8)
    ```
    """

    def __init__(
        self,
        hidden_size,
        num_attention_heads,
        attention_probs_dropout_prob=0.0,
        hidden_dropout_prob=0.0,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size {hidden_size} is not divisible by num_attention_heads "
                f"{num_attention_heads}."
            )
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.hidden_dropout_prob = hidden_dropout_prob
        self.initializer_range = initializer_range
        self.head_size = hidden_size // num_attention_heads

        def dense(name):  # a new initializer (own seed) per kernel
            return keras.layers.Dense(
                hidden_size,
                kernel_initializer=truncated_normal(initializer_range),
                dtype=self.dtype_policy,
                name=name,
            )

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.dense = dense("dense")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype="float32", name="LayerNorm"
        )
        # float32: the attention core computes in float32 under every policy (module doc)
        self.probs_dropout = keras.layers.Dropout(attention_probs_dropout_prob, dtype="float32")
        self.output_dropout = keras.layers.Dropout(hidden_dropout_prob, dtype=self.dtype_policy)

    def build(self, x_shape, input_mask_shape=None):
        shape = (None, None, self.hidden_size)
        for layer in (self.query, self.key, self.value, self.dense, self.layer_norm):
            layer.build(shape)
        self.built = True

    def cast_weights(self, dtype):
        """[(kernel, bias)] of query, key, value, dense cast to `dtype` (the `cast` call arg)."""
        return cast_dense((self.query, self.key, self.value, self.dense), dtype)

    def _split_heads(self, x, batch, length):
        # [B, T, H] -> [B, N, T, D]
        x = ops.reshape(x, (batch, length, self.num_attention_heads, self.head_size))
        return ops.transpose(x, (0, 2, 1, 3))

    def call(self, x, input_mask, training=None, indices=None, cast=None, seeds=None):
        rows = indices is not None or len(x.shape) == 2  # x is [R, H]
        check_rank(x, 2 if rows else 3, "x")
        check_rank(input_mask, 2, "input_mask")
        batch, length = ops.shape(input_mask)[0], ops.shape(input_mask)[1]
        token_index, padded_index = (None, None) if indices is None else indices
        query, key, value, dense = cast or (None,) * 4

        def heads(t):  # [B, T, H] or [R, H] -> [B, N, T, D], float32 (the core's dtype)
            if rows:
                t = to_padded(t, padded_index, batch, length)
            return self._split_heads(ops.cast(t, "float32"), batch, length)

        # with `cast`, x is rounded to the compute dtype once for the three projections
        projected = x if query is None else ops.cast(x, query[0].dtype)
        q = heads(apply_dense(self.query, projected, query))
        k = heads(apply_dense(self.key, projected, key))
        v = heads(apply_dense(self.value, projected, value))
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(self.head_size))  # [B, N, T, T]
        # [B, 1, 1, T]; expand_dims, not [:, None, None, :]: LiteRT's StridedSlice takes no new axes
        # at dynamic shapes (export/litert_model.py)
        mask = ops.expand_dims(ops.expand_dims(ops.cast(input_mask, "float32"), 1), 1)
        scores = scores + (1.0 - mask) * _MASK_ADDER
        probs_seed, output_seed = (None, None) if seeds is None else (seeds[0], seeds[1])
        probs = dropout(self.probs_dropout, ops.softmax(scores, axis=-1), training, probs_seed)
        context = ops.matmul(probs, v)  # [B, N, T, D]
        context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (batch, length, self.hidden_size))
        context = ops.cast(context, self.compute_dtype)
        if rows:
            context = to_tokens(context, token_index)  # [R, H]
        out = dropout(self.output_dropout, apply_dense(self.dense, context, dense), training, output_seed)
        return self.layer_norm(ops.cast(x, "float32") + ops.cast(out, "float32"))

    def compute_output_shape(self, x_shape, input_mask_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_attention_heads=self.num_attention_heads,
            attention_probs_dropout_prob=self.attention_probs_dropout_prob,
            hidden_dropout_prob=self.hidden_dropout_prob,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertFeedForward(keras.layers.Layer):
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
        x: float [B, T, H] (or the real tokens [R, H]: every op is per token).
        training: bool.
        cast: None, or `self.cast_weights(dtype)` (see AlbertAttention).
        seed: None (the Dropout layer draws from its own SeedGenerator), or int32 [2]: the
            output dropout's seed (module doc, "Dropout seeds").

    Returns:
        float, x's shape.

    Example:
    ```python
    layer = AlbertFeedForward(hidden_size=8, intermediate_size=32)
    layer(np.ones((2, 5, 8), "float32")).shape  # (2, 5, 8)
    ```
    """

    def __init__(
        self,
        hidden_size,
        intermediate_size,
        hidden_act="gelu",
        hidden_dropout_prob=0.0,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.initializer_range = initializer_range

        # one initializer instance (one seed) per kernel: see `truncated_normal`
        self.intermediate = keras.layers.Dense(
            intermediate_size,
            activation=get_activation(hidden_act),
            kernel_initializer=truncated_normal(initializer_range),
            dtype=self.dtype_policy,
            name="intermediate",
        )
        self.output_dense = keras.layers.Dense(
            hidden_size,
            kernel_initializer=truncated_normal(initializer_range),
            dtype=self.dtype_policy,
            name="output_dense",
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype="float32", name="LayerNorm"
        )
        self.output_dropout = keras.layers.Dropout(hidden_dropout_prob, dtype=self.dtype_policy)

    def build(self, input_shape):
        self.intermediate.build((None, None, self.hidden_size))
        self.output_dense.build((None, None, self.intermediate_size))
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def cast_weights(self, dtype):
        """[(kernel, bias)] of intermediate and output_dense cast to `dtype` (the `cast` call arg)."""
        return cast_dense((self.intermediate, self.output_dense), dtype)

    def call(self, x, training=None, cast=None, seed=None):
        if len(x.shape) not in (2, 3):
            raise ValueError(f"`x` must have rank 3 ([B, T, H]) or 2 ([R, H]), got shape {tuple(x.shape)}.")
        intermediate, output_dense = cast or (None, None)
        out = apply_dense(self.output_dense, apply_dense(self.intermediate, x, intermediate), output_dense)
        out = dropout(self.output_dropout, out, training, seed)
        return self.layer_norm(ops.cast(x, "float32") + ops.cast(out, "float32"))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            hidden_act=self.hidden_act,
            hidden_dropout_prob=self.hidden_dropout_prob,
            initializer_range=self.initializer_range,
        )
        return config
