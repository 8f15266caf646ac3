"""Files written while AlbertEncoder had two forward passes (a Keras functional graph and an
overridden `call`) load into the encoder of one forward pass and give the same outputs.

tests/data/encoder_forward.tar.gz (36 KB) was written at commit 0d432f7 by `write_reference`
below: an AlbertPretrainer (vocabulary 64, E 4, H 8, 4 layers in 2 groups: an embedding
projection and two attention / feed-forward sub-layers each) from seed 7, every weight
moved off its initial value by N(0, 0.1) noise, then its `pretrainer.weights.h5` and
`encoder.weights.h5` (save_pretrained), `ckpt-1` (tf.train.Checkpoint(model=...), the
layout of the training driver's `ckpt-N` model), the outputs of fixed padded inputs
(outputs.npz, training=False) and the weights' paths in order (weights.json).
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from conftest import extract_archive

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.storage.weights_file import model_weights_variables, weights_file_variables

ARCHIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "encoder_forward.tar.gz")
ENCODER_KEYS = ("sequence_output", "pooled_output")
ATOL = 1e-6  # float rounding of outputs of size ~1 (the same ops on the same weights)


def write_reference(out):
    """How the archive's files were made (at commit 0d432f7); not run by the tests."""
    import keras

    keras.utils.set_random_seed(7)
    config = AlbertConfig.from_dict(dict(
        vocab_size=64, embedding_size=4, hidden_size=8, num_attention_heads=2, intermediate_size=16,
        num_hidden_layers=4, num_hidden_groups=2, inner_group_num=1, max_position_embeddings=16,
        type_vocab_size=2, hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
        initializer_range=0.02))
    model = AlbertPretrainer(config)
    rng = np.random.default_rng(7)
    for v in model.weights:
        v.assign(np.asarray(v) + rng.normal(0, 0.1, v.shape).astype("float32"))
    model.save_pretrained(out)
    model.encoder.save_pretrained(out)
    tf.train.Checkpoint(model=model).write(os.path.join(out, "ckpt-1"))
    inputs = _inputs()
    encoded = model.encoder(inputs, training=False)
    logits = model(dict(inputs, masked_lm_positions=_positions()), training=False)
    arrays = dict(inputs, masked_lm_positions=_positions(), sequence_output=encoded["sequence_output"],
                  pooled_output=encoded["pooled_output"], mlm_logits=logits["mlm_logits"],
                  sop_logits=logits["sop_logits"])
    arrays.update({f"encoder_outputs_{i}": x for i, x in enumerate(encoded["encoder_outputs"])})
    np.savez_compressed(os.path.join(out, "outputs.npz"), **{k: np.asarray(v) for k, v in arrays.items()})
    with open(os.path.join(out, "weights.json"), "w") as f:
        json.dump({"pretrainer": [v.path for v in model.weights],
                   "encoder": [v.path for v in model.encoder.weights]}, f, indent=0)


def _inputs():
    ids = np.array([[2, 11, 25, 40, 3, 0, 0, 0], [2, 63, 7, 3, 9, 17, 3, 0]], "int32")
    mask = (np.arange(8)[None] < np.array([[5], [7]])).astype("int32")
    types = np.array([[0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1, 0]], "int32")
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def _positions():
    return np.array([[1, 2], [5, 0]], "int32")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("encoder_forward")
    extract_archive(ARCHIVE, root)
    directory = str(root / "encoder_forward")
    with np.load(os.path.join(directory, "outputs.npz")) as f:
        outputs = dict(f)
    with open(os.path.join(directory, "weights.json"), encoding="utf-8") as f:
        paths = json.load(f)
    return directory, outputs, paths


def check_encoder(encoder, outputs, **runtime):
    inputs = {k: outputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    assert np.array_equal(inputs["input_mask"], _inputs()["input_mask"])
    with encoder.runtime_options(**runtime):
        got = {k: np.asarray(v) if k != "encoder_outputs" else [np.asarray(x) for x in v]
               for k, v in encoder(inputs, training=False).items()}
    real = inputs["input_mask"][..., None] > 0
    skipped = runtime.get("skip_padding", False)
    for key in ENCODER_KEYS:
        want = outputs[key]
        if skipped and key == "sequence_output":
            want = np.where(real, want, 0.0)  # padded positions are zeros when skipped
        np.testing.assert_allclose(got[key], want, rtol=0, atol=ATOL, err_msg=key)
    assert len(got["encoder_outputs"]) == 4
    for i, x in enumerate(got["encoder_outputs"]):
        want = outputs[f"encoder_outputs_{i}"]
        np.testing.assert_allclose(x, np.where(real, want, 0.0) if skipped else want, rtol=0, atol=ATOL)


def check_pretrainer(model, outputs):
    inputs = {k: outputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")}
    got = model(inputs, training=False)
    for key in ("mlm_logits", "sop_logits"):
        np.testing.assert_allclose(np.asarray(got[key]), outputs[key], rtol=0, atol=ATOL, err_msg=key)
    check_encoder(model.encoder, outputs)


def test_weights_files_load_with_the_same_layout_names_and_outputs(reference):
    directory, outputs, paths = reference
    pretrainer = AlbertPretrainer.from_pretrained(directory)
    assert [v.path for v in pretrainer.weights] == paths["pretrainer"]
    # the same .weights.h5 entries (layers/albert_encoder/layers/albert_attention_1/..., shapes)
    assert model_weights_variables(pretrainer) == weights_file_variables(
        os.path.join(directory, "pretrainer.weights.h5"))
    check_pretrainer(pretrainer, outputs)

    encoder = AlbertEncoder.from_pretrained(directory)  # encoder.weights.h5
    assert [v.path for v in encoder.weights] == paths["encoder"]
    assert model_weights_variables(encoder) == weights_file_variables(os.path.join(directory, "encoder.weights.h5"))
    check_encoder(encoder, outputs)
    # the real positions and pooled output are the same with padding skipped
    check_encoder(encoder, outputs, skip_padding=True)


def test_a_checkpoint_restores_every_value_with_the_same_outputs(reference):
    directory, outputs, _ = reference
    config = AlbertConfig.from_json_file(os.path.join(directory, "albert_config.json"))
    model = AlbertPretrainer(config)
    status = tf.train.Checkpoint(model=model).read(os.path.join(directory, "ckpt-1"))
    status.assert_existing_objects_matched()
    status.assert_consumed()  # and every value of the checkpoint found its variable
    check_pretrainer(model, outputs)
