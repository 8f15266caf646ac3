"""benchmarks/memory_bench.py: a cell over the memory cap is stopped and recorded (the
benchmark goes on), larger micro-batches of a setting that did not fit are not tried, the
rounds' medians, the activation memory and budget rules, the accumulation estimate, the
--remat targets; and one real albert_tf cell with --remat measures a step."""

import os
import sys

import memory_bench as bench  # benchmarks/ is on sys.path (pytest.ini), as when a benchmark runs
import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

GB = bench.GB


def _measured(cell, peak_gb, step, parameters=1000, imports_gb=1.0, baseline_gb=2.0):
    return dict(cell, parameters=parameters, rss_after_imports=int(imports_gb * GB), baseline_rss=int(baseline_gb * GB),
                warmup_peak_rss=int(peak_gb * GB), peak_rss=int(peak_gb * GB), first_step_seconds=9.0,
                step_seconds=[step, step])


def test_a_setting_that_does_not_fit_stops_growing_and_the_rest_goes_on(monkeypatch):
    cells = bench.plan_cells(["xxlarge"], [512], ["float32"], ["albert_tf", "albert_tf_remat", "hf_checkpointing"],
                             [1, 2, 4], 2)
    assert [(c["name"], c["batch"]) for c in cells[:3]] == [("albert_tf", 1), ("albert_tf", 2), ("albert_tf", 4)]
    calls = []

    def runner(cell, cap, timeout, python):
        calls.append((cell["system"], cell["remat"], cell["batch"]))
        if cell["system"] == "hf":
            return dict(cell, unsupported="no gradient checkpointing")
        if not cell["remat"] and cell["batch"] >= 2:
            return dict(cell, does_not_fit="over the cap")
        return _measured(cell, 3.0 + cell["batch"], 1.0)

    monkeypatch.setattr(bench, "PEERS_PYTHON", sys.executable)  # as if the peers' venv were there
    records = bench.run_rounds(cells, 2, 10 * GB, 60, runner=runner, stream=open(os.devnull, "w"))
    # plain: B=1 measured twice, B=2 tried once (did not fit), B=4 never; remat: every B twice;
    # hf_checkpointing: asked once, then known unsupported
    assert calls.count(("albert_tf", False, 1)) == 2 and calls.count(("albert_tf", False, 2)) == 1
    assert ("albert_tf", False, 4) not in calls
    assert all(calls.count(("albert_tf", True, b)) == 2 for b in (1, 2, 4))
    assert sum(c[0] == "hf" for c in calls) == 1
    rows = [bench.summarize_cell(records[i]) for i in range(len(cells))]
    status = {(r["name"], r["batch"]): r["status"] for r in rows}
    assert status[("albert_tf", 1)] == "measured" and status[("albert_tf", 2)] == "over the cap"
    assert status[("albert_tf", 4)].startswith("not tried: B=2 of this setting did not fit")
    assert status[("hf_checkpointing", 4)] == "no gradient checkpointing"


def test_rows_take_medians_and_activation_memory_leaves_out_the_gradients():
    cell = {"name": "albert_tf", "system": "albert_tf", "remat": False, "size": "base", "seq": 128, "batch": 8,
            "policy": "float32", "steps": 2}
    parameters = 2 ** 27  # 0.5 GB of float32 gradients
    rounds = [_measured(cell, peak, step, parameters=parameters) for peak, step in ((5.0, 2.0), (6.0, 1.0), (9.0, 4.0))]
    row = bench.summarize_cell(rounds)
    assert row["rounds"] == 3 and row["step_seconds"] == 2.0
    assert "tensor_activation_memory" not in row  # no allocator figures in these rounds
    allocator = [dict(r, tensor_device="CPU:0", tensor_baseline=GB, tensor_peak=GB + int(extra * GB))
                 for r, extra in zip(rounds, (1.0, 2.0, 0.75))]
    assert bench.summarize_cell(allocator)["tensor_activation_memory"] == int(1.0 * GB) - 4 * parameters
    assert row["training_memory"] == 5 * GB  # median peak 6 GB minus 1 GB after the imports
    assert row["peak_over_baseline"] == 4 * GB  # minus the 2 GB baseline
    assert row["activation_memory"] == int(3.5 * GB)  # minus 0.5 GB of gradients
    assert row["model_and_slots"] == 1 * GB


