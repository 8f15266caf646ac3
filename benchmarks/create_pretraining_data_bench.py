"""Speed and peak memory of tools/create_pretraining_data.py on the sample corpus.

    python benchmarks/create_pretraining_data_bench.py [--runs=3] [--output_dir=results/bench_cpd]

Settings of the release's measurement: seq 128, dupe_factor 5, 20 predictions. Corpora:
the sample corpus at 1.04 MB (the size of the release's measurement) and a 10x larger
one (10.4 MB) from the same generator. For each corpus and --num_workers in {1, 2} it
runs the tool --runs times and reports the median instances/s and the median peak RSS
of the whole process tree (the tool and its workers, sampled from /proc every 50 ms).

Baseline: the original release's tool cannot run on TensorFlow 2; its cost on this
machine class is on record in shared/ALBERT_REFERENCE.md (12,968 instances in 58 s =
223 instances/s, 648 MB peak, 1.04 MB, seq 128, dupe 5). Ratios are against that.
Writes results.json and results.csv in --output_dir.
"""

import csv
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from absl import app, flags


def define_flags():
    """Defines this tool's flags (only when run as a script, so it can be imported)."""
    flags.DEFINE_integer("runs", 3, "Runs per setting (the median is reported).")
    flags.DEFINE_string("output_dir", "results/bench_create_pretraining_data", "Where results go.")
    flags.DEFINE_integer("vocab_size", 5000, "SentencePiece vocabulary used.")


ORIGINAL_INSTANCES_PER_SECOND = 12968 / 58
ORIGINAL_PEAK_MB = 648


def _tree_rss_kb(root_pid):
    """Sum of VmRSS of root_pid and all its descendants."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, frontier = {root_pid}, [root_pid]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in tree:
                tree.add(child)
                frontier.append(child)
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def run_once(corpus, spm_model, out_dir, workers):
    out = os.path.join(out_dir, f"bench-w{workers}.tfrecord")
    cmd = [sys.executable, os.path.join(ROOT, "tools", "create_pretraining_data.py"),
           f"--input_file={corpus}", f"--output_file={out}", f"--spm_model_file={spm_model}",
           "--max_seq_length=128", "--max_predictions_per_seq=20", "--dupe_factor=5",
           f"--num_workers={workers}"]
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kb(proc.pid))
        time.sleep(0.05)
    wall = time.time() - start
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"create_pretraining_data failed: {err[-2000:]}")
    summary = json.load(open(os.path.join(out_dir, f"summary_bench-w{workers}.tfrecord.json")))
    return {"instances": summary["instances"], "wall_seconds": wall,
            "instances_per_second": summary["instances"] / wall, "peak_rss_mb": peak / 1024}


def main(argv):
    del argv
    from albert_tf.data.sample_corpus import source_for, write_corpus
    from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece

    out_dir = os.path.abspath(flags.FLAGS.output_dir)
    os.makedirs(out_dir, exist_ok=True)
    corpora = {}
    for name, size in (("sample_1x", 1.04), ("sample_10x", 10.4)):
        path = os.path.join(out_dir, f"{name}.txt")
        write_corpus(path, size, source_for(size))
        corpora[name] = path
    spm_model = train_sentencepiece([corpora["sample_1x"]], os.path.join(out_dir, "spm"),
                                    SentencePieceOptions(vocab_size=flags.FLAGS.vocab_size, num_threads=2))
    rows = []
    for name, corpus in corpora.items():
        mb = os.path.getsize(corpus) / 1e6
        for workers in (1, 2):
            runs = [run_once(corpus, spm_model, out_dir, workers) for _ in range(flags.FLAGS.runs)]
            row = {
                "corpus": name, "corpus_mb": round(mb, 2), "num_workers": workers,
                "instances": runs[0]["instances"],
                "median_instances_per_second": round(statistics.median(r["instances_per_second"] for r in runs), 1),
                "median_peak_rss_mb": round(statistics.median(r["peak_rss_mb"] for r in runs), 1),
                "median_wall_seconds": round(statistics.median(r["wall_seconds"] for r in runs), 2),
                "runs": len(runs),
            }
            row["speedup_vs_original"] = round(row["median_instances_per_second"] / ORIGINAL_INSTANCES_PER_SECOND, 1)
            rows.append(row)
            print(f"{name:<11} {mb:6.2f} MB  workers {workers}: {row['instances']:>7,} instances, "
                  f"{row['median_instances_per_second']:>8,.0f}/s ({row['speedup_vs_original']}x the original's "
                  f"{ORIGINAL_INSTANCES_PER_SECOND:.0f}/s), peak RSS {row['median_peak_rss_mb']:,.0f} MB "
                  f"(original {ORIGINAL_PEAK_MB} MB), wall {row['median_wall_seconds']}s", flush=True)
    from albert_tf.storage import atomic

    atomic.write_json(os.path.join(out_dir, "results.json"),
                      {"rows": rows, "original_instances_per_second": ORIGINAL_INSTANCES_PER_SECOND,
                       "original_peak_rss_mb": ORIGINAL_PEAK_MB})
    with atomic.open_file(os.path.join(out_dir, "results.csv"), "w") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out_dir}/results.json and results.csv")


if __name__ == "__main__":
    define_flags()
    app.run(main)
