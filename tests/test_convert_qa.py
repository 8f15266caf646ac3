"""Conversion of SQuAD models: Hugging Face AlbertForQuestionAnswering and the release's
run_squad_v1.py / run_squad_v2.py checkpoints -> albert_tf AlbertForQuestionAnswering."""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertForQuestionAnswering
from albert_tf.convert import hf, tf1
from albert_tf.convert.api import convert, load_source, tf1_values
from albert_tf.convert.rename import ConversionError, apply_transforms, model_variables, rename
from albert_tf.convert.templates import reverse, to_regex_table

from convert_helpers import (RELEASE_V2_HEAD, config, hf_albert_forward, inputs, printed, randomize, run_cli,
                             refused_conversion, write_hf_dir, write_release_checkpoint)


def qa_batch(cfg):
    x = inputs(cfg)
    p_mask = 1 - x["input_mask"]
    p_mask[:, 1:4] = 1
    return dict(x, p_mask=p_mask)


def assert_same_predictions(a, b, cfg, atol=0.0):
    x = qa_batch(cfg)
    outputs = [(a(x, training=False), b(x, training=False))]
    if a.version == "v2":
        gold = dict(x, start_positions=np.array([5, 0], "int32"))
        outputs.append((a(gold, training=True), b(gold, training=True)))  # dropout: config 0, head below
    for oa, ob in outputs:
        assert set(oa) == set(ob)
        for key in oa:
            np.testing.assert_allclose(np.asarray(oa[key]), np.asarray(ob[key]), atol=atol, rtol=0, err_msg=key)


# --- Hugging Face -----------------------------------------------------------------------------


def hf_question_answering_forward(state, c, ids, mask, types):
    """Hugging Face AlbertForQuestionAnswering.forward (modeling_albert.py) in NumPy, float64:
    AlbertModel without pooler, then qa_outputs and split."""
    x, linear = hf_albert_forward(state, c, ids, mask, types)
    logits = linear(x, "qa_outputs")  # [B, T, 2]
    return logits[..., 0], logits[..., 1]


def hf_state(model, with_pooler):
    """An albert_tf v1 model's weights under Hugging Face's AlbertForQuestionAnswering names,
    through the inverse of the converter's table (`hf_question_answering_forward`, which
    reads these names as transformers does, checks them)."""
    to_hf = to_regex_table(reverse(hf.HF_ENCODER_TABLE + hf.HF_QA_TABLE))
    values = apply_transforms(rename({p: np.asarray(v) for p, v in model_variables(model).items()}, to_hf))
    state = {(k if k.startswith("qa_outputs.") else "albert." + k): np.ascontiguousarray(v) for k, v in values.items()}
    np.testing.assert_array_equal(state["qa_outputs.weight"], np.asarray(model.head.output_weights))  # [2, H] both
    if not with_pooler:
        del state["albert.pooler.weight"], state["albert.pooler.bias"]
    return state


def write_hf_qa_dir(directory, cfg, state):
    return write_hf_dir(directory, cfg, state, ["AlbertForQuestionAnswering"])


