"""Conversion: the release's TF1 checkpoints, Hugging Face, keras-hub <-> albert_tf."""

import json
import os
import re
import time

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertEncoder, AlbertPretrainer
from albert_tf.convert import hf, keras_hub, tf1
from albert_tf.convert.api import convert, fixed_output, load_source, tf1_values
from albert_tf.convert.rename import ConversionError, assign_to_model
from albert_tf.convert.templates import to_regex_table
from albert_tf.storage.outputs import OutputRefused
from albert_tf.storage.report import CheckpointMismatchError

from convert_helpers import config, convert_cli, inputs, randomize, refused_conversion, write_release_checkpoint


def release_names(model):
    """The release's TF1 name for each variable of an albert_tf model, written out by hand
    from shared/ALBERT_REFERENCE.md section 3 (independent of the converter's table)."""
    names = {}
    for v in model.weights:
        p = v.path
        parts = p.split("/")
        if p.startswith("embeddings/LayerNorm"):
            name = f"bert/embeddings/LayerNorm/{parts[-1]}"
        elif p.startswith("embeddings/"):
            name = f"bert/embeddings/{parts[-1]}"
        elif p.startswith("embedding_hidden_mapping_in/"):
            name = f"bert/encoder/embedding_hidden_mapping_in/{parts[-1]}"
        elif p.startswith("pooler/"):
            name = f"bert/pooler/dense/{parts[-1]}"
        elif p.startswith("group_"):
            g, k = parts[0].split("_")[1], parts[0].split("_")[4]
            t = f"bert/encoder/transformer/group_{g}/inner_group_{k}"
            sub, var = parts[1], parts[2]
            if parts[0].endswith("_attention"):
                name = {"query": f"{t}/attention_1/self/query/{var}", "key": f"{t}/attention_1/self/key/{var}",
                        "value": f"{t}/attention_1/self/value/{var}", "dense": f"{t}/attention_1/output/dense/{var}",
                        "LayerNorm": f"{t}/LayerNorm/{var}"}[sub]
            else:
                name = {"intermediate": f"{t}/ffn_1/intermediate/dense/{var}",
                        "output_dense": f"{t}/ffn_1/intermediate/output/dense/{var}",
                        "LayerNorm": f"{t}/LayerNorm_1/{var}"}[sub]
        elif p.startswith("predictions/transform_LayerNorm"):
            name = f"cls/predictions/transform/LayerNorm/{parts[-1]}"
        elif p.startswith("predictions/transform/"):
            name = f"cls/predictions/transform/dense/{parts[-1]}"
        elif p == "predictions/output_bias":
            name = "cls/predictions/output_bias"
        elif p.startswith("seq_relationship/"):
            name = f"cls/seq_relationship/{parts[-1]}"
        else:
            raise AssertionError(p)
        names.setdefault(name, np.asarray(v))
    return names


def assert_same_outputs(a, b, cfg, atol=0.0):
    x = inputs(cfg)
    ea = a.encoder if isinstance(a, AlbertPretrainer) else a
    eb = b.encoder if isinstance(b, AlbertPretrainer) else b
    oa, ob = ea(x, training=False), eb(x, training=False)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(np.asarray(oa[key]), np.asarray(ob[key]), atol=atol, rtol=0)


