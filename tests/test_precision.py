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
    record = choose("auto", cpuinfo=plain, gpus=[]).as_dict()
    assert set(record) == {"dtype_policy", "dtype_policy_requested", "dtype_policy_reason", "native_bf16", "hardware"}
    # this machine: whatever it is, auto resolves to one of the two
    assert choose("auto").policy in ("float32", "mixed_bfloat16")


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
    # the same weights in float32 give the same logits to bf16 rounding
    full = AlbertPretrainer(config)
    full.set_weights(model.get_weights())
    np.testing.assert_allclose(outputs["mlm_logits"], full(inputs)["mlm_logits"], atol=0.05)


def _pretraining(records, out, policy, steps, do_eval=True):
    from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask
    from albert_tf.training.driver import TrainingOptions, train_and_evaluate

    config = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000)
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


def test_fine_tuning_at_mixed_bfloat16_ends_within_one_point_of_float32(tiny_export, tmp_path):
    """The same classifier fine-tuned from the same weights on the same batches: dev accuracy
    at mixed_bfloat16 within 1 point of float32's."""
    from albert_tf.data.classifier_data import get_task, read_examples
    from albert_tf.tasks.classification import ClassificationOptions, ClassificationTask
    from albert_tf.training.driver import Trainer, TrainingOptions

    data_dir = _keyword_task(tmp_path / "data")
    labels = ["no", "yes"]
    task_def = get_task("tsv", labels=labels, text_a_column="sentence")
    splits = {"train": read_examples(task_def, data_dir, "train"), "dev": read_examples(task_def, data_dir, "dev")}
    accuracy, initial = {}, None
    for policy in ("float32", "mixed_bfloat16"):
        options = ClassificationOptions(task_name="tsv", data_dir=data_dir, output_dir="unused",
                                        init_checkpoint=tiny_export["pretrained"], spm_model_file=tiny_export["spm"],
                                        albert_config_file=os.path.join(tiny_export["pretrained"], "albert_config.json"),
                                        max_seq_length=64, random_seed=3, classifier_dropout=0.0,
                                        text_a_column="sentence", labels=labels)
        task = ClassificationTask(options, task_def, splits)
        trainer = Trainer(task, TrainingOptions(output_dir="unused", train_batch_size=32, eval_batch_size=64,
                                                num_train_steps=80, learning_rate=1e-3, optimizer="adamw",
                                                dtype_policy=policy))
        assert trainer.precision.policy == policy
        if initial is None:
            initial = trainer.model.get_weights()
        trainer.model.set_weights(initial)
        trainer.train(iter(task.train_dataset(None, 32, 0)), 80)
        outputs = trainer.per_example_outputs(task.split_dataset("dev", 64), 64)
        accuracy[policy] = float(np.mean(np.argmax(outputs["logits"], -1) == outputs["label"]))
        assert outputs["logits"].dtype == np.float32
    print(accuracy)
    assert accuracy["float32"] > 0.75, accuracy  # it learned (majority 0.59): the comparison means something
    assert abs(accuracy["mixed_bfloat16"] - accuracy["float32"]) <= 0.01, accuracy


def _squad_task(tmp_path, spm_model):
    from conftest import load_tool

    from albert_tf.data.squad.features import convert_examples_to_features, features_to_arrays
    from albert_tf.data.squad.reading import read_squad_examples
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.tasks.squad import SquadOptions, SquadTask

    path = tmp_path / "train.json"
    path.write_text(json.dumps(load_tool("make_squad_data").make_dataset("2.0", 24, seed=4, max_context_chars=400)),
                    encoding="utf-8")
    features = convert_examples_to_features(read_squad_examples(str(path), True), SentencePieceTokenizer(spm_model),
                                            max_seq_length=96, doc_stride=48, max_query_length=24, is_training=True)
    cfg = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000)
    cfg.to_json_file(str(tmp_path / "config.json"))
    options = SquadOptions(version="v2", output_dir=str(tmp_path), albert_config_file=str(tmp_path / "config.json"),
                           spm_model_file=spm_model, max_seq_length=96, start_n_top=3, end_n_top=3,
                           train_batch_size=8, do_train=True)
    return SquadTask(options, features_to_arrays(features))


