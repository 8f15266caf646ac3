import numpy as np
import pytest

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.convert.keras_hub import backbone_for, load_keras_hub_backbone
from albert_tf.convert.rename import ConversionError
from conftest import random_inputs
from harness import to_numpy


@pytest.mark.parametrize("groups, inner", [(2, 1), (1, 2)])
def test_matches_keras_hub_backbone(groups, inner):
    config = AlbertConfig.from_preset("albert_tiny").replace(
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        num_hidden_groups=groups, inner_group_num=inner,
    )
    backbone = backbone_for(config)
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
    backbone = backbone_for(config.replace(intermediate_size=48))
    with pytest.raises(ConversionError, match="feedforward_intermediate_dense/kernel"):
        load_keras_hub_backbone(backbone, AlbertEncoder(config))
