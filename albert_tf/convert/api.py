"""Conversion between the release's TF1 checkpoints, Hugging Face, keras-hub and albert_tf.

Every conversion goes through the albert_tf model the source's variables make (AlbertEncoder,
AlbertPretrainer, AlbertForQuestionAnswering v1/v2, AlbertForMultipleChoice, AlbertClassifier;
an albert_tf run directory through the model record of its run_info.json): the source is
renamed with its table, checked (every target variable assigned exactly once with its shape,
else the full list of problems and nothing written) and assigned; the target is then written
(hf_write.py, keras_hub_write.py, tf1.py). docs/convert.md.
"""

import json
import logging

import numpy as np

from albert_tf.convert import hf, hf_write, keras_hub, keras_hub_write, release_spm, tf1
from albert_tf.convert.rename import ConversionError, apply_transforms, assign_to_model, assign_to_variables, \
    model_variables, rename
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.config import AlbertConfig
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.multiple_choice import MULTIPLE_CHOICE_WEIGHTS, AlbertForMultipleChoice
from albert_tf.modeling.pretrained import PRETRAINER_WEIGHTS
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.modeling.question_answering import QUESTION_ANSWERING_WEIGHTS, AlbertForQuestionAnswering
from albert_tf.storage import outputs
from albert_tf.storage.json_files import read_json
from albert_tf.storage import files

logger = logging.getLogger("albert_tf")

SOURCES = ("tf1", "hf", "keras_hub", "albert_tf")
TARGETS = ("albert_tf", "tf1", "hf", "keras_hub")
# [CLS] and a few ordinary ids, [SEP]: the fixed input whose output the tool reports.
FIXED_IDS = (2, 31, 51, 99, 7, 3)
RUN_INFO, BEST_DIR = "run_info.json", "best"  # albert_tf.training.checkpoints' names (a room above convert)


def _build(config, kind):
    """The albert_tf model of a source's `model_kind`."""
    if kind == "pretrainer":
        return AlbertPretrainer(config)
    if kind in ("squad_v1", "squad_v2"):
        return AlbertForQuestionAnswering(config, version=kind[len("squad_"):])
    if kind == "multiple_choice":
        return AlbertForMultipleChoice(config)
    return AlbertEncoder(config)


