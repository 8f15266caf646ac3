"""Conversion of multiple-choice models: Hugging Face AlbertForMultipleChoice and the
release's RACE checkpoints (run_race.py, race_utils.create_model) -> albert_tf
AlbertForMultipleChoice, and back to the release's names."""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertForMultipleChoice, AlbertForQuestionAnswering
from albert_tf.convert import hf, tf1
from albert_tf.convert.api import convert, load_source, tf1_values
from albert_tf.convert.rename import ConversionError, apply_transforms, model_variables, rename
from albert_tf.convert.templates import reverse, to_regex_table

from convert_helpers import (config, hf_albert_forward, printed, randomize, run_cli, write_hf_dir,
                             write_release_checkpoint)

FIXED = np.array([[[2, 31, 51, 99, 7, 3]]], "int32")  # api.FIXED_IDS as one option of one example


def mc_batch(cfg, batch=2, options=3, length=12, seed=0):
    """[B, C, T] inputs: article then question-and-option segments, some options padded."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, cfg.vocab_size, (batch, options, length)).astype("int32")
    mask = np.ones((batch, options, length), "int32")
    mask[0, 1, 9:] = 0
    mask[-1, -1, 6:] = 0
    types = np.zeros_like(ids)
    types[..., 7:] = 1
    return {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": types * mask}


def fixed_inputs():
    return {"input_word_ids": FIXED, "input_mask": np.ones_like(FIXED), "input_type_ids": np.zeros_like(FIXED)}


def assert_same_weights(a, b):
    for x, y in zip(a.weights, b.weights, strict=True):
        assert x.path == y.path
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=x.path)


# --- Hugging Face -----------------------------------------------------------------------------


def hf_multiple_choice_forward(state, c, ids, mask, types):
    """Hugging Face AlbertForMultipleChoice.forward (modeling_albert.py) in NumPy, float64:
    [B, C, T] flattened to [B*C, T], AlbertModel with its pooler (tanh of a Linear on the
    first token), dropout (off), `classifier` Linear(H, 1), logits reshaped to [B, C].
    Returns (logits [B, C], pooled [B*C, H])."""
    num_choices, length = ids.shape[1], ids.shape[-1]
    x, linear = hf_albert_forward(state, c, *(a.reshape(-1, length) for a in (ids, mask, types)))  # view(-1, T)
    pooled = np.tanh(linear(x[:, 0], "albert.pooler"))  # AlbertModel: pooler_activation(pooler(x[:, 0]))
    logits = linear(pooled, "classifier")  # [B*C, 1]
    return logits.reshape(-1, num_choices), pooled


def hf_state(model):
    """An albert_tf multiple-choice model's weights under Hugging Face's
    AlbertForMultipleChoice names, through the inverse of the converter's table
    (`hf_multiple_choice_forward`, which reads these names as transformers does, checks them)."""
    to_hf = to_regex_table(reverse(hf.HF_ENCODER_TABLE + hf.HF_MC_TABLE))
    values = apply_transforms(rename({p: np.asarray(v) for p, v in model_variables(model).items()}, to_hf))
    state = {(k if k.startswith("classifier.") else "albert." + k): np.ascontiguousarray(v) for k, v in values.items()}
    assert state["classifier.weight"].shape == (1, model.config.hidden_size)  # torch [out, in]: no transpose
    np.testing.assert_array_equal(state["classifier.weight"], np.asarray(model.head.output_weights))
    assert "albert.pooler.weight" in state and "albert.pooler.bias" in state
    return state


def write_hf_mc_dir(directory, cfg, state, architectures=("AlbertForMultipleChoice",)):
    return write_hf_dir(directory, cfg, state, architectures)


def test_from_hugging_face_multiple_choice(tmp_path):
    cfg = config(num_hidden_groups=2)
    original = randomize(AlbertForMultipleChoice(cfg), seed=5)
    state = hf_state(original)
    hf_config = write_hf_mc_dir(tmp_path / "hf", cfg, state)
    result = run_cli("--from=hf", f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'converted'}")
    assert "as AlbertForMultipleChoice" in result.stdout and "logits[:5]" in result.stdout
    assert sorted(os.listdir(tmp_path / "converted")) == [".albert_tf_output.json", "albert_config.json",
                                                           "model.json", "multiple_choice.weights.h5"]
    converted = AlbertForMultipleChoice.from_pretrained(tmp_path / "converted")
    assert converted.config == cfg and converted.dropout_prob == 0.1
    assert_same_weights(original, converted)

    x = mc_batch(cfg)
    theirs, _ = hf_multiple_choice_forward(state, hf_config, x["input_word_ids"], x["input_mask"],
                                           x["input_type_ids"])
    ours = np.asarray(converted(x, training=False)["logits"])
    assert ours.shape == theirs.shape == (2, 3)
    np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=0)
    assert np.ptp(theirs, axis=1).min() > 50 * 1e-4  # each example's options differ far beyond it
    np.testing.assert_allclose(np.asarray(original(x, training=False)["logits"]), theirs, atol=1e-4, rtol=0)
    # four options: the same model, no other shape
    x4 = mc_batch(cfg, batch=1, options=4, length=9, seed=1)
    np.testing.assert_allclose(np.asarray(converted(x4)["logits"]),
                               hf_multiple_choice_forward(state, hf_config, *x4.values())[0], atol=1e-4, rtol=0)

    # what the tool printed: the fixed ids' pooled output and their logit as one option
    fixed_logits, fixed_pooled = hf_multiple_choice_forward(state, hf_config, *fixed_inputs().values())
    np.testing.assert_allclose(printed(result.stdout, "pooled_output"), fixed_pooled[0, :5], atol=1e-5)
    np.testing.assert_allclose(printed(result.stdout, "logits"), fixed_logits[0], atol=1e-5)

    # back from the albert_tf directory: the same model
    assert_same_weights(original, load_source("albert_tf", str(tmp_path / "converted")))


def test_hugging_face_multiple_choice_problems_are_named(tmp_path):
    cfg = config()
    original = randomize(AlbertForMultipleChoice(cfg), seed=6)
    state = hf_state(original)
    assert hf.model_kind({k[len("albert."):] if k.startswith("albert.") else k for k in state}) == "multiple_choice"
    # config.json says AlbertForMultipleChoice but the head is not there
    write_hf_mc_dir(tmp_path / "headless", cfg, {k: v for k, v in state.items() if not k.startswith("classifier.")})
    with pytest.raises(ValueError, match="names AlbertForMultipleChoice but the weights have no classifier.weight "
                                         "/ classifier.bias"):
        load_source("hf", str(tmp_path / "headless"))
    # half a head: the other half is named, nothing written
    write_hf_mc_dir(tmp_path / "half", cfg, {k: v for k, v in state.items() if k != "classifier.bias"})
    with pytest.raises(ConversionError, match=r"missing from the source \(1\): multiple_choice/output_bias"):
        convert("hf", "albert_tf", str(tmp_path / "half"), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    # a classifier of three outputs (no architectures to tell): reported by shape
    three = dict(state, **{"classifier.weight": np.zeros((3, cfg.hidden_size), "float32"),
                           "classifier.bias": np.zeros((3,), "float32")})
    write_hf_mc_dir(tmp_path / "three", cfg, three, architectures=None)
    with pytest.raises(ConversionError) as error:
        load_source("hf", str(tmp_path / "three"))
    assert r"multiple_choice/output_weights: source [3, 32], model [1, 32]" in str(error.value)
    assert r"multiple_choice/output_bias: source [3], model [1]" in str(error.value)
    # the same names in a sequence classifier: read as a classifier of three classes, not as a
    # multiple-choice model
    write_hf_mc_dir(tmp_path / "glue", cfg, three, architectures=["AlbertForSequenceClassification"])
    classifier = load_source("hf", str(tmp_path / "glue"))
    assert type(classifier).__name__ == "AlbertClassifier" and classifier.num_classes == 3
    # two heads
    two = dict(state, **{"qa_outputs.weight": np.zeros((2, 32), "float32"), "qa_outputs.bias": np.zeros(2, "float32")})
    write_hf_mc_dir(tmp_path / "two", cfg, two, architectures=None)
    with pytest.raises(ValueError, match=r"heads of several models \(squad_v1, multiple_choice\)"):
        load_source("hf", str(tmp_path / "two"))


# --- the release's RACE checkpoints -----------------------------------------------------------


def release_mc_names(model):
    """The release's TF1 names of a RACE model: the encoder's (bert/..., checked by hand in
    test_convert.py), the head's top-level variables written out here."""
    values = tf1_values(model.encoder)
    values["output_weights"] = np.asarray(model.head.output_weights)  # [1, H]
    values["output_bias"] = np.asarray(model.head.output_bias)  # [1]
    return values


