"""Mixed precision (albert_tf.training.precision): what `auto` picks on which hardware, bad
values, float32 variables and float32 islands (heads, logits, losses) under mixed_bfloat16,
checkpoints that cross policies, and fine-tuning results that do not move."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.training import precision
from albert_tf.training.precision import check_policy, choose, policy_scope

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TOPICS = os.path.join(ROOT, "notebooks", "data", "docstring_topics")


def _cpuinfo(tmp_path, flags):
    path = tmp_path / f"cpuinfo-{len(flags)}"
    path.write_text("processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse2 avx2 " + " ".join(flags) + "\n")
    return str(path)


def test_auto_follows_the_hardware(tmp_path):
    plain, bf16 = _cpuinfo(tmp_path, []), _cpuinfo(tmp_path, ["avx512f", "avx512_bf16"])
    amx = _cpuinfo(tmp_path, ["amx_tile", "amx_bf16"])
    for cpuinfo, policy in ((plain, "float32"), (bf16, "mixed_bfloat16"), (amx, "mixed_bfloat16")):
        chosen = choose("auto", cpuinfo=cpuinfo, gpus=[])
        assert chosen.policy == policy and chosen.requested == "auto", chosen
        assert "Test CPU 9000" in chosen.hardware and chosen.reason.startswith("auto: ")
    assert "none of avx512_bf16, amx_bf16" in choose("auto", cpuinfo=plain, gpus=[]).hardware
    # GPUs decide when there are any: compute capability 8.0 (A100) and later compute bf16 natively
    assert choose("auto", cpuinfo=bf16, gpus=[("T4", (7, 5))]).policy == "float32"
    chosen = choose("auto", cpuinfo=plain, gpus=[("H100", (9, 0)), ("A100", (8, 0))])
    assert chosen.policy == "mixed_bfloat16" and "compute capability 9.0" in chosen.hardware
    # asked for explicitly: as asked, whatever the hardware
    assert choose("float32", cpuinfo=bf16, gpus=[]).policy == "float32"
    assert choose("mixed_bfloat16", cpuinfo=bf16, gpus=[]).native_bf16
    plain_auto = choose("auto", cpuinfo=plain, gpus=[])
    assert plain_auto.as_dict() == {"dtype_policy": "float32", "dtype_policy_requested": "auto",
                                    "dtype_policy_reason": plain_auto.reason, "native_bf16": False,
                                    "hardware": plain_auto.hardware}
    # this machine: what its own /proc/cpuinfo and GPUs say, read here without albert_tf
    assert choose("auto").policy == _this_machines_policy()


def _this_machines_policy():
    """auto's rule applied to this machine, from its /proc/cpuinfo flags line and TensorFlow's
    GPU list (read here, not through albert_tf.training.precision)."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        capabilities = [tf.config.experimental.get_device_details(g).get("compute_capability") for g in gpus]
        return "mixed_bfloat16" if all(c is not None and tuple(c) >= (8, 0) for c in capabilities) else "float32"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        flags = []
    return "mixed_bfloat16" if {"avx512_bf16", "amx_bf16"} & set(flags) else "float32"


def test_bad_values_and_the_one_time_warning(tmp_path, monkeypatch):
    for bad in ("bf16", "float16", ""):
        with pytest.raises(ValueError, match=r"--dtype_policy=.* is not one of auto, float32, mixed_bfloat16"):
            check_policy(bad)
    with pytest.raises(ValueError, match="mixed_float16 needs loss scaling"):
        choose("mixed_float16")
    monkeypatch.setattr(precision, "_warned", set())
    plain = _cpuinfo(tmp_path, [])
    warnings = []
    first = choose("mixed_bfloat16", cpuinfo=plain, gpus=[], warn=warnings.append)
    choose("mixed_bfloat16", cpuinfo=plain, gpus=[], warn=warnings.append)
    assert first.policy == "mixed_bfloat16" and not first.native_bf16 and "slower than float32" in first.reason
    assert len(warnings) == 1 and "no native bf16" in warnings[0] and "Test CPU 9000" in warnings[0]