def load_source(source, path, config=None):
    """Reads `path` as `source` into the albert_tf model its heads make (AlbertPretrainer,
    AlbertForQuestionAnswering, AlbertForMultipleChoice, AlbertClassifier, else AlbertEncoder).

    Args:
        source: one of SOURCES.
        path: checkpoint prefix or directory (tf1), model directory (hf), preset
            directory or .weights.h5 (keras_hub), pretrained directory (albert_tf).
        config: AlbertConfig; required for tf1 (TF1 checkpoints carry none) unless the
            directory holds albert_config.json, and for a keras_hub .weights.h5.
    """
    label = f"--input={path} ({source})"
    if source == "tf1":
        prefix = tf1.checkpoint_prefix(path)
        if config is None:
            candidate = files.join(files.dirname(prefix), "albert_config.json")
            if not files.isfile(candidate):
                raise ValueError("--from=tf1 needs --albert_config_file (TF1 checkpoints carry no config).")
            config = AlbertConfig.from_json_file(candidate)
        values = tf1.read_tf1(prefix)
        model = _build(config, tf1.model_kind(values))
        assign_to_model(model, values, tf1.FROM_TF1, tf1.SKIP, label=f"--input={prefix} (tf1)")
        return model
    if source == "hf":
        if not files.isdir(path):
            raise ValueError(f"--input={path}: a Hugging Face model is a directory (config.json + weights).")
        config = config or AlbertConfig.from_dict(hf.read_config(path), source=files.join(path, "config.json"))
        values = hf.read_weights(path)
        if hf.SEQUENCE_CLASSIFICATION in hf.read_architectures(path):
            return _hf_classifier(path, config, values, label)
        kind = hf.model_kind(values)
        hf.check_architectures(path, kind)
        if kind == "squad_v1":
            values, added = hf.add_absent_qa_pooler(values, config.hidden_size)
            if added:
                logger.warning("%s: no pooler (Hugging Face's AlbertForQuestionAnswering has none); the "
                               "converted pooler is zeros (%s).", label, ", ".join(added))
        model = _build(config, kind)
        assign_to_model(model, values, hf.FROM_HF, hf.SKIP, label=label)
        return model
    if source == "keras_hub":
        backbone = keras_hub.backbone_from_file(path, config)
        config = config or keras_hub.config_of_backbone(backbone)
        task = keras_hub.preset_task(path)
        if type(task).__name__ == "AlbertMaskedLM":
            return _keras_hub_masked_lm(backbone, task, config, label)
        model = AlbertEncoder(config)
        keras_hub.load_keras_hub_backbone(backbone, model, label=label)
        if task is None:
            return model
        # an AlbertTextClassifier preset: its head too, and the labels albert_tf wrote beside it
        classifier = AlbertClassifier(model, task.num_classes, dropout=task.dropout,
                                      initializer_range=model.config.initializer_range)
        head = {v.path: np.asarray(v) for v in task.output_dense.weights}
        assign_to_variables(classifier.output_dense.weights, head, keras_hub.KERAS_HUB_TO_CLASSIFIER_HEAD,
                            label=f"{label} (AlbertTextClassifier's logits layer)")
        classifier.run_labels = keras_hub.preset_labels(path)
        return classifier
    if source == "albert_tf":
        info = run_record(path)
        if info is not None:
            return load_run(path, info)
        found = ((QUESTION_ANSWERING_WEIGHTS, AlbertForQuestionAnswering),
                 (MULTIPLE_CHOICE_WEIGHTS, AlbertForMultipleChoice), (PRETRAINER_WEIGHTS, AlbertPretrainer))
        for weights, cls in found:
            if files.isfile(files.join(path, weights)):
                return cls.from_pretrained(path)
        return AlbertEncoder.from_pretrained(path)
    raise ValueError(f"--from must be one of {', '.join(SOURCES)}, got {source!r}.")


def _keras_hub_masked_lm(backbone, task, config, label):
    """An AlbertPretrainer of a keras-hub AlbertMaskedLM preset: the backbone and the
    masked-LM head read back; the sentence-order head, which keras-hub does not hold, keeps
    its initial values and is named in `model.not_in_source` (and logged)."""
    model = AlbertPretrainer(config)
    keras_hub.load_keras_hub_backbone(backbone, model.encoder, label=label)
    head = [v for v in model.weights if v.path.startswith("predictions/")]
    assign_to_variables(head, keras_hub.masked_lm_head_values(task), keras_hub.KERAS_HUB_TO_MLM_HEAD,
                        label=f"{label} (AlbertMaskedLM's masked-LM head)")
    model.not_in_source = sorted(p for p in model_variables(model) if p.startswith("seq_relationship/"))
    logger.warning("%s: keras-hub's AlbertMaskedLM has no sentence-order head; %s keep their initial values.",
                   label, ", ".join(model.not_in_source))
    return model


def _hf_classifier(path, config, values, label):
    """An AlbertClassifier of a transformers AlbertForSequenceClassification directory
    (`model.run_labels`: its id2label in order; none for a regression)."""
    settings = read_json(files.join(path, "config.json"), "a Hugging Face config.json")
    weight = values.get("classifier.weight")
    if weight is None or np.ndim(weight) != 2:
        raise ValueError(f"{label}: config.json names {hf.SEQUENCE_CLASSIFICATION} but the weights have no "
                         "classifier.weight [num_labels, hidden_size].")
    num_classes = int(weight.shape[0])
    model = AlbertClassifier(AlbertEncoder(config, name="encoder"), num_classes,
                             dropout=float(settings.get("classifier_dropout_prob", 0.1)),
                             initializer_range=config.initializer_range)
    assign_to_model(model, values, hf.FROM_HF_CLASSIFIER, hf.SKIP, label=label)
    id2label = settings.get("id2label") or {}
    regression = num_classes == 1 and settings.get("problem_type") in (None, "regression")
    model.run_labels = [] if regression else [str(id2label.get(str(i), i)) for i in range(num_classes)]
    return model


