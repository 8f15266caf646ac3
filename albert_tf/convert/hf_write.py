"""albert_tf -> Hugging Face transformers (hf.py reads; this file writes).

Writes a directory that transformers' `from_pretrained` loads with no missing or unexpected
weight, with NumPy and safetensors only: config.json, model.safetensors (hf.py's tables
reversed), spiece.model, tokenizer.json (`tokenizer_json`: tokenizes as the release),
tokenizer_config.json and special_tokens_map.json. Which transformers model each albert_tf
model becomes (`architecture_of`) and what is left behind: docs/convert.md#to-hugging-face.
What transformers cannot represent is refused with every reason at once, before anything is
written (`HfLayoutError`, a ValueError: exit 2).
"""

import json

import numpy as np

from albert_tf import extras
from albert_tf.convert import release_spm
from albert_tf.convert.hf import CONFIG_KEYS, HF_CLASSIFIER_TABLE, HF_ENCODER_TABLE, HF_HEAD_TABLE, HF_MC_TABLE, \
    HF_QA_TABLE
from albert_tf.convert.rename import apply_transforms, model_variables, rename
from albert_tf.convert.templates import reverse, to_regex_table
from albert_tf.storage import files

# albert_tf hidden_act -> transformers' name (hf.HF_ACTIVATIONS read the other way)
TO_HF_ACTIVATIONS = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu", "tanh": "tanh", "swish": "swish",
                     "silu": "silu"}
WEIGHTS_NAME = "model.safetensors"
SPM_NAME = "spiece.model"
PREFIX = "albert."  # the encoder's weights inside every transformers model but AlbertModel
V2_HEAD = "squad_v2/"  # the variables of the release's v2 head (albert_tf.modeling.qa_heads)
# how far below the lowest piece a digit-comma piece scores in tokenizer.json's Unigram model
DIGIT_COMMA_PENALTY = 1000.0


class HfLayoutError(ValueError):
    """A model transformers' ALBERT cannot represent (the reasons in the message)."""


def architecture_of(model):
    """transformers' class for an albert_tf model.

    Raises:
        HfLayoutError: a model of another kind.
    """
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.modeling.encoder import AlbertEncoder
    from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice
    from albert_tf.modeling.pretrainer import AlbertPretrainer
    from albert_tf.modeling.question_answering import AlbertForQuestionAnswering

    if isinstance(model, AlbertPretrainer):
        return "AlbertForPreTraining"
    if isinstance(model, AlbertForQuestionAnswering):
        return "AlbertForQuestionAnswering" if model.version == "v1" else "AlbertModel"
    if isinstance(model, AlbertForMultipleChoice):
        return "AlbertForMultipleChoice"
    if isinstance(model, AlbertClassifier):
        return "AlbertForSequenceClassification"
    if isinstance(model, AlbertEncoder):
        return "AlbertModel"
    raise HfLayoutError(f"--to=hf: no transformers counterpart of {type(model).__name__}.")


def check_layout(config):
    """Raises HfLayoutError listing every reason transformers cannot hold `config`."""
    problems = []
    if config.sharing != "all":
        problems.append(f"sharing={config.sharing!r}: transformers' ALBERT shares every sub-layer of a group "
                        "(sharing='all'; num_hidden_groups = num_hidden_layers gives unshared layers)")
    if not config.has_embedding_projection:
        problems.append(f"embedding_size = hidden_size = {config.hidden_size}: albert_tf has no embedding projection "
                        "then, transformers' ALBERT always applies embedding_hidden_mapping_in")
    layers, groups = config.num_hidden_layers, config.num_hidden_groups
    theirs = [int(i / (layers / groups)) for i in range(layers)]  # transformers' AlbertTransformer
    ours = [config.group_of_layer(i) for i in range(layers)]
    if theirs != ours:
        problems.append(f"num_hidden_layers={layers} with num_hidden_groups={groups}: transformers applies the "
                        f"groups {theirs}, the release {ours}")
    if config.hidden_act not in TO_HF_ACTIVATIONS:
        problems.append(f"hidden_act={config.hidden_act!r} has no transformers name")
    if problems:
        raise HfLayoutError("--to=hf: transformers' ALBERT cannot represent this model:\n  " + "\n  ".join(problems))


