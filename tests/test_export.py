"""Encoder and preprocessing SavedModels: the TF-Hub contract, hub.KerasLayer, TFSMLayer."""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops of the preprocessing model)
from conftest import run_in_process

from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.data.tokenization import SentencePieceTokenizer, strip_machine_paths

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SEQ = 32


@pytest.fixture(scope="module")
def exported(spm_model, tmp_path_factory):
    """A tiny pretrainer saved as a training checkpoint, exported by the CLI."""
    base = tmp_path_factory.mktemp("export")
    config = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000, num_hidden_layers=2)  # a group each
    model = AlbertPretrainer(config)
    run_dir = base / "run"
    run_dir.mkdir()
    tf.train.Checkpoint(model=model).write(str(run_dir / "ckpt-7"))
    with open(run_dir / "checkpoint", "w") as f:
        f.write('model_checkpoint_path: "ckpt-7"\n')
    config_file = str(base / "albert_config.json")
    config.to_json_file(config_file)
    path = str(base / "hub")
    from absl import flags

    from albert_tf import export_tfhub

    values = flags.FlagValues()  # the command's own flags, run in this process (TensorFlow is up already)
    export_tfhub.define_flags(values)
    values(["export_tfhub", f"--albert_config_file={config_file}", f"--checkpoint={run_dir}",
            f"--spm_model_file={spm_model}", f"--export_path={path}", f"--seq_length={SEQ}"])
    export_tfhub.run(values)
    return {"path": path, "model": model, "config": config, "base": base, "config_file": config_file,
            "run_dir": run_dir}


@pytest.fixture(scope="module")
def loaded(exported):
    """The fixture's encoder and preprocessing SavedModels, each loaded once for the module
    (the tests read them; none changes a variable)."""
    return {name: tf.saved_model.load(os.path.join(exported["path"], name)) for name in ("encoder", "preprocess")}


@pytest.fixture(scope="module")
def pretrained_xla(exported, spm_model, tmp_path_factory):
    """One export serving two tests: the CLI (`export_tfhub.run`) with --checkpoint an albert_tf
    pretrained directory (pretrainer.weights.h5: another model's weights than the fixture's),
    --jit_compile and --nowith_mlm. Returns the path the command returned, the path asked
    for, and the model whose weights it exported."""
    from absl import flags

    from albert_tf import export_tfhub

    base = tmp_path_factory.mktemp("pretrained_xla")
    model = AlbertPretrainer(exported["config"])
    rng = np.random.default_rng(3)
    for v in model.weights:
        v.assign(np.asarray(v) + rng.normal(scale=0.01, size=v.shape).astype("float32"))
    model.save_pretrained(str(base / "pretrained"))
    target = str(base / "hub")
    values = flags.FlagValues()  # the command's own flags, run in this process (TensorFlow is up already)
    export_tfhub.define_flags(values)
    values(["export_tfhub", f"--albert_config_file={exported['config_file']}", f"--checkpoint={base / 'pretrained'}",
            f"--spm_model_file={spm_model}", f"--export_path={target}", f"--seq_length={SEQ}", "--jit_compile",
            "--nowith_mlm"])
    return {"path": export_tfhub.run(values), "target": target, "model": model}


def _inputs(config, batch=3, length=SEQ, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, config.vocab_size, (batch, length)).astype("int32")
    mask = np.ones((batch, length), "int32")
    mask[1, 20:] = 0
    ids[1, 20:] = 0
    types = np.zeros((batch, length), "int32")
    types[:, 10:] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types * mask}


def test_encoder_contract_and_outputs(exported, loaded):
    obj = loaded["encoder"]
    model, config = exported["model"], exported["config"]
    inputs = _inputs(config)
    out = obj(inputs, training=False)
    assert set(out) == {"pooled_output", "sequence_output", "encoder_outputs", "default"}
    assert len(out["encoder_outputs"]) == config.num_hidden_layers
    np.testing.assert_array_equal(out["default"], out["pooled_output"])
    expected = model.encoder(inputs, training=False)
    np.testing.assert_allclose(out["sequence_output"], expected["sequence_output"], atol=1e-5)
    np.testing.assert_allclose(out["pooled_output"], expected["pooled_output"], atol=1e-5)
    assert len(obj.variables) == len(model.encoder.weights)
    assert len(obj.trainable_variables) == len(model.encoder.trainable_weights)
    assert list(obj.regularization_losses) == []
    # dropout acts only with training=True
    again = obj(inputs, training=False)
    np.testing.assert_array_equal(out["sequence_output"], again["sequence_output"])
    trained = obj(inputs, training=True)
    assert np.abs(trained["sequence_output"].numpy() - out["sequence_output"].numpy()).max() > 1e-3
    # the flat serving signature
    flat = obj.signatures["serving_default"](**{k: tf.constant(v) for k, v in inputs.items()})
    np.testing.assert_allclose(flat["pooled_output"], out["pooled_output"], atol=1e-6)
    assert f"encoder_outputs_{config.num_hidden_layers - 1}" in flat


