"""AlbertEncoder: the ALBERT (or BERT) encoder as a Keras 3 model with one forward pass.

Shape legend: B batch, T sequence length (any T <= max_position_embeddings), E embedding
size, H hidden size, L num_hidden_layers.

Layer names are a stable contract (checkpoints and converters depend on them). Keras
variable paths (`encoder.weights[i].path`):

    embeddings/{word_embeddings, position_embeddings, token_type_embeddings, LayerNorm}
    embedding_hidden_mapping_in/{kernel [E, H], bias}        (only when E != H)
    group_{g}_inner_group_{k}_attention/{query,key,value,dense,LayerNorm}   shared
    group_{g}_inner_group_{k}_ffn/{intermediate,output_dense,LayerNorm}     shared
    layer_{i}_inner_group_{k}_attention, layer_{i}_inner_group_{k}_ffn      unshared
    pooler/{kernel [H, H], bias}

With `sharing="all"` and G = k = 1 (every ALBERT preset) the whole stack is the two
sub-layers `group_0_inner_group_0_{attention,ffn}`, applied L times.

`tf.train.Checkpoint(encoder=encoder)` paths follow Python attribute names instead:
`encoder/embeddings/{word_embeddings,position_embeddings,token_type_embeddings}`,
`encoder/embeddings/layer_norm/{gamma,beta}`, `encoder/embedding_projection/{_kernel,bias}`,
`encoder/<sub-layer name>/{query,key,value,dense}/{_kernel,bias}` and `.../layer_norm/*`
for attention, `encoder/<sub-layer name>/{intermediate,output_dense}/{_kernel,bias}` and
`.../layer_norm/*` for the feed-forward, `encoder/pooler/{_kernel,bias}`
(`tests/test_encoder.py` holds the full list for albert_tiny).

`.weights.h5` files (`save_weights`, `save_pretrained`) keep the layout of a Keras
functional model, which this encoder was until issue 51: its layers in order under
`layers/`, named by class (`layers/albert_embeddings/vars/0`, `layers/dense/...` for the
embedding projection, `layers/albert_attention_1/...` for the second attention sub-layer,
`layers/dense_1/...` for the pooler), so every file written before loads
(tests/test_encoder_forward.py holds files of that time).

Run-time options (modeling/runtime.py `EncoderRuntime`: padding skipping, rematerialization,
ordered gradients, the replica index of dropout seeds) are no part of the architecture:
neither in `get_config` nor in any file. The encoder and a model holding it as `self.encoder`
(AlbertPretrainer, AlbertClassifier, the fine-tuned models) take them through `RuntimeOptions`:
`model.configure_runtime(remat=True)`, `with model.runtime_options(skip_padding=True): ...`,
`with model.tracing_for_export(): ...`.
"""

import keras
from keras import ops

from albert_tf.compat import FunctionalWeightsLayout, keras_pending_variables_kept
from albert_tf.modeling.config import AlbertConfig
from albert_tf.modeling.dropout import GivenSeed
from albert_tf.modeling.embeddings import AlbertEmbeddings, truncated_normal
from albert_tf.modeling.encoder_block import (AlbertAttention, AlbertFeedForward, apply_dense, cast_dense,
                                              dense_gradient, flatten_pairs, ordered_gradients, padding_indices,
                                              to_padded, to_tokens, unflatten_pairs)
from albert_tf.modeling.pretrained import ENCODER_WEIGHTS, PretrainedMixin
from albert_tf.modeling.runtime import RuntimeOptions, as_runtime

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def sublayer_name(key, kind):
    """`("group", 0, 0), "attention"` -> "group_0_inner_group_0_attention"."""
    scope, index, inner = key
    return f"{scope}_{index}_inner_group_{inner}_{kind}"


def encoder_inputs(seq_length=None):
    """The three int32 [B, T] inputs of the TF-Hub encoder contract, as keras.Input."""
    return {name: keras.Input(shape=(seq_length,), dtype="int32", name=name) for name in INPUT_NAMES}


