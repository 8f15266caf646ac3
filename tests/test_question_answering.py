"""AlbertForQuestionAnswering and the SQuAD heads: variable names (the release's after the
tf1 rename), the v2 head against a NumPy transcription of squad_utils.create_v2_model,
p_mask, training vs inference outputs, losses, config round trip, variable lengths,
save/load, pretrained directories."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import random_inputs
from convert_helpers import RELEASE_V2_HEAD
from harness import (check_config_round_trip, check_fine_tuned_directory, check_saved_model_round_trip,
                     check_variable_lengths, new_heads_from_pretrained, to_numpy)

from albert_tf import AlbertConfig, AlbertEncoder, AlbertForQuestionAnswering, AlbertPretrainer
from albert_tf.convert.api import tf1_values
from albert_tf.modeling.pretrained import model_record
from albert_tf.modeling.qa_heads import SquadV1Head, SquadV2Head, squad_v1_loss, squad_v2_loss

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def no_dropout(config):
    return config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def randomize(layer, seed=1, hidden_size=None):
    """Known, non-default weights everywhere (biases and LayerNorms included); a head is
    built first for `hidden_size`."""
    if hidden_size is not None:
        layer.build((None, None, hidden_size))
    rng = np.random.default_rng(seed)
    for v in layer.weights:
        v.assign(rng.normal(scale=0.3, size=v.shape).astype("float32") + (1.0 if "gamma" in v.path else 0.0))
    return layer


def qa_inputs(config, length=12, seed=0, question=(1, 2, 3)):
    """random_inputs plus p_mask: 1 on the question (positions 1-3), the last real
    token ([SEP]) and padding; 0 on [CLS] and the context."""
    inputs = random_inputs(config, length=length, seed=seed)
    mask = inputs["input_mask"]
    p_mask = 1 - mask
    p_mask[:, list(question)] = 1
    p_mask[np.arange(len(mask)), mask.sum(1) - 1] = 1
    inputs["p_mask"] = p_mask.astype("int32")
    return inputs


# --- the release's names ---------------------------------------------------------------


def release_head_values(head):
    """The release's name -> array for a head, written out by hand."""
    if isinstance(head, SquadV1Head):
        return {"cls/squad/output_weights": np.asarray(head.output_weights),
                "cls/squad/output_bias": np.asarray(head.output_bias)}
    return {name: np.asarray(getattr(getattr(head, layer), var)) for name, (layer, var) in RELEASE_V2_HEAD.items()}


def test_head_variables_are_the_releases(tiny_config):
    h = tiny_config.hidden_size
    v1 = AlbertForQuestionAnswering(tiny_config)
    assert [(w.path, tuple(w.shape)) for w in v1.head.weights] == [
        ("squad/output_weights", (2, h)), ("squad/output_bias", (2,))]
    v2 = AlbertForQuestionAnswering(tiny_config, version="v2")
    assert [(w.path, tuple(w.shape)) for w in v2.head.weights] == [
        ("squad_v2/start_logits_dense/kernel", (h, 1)), ("squad_v2/start_logits_dense/bias", (1,)),
        ("squad_v2/end_logits_dense_0/kernel", (2 * h, h)), ("squad_v2/end_logits_dense_0/bias", (h,)),
        ("squad_v2/end_logits_LayerNorm/gamma", (h,)), ("squad_v2/end_logits_LayerNorm/beta", (h,)),
        ("squad_v2/end_logits_dense_1/kernel", (h, 1)), ("squad_v2/end_logits_dense_1/bias", (1,)),
        ("squad_v2/answer_class_dense_0/kernel", (2 * h, h)), ("squad_v2/answer_class_dense_0/bias", (h,)),
        ("squad_v2/answer_class_dense_1/kernel", (h, 1))]
    assert v2.head.end_layer_norm.epsilon == 1e-12  # contrib layer_norm's fixed variance epsilon

    for model in (v1, v2):
        randomize(model.head, seed=2)
        names = tf1_values(model)  # the converter's rename: the release's names, shapes and numbers
        encoder_names = tf1_values(model.encoder)
        head = {n: v for n, v in names.items() if n not in encoder_names}
        expected = release_head_values(model.head)
        assert sorted(head) == sorted(expected)
        for name in expected:
            np.testing.assert_array_equal(head[name], expected[name], err_msg=name)
        assert "bert/pooler/dense/kernel" in names  # run_squad builds the whole AlbertModel
        # initial values: truncated normal (|x| <= 2 stddev) kernels, zero biases, LayerNorm 1 / 0
    fresh = AlbertForQuestionAnswering(tiny_config, version="v2")
    for w in fresh.head.weights:
        value = np.asarray(w)
        if w.path.endswith(("kernel", "output_weights")):
            assert 0 < np.abs(value).max() <= 2 * tiny_config.initializer_range + 1e-7, w.path
        else:
            np.testing.assert_array_equal(value, 1.0 if w.path.endswith("gamma") else 0.0, err_msg=w.path)
    kernels = [np.asarray(w) for w in fresh.head.weights if w.path.endswith("kernel")]
    assert not np.array_equal(kernels[1], kernels[3])  # one initializer instance per weight