def _table(prefix):
    encoder = tuple((rule[0], prefix + rule[1]) + tuple(rule[2:]) for rule in reverse(HF_ENCODER_TABLE))
    return to_regex_table(encoder + reverse(HF_HEAD_TABLE + HF_QA_TABLE + HF_MC_TABLE + HF_CLASSIFIER_TABLE))


def hf_state(model, architecture):
    """(transformers name -> float32 array, albert_tf paths left behind) of `model`, which
    becomes `architecture` (`architecture_of`; its layout checked by `check_layout`)."""
    source = {path: np.asarray(v) for path, v in model_variables(model).items()}
    left_behind = []
    if architecture == "AlbertForQuestionAnswering":
        left_behind = sorted(p for p in source if p.startswith("pooler/"))
    elif architecture == "AlbertModel":  # an encoder, or a SQuAD v2 model's encoder (its head left behind)
        left_behind = sorted(p for p in source if p.startswith(V2_HEAD))
    source = {p: v for p, v in source.items() if p not in left_behind}
    values = apply_transforms(rename(source, _table("" if architecture == "AlbertModel" else PREFIX)))
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in values.items()}, left_behind


def hf_config(model, architecture, special_tokens):
    """transformers' config.json dict of `model` (`special_tokens`: albert_tf SpecialTokens)."""
    config = model.config
    values = {"architectures": [architecture], "model_type": "albert"}
    values.update({k: getattr(config, k) for k in CONFIG_KEYS})
    values.update(hidden_act=TO_HF_ACTIVATIONS[config.hidden_act], layer_norm_eps=1e-12,
                  classifier_dropout_prob=float(model.dropout if architecture == "AlbertForSequenceClassification"
                                                else getattr(model, "dropout_prob", 0.1)),
                  position_embedding_type="absolute", pad_token_id=special_tokens.pad_id,
                  bos_token_id=special_tokens.cls_id, eos_token_id=special_tokens.sep_id, tie_word_embeddings=True,
                  dtype="float32")
    if architecture == "AlbertForSequenceClassification":
        labels = list(getattr(model, "run_labels", None) or [])
        if model.num_classes == 1:
            labels, problem = ["score"], "regression"
        else:
            labels = labels if len(labels) == model.num_classes else [f"LABEL_{i}" for i in range(model.num_classes)]
            problem = "single_label_classification"
        values.update(num_labels=model.num_classes, id2label={str(i): str(x) for i, x in enumerate(labels)},
                      label2id={str(x): i for i, x in enumerate(labels)}, problem_type=problem)
    return values


def tokenizer_json(model_bytes, special_tokens, do_lower_case):
    """The `tokenizers` pipeline of the SentencePiece model, as tokenizer.json's dict: every
    piece in the Unigram model (only the five control pieces are added tokens), the release's
    normalisation as one precompiled character map (`release_spm.release_model`), and each
    digit-comma piece scored `DIGIT_COMMA_PENALTY` below the lowest piece, so the
    segmentation leaves it out as the release's `encode_pieces` does. Why: docs/convert.md.
    """
    import base64

    from albert_tf.data.spm_model_proto import ModelProto

    proto = ModelProto.FromString(model_bytes)
    control = {special_tokens.pad_id, special_tokens.unk_id, special_tokens.cls_id, special_tokens.sep_id,
               special_tokens.mask_id}
    added = [{"id": i, "content": proto.pieces[i].piece, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in sorted(control)]
    release, _, _ = release_spm.release_model(model_bytes, bool(do_lower_case))
    normalized = ModelProto.FromString(release)
    charsmap = base64.b64encode(normalized.normalizer_spec.precompiled_charsmap).decode()
    vocab = [[p.piece, float(p.score)] for p in proto.pieces]
    lowest = min(score for _, score in vocab)
    for i in release_spm.digit_comma_ids(proto):
        vocab[i][1] = lowest - DIGIT_COMMA_PENALTY
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    cls, sep = proto.pieces[special_tokens.cls_id].piece, proto.pieces[special_tokens.sep_id].piece

    def special(piece, type_id):
        return {"SpecialToken": {"id": piece, "type_id": type_id}}

    def sequence(name, type_id):
        return {"Sequence": {"id": name, "type_id": type_id}}

    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Precompiled", "precompiled_charsmap": charsmap},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, metaspace]},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special(cls, 0), sequence("A", 0), special(sep, 0)],
            "pair": [special(cls, 0), sequence("A", 0), special(sep, 0), sequence("B", 1), special(sep, 1)],
            "special_tokens": {cls: {"id": cls, "ids": [special_tokens.cls_id], "tokens": [cls]},
                               sep: {"id": sep, "ids": [special_tokens.sep_id], "tokens": [sep]}}},
        "decoder": metaspace,
        "model": {"type": "Unigram", "unk_id": special_tokens.unk_id,
                  "vocab": vocab, "byte_fallback": False},
    }