def test_policy_scope_builds_mixed_models_with_float32_variables_and_islands():
    config = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=300)
    before = keras.config.dtype_policy().name
    with policy_scope("mixed_bfloat16"):
        model = AlbertPretrainer(config)
        from albert_tf.modeling.classifier import AlbertClassifier

        classifier = AlbertClassifier(model.encoder, 3)
    assert keras.config.dtype_policy().name == before  # restored
    assert all(v.dtype == "float32" for v in model.weights)
    rng = np.random.default_rng(0)
    inputs = {"input_word_ids": rng.integers(5, 300, (2, 16)).astype("int32"), "input_mask": np.ones((2, 16), "int32"),
              "input_type_ids": np.zeros((2, 16), "int32"), "masked_lm_positions": np.array([[1, 2], [3, 4]], "int32")}
    encoded = model.encoder({k: v for k, v in inputs.items() if k != "masked_lm_positions"})
    # the matmuls compute in bf16 (test below), the residual stream between them in float32
    assert encoded["sequence_output"].dtype == "float32" and encoded["pooled_output"].dtype == "bfloat16"
    outputs = model(inputs)
    assert outputs["mlm_logits"].dtype == "float32" and outputs["sop_logits"].dtype == "float32"
    assert classifier({k: v for k, v in inputs.items() if k != "masked_lm_positions"}).dtype == "float32"
    # the same weights in float32 give the same logits to bf16 rounding (weights of scale 0.1:
    # at initialization attention is nearly uniform, and a change to it would hardly show)
    full = AlbertPretrainer(config)
    weights = _randomized(model, 0.1)
    model.set_weights(weights)
    full.set_weights(weights)
    outputs = model(inputs)
    assert_close_to_bf16_rounding(np.asarray(full(inputs)["mlm_logits"]), np.asarray(outputs["mlm_logits"]),
                                  "mlm_logits")


BF16_PRECISION = 2.0 ** -8  # bf16's relative rounding error (8 significant bits)


def on_bf16_grid(values):
    """Whether every value is exactly a bf16 number (what a bf16 computation cast to float32 gives)."""
    return np.array_equal(np.asarray(tf.cast(tf.cast(values, tf.bfloat16), tf.float32)), values)


def assert_close_to_bf16_rounding(full, mixed, name, factor=5):
    """`mixed` (a mixed_bfloat16 model's float32 output) equals `full` (the same weights in
    float32) to bf16 rounding: within `factor` bf16 roundings (2^-8 each) of the range the
    values span across the inputs (measured here: 1.1 to 2.6 roundings), where two inputs' values
    typically differ (sqrt(2) standard deviations) by 10 tolerances or more; computed in
    float32 (not all on the bf16 grid, as a head computing in bf16 would give) and not equal to
    float32's (the mixed model does compute in bf16)."""
    assert full.dtype == mixed.dtype == np.float32, name
    assert np.all(np.abs(full) < 1e4), name  # no masked (-1e30) entry: the range is the values'
    tolerance = factor * BF16_PRECISION * float(np.ptp(full))
    error = float(np.abs(full - mixed).max())
    print(f"{name}: max |float32 - mixed_bfloat16| {error:.3g}, tolerance {tolerance:.3g}, "
          f"std across inputs {full.std():.3g}")
    assert np.sqrt(2) * full.std() >= 10 * tolerance, (name, full.std(), tolerance)
    assert error <= tolerance, (name, error, tolerance)
    assert error > 0, name
    assert not on_bf16_grid(mixed), name


def _pretraining(records, out, policy, steps, do_eval=True):
    from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask
    from albert_tf.training.driver import TrainingOptions, train_and_evaluate

    # one layer (one group): what crosses policies is the variables, not the depth; half the graph to trace
    config = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000, num_hidden_layers=1, num_hidden_groups=1)
    task = PretrainingTask(PretrainingOptions(config, list(records), max_seq_length=128, global_batch_size=8,
                                              deterministic=True, random_seed=1, shuffle_buffer_size=100))
    options = TrainingOptions(output_dir=str(out), train_batch_size=8, eval_batch_size=8, num_train_steps=steps,
                              learning_rate=1e-3, optimizer="lamb", save_checkpoints_steps=2, iterations_per_loop=2,
                              max_eval_steps=1, write_curves=False, dtype_policy=policy, do_eval=do_eval)
    return train_and_evaluate(task, options, stream=open(os.devnull, "w"))