# --- v1 ----------------------------------------------------------------------------------


def test_v1_head_is_a_linear_map_and_masks_nothing():
    rng = np.random.default_rng(0)
    head = randomize(SquadV1Head(8), hidden_size=8)
    x = rng.normal(size=(3, 7, 8)).astype("float32")
    out = to_numpy(head(x))
    logits = x @ np.asarray(head.output_weights).T + np.asarray(head.output_bias)
    np.testing.assert_allclose(out["start_logits"], logits[..., 0], atol=1e-5)
    np.testing.assert_allclose(out["end_logits"], logits[..., 1], atol=1e-5)
    assert out["start_logits"].dtype == np.float32 and out["start_logits"].shape == (3, 7)


def test_v1_model_outputs_and_dropout_only_in_training(tiny_config):
    model = AlbertForQuestionAnswering(tiny_config.replace(hidden_dropout_prob=0.3))
    inputs = qa_inputs(tiny_config)
    out = to_numpy(model(inputs))  # p_mask is ignored by v1
    assert set(out) == {"start_logits", "end_logits"} and out["end_logits"].shape == (3, 12)
    seq = to_numpy(model.encoder({k: inputs[k] for k in ENCODER_KEYS}))["sequence_output"]
    np.testing.assert_allclose(out["start_logits"], to_numpy(model.head(seq))["start_logits"], atol=1e-6)
    np.testing.assert_array_equal(out["start_logits"], to_numpy(model(inputs, training=False))["start_logits"])
    assert not np.allclose(to_numpy(model(inputs, training=True))["start_logits"], out["start_logits"])


# --- v2 against the release ------------------------------------------------------------


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _layer_norm(x, gamma, beta, eps=1e-12):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * gamma + beta


def _top_k(x, k):
    index = np.argsort(-x, axis=-1, kind="stable")[..., :k]  # ties: lower index first, as tf.nn.top_k
    return np.take_along_axis(x, index, -1), index


def release_v2(seq, p_mask, w, is_training, start_positions=None, start_n_top=5, end_n_top=5):
    """squad_utils.create_v2_model transcribed to NumPy (float64), in its own layout:
    time-major [T, B, H], one-hot einsums, tiles and concatenations."""
    output = np.transpose(seq.astype("float64"), (1, 0, 2))  # [T, B, H]
    seq_len, bsz = output.shape[:2]
    p_mask = p_mask.astype("float64")
    start_logits = np.squeeze(output @ w["start_logits/dense/kernel"] + w["start_logits/dense/bias"], -1).T
    start_logits_masked = start_logits * (1 - p_mask) - 1e30 * p_mask
    start_log_probs = _log_softmax(start_logits_masked)

    def end_layers(x):
        x = np.tanh(x @ w["end_logits/dense_0/kernel"] + w["end_logits/dense_0/bias"])
        x = _layer_norm(x, w["end_logits/LayerNorm/gamma"], w["end_logits/LayerNorm/beta"])
        return x @ w["end_logits/dense_1/kernel"] + w["end_logits/dense_1/bias"]

    out = {}
    if is_training:
        start_index = np.eye(seq_len)[start_positions]  # [B, T]
        start_features = np.einsum("lbh,bl->bh", output, start_index)
        start_features = np.tile(start_features[None], [seq_len, 1, 1])
        end_logits = np.squeeze(end_layers(np.concatenate([output, start_features], -1)), -1).T
        end_logits_masked = end_logits * (1 - p_mask) - 1e30 * p_mask
        out["start_log_probs"], out["end_log_probs"] = start_log_probs, _log_softmax(end_logits_masked)
    else:
        start_top_log_probs, start_top_index = _top_k(start_log_probs, start_n_top)
        start_index = np.eye(seq_len)[start_top_index]  # [B, k1, T]
        start_features = np.einsum("lbh,bkl->bkh", output, start_index)
        end_input = np.tile(output[:, :, None], [1, 1, start_n_top, 1])
        start_features = np.tile(start_features[None], [seq_len, 1, 1, 1])
        end_logits = end_layers(np.concatenate([end_input, start_features], -1))
        end_logits = np.transpose(end_logits.reshape(seq_len, -1, start_n_top), (1, 2, 0))
        end_logits_masked = end_logits * (1 - p_mask[:, None]) - 1e30 * p_mask[:, None]
        end_top_log_probs, end_top_index = _top_k(_log_softmax(end_logits_masked), end_n_top)
        out.update(start_top_log_probs=start_top_log_probs, start_top_index=start_top_index,
                   end_top_log_probs=end_top_log_probs.reshape(-1, start_n_top * end_n_top),
                   end_top_index=end_top_index.reshape(-1, start_n_top * end_n_top))
    cls_feature = np.einsum("lbh,bl->bh", output, np.eye(seq_len)[np.zeros(bsz, int)])
    start_p = np.exp(_log_softmax(start_logits_masked))
    start_feature = np.einsum("lbh,bl->bh", output, start_p)
    ans = np.tanh(np.concatenate([start_feature, cls_feature], -1) @ w["answer_class/dense_0/kernel"]
                  + w["answer_class/dense_0/bias"])
    out["cls_logits"] = np.squeeze(ans @ w["answer_class/dense_1/kernel"], -1)
    return out


