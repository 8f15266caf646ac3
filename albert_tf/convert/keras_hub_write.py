"""albert_tf -> a keras-hub preset directory (keras_hub.py reads; this file writes).

keras-hub writes the preset itself (`save_to_preset`): an AlbertPretrainer becomes an
AlbertMaskedLM task (the sentence-order head left behind), an AlbertClassifier an
AlbertTextClassifier with `labels.json`, any other model the backbone and tokenizer (its head
left behind). The preset's SentencePiece model carries the release's tokenization
(`release_spm.release_model`). What keras-hub cannot represent is refused before anything is
written (`KerasHubLayoutError`, a ValueError: exit 2). docs/convert.md#to-keras-hub.
"""

import json

import numpy as np

from albert_tf import extras
from albert_tf.convert import release_spm
from albert_tf.convert.keras_hub import CLASSIFIER_HEAD_TABLE, LABELS_FILE, MLM_HEAD_TABLE, backbone_for, \
    write_keras_hub_backbone
from albert_tf.convert.rename import assign_to_variables, model_variables
from albert_tf.convert.templates import reverse, to_regex_table
from albert_tf.storage import files

ALBERT_TF_TO_CLASSIFIER_HEAD = to_regex_table(reverse(CLASSIFIER_HEAD_TABLE))
ALBERT_TF_TO_MLM_HEAD = to_regex_table(reverse(MLM_HEAD_TABLE))


class KerasHubLayoutError(ValueError):
    """A model keras-hub's AlbertBackbone cannot represent (the reasons in the message)."""


def check_layout(config):
    """Raises KerasHubLayoutError listing every reason keras-hub cannot hold `config`."""
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
    if problems:
        raise KerasHubLayoutError("--to=keras_hub: keras-hub's ALBERT cannot represent this model:\n  "
                                  + "\n  ".join(problems))


def written_tokenizer(directory):
    """text -> ids of the preset's keras-hub AlbertTokenizer (read back from `directory`)."""
    keras_hub = extras.require("keras_hub", "--to=keras_hub")

    tokenizer = keras_hub.models.AlbertTokenizer.from_preset(directory)
    return lambda text: [int(i) for i in tokenizer(text)]


def write_keras_hub_preset(model, directory, spm_model_file, sequence_length=512, do_lower_case=True):
    """Writes `model` as a keras-hub preset into the new `directory`, its tokenizer the model
    `spm_model_file` carrying the release's tokenization; `sequence_length`: the
    preprocessor's. Returns (what keras-hub loads it as, albert_tf paths left behind)."""
    keras_hub = extras.require("keras_hub", "--to=keras_hub")

    from albert_tf.data.tokenization import strip_machine_paths
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.modeling.pretrainer import AlbertPretrainer

    config = model.config
    check_layout(config)
    encoder = getattr(model, "encoder", model)
    backbone = backbone_for(config)
    write_keras_hub_backbone(encoder, backbone, label="the albert_tf encoder")
    proto, _, _ = release_spm.release_model(strip_machine_paths(files.read_bytes(spm_model_file)), bool(do_lower_case))
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
        labels = {"labels": list(getattr(model, "run_labels", None) or [])}
        files.write_bytes(files.join(directory, LABELS_FILE), json.dumps(labels).encode("utf-8"))
        kind = "AlbertTextClassifier"
    else:
        backbone.save_to_preset(directory)
        tokenizer.save_to_preset(directory)
        kind = "AlbertBackbone"
    left_behind = sorted(p for p in model_variables(model) if p not in kept)
    return kind, left_behind