def test_checkpoints_cross_policies_and_results_name_the_policy(pretraining_records, tmp_path):
    records, _ = pretraining_records
    first = _pretraining(records, tmp_path, "mixed_bfloat16", 2)
    trainer = first["trainer"]
    assert trainer.model.encoder.compute_dtype == "bfloat16"
    assert all(v.dtype == "float32" for v in trainer.model.weights)
    assert all(v.dtype == "float32" for v in trainer.optimizer.variables if v is not trainer.optimizer.iterations)
    saved = [w.copy() for w in trainer.model.get_weights()]
    results = json.load(open(tmp_path / "eval_results.json"))
    assert results["dtype_policy"] == "mixed_bfloat16" and results["dtype_policy_requested"] == "mixed_bfloat16"
    assert json.load(open(tmp_path / "run_info.json"))["dtype_policy"] == "mixed_bfloat16"

    # a float32 run resumes from the bf16 run's checkpoint with its exact (float32) weights, and back
    second = _pretraining(records, tmp_path, "float32", 4)
    assert second["resumed_from"].endswith("ckpt-2") and second["final_step"] == 4
    assert second["trainer"].model.encoder.compute_dtype == "float32"
    assert json.load(open(tmp_path / "eval_results.json"))["dtype_policy"] == "float32"
    reader = tf.train.load_checkpoint(str(tmp_path / "ckpt-2"))
    names = [n for n, _ in tf.train.list_variables(str(tmp_path / "ckpt-2")) if "word_embeddings" in n
             and "OPTIMIZER" not in n]
    assert names and reader.get_tensor(names[0]).dtype == np.float32
    assert any(np.array_equal(reader.get_tensor(names[0]), w) for w in saved)
    third = _pretraining(records, tmp_path, "mixed_bfloat16", 6, do_eval=False)
    assert third["resumed_from"].endswith("ckpt-4") and third["final_step"] == 6