def test_mlm_sub_object(exported, loaded):
    obj = loaded["encoder"]
    model, config = exported["model"], exported["config"]
    inputs = _inputs(config)
    inputs["masked_lm_positions"] = np.array([[1, 2, 5], [3, 4, 19], [0, 7, 31]], "int32")
    logits = obj.mlm(inputs, training=False)["mlm_logits"]
    np.testing.assert_allclose(logits, model(inputs, training=False)["mlm_logits"], atol=1e-5)
    head_shapes = sorted(tuple(v.shape) for v in obj.mlm.trainable_variables)
    root_shapes = sorted(tuple(v.shape) for v in obj.trainable_variables)
    assert len(obj.mlm.trainable_variables) == len(obj.trainable_variables) + 5  # transform, LN, output_bias
    assert (config.vocab_size,) in head_shapes and (config.vocab_size,) not in root_shapes
    # fine-tuning the loaded .mlm trains every variable it lists: each listed variable is the
    # one the function reads, with the Keras model's gradient (the masked-LM output bias once
    # had a listed copy apart from the one read: no gradient)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(obj.mlm(inputs, training=False)["mlm_logits"]))
    grads = tape.gradient(loss, obj.mlm.trainable_variables)
    with tf.GradientTape() as tape:
        expected_loss = tf.reduce_sum(tf.square(model(inputs, training=False)["mlm_logits"]))
    encoder_weights = model.encoder.trainable_weights
    weights = encoder_weights + [w for w in model.masked_lm_head.trainable_weights
                                 if all(w is not e for e in encoder_weights)]  # the listed order
    # the pooler is not on the logits' path: None from Keras, zeros through the loaded function
    expected = [np.zeros(w.shape, "float32") if g is None else tf.convert_to_tensor(g).numpy()
                for w, g in zip(weights, tape.gradient(expected_loss, weights))]
    assert [v.name for v, g in zip(obj.mlm.trainable_variables, grads) if g is None] == []
    scale = max(np.abs(g).max() for g in expected)  # the key biases' true gradient is 0: rounding alone
    for variable, weight, grad, reference in zip(obj.mlm.trainable_variables, weights, grads, expected, strict=True):
        assert variable.shape == weight.shape, (variable.name, weight.path)
        np.testing.assert_allclose(tf.convert_to_tensor(grad), reference, rtol=1e-3, atol=1e-6 * scale,
                                   err_msg=weight.path)
    [bias] = [i for i, v in enumerate(obj.mlm.trainable_variables) if v.shape == (config.vocab_size,)]
    assert np.abs(expected[bias]).max() > 1e-3 * scale  # the output bias' gradient was compared, not 0 with 0


def test_assets_and_no_machine_paths(exported, spm_model):
    encoder_dir = os.path.join(exported["path"], "encoder")
    assets = sorted(os.listdir(os.path.join(encoder_dir, "assets")))
    assert assets == ["albert_config.json", "spm.model"]
    assert AlbertConfig.from_json_file(os.path.join(encoder_dir, "assets", "albert_config.json")) == exported["config"]
    with open(spm_model, "rb") as f:
        assert open(os.path.join(encoder_dir, "assets", "spm.model"), "rb").read() == strip_machine_paths(f.read())
    for name in ("encoder", "preprocess"):
        pb = open(os.path.join(exported["path"], name, "saved_model.pb"), "rb").read()
        for path in (str(exported["base"]), os.path.dirname(spm_model), "/tmp/"):
            assert path.encode() not in pb, (name, path)
    assert not [p for p in os.listdir(exported["base"]) if ".tmp-" in p or ".old-" in p]


