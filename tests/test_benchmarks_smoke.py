"""Checks of the benchmarks (benchmarks/README.md) that run in seconds: the harness's
interleaved rounds, command runs in two source trees and machine record, the precision
learning benchmark's verdict rule and flags, the learning-checks runner with pytest faked.
The benchmarks themselves run by hand (their `--tiny` or small flags).
"""

import importlib
import json
import os
import sys

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


def test_harness_interleaves_rounds_and_records_the_machine(capsys):
    harness = _bench("bench_harness")
    order = []
    values = harness.interleaved({"a": lambda: order.append("a") or len(order),
                                  "b": lambda: order.append("b") or 10.0 * len(order)}, rounds=3)
    assert order == ["a", "b"] * 3  # round by round, so a drift in the machine hits both
    assert values == {"a": [1, 3, 5], "b": [20.0, 40.0, 60.0]}
    assert harness.medians(values) == {"a": 3, "b": 40.0}
    assert "round 3/3: a 5, b 60" in capsys.readouterr().out
    machine = harness.machine()
    assert machine["python"].endswith(".".join(map(str, sys.version_info[:3])))
    assert machine["cpu_count"] >= 1 and "tensorflow" in machine["versions"]
    assert set(machine["cpu_flags"].split()) <= set(harness.CPU_FLAGS)
    harness.report({"examples_per_second": 2.5})
    assert harness.read_report("noise\n" + capsys.readouterr().out) == {"examples_per_second": 2.5}
    with pytest.raises(ValueError, match="printed no BENCH_RESULT"):
        harness.read_report("nothing here")


@pytest.mark.real_process  # run_in_trees starts a process per tree and round
def test_harness_runs_a_command_in_two_trees_in_turn(tmp_path):
    """Each tree's own module (PYTHONPATH and cwd: the tree), rounds interleaved, medians of the
    reported numbers; wall seconds where a run reports nothing."""
    harness = _bench("bench_harness")
    trees = {}
    for name, speed in (("base", 1.0), ("head", 2.0)):
        tree = tmp_path / name
        tree.mkdir()
        (tree / "speed.py").write_text(f"SPEED = {speed}\n")
        (tree / "bench.py").write_text(
            "import json, os, sys\nimport speed\n"
            "with open('calls', 'a') as f:\n    f.write('x')\n"
            "n = len(open('calls').read())\n"
            "if sys.argv[1:] == ['--quiet']:\n    sys.exit(0)\n"
            "print('BENCH_RESULT ' + json.dumps({'examples_per_second': speed.SPEED * n}))\n")
        trees[name] = str(tree)
    result = harness.run_in_trees(trees, ["bench.py"], rounds=3, stream=open(os.devnull, "w"))
    assert result["base"]["median"] == {"examples_per_second": 2.0}
    assert result["head"]["median"] == {"examples_per_second": 4.0}
    assert [r["examples_per_second"] for r in result["head"]["runs"]] == [2.0, 4.0, 6.0]
    quiet = harness.run_in_trees(trees, ["bench.py", "--quiet"], rounds=1, stream=open(os.devnull, "w"))
    assert quiet["base"]["median"]["seconds"] > 0
    with pytest.raises(RuntimeError, match="exited 2"):
        harness.run_in_trees(trees, ["-c", "import sys; sys.exit(2)"], rounds=1, stream=open(os.devnull, "w"))


def test_train_step_bench_refuses_bad_flags_before_any_work(tmp_path):
    result = _run("train_step_bench.py", "--variants=albert_tf,pytorch", f"--output_dir={tmp_path / 'out'}")
    assert result.returncode == 2 and "--variants" in result.stderr and "pytorch" in result.stderr
    assert not (tmp_path / "out").exists()


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
