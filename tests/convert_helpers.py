"""Helpers shared by the conversion and question-answering tests: small configs, fixed
inputs, known weights, checkpoints written the way the TF1 release wrote them, and the
release's SQuAD v2 head names."""

import importlib
import os

import numpy as np
import tensorflow as tf

from albert_tf import AlbertConfig

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def convert_cli(*args):
    """`python -m albert_tf.convert ARGS` in this process (the module's `main(argv)`): its exit status
    and what it printed, as SimpleNamespace(returncode, stdout, stderr)."""
    from conftest import run_in_process

    return run_in_process(importlib.import_module("albert_tf.convert.__main__"), args)


def run_cli(*args):
    """`python -m albert_tf.convert ARGS` (in this process), which must succeed."""
    result = convert_cli(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def printed(stdout, name):
    """The five numbers the convert tool printed after `name[:5]`."""
    line = stdout.split(f"{name}[:5]")[1].split("\n")[0]
    return [float(v) for v in line.split("[")[-1].split("]")[0].split(",")]


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


def refused_conversion(values, tmp_path, cfg, name="bad.ckpt"):
    """(prefix, ConversionError) of `convert` tf1 -> albert_tf (into tmp_path/out) of the
    release checkpoint of `values` written as tmp_path/name, which must refuse it."""
    import pytest

    from albert_tf.convert.api import convert
    from albert_tf.convert.rename import ConversionError

    prefix = write_release_checkpoint(values, str(tmp_path / name), slots=False)
    with pytest.raises(ConversionError) as error:
        convert("tf1", "albert_tf", prefix, str(tmp_path / "out"), cfg)
    return prefix, error.value


RELEASE_V2_HEAD = {  # release name -> (SquadV2Head attribute, variable), from squad_utils.create_v2_model
    "start_logits/dense/kernel": ("start_dense", "kernel"),
    "start_logits/dense/bias": ("start_dense", "bias"),
    "end_logits/dense_0/kernel": ("end_dense_0", "kernel"),
    "end_logits/dense_0/bias": ("end_dense_0", "bias"),
    "end_logits/LayerNorm/gamma": ("end_layer_norm", "gamma"),
    "end_logits/LayerNorm/beta": ("end_layer_norm", "beta"),
    "end_logits/dense_1/kernel": ("end_dense_1", "kernel"),
    "end_logits/dense_1/bias": ("end_dense_1", "bias"),
    "answer_class/dense_0/kernel": ("answer_dense_0", "kernel"),
    "answer_class/dense_0/bias": ("answer_dense_0", "bias"),
    "answer_class/dense_1/kernel": ("answer_dense_1", "kernel"),
}


def _layer_norm(x, gamma, beta, eps):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * gamma + beta


def hf_albert_forward(state, c, ids, mask, types):
    """Hugging Face AlbertModel.forward (modeling_albert.py) in NumPy, float64, from its own
    state dict names ("albert." prefix): ids/mask/types int [B, T] -> (sequence [B, T, H],
    `linear`, the torch Linear of the state dict: linear(x, name) = x W^T + b, for the
    heads). Dropout is off; the attention mask is get_extended_attention_mask's."""
    sd = {k: v.astype("float64") for k, v in state.items()}

    def linear(x, name):  # torch Linear: x W^T + b
        return x @ sd[name + ".weight"].T + sd[name + ".bias"]

    def norm(x, name):
        return _layer_norm(x, sd[name + ".weight"], sd[name + ".bias"], c["layer_norm_eps"])

    batch, length = ids.shape
    x = (sd["albert.embeddings.word_embeddings.weight"][ids]
         + sd["albert.embeddings.token_type_embeddings.weight"][types]
         + sd["albert.embeddings.position_embeddings.weight"][:length][None])
    x = linear(norm(x, "albert.embeddings.LayerNorm"), "albert.encoder.embedding_hidden_mapping_in")
    heads = c["num_attention_heads"]
    size = c["hidden_size"] // heads
    extended = (1.0 - mask[:, None, None, :]) * np.finfo(np.float32).min  # get_extended_attention_mask

    def split(t):
        return t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

    for i in range(c["num_hidden_layers"]):
        group = int(i / (c["num_hidden_layers"] / c["num_hidden_groups"]))  # AlbertTransformer
        for k in range(c["inner_group_num"]):
            p = f"albert.encoder.albert_layer_groups.{group}.albert_layers.{k}."
            q, key, v = (split(linear(x, p + "attention." + n)) for n in ("query", "key", "value"))
            scores = q @ key.transpose(0, 1, 3, 2) / np.sqrt(size) + extended
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, heads * size)
            attention = norm(x + linear(context, p + "attention.dense"), p + "attention.LayerNorm")
            h = linear(attention, p + "ffn")
            h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))  # gelu_new
            x = norm(linear(h, p + "ffn_output") + attention, p + "full_layer_layer_norm")
    return x, linear


HF_CONFIG_KEYS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
                  "inner_group_num", "num_attention_heads", "intermediate_size", "hidden_dropout_prob",
                  "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
                  "initializer_range")


def write_hf_dir(directory, cfg, state, architectures):
    """A Hugging Face model directory (config.json + model.safetensors) of `state` (names
    as transformers'), `architectures` (a list, or None to leave the key out); returns the
    config dict."""
    import json

    from safetensors.numpy import save_file

    os.makedirs(directory, exist_ok=True)
    hf_config = {k: getattr(cfg, k) for k in HF_CONFIG_KEYS}
    hf_config.update(hidden_act="gelu_new", layer_norm_eps=1e-12, model_type="albert")
    if architectures is not None:
        hf_config["architectures"] = list(architectures)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(hf_config, f)
    save_file(state, os.path.join(directory, "model.safetensors"))
    return hf_config


def gelu_new(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def hf_outputs(directory, x):
    """transformers' outputs of the written directory, in NumPy float64 from its own files:
    sequence, pooled (where the model has a pooler) and each head's logits; with the state
    as written and config.json."""
    import json

    from safetensors.numpy import load_file

    c = json.load(open(os.path.join(directory, "config.json")))
    raw = load_file(os.path.join(directory, "model.safetensors"))
    [architecture] = c["architectures"]
    # transformers' bare AlbertModel has no "albert." prefix
    state = {"albert." + k: v for k, v in raw.items()} if architecture == "AlbertModel" else raw
    seq, linear = hf_albert_forward(state, c, x["input_word_ids"], x["input_mask"], x["input_type_ids"])
    out = {"sequence_output": seq}
    if "albert.pooler.weight" in state:
        out["pooled_output"] = np.tanh(linear(seq[:, 0], "albert.pooler"))
    if architecture == "AlbertForPreTraining":  # AlbertMLMHead, the decoder tied to the word embeddings
        h = _layer_norm(gelu_new(linear(seq, "predictions.dense")), state["predictions.LayerNorm.weight"],
                        state["predictions.LayerNorm.bias"], c["layer_norm_eps"])
        out["mlm_logits"] = h @ state["albert.embeddings.word_embeddings.weight"].T.astype("float64") + state[
            "predictions.bias"]
        out["sop_logits"] = linear(out["pooled_output"], "sop_classifier.classifier")
    if architecture == "AlbertForQuestionAnswering":
        logits = linear(seq, "qa_outputs")
        out["start_logits"], out["end_logits"] = logits[..., 0], logits[..., 1]
    if architecture == "AlbertForMultipleChoice":
        out["logits"] = linear(out["pooled_output"], "classifier")[:, 0]  # each row one option
    if architecture == "AlbertForSequenceClassification":
        out["logits"] = linear(out["pooled_output"], "classifier")
    return out, raw, c