def _assert_matches_release(ours, theirs):
    assert set(ours) == set(theirs)
    for key, value in theirs.items():
        if key.endswith("index"):
            assert ours[key].dtype == np.int32, key
            np.testing.assert_array_equal(ours[key], value, err_msg=key)
        else:
            np.testing.assert_allclose(ours[key], value, rtol=1e-5, atol=1e-4, err_msg=key)


@pytest.mark.parametrize("start_n_top, end_n_top", [(5, 5), (3, 2)])
def test_v2_head_is_the_releases(start_n_top, end_n_top):
    rng = np.random.default_rng(3)
    head = SquadV2Head(16, start_n_top=start_n_top, end_n_top=end_n_top, dropout_prob=0.0)
    randomize(head, seed=4, hidden_size=16)
    w = {k: v.astype("float64") for k, v in release_head_values(head).items()}
    seq = rng.normal(size=(3, 10, 16)).astype("float32")
    p_mask = np.zeros((3, 10), "int32")
    p_mask[:, 1:4] = 1
    p_mask[1, 7:] = 1  # padding
    p_mask[2, 5:] = 1  # 4 possible positions (0 and 4): fewer than start_n_top = 5
    _assert_matches_release(to_numpy(head(seq, p_mask)), release_v2(seq, p_mask, w, False, None, start_n_top,
                                                                     end_n_top))
    gold = np.array([4, 0, 4])
    _assert_matches_release(to_numpy(head(seq, p_mask, gold, training=True)),
                            release_v2(seq, p_mask, w, True, gold))


