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
