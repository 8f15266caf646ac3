import ast
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertEncoder, AlbertPretrainer
from albert_tf.modeling import losses, pretrained
from albert_tf.storage import atomic
from conftest import random_inputs
from harness import check_config_round_trip, check_saved_model_round_trip, to_numpy


def _batch(config, batch=3, length=12, predictions=4, seed=0):
    inputs = random_inputs(config, batch=batch, length=length, seed=seed)
    rng = np.random.default_rng(seed)
    inputs["masked_lm_positions"] = np.sort(rng.integers(1, 3, (batch, predictions)), axis=1).astype("int32")
    return inputs


def _layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def test_outputs_and_tied_masked_lm_head(tiny_config):
    config = tiny_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = AlbertPretrainer(config)
    batch = _batch(config)
    outputs = to_numpy(model(batch))
    assert outputs["mlm_logits"].shape == (3, 4, config.vocab_size)
    assert outputs["sop_logits"].shape == (3, 2)

    head = model.masked_lm_head
    assert head.embeddings.word_embeddings is model.encoder.embeddings.word_embeddings
    tables = [v for v in model.weights if tuple(v.shape) == (config.vocab_size, config.embedding_size)]
    assert len(tables) == 1  # one [V, E] table: the head has no copy of its own

    # the head's formula on the encoder's sequence output, in NumPy
    seq = to_numpy(model.encoder({k: batch[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}))
    gathered = np.take_along_axis(seq["sequence_output"], batch["masked_lm_positions"][..., None], axis=1)
    x = gathered @ np.asarray(head.transform.kernel) + np.asarray(head.transform.bias)
    x = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    x = _layer_norm(x, np.asarray(head.transform_layer_norm.gamma), np.asarray(head.transform_layer_norm.beta))
    logits = x @ np.asarray(model.encoder.embeddings.word_embeddings).T + np.asarray(head.output_bias)
    np.testing.assert_allclose(outputs["mlm_logits"], logits, atol=1e-4)

    sop = model.sentence_order_head
    expected = seq["pooled_output"] @ np.asarray(sop.output_weights).T + np.asarray(sop.output_bias)
    np.testing.assert_allclose(outputs["sop_logits"], expected, atol=1e-5)
    assert tuple(sop.output_weights.shape) == (2, config.hidden_size)


def test_mlm_gradient_reaches_the_tied_embeddings(tiny_config):
    model = AlbertPretrainer(tiny_config)
    batch = _batch(tiny_config)
    labels = {
        "masked_lm_ids": np.full((3, 4), 7, "int32"),
        "masked_lm_weights": np.ones((3, 4), "float32"),
        "next_sentence_labels": np.zeros((3, 1), "int32"),
    }
    table = model.encoder.embeddings.word_embeddings
    with tf.GradientTape() as tape:
        outputs = model(batch, training=True)
        terms = losses.pretraining_terms(outputs["mlm_logits"], outputs["sop_logits"], labels["masked_lm_ids"],
                                         labels["masked_lm_weights"], labels["next_sentence_labels"])
        loss = losses.pretraining_loss(terms, 12.0, 3)
    grad = tf.convert_to_tensor(tape.gradient(loss, table))
    # row 7 is every target: the tied output projection must give it gradient
    assert np.abs(grad.numpy()[7]).sum() > 0
    assert np.abs(grad.numpy()).sum() > 0


def test_config_and_keras_save_round_trip(tiny_config, tmp_path):
    model = AlbertPretrainer(tiny_config)
    rebuilt = check_config_round_trip(model)
    assert rebuilt.config == tiny_config
    restored = check_saved_model_round_trip(model, _batch(tiny_config), str(tmp_path))
    assert restored.masked_lm_head.embeddings.word_embeddings is restored.encoder.embeddings.word_embeddings


def test_variable_prediction_counts_and_lengths(tiny_config):
    model = AlbertPretrainer(tiny_config)
    for length, predictions in ((8, 1), (20, 5), (64, 20)):
        outputs = model(_batch(tiny_config, length=length, predictions=predictions))
        assert outputs["mlm_logits"].shape == (3, predictions, tiny_config.vocab_size)


def test_no_keras_metrics_override():
    # the pretraining metrics live in albert_tf.modeling.losses only; Keras' own
    # Model.compute_metrics is not replaced by a function of another signature
    assert AlbertPretrainer.compute_metrics is keras.Model.compute_metrics


# --- pretrained directories ------------------------------------------------------------


def _same_weights(a, b):
    assert len(a.weights) == len(b.weights)
    for x, y in zip(a.weights, b.weights, strict=True):
        assert x.path == y.path
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=x.path)


def _randomize(model, seed):
    rng = np.random.default_rng(seed)
    for v in model.weights:
        v.assign(rng.normal(size=v.shape).astype("float32"))
    return model


def test_each_class_names_its_weights_file():
    assert AlbertEncoder.WEIGHTS_FILE == pretrained.ENCODER_WEIGHTS == "encoder.weights.h5"
    assert AlbertPretrainer.WEIGHTS_FILE == pretrained.PRETRAINER_WEIGHTS == "pretrainer.weights.h5"
    assert AlbertPretrainer.SUBMODELS == {"encoder": "encoder.weights.h5"}