def test_budget_estimate_and_targets():
    def row(name, batch, training_gb, activation_gb, step):
        return {"name": name, "size": "xxlarge", "seq": 512, "batch": batch, "policy": "float32",
                "status": "measured", "training_memory": int(training_gb * GB),
                "activation_memory": int(activation_gb * GB), "tensor_activation_memory": int(activation_gb * GB / 2),
                "step_seconds": step}

    rows = [row("albert_tf", 1, 8, 4.5, 10.0), row("albert_tf", 2, 12, 9.0, 20.0),
            row("albert_tf_remat", 1, 4.5, 1.0, 13.0), row("albert_tf_remat", 2, 5.0, 1.5, 26.0),
            row("keras_hub", 1, 9, 5.0, 9.0),
            {"name": "hf_checkpointing", "size": "xxlarge", "seq": 512, "batch": 1, "policy": "float32",
             "status": "no gradient checkpointing"}]
    largest = bench.largest_batch_within(rows, 10 * GB)
    assert largest[("albert_tf", "xxlarge", 512, "float32")] == 1
    assert largest[("albert_tf_remat", "xxlarge", 512, "float32")] == 2
    assert ("hf_checkpointing", "xxlarge", 512, "float32") not in largest  # never measured
    static, per_example = bench.per_example_activation(rows)[("albert_tf", "xxlarge", 512, "float32")]
    assert (static, per_example) == (pytest.approx(4 * GB), pytest.approx(4 * GB))
    # 16 GB: (16 - 4) / 4 = 3 examples -> micro-batch 2, K 2048; 80 GB: 19 -> 16, K 256
    assert bench.accumulation_plan(static, per_example, 16 * GB) == {"micro_batch": 2, "accumulation_steps": 2048}
    assert bench.accumulation_plan(static, per_example, 80 * GB) == {"micro_batch": 16, "accumulation_steps": 256}
    assert bench.accumulation_plan(static, per_example, 4 * GB) is None
    [one, two] = bench.targets(rows)
    assert one["batch"] == 1 and one["activation_ratio"] == pytest.approx(1 / 4.5, abs=1e-3)
    assert one["tensor_activation_ratio"] == pytest.approx(0.5 / 2.25, abs=1e-3) and one["tensor_activation_target_met"]
    assert one["activation_target_met"] and one["step_time_ratio"] == 1.3 and one["step_time_target_met"]
    assert one["less_than_keras_hub"] and one["hf_checkpointing"] == "no gradient checkpointing"
    assert two["activation_ratio"] == pytest.approx(1.5 / 9, abs=1e-3) and two["step_time_ratio"] == 1.3
    rows[2] = dict(rows[2], tensor_activation_memory=int(1.0 * GB))  # by the allocator 1.0 / 2.25 of plain's
    [one, _] = bench.targets(rows)
    assert one["tensor_activation_ratio"] == pytest.approx(1 / 2.25, abs=1e-3)
    assert one["activation_target_met"] and not one["tensor_activation_target_met"]


@pytest.mark.real_process  # the bench watches its cell process's memory by pid
def test_a_cell_over_the_cap_is_stopped_and_a_real_remat_cell_measures_a_step():
    cell = {"system": "albert_tf", "remat": True, "size": "tiny", "seq": 32, "batch": 2, "policy": "float32",
            "steps": 1}
    stopped = bench.run_cell(cell, 50 * 2 ** 20, 120)  # 50 MB: TensorFlow alone takes more
    assert stopped["does_not_fit"].startswith("resident memory passed the cap"), stopped
    record = bench.run_cell(cell, 20 * GB, 300)
    assert bench.measured(record), record
    assert record["remat"] is True and record["parameters"] > 30000 * 16  # the word embeddings alone
    assert record["peak_rss"] >= record["baseline_rss"] > record["rss_after_imports"]
    assert len(record["step_seconds"]) == 1 and record["step_seconds"][0] > 0
    # TensorFlow's allocator: the weights and LAMB's slots live between steps (measured 11.5
    # bytes a parameter), a gradient of every weight and the activations above them at the peak
    import tensorflow as tf

    device = "GPU:0" if tf.config.list_physical_devices("GPU") else "CPU:0"
    try:
        tf.config.experimental.get_memory_info(device)
    except ValueError:  # no allocator statistics: oneDNN is off (as on a 2-core AVX2 EPYC without AVX-512)
        assert not any(key.startswith("tensor_") for key in record), record
        return
    assert record["tensor_device"] == device
    assert record["tensor_baseline"] > 2 * 4 * record["parameters"]
    assert record["tensor_peak"] - record["tensor_baseline"] > 4 * record["parameters"]


def test_bad_flags_are_refused_before_any_cell():
    import types

    good = dict(systems=["albert_tf"], sizes=["tiny"], seqs=["32"], batches=["1"], policies=["float32"])
    for change, message in ((dict(systems=["albert_tf", "torch"]), "--systems: unknown torch"),
                            (dict(sizes=["huge"]), "--sizes: unknown huge"),
                            (dict(seqs=["1024"]), "--seqs must be in 1..512"),
                            (dict(batches=["two"]), "--seqs and --batches take integers"),
                            (dict(policies=["float16"]), "--policies")):
        with pytest.raises(ValueError, match=message):
            bench.run(types.SimpleNamespace(**dict(good, **change)))


def test_the_fine_tuning_cell_trains_a_classifier_in_process(capsys, monkeypatch):
    """encoder_ab_bench's fine-tuning cell: a real two-class classifier's training step (its loss
    near ln 2 at the start, a new value each step: dropout and updates), timed by the cell (the
    same classifier and step: built and traced once), and the line run_in_trees reads."""
    import math

    import encoder_ab_bench

    cell = {"system": "albert_tf_finetune", "remat": False, "size": "tiny", "seq": 32, "batch": 4,
            "policy": "float32", "steps": 3}
    parameters, step = bench._albert_tf_finetune(cell)
    losses = [float(step()) for _ in range(8)]
    assert parameters > 30000 * 16
    assert all(abs(loss - math.log(2)) < 0.05 for loss in losses) and len(set(losses)) == len(losses), losses
    built = []
    monkeypatch.setattr(bench, "_albert_tf_finetune", lambda asked: built.append(asked) or (parameters, step))
    encoder_ab_bench.cell_main("finetune", {k: cell[k] for k in ("size", "seq", "batch", "steps")})
    assert [{k: asked[k] for k in cell} for asked in built] == [cell]
    import bench_harness

    result = bench_harness.read_report(capsys.readouterr().out)
    assert set(result) == {"step_seconds"} and result["step_seconds"] > 0
