"""The encoder's run-time pieces: how an AlbertEncoder runs, beside what it computes.

Each piece is switched by a field of `EncoderRuntime` (modeling/runtime.py) and changes no
output beyond float rounding (but for `skip_padding`'s zeros at padded positions); what each
does and why: docs/design_encoder.md. `EncoderRun` puts the switched-on pieces together for
one forward: AlbertEncoder makes one per call and runs its parts through it; each sub-layer
application gets a `Parts` (`run=`).

Shape legend: B batch, T sequence length, H hidden size, C any width, R the rows a call works
on (B * T, or the real tokens).
"""

import keras
from keras import ops

from albert_tf.modeling.dropout import GivenSeed, dropout


def padding_indices(input_mask):
    """Where the real tokens of a padded batch are, for the padding-skipping forward.

    Args:
        input_mask: int or bool [B, T], 1 for real tokens.
    Returns:
        (token_index int32 [R]: flat position b * T + t of each real token, in order;
         padded_index int32 [B * T]: for each flat position, its row in the [R] tokens, or
         R for padding, i.e. the zero row that `TokenRows.padded` appends).
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


class TokenRows:
    """A batch's tokens as rows: every position's (R = B * T, a reshape) or, with
    `skip_padding`, the real tokens' alone.

    Args:
        input_mask: int [B, T], 1 for real tokens.
        skip_padding: bool.
    """

    def __init__(self, input_mask, skip_padding):
        self.batch, self.length = ops.shape(input_mask)[0], ops.shape(input_mask)[1]
        self.token_index, self.padded_index = padding_indices(input_mask) if skip_padding else (None, None)

    def tokens(self, x):
        """[B, T, C] -> [R, C]."""
        rows = ops.reshape(x, (-1, ops.shape(x)[-1]))
        return rows if self.token_index is None else ops.take(rows, self.token_index, axis=0)

    def padded(self, x):
        """[R, C] -> [B, T, C], zeros at skipped padding."""
        if self.padded_index is not None:
            x = ops.take(ops.concatenate([x, ops.zeros_like(x[:1])], axis=0), self.padded_index, axis=0)
        return ops.reshape(x, (self.batch, self.length, ops.shape(x)[-1]))


def cast_dense(layers, dtype):
    """[(kernel, bias)] of built Dense `layers`, each cast to `dtype` once."""
    return [(ops.cast(layer.kernel, dtype), ops.cast(layer.bias, dtype)) for layer in layers]


def apply_dense(layer, x, weights):
    """Dense `layer` on x with `weights`, its (kernel, bias) given in the compute dtype: x cast
    to it, the matmul, the bias add (in bf16 `add_bias`) and the layer's activation."""
    kernel, bias = weights
    y = ops.matmul(ops.cast(x, kernel.dtype), kernel)
    # float32: Keras Dense's own bias add (its gradient is exact there)
    y = ops.add(y, bias) if kernel.dtype == "float32" else add_bias(y, bias)
    return y if layer.activation is None else layer.activation(y)


@ops.custom_gradient
def add_bias(y, bias):
    """y + bias ([..., C] + [C], one dtype) whose gradient for `bias` is accumulated in
    float32 and rounded once (the rows summed by a matmul with a row of ones); the forward is
    the same BiasAdd."""

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        if upstream.dtype == "float32":
            rows = tuple(range(len(upstream.shape) - 1))
            return upstream, ops.cast(ops.sum(upstream, axis=rows), bias.dtype)
        # ones [1, N] x upstream [N, C]: float32 accumulation, one rounding, no float32 copy of the rows
        flat = ops.reshape(upstream, (-1, upstream.shape[-1]))
        ones = ops.ones((1, ops.shape(flat)[0]), dtype=upstream.dtype)
        return upstream, ops.cast(ops.matmul(ones, flat)[0], bias.dtype)

    return ops.add(y, bias), grad


def _summed_rows(gradient, rows):
    """`gradient` as a dense [rows, C] tensor: TensorFlow's IndexedSlices (rows `.values` at
    `.indices`; known by name, without TensorFlow: a PyTorch tensor also has `indices` and
    `values`) summed into rows, any other gradient as it is."""
    if type(gradient).__name__ != "IndexedSlices":
        return gradient
    return ops.segment_sum(gradient.values, gradient.indices, num_segments=rows)


@ops.custom_gradient
def dense_gradient(x):
    """x itself, whose gradient reaches the ops before it as a dense tensor (an IndexedSlices
    gradient, from a gather after it, summed into rows): TensorFlow's recompute_grad takes
    only dense gradients for its outputs.

    Args:
        x: float [R, C].
    Returns:
        x.
    """
    rows = ops.shape(x)[0]

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        return _summed_rows(upstream, rows)

    return x, grad