@pytest.mark.parametrize("changes, module_prefix", [
    (dict(num_hidden_groups=2, inner_group_num=1), False),
    (dict(num_hidden_groups=1, inner_group_num=2, embedding_size=32), True),  # E == H: no projection
])
def test_from_release_tf1_checkpoint(tmp_path, changes, module_prefix):
    cfg = config(**changes)
    original = randomize(AlbertPretrainer(cfg))
    prefix = write_release_checkpoint(release_names(original), str(tmp_path / "model.ckpt-best"), module_prefix)
    cfg.to_json_file(tmp_path / "albert_config.json")
    started = time.time()
    result = convert_cli("--from=tf1", "--to=albert_tf", f"--input={prefix}",
                         f"--albert_config_file={tmp_path / 'albert_config.json'}",
                         f"--output={tmp_path / 'converted'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "AlbertPretrainer" in result.stdout and f"{original.count_params():,} parameters" in result.stdout
    converted = AlbertPretrainer.from_pretrained(tmp_path / "converted")
    printed = result.stdout.split("pooled_output[:5]")[1].split("[")[-1].split("]")[0]
    np.testing.assert_allclose([float(v) for v in printed.split(",")], fixed_output(original)[:5], atol=2e-6)
    for a, b in zip(original.weights, converted.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    assert_same_outputs(original, converted, cfg)
    x = dict(inputs(cfg), masked_lm_positions=np.array([[1, 2], [3, 4]], "int32"))
    np.testing.assert_array_equal(np.asarray(original(x)["mlm_logits"]), np.asarray(converted(x)["mlm_logits"]))
    encoder = AlbertEncoder.from_pretrained(tmp_path / "converted")
    assert_same_outputs(original, encoder, cfg)
    # what made it: the conversion's marker (its own files stay what their readers expect)
    from made_by import check_made_by

    from albert_tf.storage import outputs

    check_made_by(json.load(open(tmp_path / "converted" / outputs.MARKER))["made_by"], "convert", {
        "from": "tf1", "to": "albert_tf", "input": str(prefix),
        "albert_config_file": str(tmp_path / "albert_config.json"),
        "output": str(tmp_path / "converted"), "spm_model_file": None, "allow_tokenizer_mismatch": False},
        since=started)


def test_round_trip_albert_tf_tf1_albert_tf_is_exact(tmp_path):
    cfg = config()
    original = randomize(AlbertPretrainer(cfg), seed=3)
    original.save_pretrained(tmp_path / "a")
    convert("albert_tf", "tf1", str(tmp_path / "a"), str(tmp_path / "tf1"))
    listed = dict(tf.train.list_variables(str(tmp_path / "tf1" / "model.ckpt")))
    expected = {n: list(v.shape) for n, v in release_names(original).items()}
    assert {n: s for n, s in listed.items() if n != "global_step"} == expected
    back, _ = convert("tf1", "albert_tf", str(tmp_path / "tf1" / "model.ckpt"), str(tmp_path / "b"))
    for a, b in zip(original.weights, back.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    # the written directory is itself an input: its `checkpoint` file names model.ckpt by a
    # relative path (it was written under a temporary name) and albert_config.json is beside it
    assert "model.ckpt" in open(tmp_path / "tf1" / "checkpoint").read()
    assert str(tmp_path) not in open(tmp_path / "tf1" / "checkpoint").read()
    again = load_source("tf1", str(tmp_path / "tf1"))
    assert again.config == cfg
    for a, b in zip(original.weights, again.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)


def hf_names(model, prefix="albert."):
    """Hugging Face names (and torch [out, in] layouts) for an albert_tf model, by hand."""
    out = {}
    for v in model.weights:
        p, value = v.path, np.asarray(v)
        parts = p.split("/")
        if p.startswith("embeddings/LayerNorm"):
            out[f"{prefix}embeddings.LayerNorm.{'weight' if parts[-1] == 'gamma' else 'bias'}"] = value
        elif p.startswith("embeddings/"):
            out[f"{prefix}embeddings.{parts[-1]}.weight"] = value
        elif p.startswith("embedding_hidden_mapping_in/"):
            out[f"{prefix}encoder.embedding_hidden_mapping_in.{'weight' if parts[-1] == 'kernel' else 'bias'}"] = (
                value.T if parts[-1] == "kernel" else value)
        elif p.startswith("pooler/"):
            kernel = parts[-1] == "kernel"
            out[f"{prefix}pooler.{'weight' if kernel else 'bias'}"] = value.T if kernel else value
        elif p.startswith("group_"):
            g, k = parts[0].split("_")[1], parts[0].split("_")[4]
            base = f"{prefix}encoder.albert_layer_groups.{g}.albert_layers.{k}"
            sub, var = parts[1], parts[2]
            kind = {"kernel": "weight", "bias": "bias", "gamma": "weight", "beta": "bias"}[var]
            if parts[0].endswith("_attention"):
                name = f"{base}.attention.{sub}.{kind}"
            else:
                name = {"intermediate": f"{base}.ffn.{kind}", "output_dense": f"{base}.ffn_output.{kind}",
                        "LayerNorm": f"{base}.full_layer_layer_norm.{kind}"}[sub]
            out[name] = value.T if var == "kernel" else value
        elif p.startswith("predictions/transform_LayerNorm"):
            out[f"predictions.LayerNorm.{'weight' if parts[-1] == 'gamma' else 'bias'}"] = value
        elif p.startswith("predictions/transform/"):
            out[f"predictions.dense.{'weight' if parts[-1] == 'kernel' else 'bias'}"] = (
                value.T if parts[-1] == "kernel" else value)
        elif p == "predictions/output_bias":
            out["predictions.bias"] = value
            out["predictions.decoder.bias"] = value
        elif p.startswith("seq_relationship/"):
            out[f"sop_classifier.classifier.{'weight' if parts[-1] == 'output_weights' else 'bias'}"] = value
    if "predictions.bias" in out:
        out["predictions.decoder.weight"] = out[f"{prefix}embeddings.word_embeddings.weight"]
    return {k: np.ascontiguousarray(v) for k, v in out.items()}


def write_hf_dir(directory, cfg, tensors, hidden_act="gelu_new"):
    from safetensors.numpy import save_file

    os.makedirs(directory, exist_ok=True)
    hf_config = {k: getattr(cfg, k) for k in (
        "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups", "inner_group_num",
        "num_attention_heads", "intermediate_size", "hidden_dropout_prob", "attention_probs_dropout_prob",
        "max_position_embeddings", "type_vocab_size", "initializer_range")}
    hf_config.update(hidden_act=hidden_act, layer_norm_eps=1e-12, model_type="albert",
                     architectures=["AlbertForPreTraining"])
    json.dump(hf_config, open(os.path.join(directory, "config.json"), "w"))
    save_file(tensors, os.path.join(directory, "model.safetensors"))


def test_from_hugging_face_pretraining_and_model(tmp_path):
    cfg = config(num_hidden_groups=2)
    original = randomize(AlbertPretrainer(cfg), seed=5)
    write_hf_dir(tmp_path / "hf_pretraining", cfg, hf_names(original))
    converted = load_source("hf", str(tmp_path / "hf_pretraining"))
    assert isinstance(converted, AlbertPretrainer) and converted.config == cfg
    for a, b in zip(original.weights, converted.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    assert_same_outputs(original, converted, cfg)

    encoder_only = {k: v for k, v in hf_names(original.encoder, prefix="").items()}
    write_hf_dir(tmp_path / "hf_model", cfg, encoder_only)
    model, out = convert("hf", "albert_tf", str(tmp_path / "hf_model"), str(tmp_path / "enc"))
    assert isinstance(model, AlbertEncoder)
    assert_same_outputs(original, AlbertEncoder.from_pretrained(out), cfg)
    with pytest.raises(ValueError, match="no pretraining heads"):
        AlbertPretrainer.from_pretrained(out)

    write_hf_dir(tmp_path / "hf_exact_gelu", cfg, encoder_only, hidden_act="gelu")
    assert load_source("hf", str(tmp_path / "hf_exact_gelu")).config.hidden_act == "gelu_exact"


def test_from_keras_hub_preset_and_weights_file(tmp_path):
    import keras_hub

    cfg = config(num_hidden_groups=2)
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=cfg.vocab_size, num_layers=4, num_heads=4, num_groups=2, embedding_dim=16, hidden_dim=32,
        intermediate_dim=64, dropout=0.0, max_sequence_length=128)
    randomize(backbone, seed=7)
    backbone.save_to_preset(str(tmp_path / "preset"))
    model, out = convert("keras_hub", "albert_tf", str(tmp_path / "preset"), str(tmp_path / "converted"))
    x = inputs(cfg)
    theirs = backbone({"token_ids": x["input_word_ids"], "segment_ids": x["input_type_ids"],
                       "padding_mask": x["input_mask"]})
    ours = AlbertEncoder.from_pretrained(out)(x)
    np.testing.assert_allclose(np.asarray(ours["pooled_output"]), np.asarray(theirs["pooled_output"]), atol=1e-5)
    real = x["input_mask"][..., None].astype(bool)
    diff = np.abs(np.asarray(ours["sequence_output"]) - np.asarray(theirs["sequence_output"]))
    assert diff[np.broadcast_to(real, diff.shape)].max() < 1e-5
    backbone.save_weights(str(tmp_path / "backbone.weights.h5"))
    again = load_source("keras_hub", str(tmp_path / "backbone.weights.h5"), cfg)
    assert_same_outputs(model, again, cfg)


def test_problems_are_listed_and_nothing_is_written(tmp_path):
    cfg = config()
    names = release_names(randomize(AlbertPretrainer(cfg)))
    broken = dict(names)
    del broken["bert/pooler/dense/kernel"]
    broken["bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/kernel"] = np.zeros((32, 48),
                                                                                                        "float32")
    broken["bert/encoder/unexpected_thing"] = np.zeros((3,), "float32")
    _, error = refused_conversion(broken, tmp_path, cfg)
    message = str(error)
    # one report: the unmapped source variable beside the other differences
    assert "not in the model (1): bert/encoder/unexpected_thing" in message
    assert "bert/encoder/unexpected_thing: no rule of the rename table maps it" in message
    assert "missing from the source (1): pooler/kernel" in message and "shape mismatches (1)" in message
    assert not (tmp_path / "out").exists()
    del broken["bert/encoder/unexpected_thing"]
    prefix, error = refused_conversion(broken, tmp_path, cfg, "bad2.ckpt")
    message = str(error)
    assert isinstance(error, CheckpointMismatchError)  # the one checkpoint-matching report
    assert f"--input={prefix} (tf1) does not match the model" in message
    assert "missing from the source (1): pooler/kernel" in message
    assert ("shape mismatches (1): group_0_inner_group_0_ffn/intermediate/kernel: source [32, 48], model [32, 64]"
            in message)
    assert ("bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/kernel [32, 48], no transform "
            "-> [32, 48]; target group_0_inner_group_0_ffn/intermediate/kernel [32, 64]") in message
    assert not (tmp_path / "out").exists() and not [p for p in os.listdir(tmp_path) if ".tmp-" in p]

    result = convert_cli("--from=tf1", f"--input={prefix}", f"--output={tmp_path / 'cli'}")
    assert result.returncode == 2 and "needs --albert_config_file" in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and not (tmp_path / "cli").exists()
    with pytest.raises(ValueError, match="has no TF1 form"):
        tf1_values(AlbertEncoder(cfg.replace(sharing="none")))


def test_a_converted_directory_is_an_init_checkpoint(tmp_path):
    """What run_pretraining --init_checkpoint and export_tfhub --checkpoint read
    (albert_tf.storage.checkpoints.load_init_checkpoint) takes a converted directory."""
    from albert_tf.storage.checkpoints import load_init_checkpoint

    cfg = config()
    original = randomize(AlbertPretrainer(cfg), seed=11)
    prefix = write_release_checkpoint(release_names(original), str(tmp_path / "release" / "model.ckpt-3"))
    convert("tf1", "albert_tf", prefix, str(tmp_path / "converted"), cfg)
    fresh = AlbertPretrainer(cfg)
    read = load_init_checkpoint(fresh, str(tmp_path / "converted"), weights_file_names=("pretrainer.weights.h5",))
    assert read == str(tmp_path / "converted" / "pretrainer.weights.h5")
    for a, b in zip(original.weights, fresh.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    with pytest.raises(CheckpointMismatchError, match="does not match the model"):
        load_init_checkpoint(AlbertPretrainer(cfg.replace(intermediate_size=48)), str(tmp_path / "converted"),
                             weights_file_names=("pretrainer.weights.h5",))


# --- shape changes are named in the tables -------------------------------------------------


def _without_transform(table, source_template):
    """`table` with the transform of the rule for `source_template` removed."""
    out, hit = [], 0
    for rule in table:
        if rule[0] == source_template:
            assert len(rule) == 3, rule
            rule, hit = rule[:2], hit + 1
        out.append(rule)
    assert hit == 1
    return tuple(out)


def _backbone(cfg):
    import keras_hub

    return keras_hub.models.AlbertBackbone(
        vocabulary_size=cfg.vocab_size, num_layers=cfg.num_hidden_layers, num_heads=cfg.num_attention_heads,
        num_groups=cfg.num_hidden_groups, num_inner_repetitions=cfg.inner_group_num, embedding_dim=cfg.embedding_size,
        hidden_dim=cfg.hidden_size, intermediate_dim=cfg.intermediate_size, dropout=0.0,
        max_sequence_length=cfg.max_position_embeddings)


def test_every_shape_change_is_a_named_transform_of_the_table():
    transforms = {rule[2] for table in (hf.HF_ENCODER_TABLE, hf.HF_HEAD_TABLE, keras_hub.KERAS_HUB_TABLE,
                                        tf1.TF1_TABLE) for rule in table if len(rule) > 2}
    assert transforms == {"transpose", "merge_heads", "merge_heads_first"}
    reversed_rules = {r[0]: r[2] for r in keras_hub.ALBERT_TF_TO_KERAS_HUB if len(r) > 2}
    assert sorted(reversed_rules.values()) == ["split_heads", "split_heads", "split_heads_first"]
    with pytest.raises(ValueError, match="unknown transform 'reshape'"):
        to_regex_table((("a", "b", "reshape"),))


def test_a_table_with_a_transform_removed_fails_naming_the_variable():
    cfg = config(num_hidden_groups=1)
    original = randomize(AlbertPretrainer(cfg), seed=13)
    values = {k[len("albert."):] if k.startswith("albert.") else k: v for k, v in hf_names(original).items()
              if not k.startswith("predictions.decoder")}
    assign_to_model(AlbertPretrainer(cfg), values, hf.FROM_HF, hf.SKIP)  # the real table converts

    # HF: the FFN kernel without its transpose is [I, H] = [64, 32] against [32, 64]
    ffn = "encoder.albert_layer_groups.{g}.albert_layers.{k}.ffn.weight"
    table = to_regex_table(_without_transform(hf.HF_ENCODER_TABLE, ffn) + hf.HF_HEAD_TABLE)
    target = AlbertPretrainer(cfg)
    before = [np.asarray(v).copy() for v in target.weights]
    with pytest.raises(ConversionError) as error:
        assign_to_model(target, values, table, hf.SKIP, label="hf test")
    message = str(error.value)
    assert "hf test does not match the model" in message
    assert ("shape mismatches (1): group_0_inner_group_0_ffn/intermediate/kernel: source [64, 32], model [32, 64]"
            in message)
    assert ("encoder.albert_layer_groups.0.albert_layers.0.ffn.weight [64, 32], no transform -> [64, 32]; "
            "target group_0_inner_group_0_ffn/intermediate/kernel [32, 64]") in message
    # nothing was assigned
    assert all(np.array_equal(b, np.asarray(v)) for b, v in zip(before, target.weights, strict=True))

    # keras-hub: the per-head query kernel [H, N, D] is not reshaped to [H, H] unless the rule says so
    backbone = randomize(_backbone(cfg), seed=14)
    source = {v.path: np.asarray(v) for v in backbone.weights}
    qkv = "group_{g}_inner_layer_{k}/self_attention_layer/{qkv}/kernel"
    table = to_regex_table(_without_transform(keras_hub.KERAS_HUB_TABLE, qkv))
    with pytest.raises(ConversionError) as error:
        assign_to_model(AlbertEncoder(cfg), source, table, label="keras-hub test")
    message = str(error.value)
    assert "shape mismatches (3):" in message
    for name in ("query", "key", "value"):
        assert (f"group_0_inner_layer_0/self_attention_layer/{name}/kernel [32, 4, 8], no transform -> [32, 4, 8]; "
                f"target group_0_inner_group_0_attention/{name}/kernel [32, 32]") in message
    # a wrong transform is no better: transpose cannot make [N, D, H] into [H, H]
    out = "group_{g}_inner_layer_{k}/self_attention_layer/attention_output/kernel"
    wrong = tuple(r[:2] + ("transpose",) if r[0] == out else r for r in keras_hub.KERAS_HUB_TABLE)
    with pytest.raises(ConversionError, match=r"attention_output/kernel \[4, 8, 32\], transform transpose -> "
                                              r"\[4, 8, 32\]; target group_0_inner_group_0_attention/dense/kernel "
                                              r"\[32, 32\] \(transpose needs a 2-D array"):
        assign_to_model(AlbertEncoder(cfg), source, to_regex_table(wrong))


def test_keras_hub_table_reversed_splits_the_heads_again():
    cfg = config(num_hidden_groups=2)
    backbone = randomize(_backbone(cfg), seed=15)
    encoder = AlbertEncoder(cfg)
    keras_hub.load_keras_hub_backbone(backbone, encoder)
    # merged as the release lays them out: query kernel [H, N*D], output kernel [N*D, H]
    q = {v.path: np.asarray(v) for v in backbone.weights}["group_1_inner_layer_0/self_attention_layer/query/kernel"]
    merged = {v.path: np.asarray(v) for v in encoder.weights}["group_1_inner_group_0_attention/query/kernel"]
    assert q.shape == (32, 4, 8)
    np.testing.assert_array_equal(merged, q.reshape(32, 32))
    back = _backbone(cfg)
    keras_hub.write_keras_hub_backbone(encoder, back)
    for a, b in zip(backbone.weights, back.weights, strict=True):
        assert a.path == b.path
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)


# --- checkpoint choice, atomic output, bad input -------------------------------------------


def test_tf1_directory_without_checkpoint_file_takes_the_highest_step(tmp_path):
    cfg = config()
    older = randomize(AlbertPretrainer(cfg), seed=21)
    newer = randomize(AlbertPretrainer(cfg), seed=22)
    write_release_checkpoint(release_names(newer), str(tmp_path / "release" / "model.ckpt-10000"))
    write_release_checkpoint(release_names(older), str(tmp_path / "release" / "model.ckpt-9"))
    os.remove(tmp_path / "release" / "checkpoint")  # the Saver's state file would name the last one written
    cfg.to_json_file(tmp_path / "release" / "albert_config.json")
    assert tf1.checkpoint_prefix(str(tmp_path / "release")) == str(tmp_path / "release" / "model.ckpt-10000")
    model, _ = convert("tf1", "albert_tf", str(tmp_path / "release"), str(tmp_path / "out"))
    for a, b in zip(newer.weights, model.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    with pytest.raises(ValueError, match="no TF1 checkpoint"):
        convert("tf1", "albert_tf", str(tmp_path / "out"), str(tmp_path / "out2"), cfg)


def test_a_failed_conversion_leaves_the_old_output_and_no_litter(tmp_path, monkeypatch):
    cfg = config()
    first = randomize(AlbertPretrainer(cfg), seed=31)
    first.save_pretrained(tmp_path / "src")
    convert("albert_tf", "tf1", str(tmp_path / "src"), str(tmp_path / "out"))
    old = {name: open(tmp_path / "out" / name, "rb").read() for name in os.listdir(tmp_path / "out")}
    assert sorted(old) == [".albert_tf_output.json", "albert_config.json", "checkpoint",  # the marker: albert_tf's own
                           "model.ckpt.data-00000-of-00001", "model.ckpt.index"]

    randomize(first, seed=32).save_pretrained(tmp_path / "src")
    real_write = tf1.write_tf1

    def crashing_write(values, prefix):
        real_write(values, prefix)  # a complete new checkpoint in the temporary directory ...
        raise RuntimeError("simulated crash before the config is written")  # ... then the crash

    monkeypatch.setattr(tf1, "write_tf1", crashing_write)
    with pytest.raises(RuntimeError, match="simulated crash"):
        convert("albert_tf", "tf1", str(tmp_path / "src"), str(tmp_path / "out"))
    assert {name: open(tmp_path / "out" / name, "rb").read() for name in os.listdir(tmp_path / "out")} == old
    assert sorted(os.listdir(tmp_path)) == ["out", "src"]
    monkeypatch.undo()

    # a mismatch stops before anything is written; an output on the input is refused before it is
    # read; the old output still loads as before
    with pytest.raises(ConversionError):
        convert("tf1", "albert_tf", str(tmp_path / "out"), str(tmp_path / "out3"), cfg.replace(intermediate_size=48))
    with pytest.raises(OutputRefused, match=r"--output=.*out is the same path as the input --input="):
        convert("tf1", "albert_tf", str(tmp_path / "out"), str(tmp_path / "out"), cfg)
    back = load_source("tf1", str(tmp_path / "out"))
    expected = randomize(AlbertPretrainer(cfg), seed=31)
    for a, b in zip(expected.weights, back.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    assert sorted(os.listdir(tmp_path)) == ["out", "src"]

    # an output path that is a file: exit 2 naming it, the file untouched
    (tmp_path / "afile").write_text("keep me")
    result = convert_cli("--from=albert_tf", "--to=tf1", f"--input={tmp_path / 'src'}",
                         f"--output={tmp_path / 'afile'}")
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"convert: error: --output={tmp_path / 'afile'} exists and is not a directory" in result.stderr
    assert "Traceback" not in result.stderr and (tmp_path / "afile").read_text() == "keep me"


def test_malformed_or_foreign_configs_are_named(tmp_path):
    cfg = config()
    original = randomize(AlbertPretrainer(cfg), seed=41)
    write_hf_dir(tmp_path / "hf", cfg, hf_names(original.encoder, prefix=""))
    text = open(tmp_path / "hf" / "config.json").read()
    broken = text.replace(", ", ",\n").replace('"hidden_size": 32,', '"hidden_size": 32,,')
    open(tmp_path / "hf" / "config.json", "w").write(broken)
    line = broken.splitlines().index('"hidden_size": 32,,') + 1
    with pytest.raises(ValueError) as error:
        load_source("hf", str(tmp_path / "hf"))
    assert str(error.value) == (f"{tmp_path / 'hf' / 'config.json'}:{line}:19: not valid JSON (Expecting property "
                                "name enclosed in double quotes): \"hidden_size\": 32,,; expected a Hugging Face "
                                "config.json: fix or replace the file.")
    open(tmp_path / "hf" / "config.json", "w").write(text.replace('"model_type": "albert"', '"model_type": "bert"'))
    with pytest.raises(ValueError, match=r"config.json: a Hugging Face 'bert' model, not ALBERT"):
        load_source("hf", str(tmp_path / "hf"))
    with pytest.raises(ValueError, match=r"config.json: a Hugging Face config \(model_type='bert'\), not a keras-hub "
                                         r"preset; use --from=hf"):
        load_source("keras_hub", str(tmp_path / "hf"))

    import keras_hub as kh

    kh.models.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                           max_sequence_length=16).save_to_preset(str(tmp_path / "bert_preset"))
    with pytest.raises(ValueError) as error:
        load_source("keras_hub", str(tmp_path / "bert_preset"))
    assert str(error.value) == (f"{tmp_path / 'bert_preset' / 'config.json'}: a keras-hub BertBackbone preset "
                                "(keras_hub>BertBackbone), not an AlbertBackbone; --from=keras_hub converts ALBERT "
                                "backbones only.")
    preset_config = tmp_path / "bert_preset" / "config.json"
    truncated = open(preset_config).read()[:-20]  # read before the file is opened for writing (which empties it)
    open(preset_config, "w").write(truncated)
    result = convert_cli("--from=keras_hub", f"--input={tmp_path / 'bert_preset'}", f"--output={tmp_path / 'out'}")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert re.search(rf"convert: error: {re.escape(str(preset_config))}:\d+:\d+: not valid JSON \(", result.stderr)
    assert not (tmp_path / "out").exists()