def test_the_export_records_what_made_it_in_its_marker(exported, spm_model):
    """export_tfhub's record (command, flags as given, versions, source state, device,
    resolved dtype policy) is the "made_by" of the export's marker: no file is added to the
    export, and the encoder's assets/albert_config.json stays the model's config alone."""
    import json

    from made_by import check_made_by

    from albert_tf.storage import outputs

    assert sorted(os.listdir(exported["path"])) == [outputs.MARKER, "encoder", "preprocess"]
    marker = json.load(open(os.path.join(exported["path"], outputs.MARKER)))
    assert marker["kind"] == outputs.EXPORT
    check_made_by(marker["made_by"], "export_tfhub", {
        "albert_config_file": exported["config_file"], "checkpoint": str(exported["run_dir"]),
        "spm_model_file": spm_model, "export_path": exported["path"], "seq_length": SEQ, "with_mlm": True,
        "jit_compile": False, "dtype_policy": "float32"}, dtype_policy="float32")
    config = json.load(open(os.path.join(exported["path"], "encoder", "assets", "albert_config.json")))
    assert config == json.load(open(exported["config_file"]))


def test_preprocessing_gives_the_data_tool_ids(loaded, spm_model, sample_corpus):
    pre = loaded["preprocess"]
    tok = SentencePieceTokenizer(spm_model)
    lines = [l for l in open(sample_corpus, encoding="utf-8").read().splitlines() if l][:300]
    lines += ["Crème brûlée at the  Café\u00a0NOÑO", "``Quoted'' text\twith\ttabs", "Ünïcödé ÀÉÎ çà"]
    ragged = pre.tokenize(tf.constant(lines))
    for line, ids in zip(lines, ragged.to_list()):
        assert ids == tok.encode(line), line
    packed = pre(tf.constant(lines[:4]))
    assert packed["input_word_ids"].shape == (4, SEQ) and packed["input_word_ids"].dtype == tf.int32
    # the signature states its length (the packing is one function called with it)
    outputs = pre.signatures["serving_default"].structured_outputs
    assert {k: v.shape.as_list() for k, v in outputs.items()} == {k: [None, SEQ] for k in packed}
    for row, line in enumerate(lines[:4]):
        ids = [tok.cls_id] + tok.encode(line)[: SEQ - 2] + [tok.sep_id]
        expected = ids + [0] * (SEQ - len(ids))
        assert packed["input_word_ids"][row].numpy().tolist() == expected
        assert packed["input_mask"][row].numpy().sum() == len(ids)


def test_bert_pack_inputs_round_robin(loaded):
    pre = loaded["preprocess"]
    a = tf.ragged.constant([[10, 11, 12, 13, 14, 15, 16, 17, 18], [20, 21]], dtype=tf.int32)
    b = tf.ragged.constant([[30, 31, 32, 33, 34, 35, 36, 37], [40, 41, 42]], dtype=tf.int32)
    packed = pre.bert_pack_inputs([a, b], seq_length=tf.constant(12))
    ids = packed["input_word_ids"].numpy().tolist()
    # 12 - 3 specials = 9 tokens, taken alternately: 5 from A, 4 from B
    assert ids[0] == [2, 10, 11, 12, 13, 14, 3, 30, 31, 32, 33, 3]
    assert ids[1] == [2, 20, 21, 3, 40, 41, 42, 3, 0, 0, 0, 0]
    assert packed["input_type_ids"].numpy().tolist()[1] == [0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0]
    single = pre.bert_pack_inputs([a])
    assert single["input_word_ids"].shape[1] == 128  # the traced default