def _keyword_task(directory):
    """The topic task's real sentences, labelled by whether they hold the word "the": a task
    the tiny random model learns in a few dozen steps (majority class: 59% of dev)."""
    import csv

    os.makedirs(directory, exist_ok=True)
    for split in ("train", "dev"):
        with open(os.path.join(TOPICS, f"{split}.tsv"), encoding="utf-8") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        with open(os.path.join(directory, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n")
            for row in rows:
                label = "yes" if " the " in f" {row['sentence'].lower()} " else "no"
                f.write(f"{row['sentence']}\t{label}\n")
    return str(directory)


@pytest.mark.learning(both_policies=True)
def test_fine_tuning_at_mixed_bfloat16_ends_within_two_points_of_float32(tiny_export, tmp_path, learning):
    """The same classifier fine-tuned from the same weights on the same batches: dev accuracy
    at mixed_bfloat16 within 2 points of float32's (160 steps: both converge; at 80 one seed of
    three ended 19 points apart, at 120 seven: benchmarks/results/learning_checks)."""
    from albert_tf.tasks.classification.data import get_task, read_examples
    from albert_tf.tasks.classification.task import ClassificationOptions, ClassificationTask
    from albert_tf.training.driver import Trainer, TrainingOptions

    data_dir = _keyword_task(tmp_path / "data")
    labels = ["no", "yes"]
    task_def = get_task("tsv", labels=labels, text_a_column="sentence")
    splits = {"train": read_examples(task_def, data_dir, "train"), "dev": read_examples(task_def, data_dir, "dev")}
    accuracy, initial, logits = {}, None, {}
    for policy in ("float32", "mixed_bfloat16"):
        options = ClassificationOptions(task_name="tsv", data_dir=data_dir, output_dir="unused",
                                        init_checkpoint=tiny_export["pretrained"], spm_model_file=tiny_export["spm"],
                                        albert_config_file=os.path.join(tiny_export["pretrained"],
                                                                        "albert_config.json"),
                                        max_seq_length=64, random_seed=learning.seed_or(3), classifier_dropout=0.0,
                                        text_a_column="sentence", labels=labels)
        task = ClassificationTask(options, task_def, splits)
        trainer = Trainer(task, TrainingOptions(output_dir="unused", train_batch_size=32, eval_batch_size=64,
                                                num_train_steps=160, learning_rate=1e-3, optimizer="adamw",
                                                dtype_policy=policy))
        assert trainer.precision.policy == policy
        if initial is None:
            initial = trainer.model.get_weights()
        trainer.model.set_weights(initial)
        trainer.train(iter(task.train_dataset(None, 32, 0)), 160)
        outputs = trainer.per_example_outputs(task.split_dataset("dev", 64), 64)
        accuracy[policy] = float(np.mean(np.argmax(outputs["logits"], -1) == outputs["label"]))
        assert outputs["logits"].dtype == np.float32
        logits[policy] = outputs["logits"]
    print(accuracy)
    # two different runs (the bf16 one did compute in bf16), not one run twice
    assert not np.array_equal(logits["float32"], logits["mixed_bfloat16"])
    learning.record("accuracy", accuracy["float32"], 0.75, "higher", strict=True, policy="float32")
    assert accuracy["float32"] > 0.75, accuracy  # it learned (majority 0.59): the comparison means something
    learning.record("abs_accuracy_difference", abs(accuracy["mixed_bfloat16"] - accuracy["float32"]), 0.02, "lower",
                    policy="both")
    assert abs(accuracy["mixed_bfloat16"] - accuracy["float32"]) <= 0.02, accuracy


def _squad_task(tmp_path, spm_model):
    from tools import make_squad_data

    from albert_tf.tasks.squad.features import convert_examples_to_features, features_to_arrays
    from albert_tf.tasks.squad.reading import read_squad_examples
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.tasks.squad.task import SquadOptions, SquadTask

    path = tmp_path / "train.json"
    path.write_text(json.dumps(make_squad_data.make_dataset("2.0", 24, seed=4, max_context_chars=400)),
                    encoding="utf-8")
    features = convert_examples_to_features(read_squad_examples(str(path), True), SentencePieceTokenizer(spm_model),
                                            max_seq_length=96, doc_stride=48, max_query_length=24, is_training=True)
    cfg = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000)
    cfg.to_json_file(str(tmp_path / "config.json"))
    options = SquadOptions(version="v2", output_dir=str(tmp_path), albert_config_file=str(tmp_path / "config.json"),
                           spm_model_file=spm_model, max_seq_length=96, start_n_top=3, end_n_top=3, do_train=True)
    return SquadTask(options, features_to_arrays(features))


def _race_task(tmp_path, spm_model):
    from tools import make_race_data

    from albert_tf.tasks.race.features import MultipleChoiceSettings, examples_to_arrays
    from albert_tf.tasks.race.reading import read_race
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.tasks.race.task import MultipleChoiceOptions, MultipleChoiceTask

    make_race_data.make_race(tmp_path / "race", num_articles=4, seed=2, layout="files")
    cfg = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000)
    cfg.to_json_file(str(tmp_path / "config.json"))
    settings = MultipleChoiceSettings(max_seq_length=64, max_qa_length=24)
    splits, arrays = {}, {}
    for split in ("train", "dev"):
        splits[split] = read_race(str(tmp_path / "race"), split)
        arrays[split] = examples_to_arrays(splits[split], SentencePieceTokenizer(spm_model), settings)
    options = MultipleChoiceOptions(data_dir=str(tmp_path / "race"), output_dir=str(tmp_path),
                                    albert_config_file=str(tmp_path / "config.json"), spm_model_file=spm_model,
                                    max_seq_length=64, max_qa_length=24)
    return MultipleChoiceTask(options, splits, arrays)


def _randomized(model, scale, seed=1):
    """Known weights of a larger scale than the initializer's (LayerNorm gammas about 1)."""
    rng = np.random.default_rng(seed)
    return [rng.normal(scale=scale, size=v.shape).astype("float32") + (1.0 if "gamma" in v.path else 0.0)
            for v in model.weights]


