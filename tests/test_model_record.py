"""The one model record (issue 64): model.json beside the weights is Keras' own serialization
of the model, run_info.json's "model" is the same record, every model class is in Keras'
registry, and a bad record is a ValueError naming its file."""

import json
import os
import shutil

import numpy as np
import pytest
from conftest import extract_archive, random_inputs
from convert_helpers import randomize
from harness import to_numpy

from albert_tf import AlbertEncoder, AlbertForMultipleChoice, AlbertForQuestionAnswering, AlbertPretrainer
from albert_tf.modeling import pretrained
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.config import AlbertConfig
from albert_tf.modeling.finetuned import FineTunedModel
from albert_tf.modeling.records import run_info_record, run_model
from albert_tf.storage.json_files import JsonFileError

V0_2_0 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "v0_2_0", "fixtures.tar.xz")


def _no_dropout(config):
    return config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


MODELS = {
    "encoder": lambda c: AlbertEncoder(c),
    "pretrainer": lambda c: AlbertPretrainer(c),
    "classifier": lambda c: AlbertClassifier(AlbertEncoder(c, name="encoder"), 3, dropout=0.2),
    "regression": lambda c: AlbertClassifier(AlbertPretrainer(c).encoder, 1),
    "qa_v1": lambda c: AlbertForQuestionAnswering(c),
    "qa_v2": lambda c: AlbertForQuestionAnswering(c, version="v2", start_n_top=3, end_n_top=2),
    "mc": lambda c: AlbertForMultipleChoice(c, dropout_prob=0.2),
}


def _leaves(structure):
    return np.concatenate([np.ravel(v).astype("float64") for v in
                           (structure.values() if isinstance(structure, dict) else [structure])])


def _outputs(model, config):
    inputs = random_inputs(config)
    if isinstance(model, AlbertForMultipleChoice):
        inputs = {k: np.stack([v, v[::-1]], axis=1) for k, v in inputs.items()}  # [B, C=2, T]
    if isinstance(model, AlbertPretrainer):
        inputs["masked_lm_positions"] = np.tile(np.array([[1, 2, 5]], "int32"), (len(inputs["input_mask"]), 1))
    return to_numpy(model(inputs, training=False))


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_save_pretrained_writes_the_keras_record_and_loads_the_same_model(tiny_config, tmp_path, kind):
    config = _no_dropout(tiny_config)
    model = randomize(MODELS[kind](config), seed=4)
    model.save_pretrained(tmp_path / kind)
    assert sorted(os.listdir(tmp_path / kind)) == sorted(["albert_config.json", "model.json", model.WEIGHTS_FILE])
    record = json.load(open(tmp_path / kind / "model.json"))
    assert record == pretrained.model_record(model)
    assert record["registered_name"] == f"albert_tf>{type(model).__name__}"
    encoder_config = record["config"]["encoder"]["config"] if "encoder" in record["config"] else record["config"]
    assert encoder_config["config"] == json.load(open(tmp_path / kind / "albert_config.json"))
    loaded = type(model).from_pretrained(tmp_path / kind)
    assert type(loaded) is type(model) and loaded.get_config() == model.get_config()
    for a, b in zip(model.weights, loaded.weights, strict=True):
        assert a.path == b.path
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    np.testing.assert_array_equal(*(_leaves(_outputs(m, config)) for m in (model, loaded)))


def test_every_model_class_is_in_the_one_registry_and_the_classifier_is_fine_tuned():
    assert pretrained.registered_models() == {
        "AlbertEncoder": AlbertEncoder, "AlbertPretrainer": AlbertPretrainer, "AlbertClassifier": AlbertClassifier,
        "AlbertForQuestionAnswering": AlbertForQuestionAnswering, "AlbertForMultipleChoice": AlbertForMultipleChoice}
    assert issubclass(AlbertClassifier, FineTunedModel) and AlbertClassifier.WEIGHTS_FILE == "classifier.weights.h5"


def test_run_info_records_the_directorys_record_and_rebuilds_the_model(tiny_config, tmp_path):
    model = AlbertClassifier(AlbertEncoder(tiny_config, name="encoder"), 2)
    info = run_info_record(model, ["no", "yes"])
    model.save_pretrained(tmp_path / "c")
    assert info == {"model": json.load(open(tmp_path / "c" / "model.json")), "labels": ["no", "yes"]}
    rebuilt, labels, export = run_model(json.loads(json.dumps(info)))
    assert rebuilt.get_config() == model.get_config() and labels == ["no", "yes"] and export is None
    assert run_info_record(AlbertPretrainer(tiny_config)) == {}  # a pretraining run: its directory has model.json


