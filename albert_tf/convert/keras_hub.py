"""keras-hub AlbertBackbone <-> AlbertEncoder: a rename table on Keras variable paths.

keras-hub keeps attention kernels per head (query/key/value kernel [H, N, D], bias
[N, D], output kernel [N, D, H]); the table names the transforms that merge those axes
into the release's [H, H] / [H] layout (`merge_heads`, `merge_heads_first`) and the
reversed table splits them again.
"""


from albert_tf import extras
from albert_tf.storage.json_files import read_json
from albert_tf.convert.rename import assign_to_model
from albert_tf.convert.templates import reverse, to_regex_table
from albert_tf.storage.weights_file import load_weights_file
from albert_tf.storage import files

_K = "group_{g}_inner_layer_{k}"
_G = "group_{g}_inner_group_{k}"

KERAS_HUB_TABLE = (
    ("token_embedding/embeddings", "embeddings/word_embeddings"),
    ("position_embedding/embeddings", "embeddings/position_embeddings"),
    ("segment_embedding/embeddings", "embeddings/token_type_embeddings"),
    ("embeddings_layer_norm/{ln}", "embeddings/LayerNorm/{ln}"),
    ("embedding_projection/{var}", "embedding_hidden_mapping_in/{var}"),
    (_K + "/self_attention_layer/{qkv}/kernel", _G + "_attention/{qkv}/kernel", "merge_heads"),
    (_K + "/self_attention_layer/{qkv}/bias", _G + "_attention/{qkv}/bias", "merge_heads"),
    (_K + "/self_attention_layer/attention_output/kernel", _G + "_attention/dense/kernel", "merge_heads_first"),
    (_K + "/self_attention_layer/attention_output/bias", _G + "_attention/dense/bias"),
    (_K + "/self_attention_layer_norm/{ln}", _G + "_attention/LayerNorm/{ln}"),
    (_K + "/feedforward_intermediate_dense/{var}", _G + "_ffn/intermediate/{var}"),
    (_K + "/feedforward_output_dense/{var}", _G + "_ffn/output_dense/{var}"),
    (_K + "/feedforward_layer_norm/{ln}", _G + "_ffn/LayerNorm/{ln}"),
    ("pooled_dense/{var}", "pooler/{var}"),
)
# AlbertTextClassifier's `logits` Dense (kernel [H, C]) is AlbertClassifier's `output`
CLASSIFIER_HEAD_TABLE = (("logits/{var}", "output/{var}"),)
# AlbertMaskedLM's head (its output embedding is the backbone's token embedding, tied) is
# AlbertPretrainer's `predictions`
MLM_HEAD_TABLE = (
    ("mlm_head/intermediate_dense/{var}", "predictions/transform/{var}"),
    ("mlm_head/intermediate_layer_norm/{ln}", "predictions/transform_LayerNorm/{ln}"),
    ("mlm_head/output_bias", "predictions/output_bias"),
)
KERAS_HUB_TO_ALBERT_TF = to_regex_table(KERAS_HUB_TABLE)
KERAS_HUB_TO_CLASSIFIER_HEAD = to_regex_table(CLASSIFIER_HEAD_TABLE)
KERAS_HUB_TO_MLM_HEAD = to_regex_table(MLM_HEAD_TABLE)
TASKS = ("AlbertTextClassifier", "AlbertMaskedLM")  # the keras-hub tasks --from=keras_hub reads with their heads
LABELS_FILE = "labels.json"  # written beside an AlbertTextClassifier preset by albert_tf (keras-hub keeps no labels)
ALBERT_TF_TO_KERAS_HUB = to_regex_table(reverse(KERAS_HUB_TABLE))
BACKBONE_CLASS = "AlbertBackbone"


def load_keras_hub_backbone(backbone, encoder, label="the keras-hub backbone"):
    """Copies an in-memory keras-hub AlbertBackbone's weights into `encoder`; returns the
    assigned paths (ConversionError when any variable is missing, unexpected or misshaped)."""
    source = {v.path: v.numpy() for v in backbone.weights}
    return assign_to_model(encoder, source, KERAS_HUB_TO_ALBERT_TF, label=label)


def write_keras_hub_backbone(encoder, backbone, label="the albert_tf encoder"):
    """Copies an AlbertEncoder's weights into a keras-hub AlbertBackbone of the same
    shape (the reversed table: heads split again). Returns the assigned paths."""
    source = {v.path: v.numpy() for v in encoder.weights}
    return assign_to_model(backbone, source, ALBERT_TF_TO_KERAS_HUB, label=label)


