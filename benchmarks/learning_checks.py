"""The learning checks (the tests marked `learning`) over seeds and dtype policies: what each
measured against its threshold, the worst seed per policy.

    python benchmarks/learning_checks.py [--seeds=1,2,3] [--policies=float32,mixed_bfloat16] [--workers=2] \
        [--keyword=EXPR] [--output_dir=benchmarks/results/learning_checks]

One `pytest -m learning` run per seed and policy, with ALBERT_TF_LEARNING_SEED,
ALBERT_TF_LEARNING_POLICY and ALBERT_TF_LEARNING_LOG set (tests/conftest.py `learning`), one
intra-op thread per worker and jemalloc where the system has it, as `make test`. Writes into
--output_dir (new, empty, or this script's own): runs/, runs.jsonl, summary.json and summary.csv
(per test: threshold, direction, worst value over the seeds and its seed, pass or fail),
rewritten after each run. Exit status 1 when a check failed or is missing from a run, or a test
failed. docs/testing.md "Learning checks".
"""

import glob
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import bench_harness as harness  # noqa: E402  (puts this checkout's albert_tf on sys.path unless PYTHONPATH names one)

ROOT = harness.ROOT

from albert_tf import entry_points  # noqa: E402  (light: albert_tf.cli is imported when main runs)

POLICIES = ("float32", "mixed_bfloat16")
# as the Makefile finds it (Debian's libjemalloc2)
JEMALLOC_GLOBS = ("/usr/lib/*-linux-gnu/libjemalloc.so.2", "/usr/lib64/libjemalloc.so.2")
COLUMNS = ("test", "name", "policy", "better", "strict", "threshold", "worst", "worst_seed", "margin", "seeds",
           "seeds_missing", "passed")


def define_flags(flag_values):
    from absl import flags

    fv = {"flag_values": flag_values}
    flags.DEFINE_list("seeds", ["1", "2", "3"], "ALBERT_TF_LEARNING_SEED of each run (integers).", **fv)
    flags.DEFINE_list("policies", list(POLICIES), f"ALBERT_TF_LEARNING_POLICY of each run: {', '.join(POLICIES)}.",
                      **fv)
    flags.DEFINE_integer("workers", 2, "pytest-xdist workers per run (-n; 0: no xdist, one process).", **fv)
    flags.DEFINE_integer("intra_op_threads", 1, "TF_NUM_INTRAOP_THREADS of each worker (make test's 1).", **fv)
    flags.DEFINE_string("jemalloc", "auto", "LD_PRELOAD for the runs: auto (the Makefile's libjemalloc.so.2, where "
                        "installed), none, or a library path.", **fv)
    flags.DEFINE_string("keyword", None, "pytest -k expression: only these learning checks (e.g. 'notebook').", **fv)
    flags.DEFINE_list("tests", ["tests"], "What pytest collects (paths or node ids).", **fv)
    flags.DEFINE_integer("heartbeat_s", 60, "Print the run's progress every this many seconds (0: never).", **fv)
    flags.DEFINE_string("output_dir", "benchmarks/results/learning_checks", "Where the runs and the summary go.", **fv)


def find_jemalloc(setting):
    """The library to preload: `setting` "auto" (the Makefile's search), "none" or a path."""
    if setting == "none":
        return None
    if setting != "auto":
        if not os.path.isfile(setting):
            raise ValueError(f"--jemalloc={setting} is not a file.")
        return setting
    for pattern in JEMALLOC_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def clock(seconds):
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def pytest_command(workers, junit_xml, keyword=None, tests=("tests",)):
    command = [sys.executable, "-m", "pytest", "-m", "learning", "-p", "no:cacheprovider"]
    if workers > 0:
        command += ["-n", str(workers), "--dist", "loadscope", "--no-loadscope-reorder"]
    command += [f"--junitxml={junit_xml}"]
    if keyword:
        command += ["-k", keyword]
    return command + list(tests)


def run_pytest(command, env, log_path, heartbeat):
    """Runs `command` (cwd: the repository) with `env`, its output into `log_path`, calling
    `heartbeat()` every second; returns its exit status."""
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            while process.poll() is None:
                heartbeat()
                time.sleep(1.0)
        except BaseException:
            process.terminate()
            process.wait()
            raise
    return process.returncode