def test_run_model_reads_the_record_0_2_0_wrote(tmp_path):
    extract_archive(V0_2_0, tmp_path)
    info = json.load(open(tmp_path / "v0_2_0" / "classifier_run" / "run_info.json"))
    model, labels, export = run_model(info)
    assert isinstance(model, AlbertClassifier) and labels == ["0", "1"] and export is None
    assert (model.num_classes, model.dropout, model.config.hidden_size) == (2, 0.1, 32)


def test_a_missing_or_bad_record_names_the_file(tiny_config, tmp_path):
    model = AlbertClassifier(AlbertEncoder(tiny_config, name="encoder"), 3)
    model.save_pretrained(tmp_path / "c")
    path = tmp_path / "c" / "model.json"
    good = path.read_text()
    path.write_text('{"class_name": ')
    with pytest.raises(JsonFileError, match=rf"{path}:1:\d+: not valid JSON"):
        AlbertClassifier.from_pretrained(tmp_path / "c")
    path.write_text(json.dumps({"class_name": "Dense", "registered_name": "Dense", "config": {}}))
    with pytest.raises(ValueError, match=rf"{path}: not Keras' record of an albert_tf model.*'Dense'"):
        AlbertClassifier.from_pretrained(tmp_path / "c")
    record = json.loads(good)
    record["config"]["colour"] = "blue"
    path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match=rf"{path}: the AlbertClassifier it records does not build"):
        AlbertClassifier.from_pretrained(tmp_path / "c")
    path.write_text(good)
    os.replace(tmp_path / "c" / "classifier.weights.h5", tmp_path / "c" / "multiple_choice.weights.h5")
    with pytest.raises(ValueError, match=rf"{path}: records an AlbertClassifier, not an AlbertForMultipleChoice"):
        AlbertForMultipleChoice.from_pretrained(tmp_path / "c")
    os.replace(tmp_path / "c" / "multiple_choice.weights.h5", tmp_path / "c" / "classifier.weights.h5")
    with pytest.raises(ValueError, match="holds a head of 3 classes, not 2"):
        AlbertClassifier.from_pretrained(tmp_path / "c", num_classes=2)
    assert AlbertClassifier.from_pretrained(tmp_path / "c", dropout=0.0).dropout == 0.0
    os.remove(path)
    with pytest.raises(ValueError, match=r"c: classifier.weights.h5 without model.json"):
        AlbertClassifier.from_pretrained(tmp_path / "c")


def test_a_classifier_on_a_pretrained_directory_takes_a_new_head(tiny_config, tmp_path):
    pretrainer = randomize(AlbertPretrainer(tiny_config), seed=5)
    pretrainer.save_pretrained(tmp_path / "p")
    model = AlbertClassifier.from_pretrained(tmp_path / "p", num_classes=4)
    assert model.num_classes == 4 and [w.path for w in model.output_dense.weights] == ["output/kernel", "output/bias"]
    for a, b in zip(pretrainer.encoder.weights, model.encoder.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    with pytest.raises(ValueError, match="a new head on its encoder needs num_classes"):
        AlbertClassifier.from_pretrained(tmp_path / "p")


def test_a_0_2_0_directory_without_model_json_loads_from_albert_config(tiny_config, tmp_path):
    model = randomize(AlbertPretrainer(tiny_config), seed=6)
    model.save_pretrained(tmp_path / "p")
    os.remove(tmp_path / "p" / "model.json")  # as 0.2.0 wrote it
    shutil.copytree(tmp_path / "p", tmp_path / "q")
    loaded = AlbertPretrainer.from_pretrained(tmp_path / "q")
    assert loaded.config == AlbertConfig.from_json_file(tmp_path / "p" / "albert_config.json")
    for a, b in zip(model.weights, loaded.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)


def test_a_classifier_weights_file_keeps_the_functional_layout(tiny_config):
    """AlbertClassifier was a functional model: its `.weights.h5` layout stays that model's
    (the encoder's layers under layers/albert_encoder/, the output layer as layers/dense/)."""
    from albert_tf.storage.weights_file import model_weights_variables

    paths = model_weights_variables(AlbertClassifier(AlbertEncoder(tiny_config, name="encoder"), 3))
    assert {p for p in paths if not p.startswith("layers/albert_encoder/layers/")} == {
        "layers/dense/vars/0", "layers/dense/vars/1"}
    assert paths["layers/dense/vars/0"] == (tiny_config.hidden_size, 3)
    assert "layers/albert_encoder/layers/dense_1/vars/0" in paths  # the pooler, as the encoder's own file