def backbone_kwargs(saved, config_path):
    """The AlbertBackbone constructor arguments of a keras-hub preset config.json (`saved`);
    ValueError naming `config_path` and what it holds when it is not an AlbertBackbone."""
    if "class_name" in saved:
        found = saved.get("class_name")
        if found != BACKBONE_CLASS:
            registered = saved.get("registered_name") or saved.get("module") or ""
            raise ValueError(f"{config_path}: a keras-hub {found} preset" + (f" ({registered})" if registered else "")
                             + f", not an {BACKBONE_CLASS}; --from=keras_hub converts ALBERT backbones only.")
        kwargs = saved.get("config")
        if not isinstance(kwargs, dict):
            raise ValueError(f"{config_path}: an {BACKBONE_CLASS} preset without its \"config\" object.")
    elif "model_type" in saved:
        raise ValueError(f"{config_path}: a Hugging Face config (model_type={saved['model_type']!r}), not a keras-hub "
                         "preset; use --from=hf for a Hugging Face model directory.")
    else:
        kwargs = saved
    return {k: v for k, v in kwargs.items() if k not in ("name", "trainable", "dtype")}


def backbone_from_file(path, config=None):
    """A keras-hub AlbertBackbone from a preset directory (config.json + model.weights.h5)
    or from a `.weights.h5` file plus an AlbertConfig describing it."""
    keras_hub = extras.require("keras_hub", "--from=keras_hub")

    if files.isdir(path):
        config_path = files.join(path, "config.json")
        weights_path = files.join(path, "model.weights.h5")
        if not files.isfile(config_path):
            raise ValueError(f"--input={path}: no config.json (a keras-hub preset directory holds config.json and "
                             "model.weights.h5).")
        kwargs = backbone_kwargs(read_json(config_path, "a keras-hub preset's config.json"), config_path)
        if not files.isfile(weights_path):
            raise ValueError(f"--input={path}: no model.weights.h5 beside config.json.")
        try:
            backbone = keras_hub.models.AlbertBackbone(**kwargs)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{config_path}: not the arguments of an {BACKBONE_CLASS} ({e}); found keys "
                             f"{', '.join(sorted(kwargs))}.") from None
    else:
        if not path.endswith(".weights.h5") or not files.isfile(path):
            raise ValueError(f"--input={path}: expected a keras-hub preset directory or a .weights.h5 file.")
        if config is None:
            raise ValueError("--from=keras_hub with a .weights.h5 file needs --albert_config_file.")
        backbone = backbone_for(config)
        weights_path = path
    load_weights_file(backbone, weights_path, "the keras-hub weights")
    return backbone


# AlbertConfig key -> AlbertBackbone's argument and attribute (the backbone's one dropout is both of ours)
BACKBONE_ARGUMENTS = (
    ("vocab_size", "vocabulary_size"), ("num_hidden_layers", "num_layers"), ("num_attention_heads", "num_heads"),
    ("embedding_size", "embedding_dim"), ("hidden_size", "hidden_dim"), ("intermediate_size", "intermediate_dim"),
    ("num_hidden_groups", "num_groups"), ("inner_group_num", "num_inner_repetitions"),
    ("hidden_dropout_prob", "dropout"), ("max_position_embeddings", "max_sequence_length"),
    ("type_vocab_size", "num_segments"),
)


def backbone_for(config):
    """A new keras-hub AlbertBackbone of `config`'s shape (float32)."""
    keras_hub = extras.require("keras_hub", "converting from or to keras_hub")

    return keras_hub.models.AlbertBackbone(**{theirs: getattr(config, ours) for ours, theirs in BACKBONE_ARGUMENTS},
                                           dtype="float32")


def config_of_backbone(backbone, hidden_act="gelu"):
    """The AlbertConfig of a keras-hub AlbertBackbone (it always uses tanh GELU)."""
    from albert_tf.modeling.config import AlbertConfig

    return AlbertConfig(**{ours: getattr(backbone, theirs) for ours, theirs in BACKBONE_ARGUMENTS},
                        hidden_act=hidden_act, attention_probs_dropout_prob=backbone.dropout)


def preset_task(path):
    """keras-hub's AlbertTextClassifier or AlbertMaskedLM of a preset directory whose
    task.json names it (loaded with its head), else None (a backbone preset, a file)."""
    task_file = files.join(path, "task.json")
    if not files.isdir(path) or not files.isfile(task_file):
        return None
    name = read_json(task_file, "a keras-hub preset's task.json").get("class_name")
    if name not in TASKS:
        return None
    keras_hub = extras.require("keras_hub", "--from=keras_hub")

    return getattr(keras_hub.models, name).from_preset(path)


def masked_lm_head_values(task):
    """keras-hub path -> array of an AlbertMaskedLM's own head weights (the tied token
    embedding, which is the backbone's, left out)."""
    tied = {v.path for v in task.backbone.weights}
    return {v.path: v.numpy() for v in task.masked_lm_head.weights if v.path not in tied}


def preset_labels(path):
    """The labels albert_tf wrote beside a classifier preset (LABELS_FILE), or None."""
    labels_file = files.join(path, LABELS_FILE)
    if not files.isfile(labels_file):
        return None
    return [str(x) for x in read_json(labels_file, f"the labels albert_tf wrote ({LABELS_FILE})").get("labels", [])]

