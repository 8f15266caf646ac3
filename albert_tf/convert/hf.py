"""Hugging Face ALBERT (AlbertModel, AlbertForPreTraining, AlbertForQuestionAnswering,
AlbertForMultipleChoice, AlbertForSequenceClassification) <-> albert_tf: rename tables and
readers of a model directory (config.json and model.safetensors or pytorch_model.bin, both
with NumPy only). torch Linear weights are [out, in]: their rules name `transpose`; the tied
masked-LM decoder is checked, not copied. AlbertForQuestionAnswering has no pooler: it gets
`ABSENT_QA_POOLER` (zeros, reported). docs/convert.md "From Hugging Face".
"""


import numpy as np

from albert_tf import extras
from albert_tf.storage.json_files import read_json
from albert_tf.convert import templates
from albert_tf.convert.templates import to_regex_table
from albert_tf.convert.torch_checkpoint import read_state_dict
from albert_tf.storage import files

_L = "encoder.albert_layer_groups.{g}.albert_layers.{k}"
_G = "group_{g}_inner_group_{k}"
T = "transpose"


def _linear(source, target):
    """The rules of a torch Linear `source` ([out, in] weight) and the Keras Dense `target`."""
    return (source + ".weight", target + "/kernel", T), (source + ".bias", target + "/bias")


def _layer_norm(source, target):
    """The rules of a torch LayerNorm `source` and the Keras LayerNormalization `target`."""
    return (source + ".weight", target + "/gamma"), (source + ".bias", target + "/beta")


def _output_layer(source, target):
    """The rules of a torch Linear `source` kept in the release's [out, in] layout: `target`'s
    output_weights and output_bias."""
    return (source + ".weight", target + "/output_weights"), (source + ".bias", target + "/output_bias")


HF_ENCODER_TABLE = (
    ("embeddings.word_embeddings.weight", "embeddings/word_embeddings"),
    ("embeddings.position_embeddings.weight", "embeddings/position_embeddings"),
    ("embeddings.token_type_embeddings.weight", "embeddings/token_type_embeddings"),
    *_layer_norm("embeddings.LayerNorm", "embeddings/LayerNorm"),
    *_linear("encoder.embedding_hidden_mapping_in", "embedding_hidden_mapping_in"),
    *_linear(_L + ".attention.{qkv}", _G + "_attention/{qkv}"),
    *_linear(_L + ".attention.dense", _G + "_attention/dense"),
    *_layer_norm(_L + ".attention.LayerNorm", _G + "_attention/LayerNorm"),
    *_linear(_L + ".ffn", _G + "_ffn/intermediate"),
    *_linear(_L + ".ffn_output", _G + "_ffn/output_dense"),
    *_layer_norm(_L + ".full_layer_layer_norm", _G + "_ffn/LayerNorm"),
    *_linear("pooler", "pooler"),
)
HF_HEAD_TABLE = (
    *_linear("predictions.dense", "predictions/transform"),
    *_layer_norm("predictions.LayerNorm", "predictions/transform_LayerNorm"),
    ("predictions.bias", "predictions/output_bias"),
    *_output_layer("sop_classifier.classifier", "seq_relationship"),
)
HF_QA_TABLE = _output_layer("qa_outputs", "squad")  # torch [out=2, in=H]
HF_MC_TABLE = _output_layer("classifier", "multiple_choice")  # torch [out=1, in=H]
# AlbertForSequenceClassification's `classifier` (weight [num_labels, H]): albert_tf
# AlbertClassifier's Dense `output` (kernel [H, num_labels]); read when config.json names it
HF_CLASSIFIER_TABLE = _linear("classifier", "output")
FROM_HF = to_regex_table(HF_ENCODER_TABLE + HF_HEAD_TABLE + HF_QA_TABLE + HF_MC_TABLE)
FROM_HF_CLASSIFIER = to_regex_table(HF_ENCODER_TABLE + HF_CLASSIFIER_TABLE)
SEQUENCE_CLASSIFICATION = "AlbertForSequenceClassification"
# what AlbertForQuestionAnswering lacks, and the value it gets (H = hidden_size)
ABSENT_QA_POOLER = {"pooler.weight": lambda h: np.zeros((h, h), "float32"),
                    "pooler.bias": lambda h: np.zeros((h,), "float32")}
TIED = ("predictions.decoder.weight", "predictions.decoder.bias")
SKIP = (r"embeddings\.position_ids",)

# HF's "gelu" is the exact erf GELU; its "gelu_new" is the release's tanh "gelu".
HF_ACTIVATIONS = {"gelu_new": "gelu", "gelu": "gelu_exact", "relu": "relu", "tanh": "tanh", "swish": "swish",
                  "silu": "silu", "gelu_pytorch_tanh": "gelu"}
CONFIG_KEYS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
               "inner_group_num", "num_attention_heads", "intermediate_size", "hidden_dropout_prob",
               "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size", "initializer_range")


