"""keras-hub AlbertBackbone <-> AlbertEncoder: a rename table on Keras variable paths.

keras-hub keeps attention kernels per head ([H, N, D], bias [N, D], output [N, D, H]);
`match_shapes` merges those axes into the release's [H, H] / [H] layout.
"""

from albert_tf.convert.rename import assign_to_model

_G = r"group_(\d+)_inner_layer_(\d+)"
_T = r"group_\1_inner_group_\2"

KERAS_HUB_TO_ALBERT_TF = (
    (r"token_embedding/embeddings", "embeddings/word_embeddings"),
    (r"position_embedding/embeddings", "embeddings/position_embeddings"),
    (r"segment_embedding/embeddings", "embeddings/token_type_embeddings"),
    (r"embeddings_layer_norm/(gamma|beta)", r"embeddings/LayerNorm/\1"),
    (r"embedding_projection/(kernel|bias)", r"embedding_hidden_mapping_in/\1"),
    (_G + r"/self_attention_layer/(query|key|value)/(kernel|bias)", _T + r"_attention/\3/\4"),
    (_G + r"/self_attention_layer/attention_output/(kernel|bias)", _T + r"_attention/dense/\3"),
    (_G + r"/self_attention_layer_norm/(gamma|beta)", _T + r"_attention/LayerNorm/\3"),
    (_G + r"/feedforward_intermediate_dense/(kernel|bias)", _T + r"_ffn/intermediate/\3"),
    (_G + r"/feedforward_output_dense/(kernel|bias)", _T + r"_ffn/output_dense/\3"),
    (_G + r"/feedforward_layer_norm/(gamma|beta)", _T + r"_ffn/LayerNorm/\3"),
    (r"pooled_dense/(kernel|bias)", r"pooler/\1"),
)


def load_keras_hub_backbone(backbone, encoder):
    """Copies an in-memory keras-hub AlbertBackbone's weights into `encoder`.

    Raises:
        ConversionError: when any variable is missing, unexpected or misshaped.

    Returns:
        The assigned target paths.
    """
    source = {v.path: v.numpy() for v in backbone.weights}
    return assign_to_model(encoder, source, KERAS_HUB_TO_ALBERT_TF)


def backbone_from_file(path, config=None):
    """A keras-hub AlbertBackbone from a preset directory (config.json + model.weights.h5)
    or from a `.weights.h5` file plus an AlbertConfig describing it."""
    import json
    import os

    import keras_hub

    if os.path.isdir(path):
        config_path = os.path.join(path, "config.json")
        weights_path = os.path.join(path, "model.weights.h5")
        if not (os.path.isfile(config_path) and os.path.isfile(weights_path)):
            raise ValueError(f"--input={path}: a keras-hub preset directory holds config.json and model.weights.h5.")
        saved = json.load(open(config_path, encoding="utf-8"))
        backbone = keras_hub.models.AlbertBackbone(**{k: v for k, v in saved.get("config", saved).items()
                                                      if k not in ("name", "trainable", "dtype")})
    else:
        if not path.endswith(".weights.h5") or not os.path.isfile(path):
            raise ValueError(f"--input={path}: expected a keras-hub preset directory or a .weights.h5 file.")
        if config is None:
            raise ValueError("--from=keras_hub with a .weights.h5 file needs --albert_config_file.")
        backbone = keras_hub.models.AlbertBackbone(
            vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
            num_heads=config.num_attention_heads, embedding_dim=config.embedding_size,
            hidden_dim=config.hidden_size, intermediate_dim=config.intermediate_size,
            num_groups=config.num_hidden_groups, num_inner_repetitions=config.inner_group_num,
            dropout=config.hidden_dropout_prob, max_sequence_length=config.max_position_embeddings)
        weights_path = path
    try:
        backbone.load_weights(weights_path)
    except ValueError as e:
        raise ValueError(f"{weights_path}: does not fit the backbone ({e}).") from None
    return backbone


def config_of_backbone(backbone, hidden_act="gelu"):
    """The AlbertConfig of a keras-hub AlbertBackbone (it always uses tanh GELU)."""
    from albert_tf.modeling.config import AlbertConfig

    return AlbertConfig(
        vocab_size=backbone.vocabulary_size, embedding_size=backbone.embedding_dim,
        hidden_size=backbone.hidden_dim, num_hidden_layers=backbone.num_layers,
        num_hidden_groups=backbone.num_groups, inner_group_num=backbone.num_inner_repetitions,
        num_attention_heads=backbone.num_heads, intermediate_size=backbone.intermediate_dim,
        hidden_act=hidden_act, hidden_dropout_prob=backbone.dropout, attention_probs_dropout_prob=backbone.dropout,
        max_position_embeddings=backbone.max_sequence_length, type_vocab_size=backbone.num_segments)