def test_from_release_race_checkpoint(tmp_path):
    cfg = config(num_hidden_groups=2)
    original = randomize(AlbertForMultipleChoice(cfg), seed=7)
    values = release_mc_names(original)
    assert tf1.model_kind(values) == "multiple_choice"
    prefix = write_release_checkpoint(values, str(tmp_path / "race" / "model.ckpt-12000"))
    assert tf1.model_kind(dict(tf.train.list_variables(prefix))) == "multiple_choice"  # with the adam slots
    cfg.to_json_file(tmp_path / "albert_config.json")
    result = run_cli("--from=tf1", f"--input={prefix}", f"--albert_config_file={tmp_path / 'albert_config.json'}",
                     f"--output={tmp_path / 'converted'}")
    assert "as AlbertForMultipleChoice" in result.stdout
    converted = AlbertForMultipleChoice.from_pretrained(tmp_path / "converted")
    assert converted.config == cfg
    assert_same_weights(original, converted)
    x = mc_batch(cfg, options=4)
    ours = np.asarray(converted(x, training=False)["logits"])
    np.testing.assert_allclose(ours, np.asarray(original(x, training=False)["logits"]), atol=0, rtol=0)
    # race_utils.create_model's logits from the checkpoint's own arrays
    flat = {k: v.reshape(-1, v.shape[-1]) for k, v in x.items()}
    pooled = np.asarray(converted.encoder(flat, training=False)["pooled_output"]).astype("float64")  # [B*C, H]
    logits = (pooled @ values["output_weights"].T.astype("float64") + values["output_bias"]).reshape(2, 4)
    np.testing.assert_allclose(ours, logits, atol=1e-5, rtol=0)
    assert np.ptp(logits, axis=1).min() > 1000 * 1e-5
    fixed = np.asarray(original(fixed_inputs(), training=False)["logits"])[0]
    np.testing.assert_allclose(printed(result.stdout, "logits"), fixed, atol=1e-5)

    # and back to the release's layout: exactly the names and shapes it was read from
    run_cli("--from=albert_tf", "--to=tf1", f"--input={tmp_path / 'converted'}", f"--output={tmp_path / 'again'}")
    listed = dict(tf.train.list_variables(str(tmp_path / "again" / "model.ckpt")))
    assert {n: s for n, s in listed.items() if n != "global_step"} == {n: list(v.shape) for n, v in values.items()}
    assert listed["output_weights"] == [1, cfg.hidden_size] and listed["output_bias"] == [1]
    reader = tf.train.load_checkpoint(str(tmp_path / "again" / "model.ckpt"))
    np.testing.assert_array_equal(reader.get_tensor("output_weights"), values["output_weights"])
    again = load_source("tf1", str(tmp_path / "again"))
    assert isinstance(again, AlbertForMultipleChoice)
    assert_same_weights(original, again)