def _varied_lengths(inputs, lengths):
    """The inputs with sequence r (rows of [B, T] or [B, C, T] flattened) cut to lengths[r % len]
    real positions (input_mask 0 and ids 0 after; p_mask 1 there): [CLS] states that differ."""
    out = {k: np.array(v) for k, v in inputs.items()}
    mask = out["input_mask"].reshape(-1, out["input_mask"].shape[-1])
    for r in range(mask.shape[0]):
        mask[r, lengths[r % len(lengths)]:] = 0
    for k in ("input_word_ids", "input_type_ids"):
        out[k] = out[k] * out["input_mask"]
    if "p_mask" in out:
        out["p_mask"] = np.maximum(out["p_mask"], 1 - out["input_mask"])
    return out


def _first_principal_direction(features):
    """The unit vector along which the rows of `features` [N, H] vary most."""
    centered = features - features.mean(axis=0)
    return np.linalg.svd(centered, full_matrices=False)[2][0]


def _set(model, weights, path, value):
    """weights (model.get_weights()' order): the variable at `path` set to `value`."""
    i = [v.path for v in model.weights].index(path)
    weights[i] = np.asarray(value, "float32").reshape(weights[i].shape)


@pytest.mark.parametrize("kind", ["squad_v2", "race"])
def test_squad_and_race_heads_under_mixed_bfloat16(kind, spm_model, tmp_path):
    """The SQuAD v2 and multiple-choice models built by their tasks at mixed_bfloat16 give, from
    the same weights, float32 outputs equal to float32's to bf16 rounding (training at bf16 goes
    through the same driver step as the pretraining and classification tests above).

    A random model's outputs hardly depend on its input (RACE logits at initialization: a spread
    of 1e-5 across options and questions, below their bf16 error), so the head that reads the
    [CLS] state is set along the direction in which the float32 model's features vary most over
    the batch (RACE: the pooled outputs; SQuAD v2: the answerability layer's features, computed
    here in NumPy), with weights of scale 0.1 (attention far from uniform) and sequences of
    varied lengths: the compared outputs then differ across inputs by far more than bf16's error."""
    task = _squad_task(tmp_path, spm_model) if kind == "squad_v2" else _race_task(tmp_path, spm_model)
    models = {}
    for policy in ("float32", "mixed_bfloat16"):
        with policy_scope(policy):
            models[policy] = task.build_model()
    full = models["float32"]
    if kind == "race":
        batch = next(iter(task.eval_dataset(8)))
        inputs = _varied_lengths({k: np.asarray(batch[k]) for k in ("input_word_ids", "input_mask", "input_type_ids")},
                                 [3, 5, 8, 12, 20, 32, 48, 64])
        weights = _randomized(full, 0.1)
        full.set_weights(weights)
        flat = {k: v.reshape(-1, v.shape[-1]) for k, v in inputs.items()}
        pooled = np.asarray(full.encoder(flat, training=False)["pooled_output"], "float64")  # [B*C, H]
        _set(full, weights, "multiple_choice/output_weights", _first_principal_direction(pooled))
        _set(full, weights, "multiple_choice/output_bias", 0.0)
        keys = ("logits",)
    else:
        batch = next(iter(task.train_dataset(None, 8, 0)))
        inputs = _varied_lengths({k: np.asarray(batch[k]) for k in ("input_word_ids", "input_mask", "input_type_ids",
                                                                   "p_mask")}, [40, 56, 72, 96, 48, 64, 80, 88])
        weights = _randomized(full, 0.1)
        full.set_weights(weights)
        w = {v.path: np.asarray(v, "float64") for v in full.weights}
        x = np.asarray(full.encoder({k: v for k, v in inputs.items() if k != "p_mask"}, training=False)
                       ["sequence_output"], "float64")  # [B, T, H]
        # SquadV2Head's answerability features: tanh(dense_0([softmax(start) . x ; x[:, 0]]))
        p_mask = inputs["p_mask"].astype("float64")
        start = (x @ w["squad_v2/start_logits_dense/kernel"])[..., 0] + w["squad_v2/start_logits_dense/bias"]
        start = start * (1 - p_mask) - 1e30 * p_mask
        start_p = np.exp(start - start.max(-1, keepdims=True))
        start_p /= start_p.sum(-1, keepdims=True)
        features = np.tanh(np.concatenate([np.einsum("bt,bth->bh", start_p, x), x[:, 0]], -1)
                           @ w["squad_v2/answer_class_dense_0/kernel"] + w["squad_v2/answer_class_dense_0/bias"])
        direction = _first_principal_direction(features)
        _set(full, weights, "squad_v2/answer_class_dense_1/kernel", direction)
        keys = ("start_top_log_probs", "cls_logits")
    outputs = {}
    for policy, model in models.items():
        model.set_weights(weights)
        outputs[policy] = {k: np.asarray(v) for k, v in model(inputs, training=False).items()}
    if kind == "squad_v2":  # the features above are the head's: its float32 cls_logits, from NumPy
        np.testing.assert_allclose(outputs["float32"]["cls_logits"], features @ direction, atol=1e-5, rtol=0)
    for key in keys:
        assert_close_to_bf16_rounding(outputs["float32"][key], outputs["mixed_bfloat16"][key], f"{kind} {key}")