def test_pretrainer_directory_round_trip(tiny_config, tmp_path):
    model = _randomize(AlbertPretrainer(tiny_config), 1)
    directory = tmp_path / "pretrained"
    model.save_pretrained(directory)
    assert sorted(os.listdir(directory)) == ["albert_config.json", "model.json", "pretrainer.weights.h5"]
    loaded = AlbertPretrainer.from_pretrained(directory)
    assert loaded.config == tiny_config
    _same_weights(model, loaded)
    # an encoder out of the pretrainer's weights
    encoder = AlbertEncoder.from_pretrained(directory)
    assert isinstance(encoder, AlbertEncoder)
    _same_weights(model.encoder, encoder)


def test_encoder_directory_round_trip_and_errors(tiny_config, tmp_path):
    encoder = _randomize(AlbertEncoder(tiny_config), 2)
    directory = tmp_path / "enc"
    encoder.save_pretrained(directory)
    assert sorted(os.listdir(directory)) == ["albert_config.json", "encoder.weights.h5", "model.json"]
    _same_weights(encoder, AlbertEncoder.from_pretrained(directory))
    with pytest.raises(ValueError, match=r"no pretrainer.weights.h5 \(only encoder.weights.h5: the source had no "
                                         r"pretraining heads\)"):
        AlbertPretrainer.from_pretrained(directory)
    os.remove(directory / "encoder.weights.h5")
    with pytest.raises(ValueError, match=r"enc: neither encoder.weights.h5 nor pretrainer.weights.h5\.$"):
        AlbertEncoder.from_pretrained(directory)
    with pytest.raises(ValueError, match=r"enc: no pretrainer.weights.h5\.$"):
        AlbertPretrainer.from_pretrained(directory)
    with pytest.raises(ValueError, match="no albert_config.json"):
        AlbertEncoder.from_pretrained(tmp_path / "nothing")


def test_save_pretrained_is_atomic(tiny_config, tmp_path, monkeypatch):
    directory = tmp_path / "out"
    first = _randomize(AlbertEncoder(tiny_config), 3)
    first.save_pretrained(directory)
    before = {name: (directory / name).read_bytes() for name in os.listdir(directory)}

    # the weights go through atomic.output_path (a temporary name, renamed at the end)
    seen = []
    real_output_path = atomic.output_path

    def spy(path):
        seen.append(os.path.basename(path))
        return real_output_path(path)

    monkeypatch.setattr(atomic, "output_path", spy)
    second = _randomize(AlbertEncoder(tiny_config), 4)

    # a writer that dies half way leaves the previous file and no temporary behind
    def broken_save_weights(path):
        with open(path, "wb") as f:
            f.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(second, "save_weights", broken_save_weights)
    with pytest.raises(OSError, match="disk full"):
        second.save_pretrained(directory)
    assert "encoder.weights.h5" in seen and "albert_config.json" in seen
    assert {name: (directory / name).read_bytes() for name in os.listdir(directory)} == before
    _same_weights(first, AlbertEncoder.from_pretrained(directory))


# --- no import cycles in albert_tf/modeling ---------------------------------------------

MODELING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "albert_tf", "modeling")
PACKAGE = "albert_tf.modeling"


def _import_graph(sources):
    """{module: source} -> {module: set of modules of `sources` it imports}, counting
    function-local imports too. `from PACKAGE import name` imports the submodule `name`
    when there is one, else the package (its __init__)."""
    modules = set(sources)
    graph = {}
    for module, source in sources.items():
        is_package = module == PACKAGE
        here = module if is_package else module.rsplit(".", 1)[0]
        edges = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                    base = f"{parent}.{base}" if base else parent
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            else:
                continue
            for target in targets:
                # `import a.b.c` runs a.b.c (and its parents): the nearest one of ours counts
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    edges.add(target)
        graph[module] = edges
    return graph


def _cycles(graph):
    """Every import cycle, as a list of modules (from a depth-first search)."""
    found, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return found


def _modeling_sources():
    sources = {}
    for name in sorted(os.listdir(MODELING)):
        if name.endswith(".py"):
            module = PACKAGE if name == "__init__.py" else f"{PACKAGE}.{name[:-3]}"
            with open(os.path.join(MODELING, name), encoding="utf-8") as f:
                sources[module] = f.read()
    return sources


def test_the_cycle_check_finds_cycles():
    pkg = PACKAGE
    local = {f"{pkg}.a": "def f():\n    from albert_tf.modeling.b import g\n",
             f"{pkg}.b": "from albert_tf.modeling import a\n", f"{pkg}.c": "import keras\n"}
    assert _cycles(_import_graph(local)) == [[f"{pkg}.a", f"{pkg}.b", f"{pkg}.a"]]
    relative = {pkg: "from .a import x\n", f"{pkg}.a": "from . import thing\n"}  # via the package
    assert _cycles(_import_graph(relative)) == [[pkg, f"{pkg}.a", pkg]]
    assert _cycles(_import_graph({f"{pkg}.a": "from . import b\n", f"{pkg}.b": "import os\n"})) == []


def test_no_import_cycle_in_modeling():
    sources = _modeling_sources()
    assert {f"{PACKAGE}.encoder", f"{PACKAGE}.pretrained", f"{PACKAGE}.pretrainer"} <= set(sources)
    graph = _import_graph(sources)
    assert f"{PACKAGE}.pretrained" in graph[f"{PACKAGE}.encoder"]  # the graph sees the imports
    assert _cycles(graph) == []
    # and the model code imports no TensorFlow
    for module, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] == "tensorflow" for n in names), module
