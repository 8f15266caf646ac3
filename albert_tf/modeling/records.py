"""What a fine-tuning run records of its model, and the model rebuilt from that record.

A run directory's `run_info.json` holds, under "model", the record of the model its
checkpoints hold: its class, the encoder's albert_config, the head's constructor settings
and the task's labels. `python -m albert_tf.convert --from=albert_tf --input=RUN_DIR`
rebuilds the model from it (`model_from_record`) and reads the run's best (else newest)
checkpoint into it:

    {"class": "AlbertClassifier", "albert_config": {...},
     "settings": {"num_classes": 3, "dropout": 0.1, "initializer_range": 0.02},
     "labels": ["contradiction", "entailment", "neutral"]}
    {"class": "AlbertForQuestionAnswering", "albert_config": {...},
     "settings": {"version": "v1", "start_n_top": 5, "end_n_top": 5, "dropout_prob": 0.1}}
    {"class": "AlbertForMultipleChoice", "albert_config": {...}, "settings": {"dropout_prob": 0.1}}

A classifier fine-tuned on an export loaded as a Keras TFSMLayer (run_classifier
--albert_hub_module_handle) records "encoder": "export", the export's albert_config and
"export_variables", the names of the restored export's variables in order: its checkpoint
holds the fine-tuned values as `encoder/_reloaded_obj/variables/<i>` (the export's own
object path `encoder/_reloaded_obj/_encoder/...` keeps the values it was loaded with), and
the reader maps variable i onto the AlbertEncoder variable of that name.
"""

from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.config import AlbertConfig
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice
from albert_tf.modeling.question_answering import AlbertForQuestionAnswering
from albert_tf.storage import files

EXPORT_VARIABLES = "encoder/_reloaded_obj/variables"  # in a run's checkpoint, under "model/"
_CLASSES = {"AlbertClassifier": AlbertClassifier, "AlbertForQuestionAnswering": AlbertForQuestionAnswering,
            "AlbertForMultipleChoice": AlbertForMultipleChoice}


def model_record(model, labels=None):
    """The JSON-able record of a fine-tuning model (see the module docstring), or None for
    a model of another class (the pretrainer: its run directory is a pretrained directory)."""
    name = type(model).__name__
    if name not in _CLASSES:
        return None
    record = {"class": name, "settings": {k: getattr(model, k) for k in model.HEAD_SETTINGS}}
    if isinstance(model.encoder, AlbertEncoder):
        record["albert_config"] = model.encoder.config.to_dict()
    else:
        record["encoder"] = "export"
        config_file = files.join(str(getattr(model.encoder, "filepath", "")), "assets", "albert_config.json")
        if files.isfile(config_file):
            record["albert_config"] = AlbertConfig.from_json_file(config_file).to_dict()
        reloaded = getattr(model.encoder, "_reloaded_obj", None)
        if reloaded is not None:
            record["export_variables"] = [v.name.split(":")[0] for v in reloaded.variables]
    if labels is not None:
        record["labels"] = list(labels)
    return record


def model_from_record(record, source="run_info.json"):
    """A new model of `record`'s class and shape (weights to be read from the run).

    Raises:
        ValueError: naming `source`: an unknown class, a record without albert_config, a
            malformed config.
    """
    name = record.get("class") if isinstance(record, dict) else None
    if name not in _CLASSES:
        raise ValueError(f"{source}: \"model\" names {name!r}, not one of {', '.join(_CLASSES)}.")
    if "albert_config" not in record:
        raise ValueError(f"{source}: this {name}'s record has no albert_config (an encoder of unknown shape); it "
                         "cannot be rebuilt.")
    config = AlbertConfig.from_dict(record["albert_config"], source=source)
    settings = dict(record.get("settings") or {})
    if name == "AlbertClassifier":
        return AlbertClassifier(AlbertEncoder(config, name="encoder"), **settings)
    return _CLASSES[name](config, **settings)
