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

`tf.train.Checkpoint(encoder=encoder)` paths follow Python attribute names instead
(tests/test_encoder.py lists albert_tiny's); `.weights.h5` files keep the functional model's
layout (docs/design_encoder.md, "Weights files").

How it runs is no part of it: `call` runs its parts through the run-time pieces
(modeling/encoder_runtime.py) that an `EncoderRuntime` switches (modeling/runtime.py).
"""

import math

import keras
from keras import ops

from albert_tf.compat import FunctionalWeightsLayout, keras_pending_variables_kept
from albert_tf.modeling.config import AlbertConfig
from albert_tf.modeling.embeddings import AlbertEmbeddings, dense_layer
from albert_tf.modeling.encoder_block import AlbertAttention, AlbertFeedForward
from albert_tf.modeling.encoder_runtime import EncoderRun
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

    Run-time options (`EncoderRuntime`; the same outputs to float rounding, but for
    `skip_padding`'s zeros at padded positions of `sequence_output` and `encoder_outputs`):
    docs/design_encoder.md.

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
        self.embeddings = AlbertEmbeddings(config.vocab_size, config.embedding_size, config.max_position_embeddings,
                                           config.type_vocab_size, dropout=config.hidden_dropout_prob,
                                           initializer_range=config.initializer_range, dtype=dtype,
                                           use_one_hot_embeddings=use_one_hot_embeddings, name="embeddings")
        self.embedding_projection = None
        if config.has_embedding_projection:
            self.embedding_projection = dense_layer(config.hidden_size, config.initializer_range, dtype,
                                                    "embedding_hidden_mapping_in")
        routing = config.routing()
        attention_keys = sorted({a for steps in routing for a, _ in steps})
        ffn_keys = sorted({f for steps in routing for _, f in steps})

        def sublayers(layer_class, keys, kind, **own):
            return [layer_class(hidden_size=config.hidden_size, hidden_dropout_prob=config.hidden_dropout_prob,
                                initializer_range=config.initializer_range, dtype=dtype,
                                name=sublayer_name(key, kind), **own) for key in keys]

        self.attention_layers = sublayers(AlbertAttention, attention_keys, "attention",
                                          num_attention_heads=config.num_attention_heads,
                                          attention_probs_dropout_prob=config.attention_probs_dropout_prob)
        self.ffn_layers = sublayers(AlbertFeedForward, ffn_keys, "ffn", intermediate_size=config.intermediate_size,
                                    hidden_act=config.hidden_act)
        # Named attributes give tf.train.Checkpoint stable paths such as
        # `group_0_inner_group_0_attention/query/_kernel` (not `attention_layers/0/...`).
        for layer in self.attention_layers + self.ffn_layers:
            setattr(self, layer.name, layer)
        self.pooler = dense_layer(config.hidden_size, config.initializer_range, dtype, "pooler", activation="tanh")
        attention = dict(zip(attention_keys, self.attention_layers))
        ffn = dict(zip(ffn_keys, self.ffn_layers))
        # per outer layer, its (attention, feed-forward) sub-layer pairs, in the order applied
        self._layer_steps = [[(attention[a], ffn[f]) for a, f in steps] for steps in routing]

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
        word_ids, input_mask, type_ids = (ops.cast(x, "int32") for x in self._inputs(inputs).values())
        run = EncoderRun(self, input_mask, training)  # the run-time pieces switched on (module doc)
        x = self.embeddings(word_ids, type_ids, training=training, seed=run.next_seed())  # [B, T, E]
        x = run.tokens(x)
        if self.embedding_projection is not None:
            x = run.dense(self.embedding_projection, x)  # E -> H
        encoder_outputs = []
        for steps in self._layer_steps:  # an outer layer: its (attention, feed-forward) pairs
            for attention, ffn in steps:
                x = run.apply(attention, x, input_mask)
                x = run.apply(ffn, x)
            encoder_outputs.append(run.padded(x))  # [B, T, H]
        pooled_output = run.dense(self.pooler, encoder_outputs[-1][:, 0, :])  # [B, H]
        return {"sequence_output": encoder_outputs[-1], "pooled_output": pooled_output,
                "encoder_outputs": encoder_outputs}

    def dropout_layers(self):
        """Every keras Dropout of the encoder, in a fixed order (embeddings first)."""
        sublayers = self.attention_layers + self.ffn_layers
        return [self.embeddings.dropout_layer] + [layer for sub in sublayers for layer in sub.dropout_layers()]


def count_parameters(config, with_pooler=True):
    """Parameters of `AlbertEncoder(config)`, built without allocating any weight (a
    `keras.StatelessScope`: docs/design_encoder.md#initial-weights-and-the-float32-tables).

    Returns:
        int: encoder (+ pooler) parameter count.
    """
    config = AlbertConfig.from_dict(config)
    with keras_pending_variables_kept(), keras.StatelessScope(initialize_variables=False):
        encoder = AlbertEncoder(config)
        total = sum(math.prod(v.shape) for v in encoder.weights)
        if not with_pooler:
            total -= sum(math.prod(v.shape) for v in encoder.pooler.weights)
    return total