def test_from_release_race_checkpoint_in_a_hub_module(tmp_path):
    cfg = config(num_hidden_groups=1, inner_group_num=2, embedding_size=32)  # E == H: no projection
    original = randomize(AlbertForMultipleChoice(cfg), seed=8)
    prefix = write_release_checkpoint(release_mc_names(original), str(tmp_path / "race" / "model.ckpt-3"),
                                      module_prefix=True)
    model, out = convert("tf1", "albert_tf", prefix, str(tmp_path / "converted"), cfg)
    assert isinstance(model, AlbertForMultipleChoice)
    assert_same_weights(original, AlbertForMultipleChoice.from_pretrained(out))


def test_release_race_checkpoint_problems_are_named(tmp_path):
    cfg = config()
    model = randomize(AlbertForMultipleChoice(cfg), seed=9)
    values = release_mc_names(model)
    # a GLUE classifier (classifier_utils.create_model) with three labels: the same names, its shapes reported
    glue = dict(values, output_weights=np.zeros((3, cfg.hidden_size), "float32"),
                output_bias=np.zeros((3,), "float32"))
    prefix = write_release_checkpoint(glue, str(tmp_path / "glue" / "model.ckpt"))
    with pytest.raises(ConversionError) as error:
        convert("tf1", "albert_tf", prefix, str(tmp_path / "out"), cfg)
    message = str(error.value)
    assert "multiple_choice/output_weights: source [3, 32], model [1, 32]" in message
    assert "multiple_choice/output_bias: source [3], model [1]" in message
    assert "output_weights [3, 32], no transform -> [3, 32]; target multiple_choice/output_weights [1, 32]" in message
    assert not (tmp_path / "out").exists()
    # half a head
    half = {n: v for n, v in values.items() if n != "output_bias"}
    prefix = write_release_checkpoint(half, str(tmp_path / "half" / "model.ckpt"), slots=False)
    with pytest.raises(ConversionError, match=r"missing from the source \(1\): multiple_choice/output_bias"):
        load_source("tf1", prefix, cfg)
    # heads of two models
    with pytest.raises(ValueError, match=r"heads of several models \(squad_v1, multiple_choice\)"):
        tf1.model_kind(dict(values, **{"cls/squad/output_weights": np.zeros((2, 32))}))
    # only the top-level names (and their slots) are the head
    assert tf1.model_kind(["bert/embeddings/word_embeddings", "output_weights_2", "output_layer/kernel"]) == "encoder"
    assert tf1.model_kind(["bert/embeddings/word_embeddings", "output_bias/adam_m"]) == "multiple_choice"
    # a SQuAD model is still read as one
    squad = tf1_values(AlbertForQuestionAnswering(cfg))
    assert tf1.model_kind(squad) == "squad_v1"