def test_v2_p_mask_positions_are_masked(tiny_config):
    rng = np.random.default_rng(5)
    head = randomize(SquadV2Head(8, start_n_top=3, end_n_top=2, dropout_prob=0.0), seed=6, hidden_size=8)
    seq = rng.normal(size=(2, 9, 8)).astype("float32")
    p_mask = np.zeros((2, 9), "int32")
    p_mask[:, 1:4] = 1
    p_mask[:, 8] = 1
    masked = p_mask.astype(bool)
    train = to_numpy(head(seq, p_mask, np.array([5, 0]), training=True))
    infer = to_numpy(head(seq, p_mask))
    for key in ("start_log_probs", "end_log_probs"):
        assert (train[key][masked] < -1e29).all() and (train[key][~masked] > -1e3).all(), key
        np.testing.assert_allclose(np.exp(train[key]).sum(-1), 1.0, rtol=1e-5)
    assert not masked[np.arange(2)[:, None], infer["start_top_index"]].any()
    assert not masked[np.arange(2)[:, None], infer["end_top_index"]].any()
    # what is at masked positions (but [CLS], position 0, whose state feeds cls_logits) changes nothing
    changed = seq.copy()
    changed[masked] = rng.normal(size=changed[masked].shape) * 10
    for a, b in ((train, to_numpy(head(changed, p_mask, np.array([5, 0]), training=True))),
                 (infer, to_numpy(head(changed, p_mask)))):
        for key in a:
            values_a, values_b = a[key], b[key]
            if a[key].shape == masked.shape:
                values_a, values_b = a[key][~masked], b[key][~masked]
            np.testing.assert_allclose(values_a, values_b, atol=1e-5, err_msg=key)

    # the model masks padding (input_mask 0) even where p_mask says 0, and p_mask defaults to padding only
    model = randomize(AlbertForQuestionAnswering(no_dropout(tiny_config), version="v2", start_n_top=3,
                                                 end_n_top=2), seed=7)
    inputs = qa_inputs(tiny_config)
    padding = inputs["input_mask"] == 0
    out = to_numpy(model(dict(inputs, start_positions=np.array([5, 4, 0])), training=True))
    assert (out["start_log_probs"][padding] < -1e29).all()
    unmasked_padding = dict(inputs, p_mask=inputs["p_mask"] * inputs["input_mask"])
    _assert_matches_release(to_numpy(model(unmasked_padding)), to_numpy(model(inputs)))
    without = {k: v for k, v in inputs.items() if k != "p_mask"}
    assert (to_numpy(model(dict(without, start_positions=np.zeros(3, "int32")), training=True))
            ["start_log_probs"][~padding] > -1e3).all()


def test_v2_training_and_inference_outputs(tiny_config):
    config = no_dropout(tiny_config)
    model = AlbertForQuestionAnswering(config, version="v2", start_n_top=4, end_n_top=3, dropout_prob=0.5)
    inputs = qa_inputs(config)
    infer = to_numpy(model(inputs))
    assert {k: v.shape for k, v in infer.items()} == {
        "start_top_log_probs": (3, 4), "start_top_index": (3, 4), "end_top_log_probs": (3, 12),
        "end_top_index": (3, 12), "cls_logits": (3,)}
    np.testing.assert_array_equal(infer["cls_logits"], to_numpy(model(inputs, training=False))["cls_logits"])
    with pytest.raises(ValueError, match="training needs `start_positions`"):
        model(inputs, training=True)
    batch = dict(inputs, start_positions=np.array([5, 4, 0], "int32"))
    first, second = to_numpy(model(batch, training=True)), to_numpy(model(batch, training=True))
    assert {k: v.shape for k, v in first.items()} == {"start_log_probs": (3, 12), "end_log_probs": (3, 12),
                                                      "cls_logits": (3,)}
    # dropout (dropout_prob) only on the answer-class branch, only in training
    np.testing.assert_array_equal(first["start_log_probs"], second["start_log_probs"])
    np.testing.assert_array_equal(first["end_log_probs"], second["end_log_probs"])
    assert not np.allclose(first["cls_logits"], second["cls_logits"])
    # the end of the gold start is the inference end of that start
    best = infer["start_top_index"][:, 0]
    cond = to_numpy(model(dict(inputs, start_positions=best), training=True))
    top_end = np.argmax(cond["end_log_probs"], -1)
    np.testing.assert_array_equal(top_end, infer["end_top_index"][:, 0])
    np.testing.assert_allclose(cond["end_log_probs"].max(-1), infer["end_top_log_probs"][:, 0], atol=1e-5)


# --- losses --------------------------------------------------------------------------------


def test_squad_v1_loss_by_hand():
    start = np.array([[1.0, 2.0, 0.5], [0.0, 0.0, 3.0]], "float32")
    end = np.array([[0.0, 1.0, 0.0], [2.0, -1.0, 0.0]], "float32")
    sp, ep = np.array([1, 0]), np.array([2, 0])

    def ce(logits, label):
        return np.log(np.exp(logits).sum()) - logits[label]

    expected = ((ce(start[0], 1) + ce(start[1], 0)) / 2 + (ce(end[0], 2) + ce(end[1], 0)) / 2) / 2
    np.testing.assert_allclose(float(squad_v1_loss(start, end, sp, ep)), expected, rtol=1e-6)
    np.testing.assert_allclose(float(squad_v1_loss(np.zeros((2, 4)), np.zeros((2, 4)), [1, 2], [2, 3])),
                               np.log(4), rtol=1e-6)