def run_record(path):
    """run_info.json of a fine-tuning run directory (its "model" record and the keys beside
    it: albert_tf.modeling.records), or None for anything else."""
    info = files.join(path, RUN_INFO)
    if not files.isdir(path) or not files.isfile(info):
        return None
    values = read_json(info, f"albert_tf's record of the run ({RUN_INFO})")
    if "model" not in values and values.get("task") not in (None, "pretraining") \
            and not files.isfile(files.join(path, PRETRAINER_WEIGHTS)):
        raise ValueError(f"--input={path}: a {values['task']} run directory whose {RUN_INFO} records no model (runs "
                         "before albert_tf recorded it); train it again into a new --output_dir to convert it.")
    return values if "model" in values else None


def load_run(path, info):
    """The model of a fine-tuning run directory: rebuilt from its record, with the weights
    of the run's best checkpoint (best/) or else its newest; `model.run_labels` holds the
    task's labels and `model.run_checkpoint` the checkpoint read. ValueError for no
    checkpoint, or one whose variables differ from the record's model."""
    import tensorflow as tf

    from albert_tf.modeling.records import EXPORT_VARIABLES, run_model
    from albert_tf.storage import integrity
    from albert_tf.storage.checkpoints import latest_prefix, object_variables
    from albert_tf.storage.checkpoints import model_variables as checkpoint_variables
    from albert_tf.storage.report import MatchReport

    model, labels, names = run_model(info, files.join(path, RUN_INFO))
    prefix = latest_prefix(files.join(path, BEST_DIR)) if files.isdir(files.join(path, BEST_DIR)) else None
    prefix = prefix or latest_prefix(path)
    if prefix is None:
        raise ValueError(f"--input={path}: a fine-tuning run directory without a checkpoint (ckpt-N); train first.")
    label = f"--input={prefix} (the run's {type(model).__name__})"
    integrity.check_checkpoint(prefix, f"--input={path}", root="model")
    if names is not None:  # a classifier fine-tuned on an export's TFSMLayer
        if not names:
            raise ValueError(f"{files.join(path, RUN_INFO)}: a classifier fine-tuned on an export whose record "
                             "lacks export_variables (runs before albert_tf recorded them); train it again into a "
                             "new --output_dir to convert it.")
        reader = tf.train.load_checkpoint(prefix)
        stored = {name: reader.get_tensor(f"model/{EXPORT_VARIABLES}/{i}/.ATTRIBUTES/VARIABLE_VALUE")
                  for i, name in enumerate(names) if reader.has_tensor(f"model/{EXPORT_VARIABLES}/{i}"
                                                                       "/.ATTRIBUTES/VARIABLE_VALUE")}
        encoder = {v.path: v for v in model.encoder.weights}
        # (the export's other variables, e.g. its MLM head, are saved elsewhere: not in `stored`)
        found = {name: value.shape for name, value in stored.items()}
        MatchReport.compare({p: tuple(v.shape) for p, v in encoder.items()}, found,
                            label).raise_if_mismatched()
        for name, variable in encoder.items():
            variable.assign(stored[name])
        tf.train.Checkpoint(model=tf.train.Checkpoint(output_dense=model.output_dense)).read(
            prefix).expect_partial().assert_existing_objects_matched()
    else:
        MatchReport.compare(checkpoint_variables(model), object_variables(prefix, "model"),
                            label).raise_if_mismatched()
        tf.train.Checkpoint(model=model).read(prefix).expect_partial().assert_existing_objects_matched()
    model.run_labels = labels
    model.run_checkpoint = prefix
    return model


def tf1_values(model):
    """The release's TF1 name -> array for an albert_tf model."""
    tf1.check_tf1_layout(model.config)
    source = {path: np.asarray(v) for path, v in model_variables(model).items()}
    return apply_transforms(rename(source, tf1.TO_TF1))