def ordered_gradients(x, weights):
    """x and `weights` themselves (identities), whose backward pass goes in order: for one
    application of a shared sub-layer (x [R, H] its input, `weights` its (kernel, bias) pairs,
    which the application uses instead, the next one chaining from them), the gradient reaching
    x waits for the complete gradient of these weights (docs/design_encoder.md#ordered-gradients-of-shared-weights).
    Forward values and gradients are unchanged; on PyTorch both are returned as they are.

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
        dx, gradients = _summed_rows(upstream[0], ops.shape(x)[0]), list(upstream[1:])
        anchor = [ops.cast(ops.reshape(g, (-1,))[0], "float32") for g in gradients if g is not None]
        if anchor:
            dx = dx + ops.cast(ops.sum(ops.stack(anchor)) * 0.0, dx.dtype)
        return (dx, *gradients)

    return (ops.copy(x), *[ops.copy(t) for t in flat]), grad


def draw_seeds(dropout_layers, sites, replica_index):
    """int32 [sites, 2]: one forward's seed per dropout site, from one draw of the first of
    `dropout_layers`' SeedGenerators, or None when none has one (no rate above 0).

    replica_index: None, or a callable -> int, added to the draw (a stream per replica).
    """
    generators = [layer.seed_generator for layer in dropout_layers
                  if getattr(layer, "seed_generator", None) is not None]
    if not generators:
        return None
    base = generators[0].next()  # int64 [2]: (the generator's seed, its draw count)
    if replica_index is not None:  # a stream per replica (the draw count stays unique)
        base = base + ops.cast(ops.stack([replica_index(), 0]), base.dtype)
    return keras.random.randint((sites, 2), 0, 2**31 - 1, dtype="int32", seed=GivenSeed(base))


class Parts:
    """How the parts of one forward step run: a sub-layer's `run=` (or the encoder's own, for
    the embeddings, projection and pooler). The same calls as a sub-layer's plain parts
    (encoder_block.PlainParts), with the pieces switched on.

    Args:
        training: bool.
        rows: None ([B, T, H] throughout) or a TokenRows.
        weights: {id(Dense layer): its (kernel, bias) for this step} (cast_once).
        seeds: None, or int32 [S, 2]: the step's dropout sites' seeds, in call order.
    """

    def __init__(self, training, rows=None, weights=None, seeds=None):
        self.training = training
        self.rows = rows
        self.weights = weights or {}
        self.seeds = seeds
        self._site = 0

    def dense(self, layer, x):
        given = self.weights.get(id(layer))
        return layer(x) if given is None else apply_dense(layer, x, given)

    def next_seed(self):
        """The next dropout site's seed, or None."""
        if self.seeds is None:
            return None
        self._site += 1
        return self.seeds[self._site - 1]

    def dropout(self, layer, x):
        return dropout(layer, x, self.training, self.next_seed())

    def tokens(self, x):
        """[B, T, C] -> the rows (rows on), else x."""
        return x if self.rows is None else self.rows.tokens(x)

    def padded(self, x):
        """The rows -> [B, T, C] (rows on), else x."""
        return x if self.rows is None else self.rows.padded(x)


class EncoderRun(Parts):
    """One forward of `encoder` with the pieces its `runtime` (an EncoderRuntime) switches on.

    Args:
        encoder: the AlbertEncoder.
        input_mask: int [B, T].
        training: bool.
    """

    def __init__(self, encoder, input_mask, training):
        runtime = encoder.runtime
        self.runtime = runtime
        rows = TokenRows(input_mask, runtime.skip_padding) if runtime.rows or runtime.skip_padding else None
        weights = {}
        if runtime.cast_once:
            dtype = encoder.compute_dtype
            for layer in encoder.attention_layers + encoder.ffn_layers:
                weights[id(layer)] = layer.cast_weights(dtype)  # per sub-layer: its Dense layers' pairs
            if dtype != encoder.variable_dtype:
                for layer in (encoder.embedding_projection, encoder.pooler):
                    if layer is not None:
                        weights[id(layer)] = cast_dense([layer], dtype)[0]
        seeds = None
        if training and (runtime.dropout_seeds or runtime.remat):  # remat recomputes with the same masks
            layers = encoder.dropout_layers()
            sites = 1 + sum(len(sub.dropout_layers()) for steps in encoder._layer_steps for pair in steps
                            for sub in pair)
            seeds = draw_seeds(layers, sites, runtime.replica_index)
        super().__init__(training, rows, weights, seeds)

    def apply(self, layer, x, *args):
        """One application of sub-layer `layer` to x (and `args`: the attention's input_mask):
        its weights linked to its next application (ordered_gradients) and, in training with
        remat, rematerialized on its own.

        Returns:
            float32, x's shape.
        """
        sites = len(layer.dropout_layers())
        seeds = None if self.seeds is None else self.seeds[self._site:self._site + sites]
        self._site += sites
        weights = self.weights.get(id(layer))
        training = self.training
        if training and self.runtime.ordered_gradients and weights is not None:
            x, weights = ordered_gradients(x, weights)
            self.weights[id(layer)] = weights

        # x and every kernel and bias are the function's arguments (keras.remat differentiates
        # through those only); the seeds and rows are integers: captured
        def forward(x, *flat):
            given = {} if weights is None else dict(zip(map(id, layer.dense_layers()), unflatten_pairs(flat)))
            return layer(x, *args, training=training, run=Parts(training, self.rows, given, seeds))

        flat = [] if weights is None else flatten_pairs(weights)
        if not (training and self.runtime.remat):
            return forward(x, *flat)
        return dense_gradient(keras.remat(forward)(x, *flat))