def _traced_encoder_graph(encoder, inputs, training=False):
    spec = {k: tf.TensorSpec([None, None], tf.int32) for k in inputs}
    fn = tf.function(lambda x: encoder(x, training=training)["pooled_output"])
    return fn.get_concrete_function(spec).graph


def test_mixed_bfloat16_attention_core_is_float32_and_shared_weights_are_cast_once():
    """Issue 29: under mixed_bfloat16 the attention core (q.k^T and probabilities x values,
    the two rank-4 matmuls) computes in float32, the projections and feed-forward in bf16,
    each weight of the all-shared block is cast to bf16 once per forward, not once per layer,
    and no embedding table is cast whole."""
    from albert_tf.modeling.encoder import AlbertEncoder
    from conftest import random_inputs

    config = AlbertConfig.from_preset("albert_tiny").replace(num_hidden_layers=4, num_hidden_groups=1)
    with policy_scope("mixed_bfloat16"):
        encoder = AlbertEncoder(config)
    inputs = random_inputs(config, batch=2, length=12)
    encoder(inputs)
    for training in (False, True):
        graph = _traced_encoder_graph(encoder, inputs, training)
        ops_ = graph.get_operations()
        core = [op for op in ops_ if op.type in ("BatchMatMulV2", "BatchMatMulV3", "BatchMatMul")]
        assert len(core) == 2 * config.num_hidden_layers, [op.type for op in core]
        assert {op.outputs[0].dtype for op in core} == {tf.float32}
        dense = [op for op in ops_ if op.type == "MatMul" and "/embeddings" not in op.name]  # not the lookups
        assert len(dense) == 6 * config.num_hidden_layers + 2 and {op.outputs[0].dtype for op in dense} == {tf.bfloat16}
        # each of the shared block's six kernels is read and cast once (the embedding projection and
        # the pooler, used once anyway, once each too)
        kernel_casts = [op for op in ops_ if op.type == "Cast" and op.outputs[0].dtype == tf.bfloat16
                        and op.inputs[0].op.type == "ReadVariableOp" and op.inputs[0].shape.rank == 2
                        and "/embeddings" not in op.name]  # the embedding tables: read once anyway
        assert len(kernel_casts) == 6 + 2, len(kernel_casts)
        # the embedding tables are not cast whole: a gather of float32 rows, summed in float32
        table_casts = [op for op in ops_ if op.type == "Cast" and op.inputs[0].op.type == "ReadVariableOp"
                       and "/embeddings" in op.name]
        assert not table_casts, [op.name for op in table_casts]
    # float32: no casts of weights at all, and the same core
    full = AlbertEncoder(config)
    graph = _traced_encoder_graph(full, inputs)
    assert not [op for op in graph.get_operations() if op.type == "Cast" and op.inputs[0].op.type == "ReadVariableOp"]


