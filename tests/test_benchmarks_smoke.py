"""Smoke test of benchmarks/inference_bench.py (--tiny: export, keras-hub, results files)
and of finetune_bench.py's flag checks.

finetune_bench.py --tiny itself takes 1-2 minutes on two cores (two classifier exports,
keras-hub and the Hugging Face peer), past this suite's budget for a smoke test; run it by
hand: `.venv/bin/python benchmarks/finetune_bench.py --tiny --output_dir=/tmp/finetune_bench`.
"""

import csv
import importlib
import json
import os

import pytest
from conftest import run_in_process

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _bench(name):
    """benchmarks/NAME.py imported as the module NAME (the scripts import each other by name:
    benchmarks/ is on sys.path when one runs, and in the tests: pytest.ini)."""
    return importlib.import_module(name)


def _run(script, *args):
    """`python benchmarks/SCRIPT ARGS` in this process (the script's main(argv))."""
    return run_in_process(_bench(script.removesuffix(".py")), args)


def _seed_spm(spm_model, spm_dir, name, settings=None):
    """The session's 3000-piece SentencePiece model of the sample corpus (conftest spm_model,
    the release's recipe) put where a benchmark reuses its own (with the settings sidecar that
    says what it was made of): the benchmark skips writing a corpus and training one."""
    import shutil

    os.makedirs(spm_dir)
    shutil.copyfile(spm_model, os.path.join(spm_dir, name))
    if settings is not None:
        with open(os.path.join(spm_dir, "settings.json"), "w") as f:
            json.dump(settings, f)


