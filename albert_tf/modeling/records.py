"""What a fine-tuning run records of its model in `run_info.json` ("model", "labels" and,
for a classifier on an export, "export_encoder"), and the model rebuilt from it (`run_model`,
which reads 0.2.0's record too): docs/model_record.md.
"""

from albert_tf.compat import TFSM_LOADED_OBJECT, reloaded_savedmodel
from albert_tf.modeling import pretrained
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.config import AlbertConfig
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.finetuned import FineTunedModel
from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice
from albert_tf.modeling.question_answering import AlbertForQuestionAnswering
from albert_tf.storage import files

EXPORT_VARIABLES = f"encoder/{TFSM_LOADED_OBJECT}/variables"  # in a run's checkpoint, under "model/"
_V0_2_0_CLASSES = (AlbertClassifier, AlbertForQuestionAnswering, AlbertForMultipleChoice)  # 0.2.0's "class"


def run_info_record(model, labels=None):
    """The keys run_info.json records of a fine-tuning run's model (see the module
    docstring), or {} for a model of another class (the pretrainer: its run directory is
    a pretrained directory, with model.json)."""
    if not isinstance(model, FineTunedModel):
        return {}
    info = {"model": pretrained.model_record(model)}
    if labels is not None:
        info["labels"] = list(labels)
    if not isinstance(model.encoder, AlbertEncoder):
        export = {}
        config_file = files.join(str(getattr(model.encoder, "filepath", "")), "assets", "albert_config.json")
        if files.isfile(config_file):
            export["albert_config"] = AlbertConfig.from_json_file(config_file).to_dict()
        reloaded = reloaded_savedmodel(model.encoder)
        if reloaded is not None:
            export["variables"] = [v.name.split(":")[0] for v in reloaded.variables]
        info["export_encoder"] = export
    return info


def run_model(info, source="run_info.json"):
    """(a new model of the run's class and shape, the task's labels or None, the export's
    variable names or None when the encoder is an AlbertEncoder) of run_info.json's keys
    `info`; the weights are to be read from the run's checkpoint.

    Raises:
        ValueError: naming `source`: no albert_tf record, an encoder of unknown shape, a
            malformed config.
    """
    record = info.get("model")
    if isinstance(record, dict) and "class" in record and "registered_name" not in record:
        return _v0_2_0_model(record, source)
    cls = pretrained.record_class(record, source)
    export = info.get("export_encoder")
    if export is None:
        return pretrained.model_from_record(record, source, FineTunedModel), info.get("labels"), None
    if "albert_config" not in export:
        raise ValueError(f"{source}: this {cls.__name__}'s export_encoder has no albert_config (an encoder of "
                         "unknown shape); it cannot be rebuilt.")
    config = AlbertConfig.from_dict(export["albert_config"], source=source)
    settings = {k: record["config"][k] for k in cls.HEAD_SETTINGS if k in record["config"]}
    return cls(AlbertEncoder(config, name="encoder"), **settings), info.get("labels"), export.get("variables") or []


def _v0_2_0_model(record, source):
    """run_model of the record albert_tf 0.2.0 wrote (the module docstring)."""
    classes = {cls.__name__: cls for cls in _V0_2_0_CLASSES}
    name = record.get("class")
    if name not in classes:
        raise ValueError(f"{source}: \"model\" names {name!r}, not one of {', '.join(classes)}.")
    if "albert_config" not in record:
        raise ValueError(f"{source}: this {name}'s record has no albert_config (an encoder of unknown shape); it "
                         "cannot be rebuilt.")
    config = AlbertConfig.from_dict(record["albert_config"], source=source)
    model = classes[name](AlbertEncoder(config, name="encoder"), **dict(record.get("settings") or {}))
    export = (record.get("export_variables") or []) if record.get("encoder") == "export" else None
    return model, record.get("labels"), export