def test_cast_once_gives_the_per_use_cast_outputs(monkeypatch):
    """The encoder's forward with each weight cast once against the same forward with Keras
    casting each weight at each use (the sub-layers' cast_weights switched off): the same
    bf16 numbers, bit for bit."""
    from albert_tf.modeling.encoder import AlbertEncoder
    from albert_tf.modeling.encoder_block import AlbertAttention, AlbertFeedForward
    from conftest import random_inputs

    config = AlbertConfig.from_preset("albert_tiny").replace(num_hidden_layers=4, num_hidden_groups=1,
                                                             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    with policy_scope("mixed_bfloat16"):
        encoder = AlbertEncoder(config)
    inputs = random_inputs(config, batch=3, length=12)
    once = encoder(inputs, training=False)
    for layer in (AlbertAttention, AlbertFeedForward):
        monkeypatch.setattr(layer, "cast_weights", lambda self, dtype: None)
    per_use = encoder(inputs, training=False)
    # the patched forward is the other path: each shared kernel cast at each of its 4 uses
    graph = _traced_encoder_graph(encoder, inputs)
    kernel_casts = [op for op in graph.get_operations() if op.type == "Cast" and op.outputs[0].dtype == tf.bfloat16
                    and op.inputs[0].op.type == "ReadVariableOp" and op.inputs[0].shape.rank == 2
                    and "/embeddings" not in op.name]
    assert len(kernel_casts) == 6 * config.num_hidden_layers + 2, len(kernel_casts)
    for key in ("sequence_output", "pooled_output"):
        assert once[key].dtype == ("float32" if key == "sequence_output" else "bfloat16")
        np.testing.assert_array_equal(np.asarray(tf.cast(once[key], tf.float32)),
                                      np.asarray(tf.cast(per_use[key], tf.float32)), err_msg=key)


def test_bf16_bias_gradients_are_summed_in_float32():
    """Issue 29: a bf16 bias add's gradient (TensorFlow's BiasAddGrad, what Keras' add of a
    bias vector becomes) was 20% off the sum of its rows here; add_bias accumulates in float32.
    The reference: float64 sums of the same bf16 values. Then the encoder: under
    mixed_bfloat16 every one of its dense layers adds its bias with add_bias."""
    from albert_tf.modeling.encoder import AlbertEncoder
    from albert_tf.modeling.encoder_block import add_bias
    from conftest import random_inputs

    rows, width = 32768, 128
    upstream = tf.cast(np.random.default_rng(0).normal(size=(rows, width)), tf.bfloat16)
    exact = np.asarray(tf.cast(upstream, tf.float64)).sum(axis=0)
    bias = tf.zeros([width], tf.bfloat16)
    for add, most in ((add_bias, 0.004), (keras.ops.add, None)):
        with tf.GradientTape() as tape:
            tape.watch(bias)
            y = add(tf.zeros([rows, width], tf.bfloat16), bias)
        got = np.asarray(tf.cast(tape.gradient(y, bias, output_gradients=upstream), tf.float64))
        error = np.linalg.norm(got - exact) / np.linalg.norm(exact)
        if most is not None:  # float32 accumulation, one rounding to bf16 (2^-9 relative at most per entry)
            assert error < most, error
        else:  # what it replaces: far off, or the test above would not need add_bias
            assert error > 0.05, error

    config = AlbertConfig.from_preset("albert_tiny").replace(num_hidden_layers=2, num_hidden_groups=1)
    with policy_scope("mixed_bfloat16"):
        encoder = AlbertEncoder(config)
    inputs = random_inputs(config, batch=2, length=8)
    encoder(inputs)
    graph = _traced_encoder_graph(encoder, inputs, True)
    bias_adds = [op for op in graph.get_operations() if op.type == "BiasAdd" and op.outputs[0].dtype == tf.bfloat16]
    # the embedding projection, the pooler and the block's six dense layers, twice: each wrapped by
    # add_bias's custom gradient (an IdentityN right after it)
    wrapped = [op for op in bias_adds if any(c.type == "IdentityN" for c in op.outputs[0].consumers())]
    assert len(wrapped) == 2 + 6 * config.num_hidden_layers == len(bias_adds), [op.name for op in bias_adds]