def test_inference_bench_tiny_writes_results(tmp_path, spm_model):
    out = tmp_path / "inference"
    _seed_spm(spm_model, out / "spm", "spm.model", {"vocab_size": 3000, "corpus_mb": 1.2})
    # float32 whatever the CPU: "auto" picks mixed_bfloat16 on bf16 hardware, where outputs differ by bf16 rounding
    result = _run("inference_bench.py", "--tiny", "--repeats=1", "--calls=2", "--warmup_calls=1",
                  "--dtype_policy=float32", "--vocab_size=3000", "--corpus_mb=1.2", f"--output_dir={out}")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert "albert_tf / keras-hub:" in result.stdout
    assert "3000 pieces (reused)" in result.stdout
    # the encoder alone is exported (export_tfhub's with_preprocess=False): the benchmark loads nothing else
    for export in ("export", "export_xla"):
        assert os.listdir(out / export / "encoder") and not (out / export / "preprocess").exists(), export
    with open(out / "results.json") as f:
        results = json.load(f)
    for key in ("cpu_model", "cpu_bf16_flags", "matmul_peak_gflops", "rows", "keras_hub_fastest",
                "albert_tf_over_keras_hub", "albert_tf_xla_over_keras_hub", "batch_size", "seq_length", "config"):
        assert key in results, key
    assert (results["batch_size"], results["seq_length"], results["tiny"]) == (16, 128, True)
    rows = {row["variant"]: row for row in results["rows"]}
    assert set(rows) == {"albert_tf_saved_model_signature", "albert_tf_saved_model_call",
                         "albert_tf_saved_model_signature_xla", "keras_hub_predict_on_batch",
                         "keras_hub_predict_on_batch_jit"}
    for row in rows.values():
        assert row["median_examples_per_second"] > 0
        assert row["pooled_output_max_abs_diff"] < 1e-4  # the same weights give the same outputs
        assert row["gflops_per_second"] > 0 and row["share_of_matmul_peak"] > 0
    roofline = results["roofline"]
    assert roofline["matmul_shape"] == [16 * 128, 64, 128]  # the tiny config's [B T, H] x [H, I]
    assert len(roofline["matmul_gflops_graph"]) == len(roofline["matmul_gflops_xla"]) == 2
    assert roofline["share_of_peak_needed_for_1_1x"] == pytest.approx(
        1.1 * roofline["keras_hub_fastest_share_of_peak"], abs=2e-3)
    with open(out / "results.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert {r["variant"] for r in table} == set(rows)
    assert {"median_examples_per_second", "ratio_vs_keras_hub_fastest", "cpu_model"} <= set(table[0])
    # the op-level profile: real tf.profiler traces read back into per-op self times
    with open(out / "op_profile.json") as f:
        profile = json.load(f)
    assert set(profile["variants"]) == {"albert_tf_saved_model_signature", "albert_tf_saved_model_signature_xla",
                                        results["keras_hub_fastest"]}
    for name, p in profile["variants"].items():
        ops = {r["op"]: r for r in p["ops"]}
        # the matmul share is that of the matmul rows (graph MatMul/_Mkl*MatMul/Einsum, XLA dot), and
        # matmuls are a large part of even the tiny config's op time (38-55% measured)
        rows_share = sum(r["share"] for r in p["ops"] if "MatMul" in r["op"] or "Einsum" in r["op"]
                         or r["op"].startswith("dot"))
        assert p["matmul_share"] == pytest.approx(rows_share, abs=1e-3) and rows_share > 0.2, name
        assert p["op_ms_per_call"] > 0, name
        assert sum(r["share"] for r in p["ops"]) == pytest.approx(1, abs=0.01)
        assert not {"BlockUntilReady", "ExecutorDoneCallback"} & set(ops)  # runtime events are not ops
        assert os.listdir(p["trace_dir"])  # the trace stays for TensorBoard
    graph_ops = {r["op"]: r for r in profile["variants"]["albert_tf_saved_model_signature"]["ops"]}
    # 2 layers: Q K V O, 2 FF each; with oneDNN on (CPUs with AVX-512) the graph ops are _MklMatMul, _MklSoftmax
    dense_matmuls = sum(r["count_per_call"] for op, r in graph_ops.items() if "MatMul" in op and "Batch" not in op)
    assert dense_matmuls >= 2 * 6 and any(op.endswith("Softmax") for op in graph_ops), graph_ops
    assert any(op.endswith("fusion") for op in {r["op"] for r in profile["variants"][
        "albert_tf_saved_model_signature_xla"]["ops"]})  # XLA's instructions, not graph ops
    fastest = max(("albert_tf_saved_model_signature", "albert_tf_saved_model_signature_xla"),
                  key=lambda n: rows[n]["median_examples_per_second"])
    assert roofline["albert_tf_fastest"] == fastest
    assert roofline["speedup_bound_if_every_other_op_were_free"] == pytest.approx(
        1 / profile["variants"][fastest]["matmul_share"], rel=1e-2)
    with open(out / "op_profile.csv", newline="") as f:
        assert {"variant", "op", "ms_per_call", "share", "count_per_call"} == set(next(csv.DictReader(f)))


@pytest.mark.parametrize("flag, named", [("--systems=albert_tf,pytorch_lightning", "pytorch_lightning"),
                                         ("--accuracy_steps=-1", "--accuracy_steps"),
                                         ("--accuracy_pretrain_steps=-1", "--accuracy_pretrain_steps"),
                                         ("--accuracy_systems=albert_tf,jax", "--accuracy_systems")])
def test_finetune_bench_rejects_bad_flags(tmp_path, flag, named):
    result = _run("finetune_bench.py", flag, f"--output_dir={tmp_path}")
    assert result.returncode == 2
    assert flag.split("=")[0] in result.stderr and named in result.stderr
    assert not os.listdir(tmp_path)


def test_precision_speed_bench_tiny_serving(tmp_path, spm_model):
    """The bf16-vs-float32 speed benchmark's serving part on a tiny model: both exports answer
    every shape, their outputs differ by bf16 rounding only, and each target row is judged."""
    out = tmp_path / "speed"
    _seed_spm(spm_model, out / "spm", "sample.model")  # --tiny's vocabulary size: 3000 pieces
    result = _run("precision_speed_bench.py", "--tiny", "--parts=serving", "--repeats=1", "--calls=2",
                  f"--output_dir={out}")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    with open(out / "results.json") as f:
        results = json.load(f)
    rows = {r["measurement"]: r for r in results["rows"]}
    for shape in ("batch 1 x 16", "batch 1 x 32", "batch 32 x 128"):
        difference = rows[f"{shape}: |bf16 - float32| pooled_output, max"]["value"]
        assert 0 < difference < 0.05, (shape, difference)  # bf16 computed, and only rounding apart
    judged = [r for r in results["rows"] if r["target"]]
    assert len(judged) == 3 and all(isinstance(r["met"], bool) for r in judged)
    assert results["matmul_gflops"]["bfloat16"] > 0 and results["matmul_gflops"]["float32"] > 0


def test_precision_learning_bench_verdict_rule_and_bad_flags(tmp_path):
    """The learning benchmark's rule: a bf16 seed that never leaves the plateau where every
    float32 seed does fails, whatever the means; otherwise the means decide (2 points, or the
    float32 spread where wider)."""
    bench = _bench("precision_learning_bench")

    def runs(metrics, finals):
        return [{"metric": m, "curve": [(100, 2.7), (200, 2.0), (300, final)], "seconds": 1.0}
                for m, final in zip(metrics, finals)]

    same = bench.summarize("squad_v1", {"float32": runs([44.0, 47.0, 50.0], [1.0, 1.0, 1.0]),
                                        "mixed_bfloat16": runs([45.0, 48.0, 46.0], [1.0, 1.1, 1.05])}, 1.25)
    assert same["same_learning"] and same["allowed_difference"] == 6.0  # the float32 spread, wider than 2
    assert same["mixed_bfloat16"]["left_plateau_at"] == [300, 300, 300]
    stuck = bench.summarize("squad_v1", {"float32": runs([44.0, 47.0, 50.0], [1.0, 1.0, 1.0]),
                                         "mixed_bfloat16": runs([45.0, 48.0, 44.0], [1.0, 1.0, 1.9])}, 1.25)
    assert stuck["bf16_seed_stuck"] and not stuck["same_learning"]
    assert stuck["mixed_bfloat16"]["left_plateau_at"] == [300, 300, None]
    worse = bench.summarize("pretraining", {"float32": runs([6.00, 6.01], [6.0, 6.0]),
                                            "mixed_bfloat16": runs([6.2, 6.2], [6.2, 6.2])}, 1.25)
    assert not worse["same_learning"] and worse["allowed_difference"] == pytest.approx(0.06005)
    assert bench.plan_of(["squad_v1:random", "race", "pretraining"], ["random", "pretrained"]) == [
        ("squad_v1", "random"), ("race", "random"), ("race", "pretrained"), ("pretraining", "random")]
    import types

    with pytest.raises(ValueError, match="--classifier_steps must be at least 10"):
        bench.check_flags(types.SimpleNamespace(tasks=["classification"], starts=["pretrained"], seeds=3,
                                                leave_factor=1.25, classifier_steps=5))
    result = run_in_process(bench, ["--tasks=squad_v3", f"--output_dir={tmp_path / 'x'}"])
    assert result.returncode == 2 and "--tasks: squad_v3" in result.stderr
    assert not (tmp_path / "x").exists()


def test_litert_bench_refuses_bad_flags(tmp_path):
    result = _run("litert_bench.py", "--repeats=0", f"--output_dir={tmp_path}")
    assert result.returncode == 2 and "--repeats and --calls must be positive" in result.stderr
    assert not os.listdir(tmp_path)



def test_precision_gradient_bench_error_and_float32_gelu_variant():
    """The gradient benchmark's measure (relative error over a list of arrays) and its GELU
    variant (the feed-forward activation computed in float32, returned in the layer's dtype)."""
    import numpy as np

    bench = _bench("precision_gradient_bench")
    from keras import ops

    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.modeling.encoder_block import gelu_tanh
    from albert_tf.modeling.question_answering import AlbertForQuestionAnswering
    from albert_tf.training.precision import policy_scope

    a, b = np.array([3.0, 4.0]), np.array([[1.0]])
    assert bench.relative_error([a, b], [a, b]) == 0.0
    assert bench.relative_error([2 * a, 2 * b], [a, b]) == pytest.approx(1.0)
    assert bench.relative_error([a + np.array([0.0, 2.6])], [a]) == pytest.approx(0.52)
    with policy_scope("mixed_bfloat16"):
        model = AlbertForQuestionAnswering(AlbertConfig.from_preset("albert_tiny").replace(vocab_size=100),
                                           version="v1")
    bench.gelu_in_float32(model)
    x = ops.cast(np.linspace(-4, 4, 64).reshape(2, 32), "bfloat16")
    for ffn in model.encoder.ffn_layers:
        y = ffn.intermediate.activation(x)
        assert y.dtype == x.dtype
        np.testing.assert_array_equal(np.asarray(ops.cast(y, "float32")),
                                      np.asarray(ops.cast(ops.cast(gelu_tanh(ops.cast(x, "float32")), "bfloat16"),
                                                          "float32")))


def test_learning_checks_summarizes_the_worst_seed_and_says_what_recorded_nothing(tmp_path, monkeypatch):
    """benchmarks/learning_checks.py with pytest replaced by a fake run (the env vars it gets,
    records and JUnit XML it writes): the worst seed per test, name and policy against the
    threshold, a both-policies check measured in the float32 runs and skipped in the others, a
    learning-marked test that ran and recorded nothing; a user's directory is refused."""
    bench = _bench("learning_checks")
    calls = []

    def fake(command, env, output, heartbeat):
        seed, policy, log = (int(env["ALBERT_TF_LEARNING_SEED"]), env["ALBERT_TF_LEARNING_POLICY"],
                             env["ALBERT_TF_LEARNING_LOG"])
        calls.append((seed, policy, env["TF_NUM_INTRAOP_THREADS"], command))
        records = [{"test": "tests/test_a.py::test_learns", "name": "accuracy", "value": 0.8 + 0.05 * seed,
                    "threshold": 0.75, "better": "higher", "strict": False, "seed": seed, "policy": policy}]
        cases = ['<testcase classname="tests.test_a" name="test_learns"/>',
                 '<testcase classname="tests.test_c" name="test_silent[v1]"/>']
        if policy == "float32":
            records.append({"test": "tests/test_b.py::test_both", "name": "abs_difference", "value": 0.02 * seed,
                            "threshold": 0.05, "better": "lower", "strict": True, "seed": seed, "policy": "both"})
            cases.append('<testcase classname="tests.test_b" name="test_both"/>')
        else:
            cases.append('<testcase classname="tests.test_b" name="test_both"><skipped message="compares"/>'
                         '</testcase>')
        with open(log, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in records))
        junit = next(a for a in command if a.startswith("--junitxml=")).split("=", 1)[1]
        with open(junit, "w", encoding="utf-8") as f:
            f.write(f"<testsuites><testsuite>{''.join(cases)}</testsuite></testsuites>")
        return 0

    monkeypatch.setattr(bench, "run_pytest", fake)
    monkeypatch.setattr(bench, "ROOT", str(tmp_path / "repo"))  # node ids from JUnit: where the files exist
    (tmp_path / "repo" / "tests").mkdir(parents=True)
    for name in ("test_a.py", "test_b.py", "test_c.py"):
        (tmp_path / "repo" / "tests" / name).write_text("")
    out = tmp_path / "out"
    result = run_in_process(bench, ["--seeds=1,2", "--heartbeat_s=0", "--jemalloc=none", f"--output_dir={out}"])
    assert result.returncode == 1, result.stderr  # test_silent recorded nothing
    assert [c[:3] for c in calls] == [(1, "float32", "1"), (1, "mixed_bfloat16", "1"), (2, "float32", "1"),
                                      (2, "mixed_bfloat16", "1")]
    assert calls[0][3][1:7] == ["-m", "pytest", "-m", "learning", "-p", "no:cacheprovider"]
    assert calls[0][3][7:12] == ["-n", "2", "--dist", "loadscope", "--no-loadscope-reorder"]
    assert calls[0][3][-1] == "tests"
    assert "[run 4/4] seed 2, mixed_bfloat16" in result.stdout
    summary = json.load(open(out / "summary.json"))
    rows = {(r["test"], r["name"], r["policy"]): r for r in summary["rows"]}
    accuracy = rows["tests/test_a.py::test_learns", "accuracy", "float32"]
    assert accuracy["worst"] == pytest.approx(0.85) and accuracy["worst_seed"] == 1 and accuracy["passed"]
    assert accuracy["seeds"] == "1 2" and accuracy["seeds_missing"] == ""
    assert rows["tests/test_a.py::test_learns", "accuracy", "mixed_bfloat16"]["passed"]
    both = rows["tests/test_b.py::test_both", "abs_difference", "both"]
    assert both["worst"] == pytest.approx(0.04) and both["worst_seed"] == 2 and both["seeds_missing"] == ""
    assert {(n["test"], n["seed"], n["policy"]) for n in summary["recorded_nothing"]} == {
        ("tests/test_c.py::test_silent[v1]", s, p) for s in (1, 2) for p in ("float32", "mixed_bfloat16")}
    assert "RECORDED NOTHING: tests/test_c.py::test_silent[v1]" in result.stdout
    assert len(open(out / "runs.jsonl").readlines()) == 6
    with open(out / "summary.csv", encoding="utf-8") as f:
        assert len(f.readlines()) == 4
    # its own directory again: reused (the runs of before replaced); a user's directory: refused
    again = run_in_process(bench, ["--seeds=3", "--policies=float32", "--heartbeat_s=0", "--jemalloc=none",
                                   f"--output_dir={out}"])
    assert again.returncode == 1 and sorted(os.listdir(out / "runs")) == [
        "seed3-float32.jsonl", "seed3-float32.xml"]
    users = tmp_path / "users"
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    refused = run_in_process(bench, ["--heartbeat_s=0", f"--output_dir={users}"])
    assert refused.returncode == 2 and "albert_tf did not make" in refused.stderr
    assert os.listdir(users) == ["notes.txt"] and len(calls) == 5
    bad = run_in_process(bench, ["--policies=bf16", f"--output_dir={tmp_path / 'bad'}"])
    assert bad.returncode == 2 and "--policies=bf16" in bad.stderr and not (tmp_path / "bad").exists()