def test_squad_v2_loss_by_hand():
    start = np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.6, 0.3]], "float32"))
    end = np.log(np.array([[0.2, 0.2, 0.6], [0.7, 0.2, 0.1]], "float32"))
    outputs = {"start_log_probs": start, "end_log_probs": end, "cls_logits": np.array([2.0, -1.0], "float32")}
    sp, ep, impossible = np.array([0, 1]), np.array([0, 2]), np.array([1, 0])
    start_loss = -(np.log(0.5) + np.log(0.6)) / 2
    end_loss = -(np.log(0.2) + np.log(0.1)) / 2
    sigmoid = 1 / (1 + np.exp(-np.array([2.0, -1.0])))
    cls_loss = -(np.log(sigmoid[0]) + np.log(1 - sigmoid[1])) / 2
    expected = (start_loss + end_loss) / 2 + 0.5 * cls_loss
    np.testing.assert_allclose(float(squad_v2_loss(outputs, sp, ep, impossible)), expected, rtol=1e-6)
    # large logits stay finite
    far = dict(outputs, cls_logits=np.array([500.0, -500.0], "float32"))
    np.testing.assert_allclose(float(squad_v2_loss(far, sp, ep, np.array([0, 1]))),
                               (start_loss + end_loss) / 2 + 0.5 * 500.0, rtol=1e-6)


def test_v2_loss_gradients_reach_every_weight(tiny_config):
    model = AlbertForQuestionAnswering(tiny_config, version="v2")
    batch = dict(qa_inputs(tiny_config), start_positions=np.array([5, 4, 0], "int32"))
    with tf.GradientTape() as tape:
        outputs = model(batch, training=True)
        loss = squad_v2_loss(outputs, batch["start_positions"], np.array([6, 5, 0]), np.array([0, 0, 1]))
    grads = tape.gradient(loss, model.trainable_weights)
    by_path = {w.path: g for w, g in zip(model.trainable_weights, grads)}
    # a constant added to every start logit changes neither the start log-softmax nor the
    # softmax-weighted start state, so the start bias's gradient is 0 in exact arithmetic (in
    # the release too); in floats it is 0 or rounding noise
    shift_invariant = "squad_v2/start_logits_dense/bias"
    assert np.max(np.abs(np.asarray(by_path.pop(shift_invariant)))) < 1e-5
    missing = [path for path, g in by_path.items() if g is None or not np.any(np.asarray(g))]
    assert missing == ["pooler/kernel", "pooler/bias"]  # unused by SQuAD, in the release too


# --- Keras contract: config, lengths, save/load, pretrained directories -------------------------


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_config_round_trip_and_keras_save_load(tiny_config, tmp_path, version):
    model = AlbertForQuestionAnswering(AlbertEncoder(tiny_config, name="encoder"), version=version,
                                       start_n_top=3, end_n_top=4, dropout_prob=0.2)
    rebuilt = check_config_round_trip(model)
    assert set(rebuilt.get_config()) == {"name", "trainable", "encoder", "version", "start_n_top", "end_n_top",
                                         "dropout_prob"}
    assert (rebuilt.version, rebuilt.start_n_top, rebuilt.end_n_top, rebuilt.dropout_prob) == (version, 3, 4, 0.2)
    restored = check_saved_model_round_trip(model, qa_inputs(tiny_config), str(tmp_path))
    assert restored.version == version


def test_variable_sequence_lengths(tiny_config):
    config = no_dropout(tiny_config)
    v1 = AlbertForQuestionAnswering(config)
    check_variable_lengths(v1, lambda t: qa_inputs(config, length=t), [5, 8, 12],
                           sequence_keys=("start_logits", "end_logits"))

    v2 = randomize(AlbertForQuestionAnswering(config, version="v2", dropout_prob=0.0), seed=8)
    gold = np.array([4, 0, 4], "int32")

    def inference(inputs, training=False):  # plus sequence_output: the harness compares it position by position
        encoded = v2.encoder({k: inputs[k] for k in ENCODER_KEYS}, training=False)
        return dict(v2(inputs, training=False), sequence_output=encoded["sequence_output"])

    def conditioned(inputs, training=False):  # training outputs (dropout_prob 0: deterministic)
        sequence = v2.encoder({k: inputs[k] for k in ENCODER_KEYS}, training=False)["sequence_output"]
        p_mask = np.maximum(inputs["p_mask"], 1 - inputs["input_mask"])
        return v2.head(sequence, p_mask, gold, training=True)

    check_variable_lengths(inference, lambda t: qa_inputs(config, length=t), [6, 9, 12])
    check_variable_lengths(conditioned, lambda t: qa_inputs(config, length=t), [6, 9, 12],
                           sequence_keys=("start_log_probs", "end_log_probs"))


