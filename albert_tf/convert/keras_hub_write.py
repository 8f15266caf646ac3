"""albert_tf -> a keras-hub preset directory (keras_hub.py reads; this file writes).

The preset is written by keras-hub itself (`save_to_preset`), so that
`keras_hub.models.AlbertBackbone.from_preset(DIR)`, `AlbertTokenizer.from_preset(DIR)` and
`AlbertMaskedLM.from_preset(DIR)` load it:

    AlbertEncoder, AlbertForQuestionAnswering, AlbertForMultipleChoice
        -> the backbone and the tokenizer (keras-hub has no ALBERT question-answering or
           multiple-choice task: their heads are left behind and reported)
    AlbertPretrainer
        -> an AlbertMaskedLM task (backbone, tokenizer, preprocessor and the masked-LM head,
           tied to the token embedding as in the release); the sentence-order head has no
           keras-hub counterpart and is left behind, reported
    AlbertClassifier (a run_classifier run)
        -> an AlbertTextClassifier task (num_classes, dropout; its `logits` layer holds the
           release's output layer) and `labels.json` ({"labels": [...]}, the task's labels
           in class order; keras-hub keeps none; [] for a regression)

The backbone's weights go through keras_hub.py's table reversed (attention kernels split
per head again); the masked-LM head through `MLM_HEAD_TABLE`. keras-hub's masked-LM head
normalises with epsilon 1e-5 where the release uses 1e-12 (its layer is built that way by
AlbertMaskedLM and not configurable from a preset), so its logits differ slightly: the
tests measure that difference. keras-hub's AlbertTokenizer applies the SentencePiece model
alone (tensorflow-text's SentencepieceTokenizer), without the release's lower-casing, accent
stripping and digit-comma rule: the preset's model carries them (release_spm.release_model:
its character map does `preprocess_text`'s work, its digit-comma pieces are UNUSED), so the
preset tokenizes raw text as albert_tf (`release_spm.NOT_EXPRESSED`: what still differs).

Refused (KerasHubLayoutError, a ValueError: exit 2) before anything is written: `sharing`
other than "all", embedding_size equal to hidden_size (keras-hub always applies its
embedding projection), a group layout whose layer-to-group map differs between
AlbertBackbone (each group L // G times in a row) and the release's `int(i / L * G)`
(float rounding makes them differ for some layouts, e.g. L = G = 22), and an activation
other than the tanh GELU (AlbertBackbone's only one).
"""

import json

import numpy as np

from albert_tf import extras
from albert_tf.convert import release_spm
from albert_tf.convert.keras_hub import CLASSIFIER_HEAD_TABLE, LABELS_FILE, MLM_HEAD_TABLE, write_keras_hub_backbone
from albert_tf.convert.rename import assign_to_variables, model_variables
from albert_tf.convert.templates import reverse, to_regex_table
from albert_tf.storage import files

ALBERT_TF_TO_CLASSIFIER_HEAD = to_regex_table(reverse(CLASSIFIER_HEAD_TABLE))
ALBERT_TF_TO_MLM_HEAD = to_regex_table(reverse(MLM_HEAD_TABLE))
KERAS_HUB_MLM_EPSILON = 1e-5  # keras_hub MaskedLMHead's default, which AlbertMaskedLM keeps


class KerasHubLayoutError(ValueError):
    """A model keras-hub's AlbertBackbone cannot represent (the reasons in the message)."""


def layout_problems(config):
    """Why keras-hub's AlbertBackbone cannot hold `config` (an empty list when it can)."""
    problems = []
    if config.sharing != "all":
        problems.append(f"sharing={config.sharing!r}: keras-hub's AlbertBackbone shares every layer of a group")
    if not config.has_embedding_projection:
        problems.append(f"embedding_size = hidden_size = {config.hidden_size}: albert_tf has no embedding projection "
                        "then, AlbertBackbone always applies embedding_projection")
    layers, groups = config.num_hidden_layers, config.num_hidden_groups
    theirs = [i // max(1, layers // groups) for i in range(layers)]  # AlbertBackbone: each group L // G times
    ours = [config.group_of_layer(i) for i in range(layers)]
    if theirs != ours:
        problems.append(f"num_hidden_layers={layers} with num_hidden_groups={groups}: AlbertBackbone applies the "
                        f"groups {theirs}, the release {ours}")
    if config.hidden_act != "gelu":
        problems.append(f"hidden_act={config.hidden_act!r}: AlbertBackbone uses the tanh GELU ('gelu') only")
    return problems


def check_layout(config):
    """Raises KerasHubLayoutError listing every reason keras-hub cannot hold `config`."""
    problems = layout_problems(config)
    if problems:
        raise KerasHubLayoutError("--to=keras_hub: keras-hub's ALBERT cannot represent this model:\n  "
                                  + "\n  ".join(problems))


def backbone_for(config):
    """A new keras-hub AlbertBackbone of `config`'s shape (float32)."""
    keras_hub = extras.require("keras_hub", "--to=keras_hub")

    return keras_hub.models.AlbertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, embedding_dim=config.embedding_size, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, num_groups=config.num_hidden_groups,
        num_inner_repetitions=config.inner_group_num, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings, num_segments=config.type_vocab_size, dtype="float32")