def read_records(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _nodeid(classname, name):
    """pytest's node id from a JUnit test case (classname "tests.test_x" or "tests.test_x.TestC")."""
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        path = "/".join(parts[:n]) + ".py"
        if os.path.isfile(os.path.join(ROOT, path)):
            return "::".join([path, *parts[n:], name])
    return "/".join(parts) + ".py::" + name


def read_outcomes(junit_xml):
    """{node id: (outcome, message)} of pytest's JUnit XML: outcome passed, failed, error or
    skipped; None when there is no readable file."""
    try:
        tree = ElementTree.parse(junit_xml)
    except (OSError, ElementTree.ParseError):
        return None
    outcomes = {}
    for case in tree.iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                message = (child.get("message") or "").strip().splitlines()[:1]
                message = message[0][:300] if message else ""
                break
        outcomes[_nodeid(case.get("classname", ""), case.get("name", ""))] = (outcome, message)
    return outcomes


def holds(record):
    value, threshold = record["value"], record["threshold"]
    if record["better"] == "higher":
        return value > threshold if record.get("strict") else value >= threshold
    return value < threshold if record.get("strict") else value <= threshold


def summarize(records, runs, seeds):
    """The summary rows (per test, name and measured policy), the learning-marked tests that ran
    and recorded nothing, and the tests that failed, from every record and each run's outcomes."""
    groups = {}
    for r in records:
        groups.setdefault((r["test"], r["name"], str(r["policy"])), []).append(r)
    rows = []
    for (test, name, policy), group in sorted(groups.items()):
        higher = group[0]["better"] == "higher"
        worst = (min if higher else max)(group, key=lambda r: r["value"])
        seen = sorted({r["run_seed"] for r in group})
        # a check measured in every run of its policy (a both-policies check: in the float32 runs)
        expected = sorted({run["seed"] for run in runs if run["seed"] in seeds and any(
            g["run_policy"] == run["policy"] for g in group)})
        margin = worst["value"] - worst["threshold"] if higher else worst["threshold"] - worst["value"]
        rows.append({"test": test, "name": name, "policy": policy, "better": group[0]["better"],
                     "strict": bool(group[0].get("strict")), "threshold": worst["threshold"],
                     "worst": worst["value"], "worst_seed": worst["run_seed"], "margin": margin,
                     "seeds": " ".join(map(str, seen)),
                     "seeds_missing": " ".join(str(s) for s in seeds if s not in seen and s in expected),
                     "values": {str(r["run_seed"]): r["value"] for r in group},
                     "passed": all(holds(r) for r in group)})
    nothing, failed = [], []
    for run in runs:
        logged = {r["test"] for r in records if r["run_seed"] == run["seed"] and r["run_policy"] == run["policy"]}
        for test, (outcome, message) in sorted((run.get("outcomes") or {}).items()):
            if outcome != "skipped" and test not in logged:
                nothing.append({"test": test, "seed": run["seed"], "policy": run["policy"], "outcome": outcome,
                                "message": message})
            if outcome in ("failed", "error"):
                failed.append({"test": test, "seed": run["seed"], "policy": run["policy"], "outcome": outcome,
                               "message": message})
    return rows, nothing, failed


def table(rows):
    """The summary as aligned text lines."""
    signs = {("higher", False): ">=", ("higher", True): ">", ("lower", False): "<=", ("lower", True): "<"}
    head = ("test", "name", "policy", "threshold", "worst (seed)", "seeds", "result")
    body = [(r["test"].removeprefix("tests/"), r["name"], r["policy"], f"{signs[r['better'], r['strict']]} "
             f"{r['threshold']:.4g}", f"{r['worst']:.4g} ({r['worst_seed']})", r["seeds"],
             "pass" if r["passed"] else "FAIL") for r in rows]
    widths = [max(len(str(line[i])) for line in [head, *body]) for i in range(len(head))]
    return ["  ".join(str(v).ljust(w) for v, w in zip(line, widths)).rstrip() for line in [head, *body]]


def write_results(output_dir, settings, records, runs, seeds):
    from albert_tf.storage import atomic

    rows, nothing, failed = summarize(records, runs, seeds)
    with atomic.open_file(os.path.join(output_dir, "runs.jsonl"), "w") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    atomic.write_csv(os.path.join(output_dir, "summary.csv"), rows, COLUMNS)
    atomic.write_json(os.path.join(output_dir, "summary.json"), {
        "settings": settings, "rows": rows, "recorded_nothing": nothing, "failed_tests": failed,
        "runs": [{k: v for k, v in run.items() if k != "outcomes"} for run in runs]})
    return rows, nothing, failed


def measure(f, runner, stream=None):
    """Every run of the flags' seeds and policies; returns the exit status (module docstring)."""
    from albert_tf.storage import outputs

    stream = stream or sys.stdout
    try:
        seeds = [int(s) for s in f.seeds]
    except ValueError:
        raise ValueError(f"--seeds={','.join(f.seeds)}: every seed is an integer.") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds={','.join(f.seeds)}: one or more seeds, each once.")
    bad = [p for p in f.policies if p not in POLICIES]
    if bad or not f.policies or len(set(f.policies)) != len(f.policies):
        raise ValueError(f"--policies={','.join(f.policies)}: one or more of {', '.join(POLICIES)}, each once.")
    if f.workers < 0 or f.intra_op_threads < 1:
        raise ValueError("--workers is 0 or more and --intra_op_threads 1 or more.")
    jemalloc = find_jemalloc(f.jemalloc)
    output_dir = os.path.abspath(f.output_dir)
    outputs.check([outputs.Output("--output_dir", output_dir, outputs.LEARNING_CHECKS)])  # before any work
    outputs.claim_dir(output_dir, outputs.LEARNING_CHECKS, "--output_dir")
    runs_dir = os.path.join(output_dir, "runs")
    if os.path.isdir(runs_dir):  # this script's own runs of before: a new measurement replaces them
        import shutil

        shutil.rmtree(runs_dir)
    os.makedirs(runs_dir)
    settings = {"seeds": seeds, "policies": list(f.policies), "workers": f.workers,
                "intra_op_threads": f.intra_op_threads, "jemalloc": jemalloc, "keyword": f.keyword,
                "tests": list(f.tests), "machine": harness.machine(),
                "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    plan = [(seed, policy) for seed in seeds for policy in f.policies]
    records, runs, start = [], [], time.time()
    print(f"{len(plan)} runs (seeds {', '.join(map(str, seeds))} x {', '.join(f.policies)}) into {output_dir}; "
          f"LD_PRELOAD={jemalloc or '(none)'}", file=stream, flush=True)
    for n, (seed, policy) in enumerate(plan, 1):
        name = f"seed{seed}-{policy}"
        log, junit, output = (os.path.join(runs_dir, f"{name}.{ext}") for ext in ("jsonl", "xml", "log"))
        command = pytest_command(f.workers, junit, f.keyword, f.tests)
        env = dict(os.environ, ALBERT_TF_LEARNING_SEED=str(seed), ALBERT_TF_LEARNING_POLICY=policy,
                   ALBERT_TF_LEARNING_LOG=log, TF_NUM_INTRAOP_THREADS=str(f.intra_op_threads))
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        if jemalloc:
            env["LD_PRELOAD"] = " ".join(p for p in (jemalloc, os.environ.get("LD_PRELOAD")) if p)
        run_start = time.time()
        print(f"[run {n}/{len(plan)}] seed {seed}, {policy}: started at {clock(run_start - start)} "
              f"(pytest's output: {output})", file=stream, flush=True)
        last = [run_start]

        def heartbeat(n=n, seed=seed, policy=policy, log=log, run_start=run_start, last=last):
            now = time.time()
            if f.heartbeat_s and now - last[0] >= f.heartbeat_s:
                last[0] = now
                print(f"[run {n}/{len(plan)}] seed {seed}, {policy}: {clock(now - run_start)} in this run, "
                      f"{clock(now - start)} in all, {len(read_records(log))} records so far", file=stream,
                      flush=True)

        status = runner(command, env, output, heartbeat)
        outcomes = read_outcomes(junit)
        got = read_records(log)
        for r in got:
            r.update(run_seed=seed, run_policy=policy)
        records += got
        counts = {k: sum(o == k for o, _ in (outcomes or {}).values()) for k in ("passed", "failed", "error",
                                                                                 "skipped")}
        runs.append({"seed": seed, "policy": policy, "exit_status": status, "wall_s": round(time.time() - run_start, 1),
                     "records": len(got), **counts, "junit": outcomes is not None, "outcomes": outcomes})
        print(f"[run {n}/{len(plan)}] seed {seed}, {policy}: pytest exit status {status} after "
              f"{clock(time.time() - run_start)} ({clock(time.time() - start)} in all): {len(got)} records; "
              + ", ".join(f"{v} {k}" for k, v in counts.items() if v)
              + ("" if outcomes is not None else "; no JUnit XML (pytest did not finish: see its output)"),
              file=stream, flush=True)
        rows, nothing, failed = write_results(output_dir, settings, records, runs, seeds)
    print("", file=stream)
    for line in table(rows):
        print(line, file=stream)
    for item in nothing:
        print(f"RECORDED NOTHING: {item['test']} (seed {item['seed']}, {item['policy']}: {item['outcome']}"
              f"{': ' + item['message'] if item['message'] else ''})", file=stream)
    for item in failed:
        print(f"test {item['outcome']}: {item['test']} (seed {item['seed']}, {item['policy']})"
              f"{': ' + item['message'] if item['message'] else ''}", file=stream)
    unfinished = [run for run in runs if not run["junit"]]
    for run in unfinished:
        print(f"run seed {run['seed']}, {run['policy']} did not finish (exit status {run['exit_status']})",
              file=stream)
    missing = [r for r in rows if r["seeds_missing"]]
    print(f"wrote {output_dir}/runs.jsonl, summary.json, summary.csv ({clock(time.time() - start)})", file=stream,
          flush=True)
    ok = rows and all(r["passed"] for r in rows) and not (nothing or failed or unfinished or missing)
    return 0 if ok else 1


def run(f):
    return measure(f, runner=run_pytest)


main, entry = entry_points.command("learning_checks", define_flags, run)


if __name__ == "__main__":
    entry()
