"""Factorized ALBERT embeddings: word + position + token type in E space, LayerNorm, dropout.

Shape legend: B batch, T sequence length, E embedding size, V vocabulary size.
The E -> H projection is not here: like the original (`bert/encoder/
embedding_hidden_mapping_in`) it belongs to the encoder, and exists only when E != H.
"""

import keras
from keras import ops

from albert_tf.modeling.dropout import dropout

LAYER_NORM_EPSILON = 1e-12


def truncated_normal(stddev):
    """A new instance of the release's initializer: truncated normal (2 stddev cut), mean 0.
    Call it once per weight, never share the result (docs/design_encoder.md#initial-weights-and-the-float32-tables).
    """
    return keras.initializers.TruncatedNormal(mean=0.0, stddev=stddev)


def dense_layer(units, initializer_range, dtype, name, activation=None, use_bias=True):
    """A keras Dense with the release's kernel initializer (a new one: `truncated_normal`)."""
    return keras.layers.Dense(units, activation=activation, use_bias=use_bias, dtype=dtype, name=name,
                              kernel_initializer=truncated_normal(initializer_range))


def layer_norm():
    """The release's LayerNorm ("LayerNorm", epsilon 1e-12), float32 under every policy."""
    return keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, dtype="float32", name="LayerNorm")


def check_rank(tensor, rank, name):
    """Raises ValueError when a tensor's static rank is known and differs from `rank`."""
    ndim = len(tensor.shape)
    if ndim != rank:
        raise ValueError(f"`{name}` must have rank {rank}, got shape {tuple(tensor.shape)}.")


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEmbeddings(keras.layers.Layer):
    """Sum of word, position and token-type embeddings, then LayerNorm and dropout.

    Variables (paths below this layer): `word_embeddings` [V, E],
    `position_embeddings` [max_position_embeddings, E], `token_type_embeddings`
    [type_vocab_size, E], `LayerNorm/gamma`, `LayerNorm/beta`.

    Args:
        vocab_size: int. V.
        embedding_size: int. E.
        max_position_embeddings: int. Longest sequence; the position table is sliced to T.
        type_vocab_size: int. Number of segment ids.
        dropout: float. Dropout rate after the LayerNorm.
        initializer_range: float. Truncated-normal stddev.
        use_one_hot_embeddings: bool. Look words up with a one-hot matmul instead of a
            gather (faster on TPUs, as in the release).

    Call args:
        input_word_ids: int [B, T].
        input_type_ids: int [B, T].
        training: bool.
        seed: None (the Dropout layer draws from its own SeedGenerator), or int32 [2]: the
            dropout's seed, a stateless draw (modeling.dropout; AlbertEncoder passes it).

    Returns:
        float32 [B, T, E] (the LayerNorm and dropout compute in float32 under every policy:
        the start of the encoder's float32 residual stream, see encoder_block).

    Under a mixed policy the tables are not autocast: a word is gathered from the float32
    table (docs/design_encoder.md#initial-weights-and-the-float32-tables).

    Example:
    ```python
    layer = AlbertEmbeddings(vocab_size=100, embedding_size=8, max_position_embeddings=16)
    layer(np.ones((2, 5), "int32"), np.zeros((2, 5), "int32")).shape  # (2, 5, 8)
    ```
    """

    CONFIG = ("vocab_size", "embedding_size", "max_position_embeddings", "type_vocab_size", "dropout",
              "initializer_range", "use_one_hot_embeddings")

    def __init__(self, vocab_size, embedding_size, max_position_embeddings=512, type_vocab_size=2, dropout=0.0,
                 initializer_range=0.02, use_one_hot_embeddings=False, **kwargs):
        kwargs["autocast"] = False  # see "Under a mixed policy" above
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.use_one_hot_embeddings = use_one_hot_embeddings

        self.layer_norm = layer_norm()
        self.dropout_layer = keras.layers.Dropout(dropout, dtype="float32")

    def build(self, input_shape=None):
        # one initializer instance (one seed) per table, in this order: see `truncated_normal`
        for name, rows in (("word_embeddings", self.vocab_size), ("position_embeddings", self.max_position_embeddings),
                           ("token_type_embeddings", self.type_vocab_size)):
            setattr(self, name, self.add_weight(name=name, shape=(rows, self.embedding_size),
                                                initializer=truncated_normal(self.initializer_range)))
        self.layer_norm.build((None, None, self.embedding_size))
        self.built = True

    def _lookup(self, table, ids, depth, one_hot, dtype):
        if one_hot:
            return ops.matmul(ops.one_hot(ids, depth, dtype=dtype), ops.cast(table, dtype))
        return ops.take(table, ids, axis=0)  # the table's dtype (float32)

    def call(self, input_word_ids, input_type_ids, training=None, seed=None):
        check_rank(input_word_ids, 2, "input_word_ids")
        check_rank(input_type_ids, 2, "input_type_ids")
        seq_length = input_word_ids.shape[1]
        if seq_length is not None and seq_length > self.max_position_embeddings:
            raise ValueError(f"sequence length {seq_length} exceeds max_position_embeddings "
                             f"{self.max_position_embeddings}.")
        words = self._lookup(self.word_embeddings, input_word_ids, self.vocab_size, self.use_one_hot_embeddings,
                             self.compute_dtype)
        # The type table is tiny: the release always uses a one-hot matmul for it (here in float32).
        types = self._lookup(self.token_type_embeddings, input_type_ids, self.type_vocab_size, True, "float32")
        length = ops.shape(input_word_ids)[1]
        # the variable's value sliced, not the variable (JAX's slice takes arrays only; the same read on TensorFlow)
        table = ops.convert_to_tensor(self.position_embeddings)
        positions = ops.cast(ops.slice(table, (0, 0), (length, self.embedding_size)), "float32")
        x = ops.cast(words, "float32") + types + ops.expand_dims(positions, 0)  # summed in float32
        return dropout(self.dropout_layer, self.layer_norm(x), training, seed)

    def compute_output_shape(self, input_word_ids_shape, input_type_ids_shape=None):
        return tuple(input_word_ids_shape) + (self.embedding_size,)

    def get_config(self):
        return {**super().get_config(), **{name: getattr(self, name) for name in self.CONFIG}}
