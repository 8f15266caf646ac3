"""--gradient_accumulation_steps: K slices of the batch give the step of the whole batch
(parameters after 3 steps within float32 rounding of the unaccumulated run's, per variable
||difference|| / ||weights|| <= 1e-5) for LAMB and AdamW, on one device (K = 2, 4) and on 2
mirrored replicas (K = 2), under XLA, bf16 and padding skipping; K = 1 builds no loop; steps,
checkpoints and resume count optimizer steps; bad K exits 2 naming both flags."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import run_in_process
from distributed_helpers import MECHANICS, ArrayClassification, median, relative_difference, weights_after_steps

from albert_tf import AlbertConfig
from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask
from albert_tf.training.driver import Trainer, TrainingOptions, train_and_evaluate

TOLERANCE = 1e-5  # per variable ||difference|| / ||weights||


def config():
    return AlbertConfig.from_preset("albert_tiny").replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                                           **MECHANICS)


def pretraining_task(records):
    return PretrainingTask(PretrainingOptions(config().replace(vocab_size=3000), list(records), max_seq_length=128,
                                              global_batch_size=8, deterministic=True, random_seed=5,
                                              shuffle_buffer_size=100))


def check_same_steps(make_task, optimizer, slices=(2, 4), **options):
    """Trains 3 steps with K = 1 and each of `slices`; asserts the weights and the summed
    terms agree, and that the steps moved the weights far more than the tolerance."""
    strategy = tf.distribute.get_strategy()
    initial, whole, _, whole_terms = weights_after_steps(make_task(), strategy, 1, optimizer, **options)
    assert relative_difference(initial, whole, median) > 1e-3  # the runs compared did learn
    for k in slices:
        start, accumulated, trainer, terms = weights_after_steps(make_task(), strategy, k, optimizer, **options)
        assert trainer.step == 3
        assert all(np.array_equal(start[key], initial[key]) for key in initial)
        assert relative_difference(accumulated, whole) <= TOLERANCE, k
        for got, want in zip(terms, whole_terms, strict=True):  # metric sums add over the slices
            assert got.keys() == want.keys()
            for key in want:
                assert got[key] == pytest.approx(want[key], rel=1e-5, abs=1e-6), (k, key)
    return trainer


# each optimizer with the task it serves (LAMB pretrains, AdamW fine-tunes): both optimizers, both
# tasks, in half the suite time of every pair (every pair passed when measured: <= 1.1e-6)
def test_pretraining_in_2_and_4_slices_takes_the_whole_batch_step(pretraining_records):
    outputs, _ = pretraining_records
    check_same_steps(lambda: pretraining_task(outputs), "lamb")


def test_classification_with_padding_skipped_in_slices_takes_the_whole_batch_step():
    trainer = check_same_steps(lambda: ArrayClassification.make(config(), padded=True), "adamw")
    assert trainer.skips_padding


def test_xla_slices_take_the_whole_batch_step():
    trainer = check_same_steps(lambda: ArrayClassification.make(config()), "adamw", slices=(2,), jit_compile=True)
    # each slice's gradient pass is the XLA program
    batch = {k: v[:4] for k, v in next(iter(trainer.task.train_dataset(None, 8, 0))).items()}
    hlo = trainer._gradients_fn.experimental_get_compiler_ir(batch, {"examples": tf.constant(8.0)})(stage="hlo")
    assert "HloModule" in hlo


@pytest.fixture(scope="module")
def classification_runs():
    """3 steps of the classification task with AdamW: float32 in one slice ("full"), and
    mixed_bfloat16 in one slice ("whole") and in 4 ("accumulated"); {name: (weights, trainer)}.
    The bf16 test compares them and the loop test reads the graphs of the steps they ran."""
    strategy = tf.distribute.get_strategy()
    make = lambda: ArrayClassification.make(config())  # noqa: E731
    runs = {}
    for name, slices, policy in (("full", 1, "float32"), ("whole", 1, "mixed_bfloat16"),
                                 ("accumulated", 4, "mixed_bfloat16")):
        _, weights, trainer, _ = weights_after_steps(make(), strategy, slices, "adamw", dtype_policy=policy)
        runs[name] = (weights, trainer)
    return runs


def test_mixed_bfloat16_slices_take_the_whole_batch_step_within_bf16_rounding(classification_runs):
    """In bf16 a slice's matmuls round differently from the whole batch's (measured: 2e-2 at
    K = 4 for the worst variable, 3e-3 for the median), less than bf16 itself differs from
    float32 (5e-2, 7e-3); a step that lost slices would differ by what 3 steps move (0.37
    for the median variable)."""
    (full, _), (whole, _), (accumulated, trainer) = (classification_runs[k] for k in ("full", "whole", "accumulated"))
    assert trainer.precision.policy == "mixed_bfloat16"
    assert all(v.dtype == "float32" for v in trainer.model.trainable_variables)
    assert relative_difference(accumulated, whole) < min(0.05, relative_difference(whole, full))
    assert relative_difference(accumulated, whole, median) < min(0.01, relative_difference(whole, full, median))


def loops_in_step(trainer):
    def dataset_fn(ctx):
        return trainer.task.train_dataset(ctx, trainer.global_batch_size, 0)

    iterator = iter(trainer.strategy.distribute_datasets_from_function(dataset_fn))
    graph = trainer._step_fn.get_concrete_function(iterator).graph
    return [op for op in graph.get_operations() if op.type in ("While", "StatelessWhile")]


def test_one_slice_builds_no_loop_and_k_slices_one_loop(classification_runs):
    """The steps the runs above took (their traces, read again): K = 1 and K = 4."""
    plain, sliced = classification_runs["full"][1], classification_runs["accumulated"][1]
    assert (plain.options.gradient_accumulation_steps, sliced.options.gradient_accumulation_steps) == (1, 4)
    assert loops_in_step(plain) == []
    loops = loops_in_step(sliced)
    assert len(loops) == 1
    # one slice's activations at a time
    assert loops[0].get_attr("parallel_iterations") == 1
    # the graphs read are those of the steps run (no second trace)
    assert plain._step_fn.experimental_get_tracing_count() == sliced._step_fn.experimental_get_tracing_count() == 1


def test_the_trainer_refuses_a_k_that_does_not_divide_the_batch():
    task = ArrayClassification.make(config())
    for k, message in ((3, r"--gradient_accumulation_steps=3 must divide the per-replica batch: "
                           r"--train_batch_size=8"),
                       (0, r"--gradient_accumulation_steps must be at least 1, got 0 .*--train_batch_size=8")):
        with pytest.raises(ValueError, match=message):
            Trainer(task, TrainingOptions(output_dir="unused", train_batch_size=8, gradient_accumulation_steps=k))


def test_steps_checkpoints_and_resume_count_optimizer_steps(pretraining_records, tmp_path):
    """With K = 2 the run ends at --num_train_steps optimizer steps, logs and saves at them,
    and a run stopped at a checkpoint resumes to the uninterrupted run's weights."""
    outputs, _ = pretraining_records

    def run(out, stop=None):
        keras.utils.set_random_seed(3)
        options = TrainingOptions(output_dir=str(out), train_batch_size=8, num_train_steps=4, save_checkpoints_steps=2,
                                  iterations_per_loop=2, learning_rate=0.005, optimizer="lamb", do_eval=False,
                                  write_curves=False, gradient_accumulation_steps=2)
        stream = open(out.parent / f"{out.name}-{stop}.log", "w+")
        result = train_and_evaluate(pretraining_task(outputs), options, stream=stream, stop_after_steps=stop)
        stream.seek(0)
        return result, stream.read()

    whole, log = run(tmp_path / "whole")
    assert whole["final_step"] == 4 and "global batch 8 in 2 accumulated slices" in log
    records = [json.loads(line) for line in open(tmp_path / "whole" / "metrics.jsonl")]
    assert [r["step"] for r in records if r["split"] == "train"] == [2, 4]
    assert sorted(p.name for p in (tmp_path / "whole").glob("ckpt-*.index")) == ["ckpt-2.index", "ckpt-4.index"]
    first, _ = run(tmp_path / "resumed", stop=2)
    assert first["final_step"] == 2
    resumed, log = run(tmp_path / "resumed")
    assert "resuming from" in log and resumed["final_step"] == 4
    for a, b in zip(resumed["trainer"].model.weights, whole["trainer"].model.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_two_mirrored_replicas_in_slices_take_the_whole_batch_step(pretraining_records):
    """(The CPU split in two logical devices: conftest.)"""
    from distributed_helpers import accumulation_differences

    outputs, _ = pretraining_records
    results = accumulation_differences(outputs)
    for name in ("pretraining/lamb", "classification/adamw"):
        assert results[name]["replicas"] == 2
        assert results[name]["moved"] > 1e-3, (name, results[name])
        assert results[name]["difference"] <= TOLERANCE, (name, results[name])
    # a global batch of 8 over 2 replicas is 4 per replica, which 8 slices do not divide
    assert "--gradient_accumulation_steps=8 must divide the per-replica batch" in results["refused"]
    assert "--train_batch_size=8 over 2 replicas is 4" in results["refused"]


def test_bad_accumulation_exits_2_naming_both_flags():
    """Every training command checks K with its other flags, before TensorFlow work (each
    command's main in this process)."""
    import importlib

    pretraining = ["--output_dir=X", "--albert_config_file=Y", "--input_file=Z", "--train_batch_size=8"]
    fine_tuning = ["--train_batch_size=8"]
    cases = []
    for module, common in (("albert_tf.run_pretraining", pretraining), ("albert_tf.run_classifier", fine_tuning),
                           ("albert_tf.run_squad_v1", fine_tuning), ("albert_tf.run_squad_v2", fine_tuning),
                           ("albert_tf.run_race", fine_tuning)):
        cases += [(module, common + ["--gradient_accumulation_steps=0"]),
                  (module, common + ["--gradient_accumulation_steps=3"])]
    results = [run_in_process(importlib.import_module(module), args) for module, args in cases]
    for (module, args), result in zip(cases, results, strict=True):
        assert result.returncode == 2, (module, args, result.stderr[-2000:])
        assert "--gradient_accumulation_steps" in result.stderr and "--train_batch_size=8" in result.stderr, \
            (module, args, result.stderr)
        assert "Traceback" not in result.stderr
    assert "must be at least 1, got 0" in results[0].stderr
    assert "--gradient_accumulation_steps=3 must divide" in results[1].stderr


def test_every_training_command_passes_k_to_the_driver(pretraining_records):
    """--gradient_accumulation_steps reaches TrainingOptions in every command (one flag,
    defined in albert_tf.cli)."""
    from absl import flags

    from albert_tf import run_classifier, run_pretraining, run_race, run_squad_v1, run_squad_v2

    outputs, _ = pretraining_records
    for module, args in ((run_classifier, []), (run_race, []), (run_squad_v1, ["v1"]), (run_squad_v2, ["v2"])):
        values = flags.FlagValues()
        module.define_flags(values)
        values(["cmd", "--gradient_accumulation_steps=4", "--train_batch_size=8"])
        assert "each step's batch is split into K slices" in values["gradient_accumulation_steps"].help
        entry = run_squad_v1 if module is run_squad_v2 else module  # v2 is v1's code with version="v2"
        entry.check_flags(values)
        _, training = entry.options_from_flags(values, *args)
        assert training.gradient_accumulation_steps == 4 and training.train_batch_size == 8, module.__name__
    values = flags.FlagValues()
    run_pretraining.define_flags(values)
    values(["cmd", "--gradient_accumulation_steps=4", "--train_batch_size=8", "--output_dir=X",
            "--albert_config_file=Y", f"--input_file={outputs[0]}", "--max_seq_length=128"])
    run_pretraining.check_flags(values)
    _, training = run_pretraining.options_from_flags(values, config().replace(vocab_size=3000))
    assert training.gradient_accumulation_steps == 4 and training.train_batch_size == 8