def _race_task(tmp_path, spm_model):
    from conftest import load_tool

    from albert_tf.data.race.features import MultipleChoiceSettings, examples_to_arrays
    from albert_tf.data.race.reading import read_race
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.tasks.race import MultipleChoiceOptions, MultipleChoiceTask

    load_tool("make_race_data").make_race(tmp_path / "race", num_articles=4, seed=2, layout="files")
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


@pytest.mark.parametrize("kind", ["squad_v2", "race"])
def test_squad_and_race_heads_under_mixed_bfloat16(kind, spm_model, tmp_path):
    """The SQuAD v2 and multiple-choice models built by their tasks at mixed_bfloat16 give, from
    the same weights, float32 outputs close to float32's (training at bf16 goes through the
    same driver step as the pretraining and classification tests above)."""
    outputs, weights = {}, None
    task = _squad_task(tmp_path, spm_model) if kind == "squad_v2" else _race_task(tmp_path, spm_model)
    for policy in ("float32", "mixed_bfloat16"):
        with policy_scope(policy):
            model = task.build_model()
        weights = weights or model.get_weights()
        model.set_weights(weights)
        if kind == "race":
            batch = next(iter(task.eval_dataset(8)))
            inputs = {k: v for k, v in batch.items() if k in ("input_word_ids", "input_mask", "input_type_ids")}
            outputs[policy] = {"logits": np.asarray(model(inputs, training=False)["logits"])}
        else:
            batch = next(iter(task.train_dataset(None, 8, 0)))
            inputs = {k: v for k, v in batch.items() if k in ("input_word_ids", "input_mask", "input_type_ids",
                                                              "p_mask")}
            outputs[policy] = {k: np.asarray(v) for k, v in model(inputs, training=False).items()}
    keys = ("logits",) if kind == "race" else ("start_top_log_probs", "cls_logits")
    for key in keys:
        a, b = outputs["float32"][key], outputs["mixed_bfloat16"][key]
        assert a.dtype == b.dtype == np.float32, key
        np.testing.assert_allclose(a, b, atol=0.1, rtol=0.05, err_msg=key)
        assert np.abs(a - b).max() > 0, key  # the mixed model does compute in bf16


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
    for key in ("sequence_output", "pooled_output"):
        assert once[key].dtype == ("float32" if key == "sequence_output" else "bfloat16")
        np.testing.assert_array_equal(np.asarray(tf.cast(once[key], tf.float32)),
                                      np.asarray(tf.cast(per_use[key], tf.float32)), err_msg=key)


def test_bf16_bias_gradients_are_summed_in_float32():
    """Issue 29: a bf16 bias add's gradient (TensorFlow's BiasAddGrad, what Keras' add of a
    bias vector becomes) was 20% off the sum of its rows here; add_bias sums them in float32.
    The reference: float64 sums of the same bf16 values. Then the encoder: under
    mixed_bfloat16 every one of its dense layers adds its bias with add_bias."""
    from albert_tf.modeling.encoder import AlbertEncoder
    from albert_tf.modeling.encoder_block import add_bias
    from conftest import random_inputs

    rows, width = 32768, 128
    upstream = tf.cast(np.random.default_rng(0).normal(size=(rows, width)), tf.bfloat16)
    exact = np.asarray(tf.cast(upstream, tf.float64)).sum(axis=0)
    bias = tf.zeros([width], tf.bfloat16)
    for add, most in ((add_bias, 0.01), (keras.ops.add, None)):
        with tf.GradientTape() as tape:
            tape.watch(bias)
            y = add(tf.zeros([rows, width], tf.bfloat16), bias)
        got = np.asarray(tf.cast(tape.gradient(y, bias, output_gradients=upstream), tf.float64))
        error = np.linalg.norm(got - exact) / np.linalg.norm(exact)
        if most is not None:
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
