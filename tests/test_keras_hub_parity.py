import keras_hub
import numpy as np
import pytest

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.convert.keras_hub import load_keras_hub_backbone
from albert_tf.convert.rename import ConversionError
from conftest import random_inputs
from harness import to_numpy


def _backbone(config):
    return keras_hub.models.AlbertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        num_groups=config.num_hidden_groups,
        num_inner_repetitions=config.inner_group_num,
        embedding_dim=config.embedding_size,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        dropout=0.0,
        max_sequence_length=config.max_position_embeddings,
    )


@pytest.mark.parametrize("groups, inner", [(2, 1), (1, 2)])
def test_matches_keras_hub_backbone(groups, inner):
    config = AlbertConfig.from_preset("albert_tiny").replace(
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        num_hidden_groups=groups, inner_group_num=inner,
    )
    backbone = _backbone(config)
    encoder = AlbertEncoder(config)
    assigned = load_keras_hub_backbone(backbone, encoder)
    assert len(assigned) == len(encoder.weights)
    inputs = random_inputs(config, batch=3, length=20, seed=3)
    ours = to_numpy(encoder(inputs))
    theirs = to_numpy(backbone({
        "token_ids": inputs["input_word_ids"],
        "segment_ids": inputs["input_type_ids"],
        "padding_mask": inputs["input_mask"],
    }))
    real = inputs["input_mask"][..., None].astype(bool)
    diff = np.abs(ours["sequence_output"] - theirs["sequence_output"])
    assert diff[np.broadcast_to(real, diff.shape)].max() < 1e-5
    np.testing.assert_allclose(ours["pooled_output"], theirs["pooled_output"], atol=1e-5)


def test_mismatched_backbone_is_refused_with_the_list():
    config = AlbertConfig.from_preset("albert_tiny")
    backbone = _backbone(config.replace(intermediate_size=48))
    with pytest.raises(ConversionError, match="feedforward_intermediate_dense/kernel"):
        load_keras_hub_backbone(backbone, AlbertEncoder(config))