def _deserialize_dtype(dtype):
    if isinstance(dtype, dict):
        return keras.dtype_policies.deserialize(dtype)
    return dtype


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEncoder(FunctionalWeightsLayout, PretrainedMixin, RuntimeOptions, keras.Model):
    """ALBERT encoder: factorized embeddings and a cross-layer shared transformer.

    Args:
        config: `AlbertConfig` or a dict of its keys (an original albert_config.json).
        use_one_hot_embeddings: bool. One-hot matmul word lookup (TPU friendly).
        dtype: a Keras dtype policy name or object, e.g. "mixed_bfloat16".
        runtime: None (the defaults), an `EncoderRuntime` or a dict of its options; not part
            of `get_config` (see `RuntimeOptions` for changing them later).

    Every weight exists from the constructor on (no build at the first call).

    Inputs: dict of int32 [B, T] `input_word_ids`, `input_mask` (1 = real token),
    `input_type_ids`; other keys are ignored, a missing one is refused (ValueError naming it).

    Outputs: dict `sequence_output` float32 [B, T, H], `pooled_output` [B, H] in the compute
    dtype (tanh dense on the first token), `encoder_outputs` (list of L float32 tensors
    [B, T, H], one per outer layer; the last equals `sequence_output`).

    Run-time options (the same outputs to float rounding): `skip_padding` (off; per-token
    ops on the real tokens only, zeros at padded positions of `sequence_output` and
    `encoder_outputs`; not under XLA or on TPUs), `remat` (off; in training each sub-layer
    application keeps only its input for the backward pass), `ordered_gradients` (on; shared
    weights' gradients summed application by application). Dropout masks are drawn
    statelessly per site, application and replica from one seed per forward.
    Design (rows [R, H], the options, dropout seeds): docs/design_encoder.md

    Example:
    ```python
    encoder = AlbertEncoder(AlbertConfig.from_preset("albert_tiny"))
    outputs = encoder({
        "input_word_ids": np.array([[2, 15, 27, 3, 0]], "int32"),
        "input_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
        "input_type_ids": np.zeros((1, 5), "int32"),
    })
    outputs["pooled_output"].shape  # (1, 32)
    with encoder.runtime_options(skip_padding=True):
        encoder(...)  # the real tokens only
    ```
    """

    # its file in a pretrained directory (`save_pretrained` / `from_pretrained`)
    WEIGHTS_FILE = ENCODER_WEIGHTS

    def _runtime_encoder(self):
        return self  # its own run-time options (RuntimeOptions)

    def __init__(self, config, use_one_hot_embeddings=False, dtype=None, runtime=None, **kwargs):
        config = AlbertConfig.from_dict(config)
        dtype = _deserialize_dtype(dtype)
        runtime = as_runtime(runtime)
        kwargs.setdefault("name", "albert_encoder")
        super().__init__(dtype=dtype, **kwargs)

        # === Layers ===
        self.embeddings = AlbertEmbeddings(
            vocab_size=config.vocab_size,
            embedding_size=config.embedding_size,
            max_position_embeddings=config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size,
            dropout=config.hidden_dropout_prob,
            initializer_range=config.initializer_range,
            use_one_hot_embeddings=use_one_hot_embeddings,
            dtype=dtype,
            name="embeddings",
        )
        self.embedding_projection = None
        if config.has_embedding_projection:
            self.embedding_projection = keras.layers.Dense(
                config.hidden_size,
                kernel_initializer=truncated_normal(config.initializer_range),
                dtype=dtype,
                name="embedding_hidden_mapping_in",
            )
        routing = config.routing()
        attention_keys = sorted({a for steps in routing for a, _ in steps})
        ffn_keys = sorted({f for steps in routing for _, f in steps})
        self.attention_layers = [
            AlbertAttention(
                hidden_size=config.hidden_size,
                num_attention_heads=config.num_attention_heads,
                attention_probs_dropout_prob=config.attention_probs_dropout_prob,
                hidden_dropout_prob=config.hidden_dropout_prob,
                initializer_range=config.initializer_range,
                dtype=dtype,
                name=sublayer_name(key, "attention"),
            )
            for key in attention_keys
        ]
        self.ffn_layers = [
            AlbertFeedForward(
                hidden_size=config.hidden_size,
                intermediate_size=config.intermediate_size,
                hidden_act=config.hidden_act,
                hidden_dropout_prob=config.hidden_dropout_prob,
                initializer_range=config.initializer_range,
                dtype=dtype,
                name=sublayer_name(key, "ffn"),
            )
            for key in ffn_keys
        ]
        # Named attributes give tf.train.Checkpoint stable paths such as
        # `group_0_inner_group_0_attention/query/_kernel` (not `attention_layers/0/...`).
        for layer in self.attention_layers + self.ffn_layers:
            setattr(self, layer.name, layer)
        self.pooler = keras.layers.Dense(
            config.hidden_size,
            activation="tanh",
            kernel_initializer=truncated_normal(config.initializer_range),
            dtype=dtype,
            name="pooler",
        )
        attention_index = {key: i for i, key in enumerate(attention_keys)}
        ffn_index = {key: i for i, key in enumerate(ffn_keys)}
        # per outer layer, its (attention, feed-forward) sub-layer pairs, in the order applied
        self._layer_steps = [[(self.attention_layers[attention_index[a]], self.ffn_layers[ffn_index[f]])
                              for a, f in steps] for steps in routing]

        # === Weights === (built outside any name scope: paths `embeddings/...`, `pooler/...`;
        # in the order the layers are first applied, so a seed gives the same initial weights
        # as the functional model this class was)
        self.embeddings.build()
        if self.embedding_projection is not None:
            self.embedding_projection.build((None, None, config.embedding_size))
        for steps in self._layer_steps:
            for attention, ffn in steps:
                for layer in (attention, ffn):
                    if not layer.built:
                        layer.build((None, None, config.hidden_size))
        self.pooler.build((None, config.hidden_size))
        self.built = True

        # === Config ===
        self.config = config
        self.use_one_hot_embeddings = use_one_hot_embeddings
        self._runtime = runtime

    def compute_output_spec(self, inputs, training=None, mask=None):
        """The outputs' shapes and dtypes for symbolic inputs (a functional model built on
        the encoder), without running the forward."""
        batch, length = tuple(self._inputs(inputs)["input_word_ids"].shape)
        hidden = self.config.hidden_size
        states = [keras.KerasTensor((batch, length, hidden), dtype="float32")
                  for _ in self._layer_steps]
        return {"sequence_output": states[-1],
                "pooled_output": keras.KerasTensor((batch, hidden), dtype=self.compute_dtype),
                "encoder_outputs": states}

    @staticmethod
    def _inputs(inputs):
        """{name: inputs[name]} of INPUT_NAMES; ValueError naming those missing."""
        missing = [name for name in INPUT_NAMES if not isinstance(inputs, dict) or name not in inputs]
        if missing:
            got = ", ".join(sorted(inputs)) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(f"AlbertEncoder: missing inputs {', '.join(missing)} (got {got}); expected a dict "
                             f"of int32 [B, T] {', '.join(INPUT_NAMES)}.")
        return {name: inputs[name] for name in INPUT_NAMES}

    def call(self, inputs, training=None, mask=None):
        runtime = self._runtime
        inputs = self._inputs(inputs)
        word_ids, input_mask, type_ids = (ops.cast(inputs[k], "int32") for k in INPUT_NAMES)
        batch, length = ops.shape(word_ids)[0], ops.shape(word_ids)[1]
        # token_index [R], padded_index [B*T]; None: every position is a row (R = B * T)
        indices = padding_indices(input_mask) if runtime.skip_padding else None
        token_index, padded_index = (None, None) if indices is None else indices
        # each sub-layer's dense weights once per forward, in the compute dtype (under mixed
        # precision a cast, not one at each use, and every bias gradient summed in float32:
        # encoder_block module doc), linked from one application to the next ("Shared
        # weights' gradients" above)
        cast = {id(layer): layer.cast_weights(self.compute_dtype) for layer in self.attention_layers + self.ffn_layers}
        if self.compute_dtype != self.variable_dtype:
            for layer in (self.embedding_projection, self.pooler):
                if layer is not None:
                    cast[id(layer)] = cast_dense([layer], self.compute_dtype)[0]
        # int32 [1 + 3 A, 2] (A applications), or None: no dropout to draw
        seeds = self._dropout_seeds(runtime.replica_index) if training else None
        embedded = self.embeddings(word_ids, type_ids, training=training, seed=None if seeds is None else seeds[0])
        x = to_tokens(embedded, token_index)  # [R, E]
        if self.embedding_projection is not None:
            x = apply_dense(self.embedding_projection, x, cast.get(id(self.embedding_projection)))  # [R, H]
        encoder_outputs = []
        application = 0
        for steps in self._layer_steps:
            for attention, ffn in steps:
                pair_seeds = None if seeds is None else seeds[1 + 3 * application:4 + 3 * application]
                x = self._apply_pair(attention, ffn, x, input_mask, training, indices, cast, pair_seeds, runtime)
                application += 1
            encoder_outputs.append(to_padded(x, padded_index, batch, length))  # [B, T, H]
        sequence_output = encoder_outputs[-1]
        pooled_output = apply_dense(self.pooler, sequence_output[:, 0, :], cast.get(id(self.pooler)))  # [B, H]
        return {"sequence_output": sequence_output, "pooled_output": pooled_output, "encoder_outputs": encoder_outputs}

    def _dropout_seeds(self, replica_index):
        """int32 [1 + 3 A, 2]: this forward's seed per dropout site (A applications of a
        sub-layer pair; "Dropout in training" above), or None when no rate is above 0.
        Advances one SeedGenerator by one draw. replica_index: None or a callable -> int."""
        generators = [layer.seed_generator for layer in self._dropout_layers()
                      if getattr(layer, "seed_generator", None) is not None]
        if not generators:
            return None
        base = generators[0].next()  # int64 [2]: (the generator's seed, its draw count)
        if replica_index is not None:  # a stream per replica (the draw count stays unique)
            base = base + ops.cast(ops.stack([replica_index(), 0]), base.dtype)
        sites = 1 + 3 * sum(len(steps) for steps in self._layer_steps)
        return keras.random.randint((sites, 2), 0, 2**31 - 1, dtype="int32", seed=GivenSeed(base))

    def _dropout_layers(self):
        """Every keras Dropout of the encoder, in a fixed order (embeddings first)."""
        layers = [self.embeddings.dropout_layer]
        for layer in self.attention_layers:
            layers += [layer.probs_dropout, layer.output_dropout]
        return layers + [layer.output_dropout for layer in self.ffn_layers]

    def _apply_pair(self, attention, ffn, x, input_mask, training, indices, cast, seeds, runtime):
        """One application of an (attention, feed-forward) pair to x [R, H]: each sub-layer
        linked to its next application ("Shared weights' gradients" above) and, in training
        with `runtime.remat`, rematerialized on its own ("Rematerialization" above).

        Args:
            attention, ffn: the sub-layers.
            x: float32 [R, H].
            input_mask: int [B, T].
            training: bool.
            indices: None or `padding_indices(input_mask)`.
            cast: {id(layer): its dense weights in the compute dtype}. Each sub-layer's entry
                is replaced by the linked weights, which the next application chains from.
            seeds: None or int32 [3, 2]: the attention's two dropout sites', the
                feed-forward's.
            runtime: the call's EncoderRuntime.
        Returns:
            float32 [R, H].
        """
        attention_seeds, ffn_seeds = (None, None) if seeds is None else (seeds[:2], seeds[2])
        x = self._apply_sublayer(attention, x, cast, training, runtime, lambda x, given: attention(
            x, input_mask, training=training, indices=indices, cast=given, seeds=attention_seeds))
        return self._apply_sublayer(ffn, x, cast, training, runtime, lambda x, given: ffn(
            x, training=training, cast=given, seed=ffn_seeds))

    def _apply_sublayer(self, layer, x, cast, training, runtime, apply):
        """`apply(x, weights)` for one application of `layer`, its weights `cast[id(layer)]`
        (see `_apply_pair`); with them ordered and rematerialized in training when on."""
        weights = cast[id(layer)]
        if training and runtime.ordered_gradients:  # this application's link ("Shared weights' gradients")
            x, weights = ordered_gradients(x, weights)
            cast[id(layer)] = weights
        if not (runtime.remat and training):
            return apply(x, weights)
        # the wrapped function's arguments: x and every kernel and bias (the seeds and indices
        # are integers, through which no gradient flows: captured)
        def sublayer(x, *flat):
            return apply(x, unflatten_pairs(flat))

        return dense_gradient(keras.remat(sublayer)(x, *flatten_pairs(weights)))


def count_parameters(config, with_pooler=True):
    """Parameters of `AlbertEncoder(config)`, built without allocating any weight.

    The real encoder is built inside a `keras.StatelessScope` that leaves its
    variables uninitialized, so xxlarge or bert_xlarge cost no weight memory at all.

    Keras keeps every variable made so in a list of its own and initializes them all when a
    later top-level `keras.StatelessScope` ends (e.g. the first `model.fit` in the process):
    that list is put back as it was, so the encoder's weights are never allocated.

    Returns:
        int: encoder (+ pooler) parameter count.
    """
    config = AlbertConfig.from_dict(config)
    with keras_pending_variables_kept(), keras.StatelessScope(initialize_variables=False):
        encoder = AlbertEncoder(config)
        total = sum(int(_prod(v.shape)) for v in encoder.weights)
        if not with_pooler:
            total -= sum(int(_prod(v.shape)) for v in encoder.pooler.weights)
    return total


def _prod(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n
