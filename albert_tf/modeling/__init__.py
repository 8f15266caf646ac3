"""Model code: keras.layers and keras.ops only (no TensorFlow imports), so the same
model builds on the JAX and PyTorch backends."""

from albert_tf.modeling.config import PRESETS, SHARING_MODES, AlbertConfig
from albert_tf.modeling.embeddings import AlbertEmbeddings
from albert_tf.modeling.encoder import AlbertEncoder, count_parameters
from albert_tf.modeling.encoder_block import AlbertAttention, AlbertFeedForward
from albert_tf.modeling.heads import AlbertMaskedLMHead, AlbertSentenceOrderHead
from albert_tf.modeling.pretrainer import AlbertPretrainer
