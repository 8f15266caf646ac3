"""The spread of `make demo`'s final figures over seeds, at float32 and at mixed_bfloat16.

    python benchmarks/demo_spread.py [--seeds=1,2,3] [--policies=float32,mixed_bfloat16] \\
        [--work_dir=results/demo_spread] [--output_dir=benchmarks/results/demo_spread]

Runs tools/demo.py once per policy and seed (`--dtype_policy`, `--random_seed`), each in its
own process and its own demo directory under --work_dir (kept: a finished run, one with its
demo_results.json, is not run again), and reads the figures each run writes: the dev
accuracy of the notebook (hub.KerasLayer, tf_keras) and of run_classifier, both fine-tuned
from the same export, beside the majority-class baseline.

Writes --output_dir/runs.csv (one row a run) and summary.json (per policy: min, median and
max of each figure, and whether run_classifier's median reaches the notebook's), and prints
the table. docs/demo.md quotes it.
"""

import csv
import io
import json
import os
import statistics
import subprocess
import sys
import time

from absl import flags

from albert_tf import entry_points
from albert_tf.storage import atomic, outputs

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

FIGURES = ("notebook_dev_accuracy", "run_classifier_dev_accuracy", "majority_baseline")
COLUMNS = ("dtype_policy", "random_seed", "resolved_policy", *FIGURES, "run_classifier_best_step", "seconds",
           "machine", "python")


def define_flags(flag_values):
    flags.DEFINE_list("seeds", ["1", "2", "3"], "The demo's --random_seed values.", flag_values=flag_values)
    flags.DEFINE_list("policies", ["float32", "mixed_bfloat16"], "The demo's --dtype_policy values.",
                      flag_values=flag_values)
    flags.DEFINE_string("work_dir", "results/demo_spread", "Where the demo runs go, one directory each.",
                        flag_values=flag_values)
    flags.DEFINE_string("output_dir", "benchmarks/results/demo_spread", "Where runs.csv and summary.json go.",
                        flag_values=flag_values)


def summarize(rows):
    """{policy: {figure: {"min", "median", "max"}, "runs", "classifier_reaches_notebook"}}."""
    summary = {}
    for policy in sorted({r["dtype_policy"] for r in rows}):
        mine = [r for r in rows if r["dtype_policy"] == policy]
        entry = {"runs": len(mine), "seeds": [r["random_seed"] for r in mine]}
        for figure in FIGURES:
            values = [r[figure] for r in mine]
            entry[figure] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
        entry["classifier_reaches_notebook"] = (entry["run_classifier_dev_accuracy"]["median"]
                                                >= entry["notebook_dev_accuracy"]["median"])
        summary[policy] = entry
    return summary


def run(f):
    seeds = [int(s) for s in f.seeds]
    for policy in f.policies:
        if policy not in ("float32", "mixed_bfloat16"):
            raise ValueError(f"--policies: {policy!r} is not float32 or mixed_bfloat16.")
    files = [os.path.join(f.output_dir, name) for name in ("runs.csv", "summary.json")]
    outputs.check([outputs.Output("--output_dir", path, outputs.GENERATED_DATA) for path in files])
    runs = [(policy, seed) for policy in f.policies for seed in seeds]
    rows, start = [], time.time()
    for number, (policy, seed) in enumerate(runs, 1):
        directory = os.path.join(f.work_dir, f"{policy}-seed{seed}")
        results_file = os.path.join(directory, "demo_results.json")
        if not os.path.isfile(results_file):
            os.makedirs(os.path.dirname(os.path.abspath(directory)), exist_ok=True)
            log = directory + ".log"
            print(f"[{number}/{len(runs)}] {policy} seed {seed}: tools/demo.py > {log} "
                  f"({time.time() - start:.0f}s so far)", flush=True)
            with open(log, "w", encoding="utf-8") as out:
                done = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "demo.py"),
                                       f"--output_dir={directory}", f"--random_seed={seed}",
                                       f"--dtype_policy={policy}"], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
            if done.returncode:
                raise RuntimeError(f"the demo at {policy}, seed {seed} exited {done.returncode}; see {log}.")
        with open(results_file, encoding="utf-8") as r:
            result = json.load(r)
        rows.append({k: result[k] for k in COLUMNS})
        print(f"      notebook {result['notebook_dev_accuracy']:.4f}  run_classifier "
              f"{result['run_classifier_dev_accuracy']:.4f}  majority {result['majority_baseline']:.4f}  "
              f"({result['resolved_policy']}, {result['seconds']:.0f}s)", flush=True)
    summary = summarize(rows)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    for path, data in zip(files, (text.getvalue(), json.dumps(summary, indent=2, sort_keys=True) + "\n")):
        with outputs.replacing_file(path, outputs.GENERATED_DATA, "--output_dir"):
            atomic.write_text(path, data)
    print(f"\n{'policy':16s} {'figure':28s} {'min':>7s} {'median':>7s} {'max':>7s}")
    for policy, entry in summary.items():
        for figure in FIGURES:
            v = entry[figure]
            print(f"{policy:16s} {figure:28s} {v['min']:7.4f} {v['median']:7.4f} {v['max']:7.4f}")
        print(f"{policy:16s} run_classifier's median reaches the notebook's: {entry['classifier_reaches_notebook']}")
    print(f"wrote {files[0]} and {files[1]}")
    return 0


main, entry = entry_points.command("demo_spread", define_flags, run)


if __name__ == "__main__":
    entry()
