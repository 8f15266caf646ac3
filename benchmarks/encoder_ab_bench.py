"""Two source trees' albert_tf against each other, base and result alternating in fresh processes
(bench_harness.run_in_trees): the pretraining step (memory_bench's albert_tf cell), its peak
memory with --remat, and a classifier's fine-tuning step; medians and result / base.

    python benchmarks/encoder_ab_bench.py --base=/tmp/base [--result=.] [--rounds=5] \
        [--size=base] [--seq=128] [--batch=8] [--steps=5] [--output_dir=results/encoder_ab]

Method and figures: benchmarks/README.md.
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_harness as harness  # noqa: E402
import memory_bench  # noqa: E402


def cell_main(name, cell):
    """One cell in this process; prints its figures as the line run_in_trees reads."""
    system = "albert_tf_finetune" if name == "finetune" else "albert_tf"
    record = memory_bench.cell_record(dict(cell, system=system, policy="float32", remat=name == "pretrain_remat"))
    figures = {"step_seconds": statistics.median(record["step_seconds"])}
    if name == "pretrain_remat":
        figures["peak_rss_over_baseline"] = record["peak_rss"] - record["baseline_rss"]
    harness.report(figures)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the base checkout")
    parser.add_argument("--result", default=".", help="the checkout measured against it")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", default="base", help="an ALBERT preset size: tiny, base, large, ...")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per cell, after a warm-up step")
    parser.add_argument("--output_dir", default="results/encoder_ab")
    f = parser.parse_args(argv)
    trees = {"base": os.path.abspath(f.base), "result": os.path.abspath(f.result)}
    cell = {"size": f.size, "seq": f.seq, "batch": f.batch, "steps": f.steps}
    rows = []
    for name in ("pretrain", "pretrain_remat", "finetune"):
        runs = harness.run_in_trees(trees, [os.path.abspath(__file__), "--cell", name, json.dumps(cell)], f.rounds)
        for figure, base in runs["base"]["median"].items():
            result = runs["result"]["median"][figure]
            rows.append({"cell": name, "figure": figure, "base": base, "result": result, "ratio": result / base})
            print(f"{name:<16}{figure:<26}{base:>14.4g}{result:>14.4g}{result / base:>8.3f}", flush=True)
    harness.write_results(harness.output_dir(f.output_dir), dict(cell, trees=trees, rounds=f.rounds,
                                                                  machine=harness.machine()), rows)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--cell"]:
        cell_main(sys.argv[2], json.loads(sys.argv[3]))
    else:
        main()