def read_config(directory):
    """HF config.json -> albert_config dict."""
    path = files.join(directory, "config.json")
    if not files.isfile(path):
        raise ValueError(f"--input={directory}: no config.json (a Hugging Face model directory has one).")
    hf = read_json(path, "a Hugging Face config.json")
    if hf.get("model_type", "albert") != "albert":
        raise ValueError(f"{path}: a Hugging Face {hf['model_type']!r} model, not ALBERT (model_type 'albert').")
    missing = [k for k in CONFIG_KEYS + ("hidden_act",) if k not in hf]
    if missing:
        raise ValueError(f"{path}: missing keys {', '.join(missing)}.")
    if hf["hidden_act"] not in HF_ACTIVATIONS:
        raise ValueError(f"{path}: hidden_act {hf['hidden_act']!r} has no albert_tf equivalent.")
    eps = hf.get("layer_norm_eps", 1e-12)
    if eps != 1e-12:
        raise ValueError(f"{path}: layer_norm_eps {eps} differs from ALBERT's 1e-12.")
    values = {k: hf[k] for k in CONFIG_KEYS}
    values["hidden_act"] = HF_ACTIVATIONS[hf["hidden_act"]]
    values["sharing"] = "all"
    return values


def read_weights(directory):
    """name -> array, without the `albert.` prefix of AlbertForPreTraining."""
    safetensors_path = files.join(directory, "model.safetensors")
    torch_path = files.join(directory, "pytorch_model.bin")
    if files.isfile(safetensors_path):
        extras.require("safetensors.numpy", "--from=hf")
        from safetensors import SafetensorError
        from safetensors.numpy import load_file

        try:
            raw = load_file(safetensors_path)
        except SafetensorError as e:
            raise ValueError(f"{safetensors_path}: cannot be read as safetensors ({e}).") from None
    elif files.isfile(torch_path):
        raw = read_state_dict(torch_path)
    else:
        raise ValueError(f"--input={directory}: neither model.safetensors nor pytorch_model.bin.")
    values = {(k[len("albert."):] if k.startswith("albert.") else k): v for k, v in raw.items()}
    word = values.get("embeddings.word_embeddings.weight")
    for name in TIED:
        if name in values:
            tied = values.pop(name)
            reference = word if name.endswith("weight") else values.get("predictions.bias")
            if reference is not None and not np.array_equal(tied, reference):
                raise ValueError(f"{directory}: {name} is not tied as ALBERT's head is "
                                 f"({'word embeddings' if name.endswith('weight') else 'predictions.bias'}).")
    return values


# model kind -> the prefixes of its head's weights, and the architecture that has them
HEAD_PREFIXES = {
    "pretrainer": ("predictions.", "sop_classifier."),
    "squad_v1": ("qa_outputs.",),
    "multiple_choice": ("classifier.",),
}
ARCHITECTURES = {"squad_v1": "AlbertForQuestionAnswering", "multiple_choice": "AlbertForMultipleChoice"}
HEAD_WEIGHTS = {"squad_v1": "qa_outputs.weight / qa_outputs.bias",
                "multiple_choice": "classifier.weight / classifier.bias"}


def model_kind(names):
    """"encoder", "pretrainer", "squad_v1" (AlbertForQuestionAnswering) or
    "multiple_choice" (AlbertForMultipleChoice) from the weight names (without the
    `albert.` prefix); ValueError for heads of more than one model."""
    return templates.model_kind(names, HEAD_PREFIXES, str.startswith, "the weights hold")


def read_architectures(directory):
    """config.json's `architectures` (e.g. ["AlbertForQuestionAnswering"]), [] when absent."""
    value = read_json(files.join(directory, "config.json"), "a Hugging Face config.json").get("architectures") or []
    return [str(a) for a in value] if isinstance(value, list) else [str(value)]


def check_architectures(directory, kind):
    """Checks the weights' `kind` against config.json's `architectures`.

    Raises:
        ValueError: config.json names AlbertForQuestionAnswering or
            AlbertForMultipleChoice but the weights lack that head, or the weights hold
            a `classifier` while config.json names another model (e.g.
            AlbertForSequenceClassification, whose classifier is [num_labels, H]).
    """
    architectures = read_architectures(directory)
    for head_kind, architecture in ARCHITECTURES.items():
        if architecture in architectures and kind != head_kind:
            raise ValueError(f"--input={directory}: config.json names {architecture} but the weights have no "
                             f"{HEAD_WEIGHTS[head_kind]}.")
    if kind == "multiple_choice" and architectures and ARCHITECTURES[kind] not in architectures:
        raise ValueError(f"--input={directory}: the weights' {HEAD_WEIGHTS[kind]} are converted as "
                         f"{ARCHITECTURES[kind]}'s head, but config.json names {', '.join(architectures)}.")


def add_absent_qa_pooler(values, hidden_size):
    """For an AlbertForQuestionAnswering source without pooler weights: `values` with
    ABSENT_QA_POOLER added, and the names added (none when both pooler weights are
    there; when only one is, nothing is added and the conversion reports the other)."""
    if any(name in values for name in ABSENT_QA_POOLER):
        return values, []
    values = dict(values)
    for name, make in ABSENT_QA_POOLER.items():
        values[name] = make(hidden_size)
    return values, sorted(ABSENT_QA_POOLER)
