"""Conversion: the release's TF1 checkpoints, Hugging Face, keras-hub <-> albert_tf."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.convert.api import convert, load_source, tf1_values
from albert_tf.convert.rename import ConversionError

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)


def config(**changes):
    values = dict(vocab_size=500, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    values.update(changes)
    return AlbertConfig.from_preset("albert_tiny").replace(**values)


def inputs(cfg, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, cfg.vocab_size, (2, 12)).astype("int32")
    mask = np.ones((2, 12), "int32")
    mask[1, 8:] = 0
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros((2, 12), "int32")}


def randomize(model, seed=1):
    """Known, non-default weights everywhere (biases and LayerNorms included)."""
    rng = np.random.default_rng(seed)
    for v in model.weights:
        v.assign(rng.normal(scale=0.05, size=v.shape).astype("float32") + (1.0 if "gamma" in v.path else 0.0))
    return model


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


def write_release_checkpoint(values, prefix, module_prefix=False, slots=True):
    """A TF1 checkpoint as the release wrote it: tf.compat.v1 variables, LAMB slots, global_step."""
    graph = tf.Graph()
    with graph.as_default():
        variables = []
        for name, value in sorted(values.items()):
            full = ("module/" if module_prefix else "") + name
            variables.append(tf.compat.v1.get_variable(full, initializer=value))
            if slots:
                variables.append(tf.compat.v1.get_variable(full + "/adam_m", initializer=np.zeros_like(value)))
                variables.append(tf.compat.v1.get_variable(full + "/adam_v", initializer=np.zeros_like(value)))
        variables.append(tf.compat.v1.train.get_or_create_global_step())
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return tf.compat.v1.train.Saver(variables).save(session, prefix, write_meta_graph=False)


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
    result = subprocess.run([sys.executable, "-m", "albert_tf.convert", "--from=tf1", "--to=albert_tf",
                             f"--input={prefix}", f"--albert_config_file={tmp_path / 'albert_config.json'}",
                             f"--output={tmp_path / 'converted'}"], capture_output=True, text=True, env=ENV,
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "pooled_output[:5]" in result.stdout and "AlbertPretrainer" in result.stdout
    converted = AlbertPretrainer.from_pretrained(tmp_path / "converted")
    for a, b in zip(original.weights, converted.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    assert_same_outputs(original, converted, cfg)
    x = dict(inputs(cfg), masked_lm_positions=np.array([[1, 2], [3, 4]], "int32"))
    np.testing.assert_array_equal(np.asarray(original(x)["mlm_logits"]), np.asarray(converted(x)["mlm_logits"]))
    encoder = AlbertEncoder.from_pretrained(tmp_path / "converted")
    assert_same_outputs(original, encoder, cfg)


def test_round_trip_albert_tf_tf1_albert_tf_is_exact(tmp_path):
    cfg = config()
    original = randomize(AlbertPretrainer(cfg), seed=3)
    original.save_pretrained(tmp_path / "a")
    convert("albert_tf", "tf1", str(tmp_path / "a"), str(tmp_path / "tf1"))
    listed = dict(tf.train.list_variables(str(tmp_path / "tf1" / "model.ckpt")))
    expected = {n: list(v.shape) for n, v in release_names(original).items()}
    assert {n: s for n, s in listed.items() if n != "global_step"} == expected
    back, _ = convert("tf1", "albert_tf", str(tmp_path / "tf1" / "model.ckpt"), str(tmp_path / "b"))
    for a, b in zip(original.weights, back.weights):
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
            out[f"{prefix}pooler.{'weight' if parts[-1] == 'kernel' else 'bias'}"] = value.T if parts[-1] == "kernel" else value
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
    for a, b in zip(original.weights, converted.weights):
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
    broken["bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/kernel"] = np.zeros((32, 48), "float32")
    broken["bert/encoder/unexpected_thing"] = np.zeros((3,), "float32")
    prefix = write_release_checkpoint(broken, str(tmp_path / "bad.ckpt"), slots=False)
    with pytest.raises(ConversionError) as error:
        convert("tf1", "albert_tf", prefix, str(tmp_path / "out"), cfg)
    message = str(error.value)
    assert "bert/encoder/unexpected_thing" in message  # no rule maps it
    assert not (tmp_path / "out").exists()
    del broken["bert/encoder/unexpected_thing"]
    prefix = write_release_checkpoint(broken, str(tmp_path / "bad2.ckpt"), slots=False)
    with pytest.raises(ConversionError) as error:
        convert("tf1", "albert_tf", prefix, str(tmp_path / "out"), cfg)
    message = str(error.value)
    assert "target variables with no source" in message and "pooler/kernel" in message
    assert "shape mismatches" in message and "(32, 48) -> group_0_inner_group_0_ffn/intermediate/kernel (32, 64)" in message
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob("out.tmp-*"))

    result = subprocess.run([sys.executable, "-m", "albert_tf.convert", "--from=tf1", f"--input={prefix}",
                             f"--output={tmp_path / 'cli'}"], capture_output=True, text=True, env=ENV, cwd=ROOT,
                            timeout=300)
    assert result.returncode == 2 and "needs --albert_config_file" in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and not (tmp_path / "cli").exists()
    with pytest.raises(ValueError, match="has no TF1 form"):
        tf1_values(AlbertEncoder(cfg.replace(sharing="none")))


def test_run_directories_and_converted_directories_interoperate(pretraining_records, tmp_path):
    """A run_pretraining output_dir loads with from_pretrained; a converted directory is an
    init_checkpoint."""
    from albert_tf.training.checkpoints import CheckpointMismatchError, load_init_checkpoint
    from test_training import make_loop, small_config, train_small

    outputs, _ = pretraining_records
    run = tmp_path / "run"
    loop = train_small(outputs, run, steps=10, iterations=5, save_every=5)[0]
    loaded = AlbertPretrainer.from_pretrained(run)
    for a, b in zip(loop.model.weights, loaded.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    converted = randomize(AlbertPretrainer(small_config()), seed=11)
    converted.save_pretrained(tmp_path / "converted")
    fresh = make_loop(steps=10)
    assert load_init_checkpoint(fresh.model, str(tmp_path / "converted")).endswith("pretrainer.weights.h5")
    for a, b in zip(converted.weights, fresh.model.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    other = make_loop(config=small_config(intermediate_size=48), steps=10)
    with pytest.raises(CheckpointMismatchError, match="does not match the model"):
        load_init_checkpoint(other.model, str(tmp_path / "converted"))


def test_from_hugging_face_pytorch_bin_when_torch_is_installed(tmp_path):
    """pytorch_model.bin needs torch; requirements.txt does not pin it, so CI skips this."""
    torch = pytest.importorskip("torch")
    cfg = config()
    original = randomize(AlbertPretrainer(cfg), seed=9)
    write_hf_dir(tmp_path / "hf", cfg, {})
    os.remove(tmp_path / "hf" / "model.safetensors")
    torch.save({k: torch.from_numpy(v) for k, v in hf_names(original).items()}, tmp_path / "hf" / "pytorch_model.bin")
    converted = load_source("hf", str(tmp_path / "hf"))
    for a, b in zip(original.weights, converted.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