def tokenizer_files(spm_model_file, special_tokens, do_lower_case, max_length):
    """{file name: bytes} of the tokenizer: spiece.model, tokenizer.json (`tokenizer_json`)
    and the two JSON files of its settings (`special_tokens`: the model's SpecialTokens)."""
    from albert_tf.data.tokenization import strip_machine_paths
    from albert_tf.data.vocab import PIECES

    model_bytes = strip_machine_paths(files.read_bytes(spm_model_file))
    special = {"bos_token": PIECES["cls_id"], "eos_token": PIECES["sep_id"], "unk_token": PIECES["unk_id"],
               "sep_token": PIECES["sep_id"], "pad_token": PIECES["pad_id"], "cls_token": PIECES["cls_id"],
               "mask_token": PIECES["mask_id"]}
    # token_type_ids too (transformers' AlbertTokenizer leaves them out by default): a text
    # pair's second segment must reach the model as type 1, as albert_tf packs it
    config = dict(tokenizer_class="AlbertTokenizer", do_lower_case=bool(do_lower_case), keep_accents=False,
                  remove_space=True, model_max_length=int(max_length),
                  model_input_names=["input_ids", "token_type_ids", "attention_mask"], **special)
    return {SPM_NAME: model_bytes,
            "tokenizer.json": json.dumps(tokenizer_json(model_bytes, special_tokens, do_lower_case),
                                         ensure_ascii=False).encode(),
            "tokenizer_config.json": json.dumps(config, indent=2).encode(),
            "special_tokens_map.json": json.dumps(special, indent=2).encode()}


def written_tokenizer(directory):
    """text -> ids of the tokenizer.json in `directory`, as the `tokenizers` library (which
    transformers' AutoTokenizer runs) gives them, [CLS] and [SEP] included."""
    Tokenizer = extras.require("tokenizers", "--to=hf").Tokenizer

    tokenizer = Tokenizer.from_file(files.join(directory, "tokenizer.json"))
    return lambda text: tokenizer.encode(text).ids


SLOW_TOKENIZER_NOTE = ("transformers' slow AlbertTokenizer (use_fast=False: spiece.model with its own preprocessing) "
                       "maps `` and '' to \" before SentencePiece; the release does not")


def write_hf(model, directory, spm_model_file, do_lower_case=True):
    """Writes `model` (AlbertEncoder, AlbertPretrainer, AlbertForQuestionAnswering (v2: its
    encoder only), AlbertForMultipleChoice or AlbertClassifier) as a transformers model
    directory into the new `directory`, with the tokenizer of `spm_model_file`. Returns
    (architecture, albert_tf paths left behind); HfLayoutError for what transformers cannot
    represent."""
    save_file = extras.require("safetensors.numpy", "--to=hf").save_file

    from albert_tf.data.tokenization import SentencePieceTokenizer

    architecture = architecture_of(model)
    check_layout(model.config)
    state, left_behind = hf_state(model, architecture)
    tokens = SentencePieceTokenizer(spm_model_file, do_lower_case).special_tokens
    save_file(state, files.join(directory, WEIGHTS_NAME), metadata={"format": "pt"})
    files.write_bytes(files.join(directory, "config.json"),
                      json.dumps(hf_config(model, architecture, tokens), indent=2).encode("utf-8"))
    for name, data in tokenizer_files(spm_model_file, tokens, do_lower_case,
                                      model.config.max_position_embeddings).items():
        files.write_bytes(files.join(directory, name), data)
    return architecture, left_behind
