"""The pretraining loop in-process: learning, clipping, NaN stop, init_checkpoint, XLA."""

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.data.pipeline import pretraining_dataset
from albert_tf.training.checkpoints import CheckpointMismatchError, TrainingCheckpoints, load_init_checkpoint
from albert_tf.training.loop import MetricsLogger, PretrainingLoop, TrainingDivergedError, run_training

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools")


def small_config(**changes):
    values = dict(vocab_size=3000, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    values.update(changes)
    return AlbertConfig.from_preset("albert_tiny").replace(**values)


def make_loop(config=None, batch=16, steps=300, lr=0.005, **kwargs):
    strategy = tf.distribute.get_strategy()
    return PretrainingLoop(strategy, config or small_config(), batch, learning_rate=lr, num_train_steps=steps,
                           num_warmup_steps=steps // 10, **kwargs)


def iterator_for(records, batch=16, seed=1):
    ds = pretraining_dataset(records, batch, 128, 20, deterministic=True, seed=seed, shuffle_buffer_size=2000)
    return iter(tf.distribute.get_strategy().experimental_distribute_dataset(ds))


def train_small(records, out_dir, steps, iterations, save_every, keep=2, stop_after=None):
    """A small loop trained for `steps` with checkpoints and logs in out_dir; returns
    (loop, iterator, checkpoints, logger) so a test can go on with them."""
    loop = make_loop(steps=steps)
    iterator = iterator_for(records)
    checkpoints = TrainingCheckpoints(str(out_dir), loop.model, loop.optimizer, keep)
    logger = MetricsLogger(str(out_dir), steps, stream=sys.stderr)
    run_training(loop, iterator, checkpoints, logger, steps, iterations, save_every, stop_after_steps=stop_after)
    return loop, iterator, checkpoints, logger


def test_loss_falls_over_a_few_hundred_steps(pretraining_records, tmp_path):
    outputs, _ = pretraining_records
    train_small(outputs, tmp_path, steps=300, iterations=50, save_every=150)
    rows = [json.loads(l) for l in open(tmp_path / "metrics.jsonl")]
    assert [r["step"] for r in rows] == [50, 100, 150, 200, 250, 300]
    assert set(rows[0]) == {"step", "loss", "masked_lm_loss", "masked_lm_accuracy", "sentence_order_loss",
                            "sentence_order_accuracy", "learning_rate", "examples_per_second"}
    first, last = rows[0], rows[-1]
    assert last["masked_lm_loss"] < first["masked_lm_loss"] - 1.0, (first, last)
    assert last["masked_lm_accuracy"] > first["masked_lm_accuracy"]
    assert sorted(p.name for p in tmp_path.glob("ckpt-*.index")) == ["ckpt-150.index", "ckpt-300.index"]
    # TensorBoard summaries carry the losses, accuracies, learning rate and throughput
    tags = set()
    for event_file in (tmp_path / "train").glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(event_file)):
            tags.update(v.tag for v in event.summary.value)
    assert {"loss", "masked_lm_accuracy", "sentence_order_loss", "learning_rate", "examples_per_second"} <= tags

    # the curves tool draws them
    sys.path.insert(0, TOOLS)
    import plot_metrics

    png = plot_metrics.plot(plot_metrics.read_metrics(str(tmp_path / "metrics.jsonl")), str(tmp_path / "c.png"))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 10_000


def test_gradients_are_clipped_to_global_norm_one(pretraining_records):
    outputs, _ = pretraining_records
    loop = make_loop(lr=0.0)  # learning rate 0: only the optimizer slots move
    batch = next(iter(pretraining_dataset(outputs, 16, 128, 20, is_training=False)))
    loop._replica_step(batch)
    # with m0 = 0 the first moment after one step is (1 - b1) * clipped gradient
    m = [np.asarray(v) / 0.1 for v in loop.optimizer._m]
    norm = np.sqrt(sum((x.astype(np.float64) ** 2).sum() for x in m))
    assert norm == pytest.approx(1.0, rel=1e-4)  # raw gradients of a fresh model are far larger
    small = [np.array([3.0, 4.0]) * 0.01]
    clipped, raw_norm = tf.clip_by_global_norm([tf.constant(g) for g in small], 1.0)
    np.testing.assert_allclose(clipped[0].numpy(), [0.03, 0.04])
    clipped, _ = tf.clip_by_global_norm([tf.constant([3.0, 4.0])], 1.0)
    np.testing.assert_allclose(clipped[0].numpy(), [0.6, 0.8])


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(pretraining_records, tmp_path):
    outputs, _ = pretraining_records
    loop, iterator, checkpoints, logger = train_small(outputs, tmp_path, steps=100, iterations=10, save_every=10,
                                                      keep=5, stop_after=20)
    good = checkpoints.manager.latest_checkpoint
    assert good.endswith("ckpt-20")
    kernel = loop.model.encoder.pooler.kernel
    kernel.assign(np.full(kernel.shape, np.nan, "float32"))
    with pytest.raises(TrainingDivergedError, match=r"the loss became nan .*ckpt-20"):
        run_training(loop, iterator, checkpoints, logger, 100, 10, 10)
    assert checkpoints.manager.latest_checkpoint == good
    assert sorted(p.name for p in tmp_path.glob("ckpt-*.index")) == ["ckpt-10.index", "ckpt-20.index"]


def test_init_checkpoint_loads_or_fails_loudly(pretraining_records, tmp_path):
    outputs, _ = pretraining_records
    loop = train_small(outputs, tmp_path / "a", steps=20, iterations=10, save_every=10)[0]
    fresh = make_loop(steps=20)
    prefix = load_init_checkpoint(fresh.model, str(tmp_path / "a"))
    assert prefix.endswith("ckpt-20")
    for a, b in zip(loop.model.weights, fresh.model.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    with pytest.raises(CheckpointMismatchError, match="no checkpoint there"):
        load_init_checkpoint(fresh.model, str(tmp_path / "missing"))
    other = make_loop(config=small_config(intermediate_size=48, num_hidden_groups=1), steps=20)
    with pytest.raises(CheckpointMismatchError) as error:
        load_init_checkpoint(other.model, str(tmp_path / "a"))
    message = str(error.value)
    assert "shape mismatches" in message and "group_0_inner_group_0_ffn/intermediate/_kernel" in message
    assert "not in the model" in message and "group_1_inner_group_0_attention" in message


def test_full_train_step_compiles_with_xla_on_static_shapes(pretraining_records):
    outputs, _ = pretraining_records
    loop = make_loop(jit_compile=True, use_one_hot_embeddings=True)
    ds = pretraining_dataset(outputs, 16, 128, 20)
    for spec in ds.element_spec.values():
        assert spec.shape.is_fully_defined(), spec  # static shapes, as a TPU requires
        assert spec.dtype != tf.string
    batch = next(iter(ds))
    # the whole step (forward, backward, clipping, optimizer update) as one XLA program
    full_step = tf.function(loop._replica_step, jit_compile=True)
    hlo = full_step.experimental_get_compiler_ir(batch)(stage="hlo")
    assert "HloModule" in hlo
    before = loop.step
    full_step(batch)
    assert loop.step == before + 1
    before = loop.step
    loop.train(iter(ds), 2)
    assert loop.step == before + 2


def test_mixed_bfloat16_policy_trains(pretraining_records):
    outputs, _ = pretraining_records
    loop = make_loop(dtype_policy="mixed_bfloat16", steps=10)
    assert loop.model.encoder.embeddings.compute_dtype == "bfloat16"
    assert loop.model.encoder.embeddings.word_embeddings.dtype == "float32"
    from albert_tf.training.loop import metrics_from_totals

    metrics = metrics_from_totals(loop.train(iterator_for(outputs), 3))
    assert np.isfinite(metrics["loss"])


def test_batch_must_divide_over_replicas():
    class Fake:
        num_replicas_in_sync = 3

    with pytest.raises(ValueError, match="not divisible by the 3 replicas"):
        PretrainingLoop(Fake(), small_config(), 16)