def check_target(model, target, spm_model_file):
    """Everything `write_target` refuses, before anything is written: an unknown target,
    a layout the target cannot hold (every reason at once), a missing SentencePiece model
    for a target that carries the tokenizer. Raises ValueError naming the flag."""
    if target not in TARGETS:
        raise ValueError(f"--to must be one of {', '.join(TARGETS)}, got {target!r}.")
    if isinstance(model, AlbertClassifier) and target in ("albert_tf", "tf1"):
        raise ValueError(f"--to={target}: a classifier converts to hf or keras_hub; the {target} form holds "
                         "pretrained, SQuAD and multiple-choice models (a classifier's run directory is its "
                         "albert_tf form).")
    if target == "tf1":
        tf1_values(model)
    elif target == "hf":
        hf_write.architecture_of(model)
        hf_write.check_layout(model.config)
    elif target == "keras_hub":
        keras_hub_write.check_layout(model.config)
    if target in ("hf", "keras_hub"):
        if not spm_model_file:
            raise ValueError(f"--to={target} writes the tokenizer too: give --spm_model_file (the model's "
                             "SentencePiece model; the input holds none).")
        from albert_tf.data.tokenization import SentencePieceTokenizer

        pieces = SentencePieceTokenizer(spm_model_file).vocab_size  # ValueError naming a missing or bad file
        if pieces != model.config.vocab_size:
            raise ValueError(f"--spm_model_file={spm_model_file} has {pieces} pieces but the model's vocab_size "
                             f"is {model.config.vocab_size}; give the model's own SentencePiece model.")


def write_target(model, target, output, spm_model_file=None, do_lower_case=True, allow_tokenizer_mismatch=False,
                 made_by=None):
    """Writes `model` as `target` into the directory `output`, atomically
    (`outputs.replacing_dir`: `output` must be new or albert_tf's own conversion, else
    OutputRefused). hf and keras_hub targets carry the tokenizer (`spm_model_file`,
    `do_lower_case`), read back and checked against albert_tf's on `release_spm.CHECK_TEXTS`
    (its record: `release_spm.CHECK_FILE` in `output`). `made_by` (a provenance.record) is
    kept in the output's marker.

    Returns (output path, what the target holds (e.g. "AlbertForPreTraining"), the albert_tf
    variable paths the target has no place for). Raises release_spm.TokenizerMismatch where
    the written tokenizer gives other ids than albert_tf, unless `allow_tokenizer_mismatch`.
    """
    check_target(model, target, spm_model_file)
    output = files.abspath(output)
    values = tf1_values(model) if target == "tf1" else None
    kind, left_behind = type(model).__name__, []
    with outputs.replacing_dir(output, outputs.CONVERSION, "--output", made_by=made_by) as tmp:
        if target == "albert_tf":
            model.save_pretrained(tmp)
        elif target == "tf1":
            tf1.write_tf1(values, files.join(tmp, "model.ckpt"))
            model.config.to_json_file(files.join(tmp, "albert_config.json"))
        elif target == "hf":
            kind, left_behind = hf_write.write_hf(model, tmp, spm_model_file, do_lower_case)
        else:
            kind, left_behind = keras_hub_write.write_keras_hub_preset(model, tmp, spm_model_file,
                                                                       do_lower_case=do_lower_case)
        if target in ("hf", "keras_hub"):
            report = tokenizer_check(target, tmp, spm_model_file, do_lower_case)
            release_spm.refuse_mismatch(report, allow_tokenizer_mismatch)
            text = json.dumps(report, indent=2, ensure_ascii=False)
            files.write_bytes(files.join(tmp, release_spm.CHECK_FILE), text.encode("utf-8"))
    return output, kind, left_behind