def test_save_and_from_pretrained(tiny_config, tmp_path):
    config = no_dropout(tiny_config)
    model = randomize(AlbertForQuestionAnswering(config, version="v2", start_n_top=3, end_n_top=2), seed=9)
    model.save_pretrained(tmp_path / "qa")
    assert sorted(os.listdir(tmp_path / "qa")) == ["albert_config.json", "model.json",
                                                    "question_answering.weights.h5"]
    record = json.load(open(tmp_path / "qa" / "model.json"))
    assert record == model_record(model)  # keras.saving.serialize_keras_object(model), no compile settings
    assert record["registered_name"] == "albert_tf>AlbertForQuestionAnswering"
    assert {k: record["config"][k] for k in AlbertForQuestionAnswering.HEAD_SETTINGS} == {
        "version": "v2", "start_n_top": 3, "end_n_top": 2, "dropout_prob": 0.1}
    loaded = AlbertForQuestionAnswering.from_pretrained(tmp_path / "qa")
    assert loaded.head_settings() == model.head_settings()
    for a, b in zip(model.weights, loaded.weights, strict=True):
        assert a.path == b.path
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    inputs = qa_inputs(config)
    _assert_matches_release(to_numpy(loaded(inputs)), to_numpy(model(inputs)))
    wider = AlbertForQuestionAnswering.from_pretrained(tmp_path / "qa", start_n_top=4, dropout_prob=0.0)
    assert (wider.start_n_top, wider.end_n_top, wider.dropout_prob) == (4, 2, 0.0)
    with pytest.raises(ValueError, match="holds a SQuAD v2 head, not v1"):
        AlbertForQuestionAnswering.from_pretrained(tmp_path / "qa", version="v1")
    # the directory as albert_tf 0.2.0 wrote it: question_answering.json, no model.json
    os.remove(tmp_path / "qa" / "model.json")
    (tmp_path / "qa" / "question_answering.json").write_text(json.dumps(model.head_settings()))
    old = AlbertForQuestionAnswering.from_pretrained(tmp_path / "qa")
    assert old.get_config() == model.get_config()
    _assert_matches_release(to_numpy(old(inputs)), to_numpy(model(inputs)))
    with pytest.raises(ValueError, match="holds a SQuAD v2 head, not v1"):
        AlbertForQuestionAnswering.from_pretrained(tmp_path / "qa", version="v1")
    os.remove(tmp_path / "qa" / "question_answering.json")
    with pytest.raises(ValueError, match="question_answering.weights.h5 without question_answering.json"):
        AlbertForQuestionAnswering.from_pretrained(tmp_path / "qa")


def test_from_a_pretrained_encoder_or_pretrainer_directory_a_new_head(tiny_config, tmp_path):
    pretrainer = randomize(AlbertPretrainer(tiny_config), seed=10)
    for model in new_heads_from_pretrained(AlbertForQuestionAnswering, pretrainer, tmp_path, version="v2",
                                           start_n_top=2):
        assert (model.version, model.start_n_top, model.end_n_top) == ("v2", 2, 5)
        # the head is new: initial values
        np.testing.assert_array_equal(np.asarray(model.head.end_layer_norm.gamma), 1.0)
    v1 = AlbertForQuestionAnswering.from_pretrained(tmp_path / "encoder")
    assert v1.version == "v1"
    check_fine_tuned_directory(v1, tmp_path)


def test_public_api_and_bad_arguments(tiny_config):
    import albert_tf

    assert "AlbertForQuestionAnswering" in albert_tf.__all__
    model = albert_tf.AlbertForQuestionAnswering(tiny_config.to_dict())
    assert model.config == tiny_config and model.encoder.name == "encoder"
    with pytest.raises(ValueError, match="version must be one of v1, v2"):
        AlbertForQuestionAnswering(tiny_config, version="v3")
    with pytest.raises(TypeError, match="must be an AlbertEncoder"):
        AlbertForQuestionAnswering(keras.layers.Dense(3))
    with pytest.raises(ValueError, match="missing inputs input_type_ids"):
        model({k: v for k, v in random_inputs(tiny_config).items() if k != "input_type_ids"})
    assert isinstance(AlbertConfig.from_dict(model.get_config()["encoder"]["config"]["config"]), AlbertConfig)