def test_from_hugging_face_question_answering(tmp_path):
    cfg = config(num_hidden_groups=2)
    original = randomize(AlbertForQuestionAnswering(cfg), seed=5)
    state = hf_state(original, with_pooler=False)  # as transformers builds it: no pooler
    hf_config = write_hf_qa_dir(tmp_path / "hf", cfg, state)
    result = run_cli("--from=hf", f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'converted'}")
    assert "as AlbertForQuestionAnswering" in result.stdout
    assert "no pooler" in result.stderr and "the converted pooler is zeros" in result.stderr
    assert sorted(os.listdir(tmp_path / "converted")) == [".albert_tf_output.json", "albert_config.json",
                                                           "model.json", "question_answering.weights.h5"]
    converted = AlbertForQuestionAnswering.from_pretrained(tmp_path / "converted")
    assert converted.version == "v1" and converted.config == cfg

    x = inputs(cfg)
    ours = converted(x, training=False)
    start, end = hf_question_answering_forward(state, hf_config, x["input_word_ids"], x["input_mask"],
                                               x["input_type_ids"])
    np.testing.assert_allclose(np.asarray(ours["start_logits"]), start, atol=1e-4, rtol=0)
    np.testing.assert_allclose(np.asarray(ours["end_logits"]), end, atol=1e-4, rtol=0)
    np.testing.assert_allclose(np.asarray(original(x)["start_logits"]), start, atol=1e-4, rtol=0)
    fixed = np.array([[2, 31, 51, 99, 7, 3]], "int32")
    fixed_start, _ = hf_question_answering_forward(state, hf_config, fixed, np.ones_like(fixed), np.zeros_like(fixed))
    np.testing.assert_allclose(printed(result.stdout, "start_logits"), fixed_start[0, :5], atol=1e-5)
    # every weight but the absent pooler is the source's; the pooler is zeros
    for a, b in zip(original.weights, converted.weights, strict=True):
        expected = np.zeros(a.shape) if a.path.startswith("pooler/") else np.asarray(a)
        np.testing.assert_array_equal(np.asarray(b), expected, err_msg=a.path)
    assert printed(result.stdout, "pooled_output") == [0.0] * 5

    # an older transformers saved the pooler: it is converted too
    write_hf_qa_dir(tmp_path / "hf_old", cfg, hf_state(original, with_pooler=True))
    old = load_source("hf", str(tmp_path / "hf_old"))
    for a, b in zip(original.weights, old.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)