def tokenizer_check(target, directory, spm_model_file, do_lower_case):
    """The tokenizer written into `directory` (target "hf" or "keras_hub") against albert_tf's
    on `release_spm.CHECK_TEXTS`: `release_spm.check_report`'s record."""
    from albert_tf.data.tokenization import SentencePieceTokenizer, strip_machine_paths

    ours = SentencePieceTokenizer(spm_model_file, do_lower_case)
    model_bytes = strip_machine_paths(files.read_bytes(spm_model_file))
    _, rules, unused = release_spm.release_model(model_bytes, bool(do_lower_case))
    if target == "hf":
        return release_spm.check_report(
            target, "tokenizer.json read by the tokenizers library (transformers' AutoTokenizer)",
            lambda text: [ours.cls_id] + ours.encode(text) + [ours.sep_id], hf_write.written_tokenizer(directory),
            rules, unused, notes=[hf_write.SLOW_TOKENIZER_NOTE])
    return release_spm.check_report(target, "the preset's keras_hub.models.AlbertTokenizer", ours.encode,
                                    keras_hub_write.written_tokenizer(directory), rules, unused)


def spm_model_in(source, path):
    """The SentencePiece model a source directory carries (hf: spiece.model, keras_hub:
    assets/tokenizer/vocabulary.spm, albert_tf: spm.model), or None."""
    names = {"hf": ("spiece.model",), "keras_hub": (files.join("assets", "tokenizer", "vocabulary.spm"),),
             "albert_tf": ("spm.model", "spiece.model"), "tf1": ("30k-clean.model", "spm.model")}.get(source, ())
    directory = path if files.isdir(path) else files.dirname(path)
    for name in names:
        candidate = files.join(directory, name)
        if files.isfile(candidate):
            return candidate
    return None


def convert(source, target, input_path, output_path, config=None, spm_model_file=None, do_lower_case=True,
            allow_tokenizer_mismatch=False, made_by=None):
    """Converts and writes (arguments as `write_target`'s), the output checked first
    (`outputs.check`); returns (model, output path). `spm_model_file` defaults to the one the
    input carries (`spm_model_in`)."""
    if target not in TARGETS:
        raise ValueError(f"--to must be one of {', '.join(TARGETS)}, got {target!r}.")
    outputs.check([outputs.Output("--output", output_path, outputs.CONVERSION)],
                  [outputs.Input("--input", input_path), outputs.Input("--spm_model_file", spm_model_file)])
    model = load_source(source, input_path, config)
    spm_model_file = spm_model_file or spm_model_in(source, input_path)
    return model, write_target(model, target, output_path, spm_model_file, do_lower_case,
                               allow_tokenizer_mismatch, made_by)[0]


def fixed_ids(config):
    """FIXED_IDS, each clipped to the vocabulary (tiny test models have fewer ids)."""
    return tuple(min(i, config.vocab_size - 1) for i in FIXED_IDS)


def _fixed_inputs(config):
    ids = np.array([fixed_ids(config)], "int32")
    return {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)}


def fixed_output(model):
    """pooled_output of `fixed_ids(model.config)` (to compare with the source framework)."""
    outputs = getattr(model, "encoder", model)(_fixed_inputs(model.config), training=False)
    return np.asarray(outputs["pooled_output"])[0]


def fixed_head_output(model):
    """(name, values) of a fine-tuned model's head on `fixed_ids(model.config)`: QA v1
    start_logits [T], v2 cls_logits [1] (None when T is below start_n_top or end_n_top);
    multiple choice logits [1] (the ids as the one option); classifier logits [C]; else None."""
    inputs = _fixed_inputs(model.config)
    if isinstance(model, AlbertClassifier):
        return "logits", np.asarray(model(inputs, training=False))[0]
    if isinstance(model, AlbertForMultipleChoice):
        one_option = {name: value[:, None] for name, value in inputs.items()}  # [1, 1, T]
        return "logits", np.asarray(model(one_option, training=False)["logits"])[0]
    if not isinstance(model, AlbertForQuestionAnswering):
        return None
    if model.version == "v1":
        return "start_logits", np.asarray(model(inputs, training=False)["start_logits"])[0]
    if inputs["input_word_ids"].shape[1] < max(model.start_n_top, model.end_n_top):
        return None
    return "cls_logits", np.asarray(model(inputs, training=False)["cls_logits"])


__all__ = ["convert", "load_source", "write_target", "check_target", "spm_model_in", "fixed_output",
           "fixed_head_output", "fixed_ids",
           "ConversionError", "SOURCES", "TARGETS"]