def written_tokenizer(directory):
    """text -> ids of the preset's keras-hub AlbertTokenizer (read back from `directory`)."""
    keras_hub = extras.require("keras_hub", "--to=keras_hub")

    tokenizer = keras_hub.models.AlbertTokenizer.from_preset(directory)
    return lambda text: [int(i) for i in tokenizer(text)]


def write_keras_hub_preset(model, directory, spm_model_file, sequence_length=512, do_lower_case=True):
    """Writes `model` as a keras-hub preset into the (new) `directory`.

    Args:
        model: AlbertEncoder, AlbertPretrainer, AlbertForQuestionAnswering or
            AlbertForMultipleChoice.
        directory: where the files go (the caller makes it atomic).
        spm_model_file: the model's SentencePiece model; the preset's tokenizer holds it
            with the release's tokenization inside (`release_spm.release_model`).
        sequence_length: the masked-LM preprocessor's sequence length.
        do_lower_case: the tokenizer lower-cases (as the model was trained).

    Returns:
        (what keras-hub loads it as, albert_tf paths left behind).
    """
    keras_hub = extras.require("keras_hub", "--to=keras_hub")

    from albert_tf.data.tokenization import strip_machine_paths
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.modeling.pretrainer import AlbertPretrainer

    config = model.config
    check_layout(config)
    encoder = getattr(model, "encoder", model)
    backbone = backbone_for(config)
    write_keras_hub_backbone(encoder, backbone, label="the albert_tf encoder")
    with files.open(spm_model_file, "rb") as f:
        proto, _, _ = release_spm.release_model(strip_machine_paths(f.read()), bool(do_lower_case))
    tokenizer = keras_hub.models.AlbertTokenizer(proto=proto)
    length = min(int(sequence_length), config.max_position_embeddings)
    kept = {v.path for v in encoder.weights}

    def copy_head(prefix, weights, table):  # the albert_tf head's variables (paths `prefix...`) into `weights`
        head = {p: np.asarray(v) for p, v in model_variables(model).items() if p.startswith(prefix)}
        assign_to_variables(weights, head, table, label=f"the albert_tf {prefix[:-1]} head")
        kept.update(head)

    if isinstance(model, AlbertPretrainer):
        task = keras_hub.models.AlbertMaskedLM(
            backbone, preprocessor=keras_hub.models.AlbertMaskedLMPreprocessor(tokenizer, sequence_length=length))
        tied = {v.path for v in backbone.weights}  # the head's output embedding is the token embedding
        copy_head("predictions/", [v for v in task.masked_lm_head.weights if v.path not in tied], ALBERT_TF_TO_MLM_HEAD)
        task.save_to_preset(directory)
        kind = "AlbertMaskedLM"
    elif isinstance(model, AlbertClassifier):
        task = keras_hub.models.AlbertTextClassifier(
            backbone, num_classes=model.num_classes, dropout=model.dropout,
            preprocessor=keras_hub.models.AlbertTextClassifierPreprocessor(tokenizer, sequence_length=length))
        copy_head("output/", task.output_dense.weights, ALBERT_TF_TO_CLASSIFIER_HEAD)
        task.save_to_preset(directory)
        with files.open(files.join(directory, LABELS_FILE), "w", encoding="utf-8") as f:
            json.dump({"labels": list(getattr(model, "run_labels", None) or [])}, f)
        kind = "AlbertTextClassifier"
    else:
        backbone.save_to_preset(directory)
        tokenizer.save_to_preset(directory)
        kind = "AlbertBackbone"
    left_behind = sorted(p for p in model_variables(model) if p not in kept)
    return kind, left_behind