@pytest.mark.learning
def test_hub_keras_layer_fine_tunes_in_tf_keras(exported, sample_corpus, spm_model, tmp_path, learning):
    import tensorflow_hub as hub
    import tf_keras

    # the module's float32 export; a forced mixed_bfloat16: the same model exported computing in it
    path = learning.hub_export(exported["path"], exported["model"], spm_model, tmp_path / "hub", SEQ)
    lines = [l for l in open(sample_corpus, encoding="utf-8").read().splitlines() if len(l.split()) > 4][:256]
    labels = np.array([1 if "return" in l.lower() else 0 for l in lines], "int32")
    text = tf_keras.layers.Input(shape=(), dtype=tf.string)
    encoder_layer = hub.KerasLayer(os.path.join(path, "encoder"), trainable=True)
    preprocess_layer = hub.KerasLayer(os.path.join(path, "preprocess"))
    encoded = encoder_layer(preprocess_layer(text))
    logits = tf_keras.layers.Dense(2)(encoded["pooled_output"])
    model = tf_keras.Model(text, logits)
    assert len(encoder_layer.trainable_weights) == len(exported["model"].encoder.trainable_weights)
    before = [w.numpy().copy() for w in encoder_layer.trainable_weights]
    probe = preprocess_layer(tf.constant(lines[:8]))
    output_before = encoder_layer(probe)["pooled_output"].numpy()
    model.compile(tf_keras.optimizers.Adam(1e-3),
                  tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(tf.constant(lines), labels, epochs=4, batch_size=32, verbose=0)
    losses = history.history["loss"]
    learning.record("loss_drop", losses[0] - losses[-1], 0.0, "higher", strict=True)
    assert losses[-1] < losses[0]
    changed = sum(not np.array_equal(b, w.numpy()) for b, w in zip(before, encoder_layer.trainable_weights))
    assert changed == len(before)
    # the weights that moved are the ones the encoder computes with
    assert np.abs(encoder_layer(probe)["pooled_output"].numpy() - output_before).max() > 1e-3


def _keras3_finetune(layer_factory, path, config):
    import keras

    inputs = {k: keras.Input(shape=(SEQ,), dtype="int32", name=k) for k in
              ("input_word_ids", "input_mask", "input_type_ids")}
    encoder = layer_factory(os.path.join(path, "encoder"))
    pooled = encoder(inputs)["pooled_output"]
    model = keras.Model(inputs, keras.layers.Dense(2)(pooled))
    data = _inputs(config, batch=32, seed=4)
    labels = (data["input_word_ids"][:, 1] % 2).astype("int32")
    model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = [np.asarray(w).copy() for w in encoder.trainable_weights]
    output_before = np.asarray(encoder(data)["pooled_output"])
    history = model.fit(data, labels, epochs=5, batch_size=16, verbose=0)
    after = [np.asarray(w) for w in encoder.trainable_weights]
    # the weights that moved are the ones the encoder computes with
    assert np.abs(np.asarray(encoder(data)["pooled_output"]) - output_before).max() > 1e-3
    return encoder, history.history["loss"], before, after


@pytest.mark.learning
def test_tfsm_layer_inference_and_adam_fine_tuning(exported, spm_model, tmp_path, learning):
    import keras

    from albert_tf.export.keras3 import EncoderTFSMLayer

    path, config, model = exported["path"], exported["config"], exported["model"]
    inputs = _inputs(config)
    plain = keras.layers.TFSMLayer(os.path.join(path, "encoder"), call_endpoint="serve")
    np.testing.assert_allclose(plain(inputs)["pooled_output"], model.encoder(inputs)["pooled_output"], atol=1e-5)

    # Plain TFSMLayer: the restored names keep ':0' and Adam cannot name its slots.
    with pytest.raises(ValueError, match=":0"):
        _keras3_finetune(lambda p: keras.layers.TFSMLayer(p, call_endpoint="serve", call_training_endpoint="train",
                                                          trainable=True), path, config)
    # fine-tuned: the module's float32 export; a forced mixed_bfloat16: the same model exported computing in it
    tuned = learning.hub_export(path, model, spm_model, tmp_path / "hub", SEQ)
    encoder, losses, before, after = _keras3_finetune(lambda p: EncoderTFSMLayer(p, trainable=True), tuned, config)
    assert all(":" not in w.name for w in encoder.weights)
    learning.record("loss_drop", losses[0] - losses[-1], 0.0, "higher", strict=True)
    assert losses[-1] < losses[0]
    assert sum(not np.array_equal(b, a) for b, a in zip(before, after)) == len(before)


def test_mixed_bfloat16_export_keeps_the_float32_contract_and_fine_tunes(exported, spm_model, tmp_path):
    """export_tfhub --dtype_policy=mixed_bfloat16: the encoder computes in bf16 (its graph has
    bf16 matmuls), its signatures still take int32 and return float32, its variables are
    float32, it loads with hub.KerasLayer and TFSMLayer and fine-tunes."""
    import keras
    import tensorflow_hub as hub
    import tf_keras

    from albert_tf.export_tfhub import export

    path = export(exported["config_file"], str(exported["run_dir"]), spm_model, str(tmp_path / "bf16"),
                  seq_length=SEQ, dtype_policy="mixed_bfloat16", with_mlm=False)  # (the .mlm is not looked at)
    loaded = tf.saved_model.load(os.path.join(path, "encoder"))
    signature = loaded.signatures["serving_default"]
    assert all(spec.dtype == tf.int32 for spec in signature.structured_input_signature[1].values())
    inputs = _inputs(exported["config"])
    outputs = signature(**{k: tf.constant(v) for k, v in inputs.items()})
    assert {v.dtype for v in outputs.values()} == {tf.float32}
    assert all(v.dtype == tf.float32 for v in loaded.variables)
    bf16_matmuls = [node.op for f in signature.graph.as_graph_def().library.function for node in f.node_def
                    if node.op in ("MatMul", "BatchMatMulV2") and node.attr["T"].type == tf.bfloat16.as_datatype_enum]
    assert len(bf16_matmuls) >= 4, bf16_matmuls
    reference = exported["model"].encoder(inputs, training=False)["pooled_output"]
    np.testing.assert_allclose(outputs["pooled_output"], reference, atol=0.05)  # bf16 rounding, same weights
    assert np.abs(outputs["pooled_output"].numpy() - reference).max() > 0  # and it really is not float32

    layer = keras.layers.TFSMLayer(os.path.join(path, "encoder"), call_endpoint="serve")
    # the same bf16 graph through another endpoint: oneDNN may fuse its matmuls, bias and GELU
    # differently there, so outputs agree to bf16 rounding (one bf16 step at 0.03 is 1.2e-4)
    np.testing.assert_allclose(layer(inputs)["pooled_output"], outputs["pooled_output"], atol=2e-3)
    encoder_layer = hub.KerasLayer(os.path.join(path, "encoder"), trainable=True)
    text = tf_keras.layers.Input(shape=(), dtype=tf.string)
    logits = tf_keras.layers.Dense(2)(encoder_layer(hub.KerasLayer(os.path.join(path, "preprocess"))(text))
                                      ["pooled_output"])
    model = tf_keras.Model(text, logits)
    before = [w.numpy().copy() for w in encoder_layer.trainable_weights]
    model.compile(tf_keras.optimizers.Adam(1e-3), tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    sentences = tf.constant(["the cat sat on the mat", "numbers add up", "a thread waits", "the socket closed"] * 4)
    history = model.fit(sentences, np.array([0, 1, 0, 1] * 4), epochs=2, batch_size=8, verbose=0)
    assert all(np.isfinite(history.history["loss"]))
    assert all(w.dtype == tf.float32 for w in encoder_layer.trainable_weights)
    assert sum(not np.array_equal(b, w.numpy()) for b, w in zip(before, encoder_layer.trainable_weights)) == len(before)


def _xla_functions(concrete):
    return [f.signature.name for f in concrete.graph.as_graph_def().library.function
            if "_XlaMustCompile" in f.attr and f.attr["_XlaMustCompile"].b]


def test_jit_compile_export_serves_through_xla_with_the_same_outputs(exported, loaded, pretrained_xla):
    """export_tfhub --jit_compile: `serving_default` and `serve` run the encoder as an XLA
    program (marked in the SavedModel's function library, so the loading process compiles
    it), at any [B, T] with the same outputs; the default export has no XLA function."""
    import keras

    path = pretrained_xla["path"]  # exported by the CLI with --jit_compile
    default = loaded["encoder"]
    loaded = tf.saved_model.load(os.path.join(path, "encoder"))
    signature = loaded.signatures["serving_default"]
    assert _xla_functions(signature)
    assert not _xla_functions(default.signatures["serving_default"])
    model = pretrained_xla["model"]
    for batch, length in ((3, SEQ), (2, 16)):  # one compile per shape, any shape
        inputs = _inputs(exported["config"], batch=batch, length=length)
        expected = model.encoder(inputs, training=False)
        flat = signature(**{k: tf.constant(v) for k, v in inputs.items()})
        np.testing.assert_allclose(flat["pooled_output"], expected["pooled_output"], atol=1e-5)
        np.testing.assert_allclose(flat["sequence_output"], expected["sequence_output"], atol=1e-5)
    layer = keras.layers.TFSMLayer(os.path.join(path, "encoder"), call_endpoint="serve")
    np.testing.assert_allclose(layer(inputs)["pooled_output"], expected["pooled_output"], atol=1e-5)
    with tf.GradientTape() as tape:  # the XLA program differentiates (plain TFSMLayer trains through `serve`)
        loss = tf.reduce_sum(loaded.serve({k: tf.constant(v) for k, v in inputs.items()})["pooled_output"] ** 2)
    grads = tape.gradient(loss, loaded.trainable_variables)
    assert all(g is not None and np.abs(tf.convert_to_tensor(g).numpy()).max() > 0 for g in grads)
    # the root __call__ (what hub.KerasLayer fine-tunes) is the plain graph, dropout still on in training
    trained = loaded(inputs, training=True)["pooled_output"].numpy()
    assert np.abs(trained - expected["pooled_output"].numpy()).max() > 1e-4


def _tree(path):
    """relative path -> bytes of every file under `path`."""
    out = {}
    for directory, _, files in os.walk(path):
        for name in files:
            full = os.path.join(directory, name)
            out[os.path.relpath(full, path)] = open(full, "rb").read()
    return out


def test_export_is_atomic(exported, spm_model, monkeypatch):
    from albert_tf.export import exporter

    target = str(exported["base"] / "atomic")
    shutil.copytree(exported["path"], target)  # a previous export (the fixture's, written by the same code)
    first = _tree(target)
    assert {"encoder/saved_model.pb", "preprocess/saved_model.pb"} <= set(first)
    real_save = tf.saved_model.save
    calls = []

    def failing_save(obj, path, **kwargs):
        calls.append(path)
        if path.endswith("preprocess"):
            raise RuntimeError("simulated crash while writing")
        return real_save(obj, path, **kwargs)

    monkeypatch.setattr(exporter.tf.saved_model, "save", failing_save)
    with pytest.raises(RuntimeError, match="simulated crash"):
        exporter.export_tfhub(exported["model"], spm_model, target, seq_length=SEQ)
    assert len(calls) == 2 and not calls[0].startswith(target + os.sep)  # written beside, not into, the target
    assert _tree(target) == first  # the previous export is intact, byte for byte
    assert not [p for p in os.listdir(exported["base"]) if ".tmp-" in p or ".old-" in p]
    monkeypatch.undo()
    obj = tf.saved_model.load(os.path.join(target, "encoder"))
    inputs = _inputs(exported["config"])
    np.testing.assert_allclose(obj(inputs, training=False)["pooled_output"],
                               exported["model"].encoder(inputs, training=False)["pooled_output"], atol=1e-5)


def test_export_from_a_pretrained_directory(exported, pretrained_xla):
    """--checkpoint may be an albert_tf pretrained directory (pretrainer.weights.h5, e.g. a
    converted release): loaded through storage.checkpoints.load_init_checkpoint."""
    path, model = pretrained_xla["path"], pretrained_xla["model"]
    assert path == pretrained_xla["target"]
    obj = tf.saved_model.load(os.path.join(path, "encoder"))
    inputs = _inputs(exported["config"])
    np.testing.assert_allclose(obj(inputs, training=False)["pooled_output"],
                               model.encoder(inputs, training=False)["pooled_output"], atol=1e-5)
    assert not hasattr(obj, "mlm")


def test_cli_errors(exported, spm_model, tmp_path):
    other = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000, hidden_size=48, num_attention_heads=4)
    other_file = str(tmp_path / "other.json")
    other.to_json_file(other_file)
    cases = [
        ([f"--albert_config_file={exported['config_file']}"], "--checkpoint is required"),
        ([f"--albert_config_file={other_file}", f"--checkpoint={exported['run_dir']}", f"--spm_model_file={spm_model}",
          f"--export_path={tmp_path}/x"], "shape mismatches"),
        ([f"--albert_config_file={exported['config_file']}", f"--checkpoint={tmp_path}/none",
          f"--spm_model_file={spm_model}", f"--export_path={tmp_path}/x"],
         f"--checkpoint={tmp_path}/none: no checkpoint there"),
        ([f"--albert_config_file={exported['config_file']}", f"--checkpoint={exported['run_dir']}",
          f"--spm_model_file={spm_model}", f"--export_path={tmp_path}/afile"],
         f"--export_path={tmp_path}/afile exists and is not a directory"),
        ([f"--albert_config_file={tmp_path}/missing.json", f"--checkpoint={exported['run_dir']}",
          f"--spm_model_file={spm_model}", f"--export_path={tmp_path}/x"], f"{tmp_path}/missing.json"),
        ([f"--albert_config_file={exported['config_file']}", f"--checkpoint={exported['run_dir']}",
          f"--spm_model_file={spm_model}", f"--export_path={tmp_path}/x", "--dtype_policy=bf16"],
         "--dtype_policy='bf16' is not one of auto, float32, mixed_bfloat16"),
    ]
    (tmp_path / "afile").write_text("keep me")
    from albert_tf import export_tfhub

    results = [run_in_process(export_tfhub, args) for args, _ in cases]
    for (args, message), result in zip(cases, results, strict=True):
        assert result.returncode == 2 and "export_tfhub: error: " in result.stderr, result.stderr[-2000:]
        assert message in result.stderr, result.stderr[-2000:]
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "x").exists() and (tmp_path / "afile").read_text() == "keep me"