def test_hugging_face_question_answering_problems_are_named(tmp_path):
    cfg = config()
    original = randomize(AlbertForQuestionAnswering(cfg), seed=6)
    state = hf_state(original, with_pooler=False)
    # config.json says AlbertForQuestionAnswering but the head is not there
    write_hf_qa_dir(tmp_path / "headless", cfg, {k: v for k, v in state.items() if not k.startswith("qa_outputs")})
    with pytest.raises(ValueError, match="names AlbertForQuestionAnswering but the weights have no qa_outputs"):
        load_source("hf", str(tmp_path / "headless"))
    # a head of another size: reported, nothing written
    wrong = dict(state, **{"qa_outputs.weight": np.zeros((3, cfg.hidden_size), "float32")})
    write_hf_qa_dir(tmp_path / "three", cfg, wrong)
    with pytest.raises(ConversionError, match=r"squad/output_weights: source \[3, 32\], model \[2, 32\]"):
        convert("hf", "albert_tf", str(tmp_path / "three"), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    # only one pooler weight: not filled in, reported
    write_hf_qa_dir(tmp_path / "half", cfg, dict(state, **{"albert.pooler.bias": np.zeros(32, "float32")}))
    with pytest.raises(ConversionError, match=r"missing from the source \(1\): pooler/kernel"):
        load_source("hf", str(tmp_path / "half"))


# --- the release's TF1 checkpoints -----------------------------------------------------------------


def release_qa_names(model):
    """The release's TF1 names of a SQuAD model: the encoder's (bert/..., checked by
    hand in test_convert.py), the head's written out here."""
    values = tf1_values(model.encoder)
    if model.version == "v1":
        values["cls/squad/output_weights"] = np.asarray(model.head.output_weights)
        values["cls/squad/output_bias"] = np.asarray(model.head.output_bias)
    else:
        for name, (layer, var) in RELEASE_V2_HEAD.items():
            values[name] = np.asarray(getattr(getattr(model.head, layer), var))
    return values


def test_from_release_squad_v2_checkpoint(tmp_path):
    cfg = config(num_hidden_groups=2)
    original = randomize(AlbertForQuestionAnswering(cfg, version="v2", dropout_prob=0.0), seed=7)
    prefix = write_release_checkpoint(release_qa_names(original), str(tmp_path / "squad2" / "model.ckpt-8144"))
    cfg.to_json_file(tmp_path / "albert_config.json")
    result = run_cli("--from=tf1", f"--input={prefix}", f"--albert_config_file={tmp_path / 'albert_config.json'}",
                     f"--output={tmp_path / 'converted'}")
    assert "as AlbertForQuestionAnswering" in result.stdout and "cls_logits[:5]" in result.stdout
    converted = AlbertForQuestionAnswering.from_pretrained(tmp_path / "converted", dropout_prob=0.0)
    assert converted.version == "v2" and converted.config == cfg
    for a, b in zip(original.weights, converted.weights, strict=True):
        assert a.path == b.path
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    assert_same_predictions(original, converted, cfg)
    ids = np.array([[2, 31, 51, 99, 7, 3]], "int32")
    cls = original({"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)},
                   training=False)["cls_logits"]
    np.testing.assert_allclose(printed(result.stdout, "cls_logits"), np.asarray(cls), atol=1e-5)

    # and back to the release's layout: exactly the names and shapes it was read from
    convert("albert_tf", "tf1", str(tmp_path / "converted"), str(tmp_path / "release_again"))
    listed = dict(tf.train.list_variables(str(tmp_path / "release_again" / "model.ckpt")))
    assert {n: s for n, s in listed.items() if n != "global_step"} == {
        n: list(v.shape) for n, v in release_qa_names(original).items()}
    again = load_source("tf1", str(tmp_path / "release_again"))
    assert isinstance(again, AlbertForQuestionAnswering) and again.version == "v2"


def test_from_release_squad_v1_checkpoint(tmp_path):
    cfg = config(num_hidden_groups=1, inner_group_num=2, embedding_size=32)  # E == H: no projection
    original = randomize(AlbertForQuestionAnswering(cfg), seed=8)
    values = release_qa_names(original)
    assert sorted(n for n in values if n.startswith("cls/")) == ["cls/squad/output_bias", "cls/squad/output_weights"]
    prefix = write_release_checkpoint(values, str(tmp_path / "squad1" / "model.ckpt-3649"), module_prefix=True)
    model, out = convert("tf1", "albert_tf", prefix, str(tmp_path / "converted"), cfg)
    assert isinstance(model, AlbertForQuestionAnswering) and model.version == "v1"
    converted = AlbertForQuestionAnswering.from_pretrained(out)
    for a, b in zip(original.weights, converted.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    assert_same_predictions(original, converted, cfg)
    # create_v1_model's logits from the checkpoint's own arrays
    x = inputs(cfg)
    sequence = np.asarray(converted.encoder(x, training=False)["sequence_output"])
    logits = sequence @ values["cls/squad/output_weights"].T + values["cls/squad/output_bias"]
    np.testing.assert_allclose(np.asarray(converted(x)["start_logits"]), logits[..., 0], atol=1e-5)
    np.testing.assert_allclose(np.asarray(converted(x)["end_logits"]), logits[..., 1], atol=1e-5)


def test_release_squad_checkpoint_problems_are_named(tmp_path):
    cfg = config()
    v2 = randomize(AlbertForQuestionAnswering(cfg, version="v2"), seed=9)
    values = release_qa_names(v2)
    assert tf1.model_kind(values) == "squad_v2"
    mixed = dict(values, **{"cls/squad/output_weights": np.zeros((2, 32), "float32")})
    with pytest.raises(ValueError, match=r"heads of several models \(squad_v1, squad_v2\)"):
        tf1.model_kind(mixed)
    broken = dict(values)
    del broken["end_logits/LayerNorm/gamma"]
    broken["answer_class/dense_1/bias"] = np.zeros((1,), "float32")  # the release's dense_1 has no bias
    _, error = refused_conversion(broken, tmp_path, cfg)
    message = str(error)
    assert "missing from the source (1): squad_v2/end_logits_LayerNorm/gamma" in message
    assert "answer_class/dense_1/bias: no rule of the rename table maps it" in message
    assert not (tmp_path / "out").exists()
