"""The original release's TF1 checkpoints <-> albert_tf (shared/ALBERT_REFERENCE.md sections 3, 9).

A checkpoint is read as the model its variables belong to (`model_kind`): the encoder, the
pretrainer, a SQuAD v1 or v2 model, or a RACE model (top-level `output_weights` [1, H] and
`output_bias` [1]). Reading skips optimizer slots and `global_step` and strips the `module/`
prefix of TF1 hub modules; writing produces a name-based checkpoint with the release's names
and shapes. docs/convert.md "From the original TF1 release".
"""


import numpy as np
import tensorflow as tf

from albert_tf.convert import templates
from albert_tf.convert.templates import reverse, to_regex_table
from albert_tf.storage import integrity
from albert_tf.storage.checkpoints import latest_prefix
from albert_tf.storage import files

_T = "bert/encoder/transformer/group_{g}/inner_group_{k}"
_G = "group_{g}_inner_group_{k}"

TF1_TABLE = (
    ("bert/embeddings/{emb}", "embeddings/{emb}"),
    ("bert/embeddings/LayerNorm/{ln}", "embeddings/LayerNorm/{ln}"),
    ("bert/encoder/embedding_hidden_mapping_in/{var}", "embedding_hidden_mapping_in/{var}"),
    (_T + "/attention_1/self/{qkv}/{var}", _G + "_attention/{qkv}/{var}"),
    (_T + "/attention_1/output/dense/{var}", _G + "_attention/dense/{var}"),
    (_T + "/LayerNorm/{ln}", _G + "_attention/LayerNorm/{ln}"),
    (_T + "/ffn_1/intermediate/dense/{var}", _G + "_ffn/intermediate/{var}"),
    (_T + "/ffn_1/intermediate/output/dense/{var}", _G + "_ffn/output_dense/{var}"),
    (_T + "/LayerNorm_1/{ln}", _G + "_ffn/LayerNorm/{ln}"),
    ("bert/pooler/dense/{var}", "pooler/{var}"),
    ("cls/predictions/transform/dense/{var}", "predictions/transform/{var}"),
    ("cls/predictions/transform/LayerNorm/{ln}", "predictions/transform_LayerNorm/{ln}"),
    ("cls/predictions/output_bias", "predictions/output_bias"),
    ("cls/seq_relationship/{head}", "seq_relationship/{head}"),
)
# squad_utils.create_v1_model and create_v2_model (albert_tf.modeling.qa_heads)
TF1_QA_TABLE = (
    ("cls/squad/{head}", "squad/{head}"),
    ("start_logits/dense/{var}", "squad_v2/start_logits_dense/{var}"),
    ("end_logits/dense_0/{var}", "squad_v2/end_logits_dense_0/{var}"),
    ("end_logits/LayerNorm/{ln}", "squad_v2/end_logits_LayerNorm/{ln}"),
    ("end_logits/dense_1/{var}", "squad_v2/end_logits_dense_1/{var}"),
    ("answer_class/dense_0/{var}", "squad_v2/answer_class_dense_0/{var}"),
    ("answer_class/dense_1/kernel", "squad_v2/answer_class_dense_1/kernel"),
)
# race_utils.create_model (albert_tf.modeling.multiple_choice): top-level variables
TF1_MC_TABLE = (
    ("output_weights", "multiple_choice/output_weights"),  # [1, H] in both
    ("output_bias", "multiple_choice/output_bias"),
)
FROM_TF1 = to_regex_table(TF1_TABLE + TF1_QA_TABLE + TF1_MC_TABLE)
TO_TF1 = to_regex_table(reverse(TF1_TABLE + TF1_QA_TABLE + TF1_MC_TABLE))
SKIP = (r".*/adam_[mv]", r"global_step", r".*/(Adam|Momentum|lamb)(_\d+)?")


def checkpoint_prefix(path):
    """A checkpoint prefix from a prefix or a directory: the one its `checkpoint` file
    names, else the highest step (model.ckpt-10000 over model.ckpt-9), as
    `albert_tf.storage.checkpoints.latest_prefix`."""
    prefix = latest_prefix(path)
    if prefix is None:
        if files.isdir(path):
            raise ValueError(f"--input={path}: no TF1 checkpoint (*.index) in this directory.")
        raise ValueError(f"--input={path}: no checkpoint ({path}.index does not exist).")
    return prefix


def read_tf1(path):
    """name -> array of a TF1 checkpoint, `module/` prefix removed."""
    prefix = checkpoint_prefix(path)
    values = {}
    with integrity.reading_checkpoint(prefix, f"--input={path}", integrity.READER_FIX):
        reader = tf.train.load_checkpoint(prefix)
        for name, _ in tf.train.list_variables(prefix):
            key = name[len("module/"):] if name.startswith("module/") else name
            values[key] = reader.get_tensor(name)
    return values


# model kind -> its head's variables: a scope (ending in "/") or one variable's name
HEAD_PREFIXES = {
    "pretrainer": ("cls/predictions/", "cls/seq_relationship/"),
    "squad_v1": ("cls/squad/",),
    "squad_v2": ("start_logits/", "end_logits/", "answer_class/"),
    "multiple_choice": ("output_weights", "output_bias"),
}


def _in_head(name, prefix):
    """Whether `name` is the head variable `prefix` names (or its optimizer slot), or lies
    in the scope `prefix` names."""
    if prefix.endswith("/"):
        return name.startswith(prefix)
    return name == prefix or name.startswith(prefix + "/")


def model_kind(names):
    """"encoder", "pretrainer", "squad_v1", "squad_v2" or "multiple_choice": the model
    whose head variables `names` hold; ValueError for heads of more than one model."""
    return templates.model_kind(names, HEAD_PREFIXES, _in_head, "the checkpoint holds")


def write_tf1(values, prefix):
    """Writes name -> array as a name-based TF1 checkpoint at `prefix` (plus global_step)."""
    graph = tf.Graph()
    with graph.as_default():
        variables = [tf.compat.v1.get_variable(name, initializer=np.asarray(value), trainable=True)
                     for name, value in sorted(values.items())]
        step = tf.compat.v1.train.get_or_create_global_step()
        # relative paths in the `checkpoint` file: the directory is written under a
        # temporary name and renamed
        saver = tf.compat.v1.train.Saver(variables + [step], save_relative_paths=True)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return saver.save(session, prefix, write_meta_graph=False)


def check_tf1_layout(config):
    if config.sharing != "all":
        raise ValueError(f"the release's TF1 layout shares every layer within a group; sharing="
                         f"{config.sharing!r} has no TF1 form (use sharing='all' with num_hidden_groups = "
                         "num_hidden_layers for unshared layers).")
    return config
