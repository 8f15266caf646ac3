"""Speed, scale and peak memory of create_pretraining_data: the local default and Beam's DirectRunner.

    python benchmarks/create_pretraining_data_bench.py [--size_mb=20] [--runs=1] \
        [--release_dir=/path/to/google-research/albert/albert] [--baseline_tree=/path/to/another/checkout] \
        [--output_dir=results/bench_create_pretraining_data]

Corpus: `tools/make_sample_corpus.py --source=installed`: the docstrings of this
interpreter's standard library and installed packages, the first --size_mb MB (at least 20 by
default), and its first 1.04 MB and --memory_sizes cuts. Tokenizer: the release's 30k
SentencePiece model (--spm_model_file; shared/data/real/albert/30k-clean.model). Settings:
seq 128, 20 predictions, as the release's measurement.

Rows (each a fresh process; wall time, instances, text MB/s, instances/s and the peak RSS of
the whole process tree, sampled every 50 ms):
- scale: the large corpus at --scale_dupe_factor with the local default and --runner=DirectRunner,
  --num_workers 1 and 2 (and --baseline_tree's tool, another checkout's, at 1 and 2: the speed
  before a change);
- memory: the local default at 1 worker on the --memory_sizes cuts with
  --shuffle_buffer_size=--memory_buffer (both cuts exceed it, so the peak is the buffer's);
- dupe: the 1.04 MB cut at dupe_factor 1 and 10 at 1 worker (the per-MB cost of a dupe);
- release: the 1.04 MB cut at dupe_factor 5 by albert_tf and by the original release's tool
  (--release_dir: its create_pretraining_data.py run by benchmarks/release_tool.py; without it
  the release's figure on record in shared/ALBERT_REFERENCE.md).

- marginal: the smaller memory cut with the local default at 2 workers and DirectRunner at 1
  (with the scale rows, costs as differences of two corpus sizes).

Projection (results.json "projection"): the time for --project_gb GB of text at
--project_dupe_factor from measured marginal costs (differences between two runs, so the
processes' start cancels): core-seconds per MB at 1 worker (the scale row minus the smaller
cut's), plus the dupe rows' core-seconds per MB per extra dupe, times the corpus, divided by the
cores (one 64-core machine; a cluster of 32 Beam workers of one core each). The local default is
bounded below by its main process, which takes, sorts and writes every record: its CPU seconds
per record (measured in this process on records of the scale run's mean size: unpickling, the
shuffle with its default buffer, framing) times the projected instances. Writes results.json
and results.csv in --output_dir.
"""

import csv
import json
import os
import statistics
import subprocess
import sys
import time

from absl import app, flags

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
REAL = os.path.join(ROOT, "..", "shared", "data", "real", "albert")
ORIGINAL = {"instances": 12968, "wall_s": 58.0, "peak_rss_mb": 648.0, "corpus_mb": 1.04}  # ALBERT_REFERENCE.md


def define_flags():
    """Defines this tool's flags (only when run as a script, so it can be imported)."""
    flags.DEFINE_float("size_mb", 20.0, "The large corpus's size (MB of text).")
    flags.DEFINE_list("memory_sizes", ["5", "20"], "Corpus cuts (MB) of the memory rows.")
    flags.DEFINE_list("more_pythons", [], "Other interpreters (with albert_tf's requirements) whose installed "
                                          "packages' docstrings add their documents not yet in the corpus, when this "
                                          "interpreter's give less than --size_mb.")
    flags.DEFINE_integer("memory_buffer", 10_000, "--shuffle_buffer_size of the memory rows.")
    flags.DEFINE_integer("scale_dupe_factor", 1, "dupe_factor of the scale rows.")
    flags.DEFINE_integer("runs", 1, "Runs per row (the median is reported).")
    flags.DEFINE_string("spm_model_file", os.path.join(REAL, "30k-clean.model"), "SentencePiece model.")
    flags.DEFINE_string("vocab_file", os.path.join(REAL, "30k-clean.vocab"), "Its vocabulary (the release's tool).")
    flags.DEFINE_string("release_dir", None, "The release's albert/ directory (create_pretraining_data.py, "
                                             "tokenization.py), extracted by you; none: its recorded figure.")
    flags.DEFINE_string("baseline_tree", None, "Another checkout of albert_tf whose tool to time beside this one.")
    flags.DEFINE_float("project_gb", 16.0, "Projected corpus (GB of text).")
    flags.DEFINE_integer("project_dupe_factor", 10, "Projected dupe_factor.")
    flags.DEFINE_string("output_dir", "results/bench_create_pretraining_data", "Where results go.")


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


def _cpu_seconds(pid):
    """User + system CPU seconds of process `pid` itself (not its children)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_tool(corpus, out_dir, name, workers, dupe_factor, tree=ROOT, extra=()):
    """One run of `tree`'s tools/create_pretraining_data.py; the row's measurements."""
    out = os.path.join(out_dir, f"{name}.tfrecord")
    cmd = [sys.executable, os.path.join(tree, "tools", "create_pretraining_data.py"), f"--input_file={corpus}",
           f"--output_file={out}", f"--spm_model_file={flags.FLAGS.spm_model_file}", "--max_seq_length=128",
           "--max_predictions_per_seq=20", f"--dupe_factor={dupe_factor}", f"--num_workers={workers}", *extra]
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tree,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=tree))
    peak = cpu = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kb(proc.pid))
        try:
            cpu = _cpu_seconds(proc.pid)
        except OSError:
            pass
        time.sleep(0.05)
    wall = time.time() - start
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"create_pretraining_data failed: {err[-3000:]}")
    summary = json.load(open(os.path.join(out_dir, f"summary_{name}.tfrecord.json")))
    size = os.path.getsize(out)
    for path in (out, os.path.join(out_dir, f"summary_{name}.tfrecord.json")):
        os.remove(path)
    return {"instances": summary["instances"], "wall_s": wall, "peak_rss_mb": peak / 1024, "main_cpu_s": cpu,
            "output_bytes": size}


def row(kind, corpus, tool, workers, dupe_factor, runs, **notes):
    mb = os.path.getsize(corpus) / 1e6
    wall = statistics.median(r["wall_s"] for r in runs)
    r = {"kind": kind, "tool": tool, "corpus_mb": round(mb, 3), "num_workers": workers, "dupe_factor": dupe_factor,
         "instances": runs[0]["instances"], "median_wall_s": round(wall, 2),
         "text_mb_per_s": round(mb / wall, 4), "instances_per_s": round(runs[0]["instances"] / wall, 1),
         "median_peak_rss_mb": round(statistics.median(x["peak_rss_mb"] for x in runs), 1),
         "runs": len(runs), "output_bytes": runs[0].get("output_bytes"), **notes}
    if all("main_cpu_s" in x for x in runs):
        r["main_cpu_s"] = round(statistics.median(x["main_cpu_s"] for x in runs), 2)
    print(f"{kind:<8} {tool:<22} {mb:7.2f} MB w{workers} dupe {dupe_factor}: {r['instances']:>8,} instances in "
          f"{wall:7.1f} s = {r['text_mb_per_s']:.3f} MB/s, {r['instances_per_s']:,.0f}/s, peak "
          f"{r['median_peak_rss_mb']:,.0f} MB", flush=True)
    return r


def cut(source, path, mb):
    """The first `mb` MB of corpus `source`, ending at a document boundary."""
    limit = int(mb * 1e6)
    with open(source, "rb") as f, open(path, "wb") as out:
        written = 0
        for line in f:
            out.write(line)
            written += len(line)
            if written >= limit and not line.strip():
                break
    return path


def make_corpus(path, out_dir):
    """The installed packages' docstrings of this interpreter, then of --more_pythons, up to
    --size_mb (interpreters share packages, so documents may repeat: their share is returned)."""
    F = flags.FLAGS
    seen, size, documents, repeated = set(), 0, 0, 0
    with open(path, "w", encoding="utf-8") as out:
        for i, python in enumerate([sys.executable, *F.more_pythons]):
            part = os.path.join(out_dir, f"installed_part{i}.txt")
            subprocess.run([python, os.path.join(ROOT, "tools", "make_sample_corpus.py"), "--source=installed",
                            f"--size_mb={F.size_mb}", f"--output_file={part}"], check=True, cwd=ROOT,
                           env=dict(os.environ, PYTHONPATH=ROOT))
            for document in open(part, encoding="utf-8").read().split("\n\n"):
                document = document.strip("\n")
                if document and size < F.size_mb * 1e6:
                    repeated += document in seen
                    documents += 1
                    seen.add(document)
                    out.write(document + "\n\n")
                    size += len(document.encode("utf-8")) + 2
            os.remove(part)
            os.remove(os.path.join(out_dir, f".installed_part{i}.txt.albert_tf_output.json"))
    return repeated / documents


def main_process_seconds_per_record(record_bytes, n=300_000, chunk=2000):
    """CPU seconds per record of what the local default's main process does with a record: unpickle it
    from a worker's result (chunks of `chunk`), KeySort it (the default buffer, so part of it spills),
    frame and write it."""
    import io
    import pickle
    import random
    import tempfile

    from albert_tf.data.shuffle import KeySort, write_shards

    rng = random.Random(0)
    record = bytes(rng.getrandbits(8) for _ in range(record_bytes))
    blob = pickle.dumps([(rng.getrandbits(64), record) for _ in range(chunk)])
    with tempfile.TemporaryDirectory() as spill:
        sort = KeySort(100_000, os.path.join(spill, "s"))
        start = time.process_time()
        for _ in range(n // chunk):
            for key, value in pickle.loads(blob):
                sort.add(key ^ rng.getrandbits(64), value)
        write_shards(sort.items(), [io.BytesIO(), io.BytesIO()])
        return (time.process_time() - start) / n


def project(rows):
    """The projection (module docstring) from the measured rows: marginal costs, taken as
    differences between runs, so the processes' start (imports, the model) cancels out."""
    F = flags.FLAGS

    def get(kind, tool, workers, mb=None, dupe=None):
        return next(r for r in rows if r["kind"] == kind and r["tool"] == tool and r["num_workers"] == workers
                    and (mb is None or abs(r["corpus_mb"] - mb) < 0.5) and (dupe is None or r["dupe_factor"] == dupe))

    small_mb, big_mb = (float(x) for x in F.memory_sizes)
    d1, d10 = get("dupe", "local", 1, dupe=1), get("dupe", "local", 1, dupe=10)
    per_dupe = (d10["median_wall_s"] - d1["median_wall_s"]) / 9 / d1["corpus_mb"]  # core-s per MB per dupe
    out = {"gb": F.project_gb, "dupe_factor": F.project_dupe_factor, "core_seconds_per_mb_per_dupe": per_dupe,
           "cluster_worker_cores": 1}
    mb = F.project_gb * 1000
    extra = per_dupe * (F.project_dupe_factor - F.scale_dupe_factor)
    for tool, kind in (("local", "memory"), ("beam_direct", "marginal")):
        small, big = get(kind, tool, 1, small_mb), get("scale", tool, 1, big_mb)
        per_mb = (big["median_wall_s"] - small["median_wall_s"]) / (big["corpus_mb"] - small["corpus_mb"])
        out[f"{tool}_core_seconds_per_mb_at_dupe_{F.scale_dupe_factor}"] = round(per_mb, 4)
        out[f"{tool}_core_seconds_per_mb"] = round(per_mb + extra, 4)
    # the local default's main process takes every record from a worker, sorts and writes it: its CPU time
    # per record, measured here on records of the scale run's mean size (the process's start is too large
    # for a difference of two runs to show it)
    big = get("scale", "local", 2, big_mb)
    main_per_instance = main_process_seconds_per_record(round(big["output_bytes"] / big["instances"]))
    instances = big["instances"] / big["corpus_mb"] * F.project_dupe_factor / F.scale_dupe_factor * mb
    out["local_main_seconds_per_instance"] = main_per_instance
    out["projected_instances"] = round(instances)
    workers_hours = out["local_core_seconds_per_mb"] * mb / 64 / 3600
    out["local_64_cores_hours_workers"] = round(workers_hours, 2)
    out["local_64_cores_hours_main_process"] = round(main_per_instance * instances / 3600, 2)
    out["local_64_cores_hours"] = max(out["local_64_cores_hours_workers"], out["local_64_cores_hours_main_process"])
    out["beam_32_workers_hours"] = round(out["beam_direct_core_seconds_per_mb"] * mb / 32 / 3600, 2)
    out["beam_64_workers_hours"] = round(out["beam_direct_core_seconds_per_mb"] * mb / 64 / 3600, 2)
    return out


def main(argv):
    del argv
    F = flags.FLAGS
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    out_dir = os.path.abspath(F.output_dir)
    os.makedirs(out_dir, exist_ok=True)
    big = os.path.join(out_dir, f"installed_{F.size_mb:g}mb.txt")
    repeated = make_corpus(big, out_dir)
    if os.path.getsize(big) < F.size_mb * 1e6 * 0.99:
        raise SystemExit(f"the installed packages give only {os.path.getsize(big) / 1e6:.1f} MB of docstrings")
    small = cut(big, os.path.join(out_dir, "cut_1.04mb.txt"), 1.04)
    rows = []
    trees = [("local", ROOT, ())]
    if F.baseline_tree:
        trees.append(("baseline_local", os.path.abspath(F.baseline_tree), ()))
    trees.append(("beam_direct", ROOT, ("--runner=DirectRunner",)))
    for workers in (1, 2):
        for tool, tree, extra in trees:
            runs = [run_tool(big, out_dir, f"{tool}-w{workers}", workers, F.scale_dupe_factor, tree, extra)
                    for _ in range(F.runs)]
            rows.append(row("scale", big, tool, workers, F.scale_dupe_factor, runs))
    for mb in F.memory_sizes:
        corpus = cut(big, os.path.join(out_dir, f"cut_{mb}mb.txt"), float(mb))
        runs = [run_tool(corpus, out_dir, f"memory-{mb}", 1, F.scale_dupe_factor,
                         extra=(f"--shuffle_buffer_size={F.memory_buffer}",)) for _ in range(F.runs)]
        rows.append(row("memory", corpus, "local", 1, F.scale_dupe_factor, runs, shuffle_buffer_size=F.memory_buffer))
    small_mb = float(F.memory_sizes[0])
    corpus = cut(big, os.path.join(out_dir, f"cut_{F.memory_sizes[0]}mb.txt"), small_mb)
    for tool, workers, extra in (("local", 2, ()), ("beam_direct", 1, ("--runner=DirectRunner",))):
        runs = [run_tool(corpus, out_dir, f"marginal-{tool}", workers, F.scale_dupe_factor, extra=extra)
                for _ in range(F.runs)]
        rows.append(row("marginal", corpus, tool, workers, F.scale_dupe_factor, runs))
    for dupe in (1, 10):
        rows.append(row("dupe", small, "local", 1, dupe, [run_tool(small, out_dir, f"dupe-{dupe}", 1, dupe)]))
    rows.append(row("release", small, "local", 1, 5, [run_tool(small, out_dir, "release-local", 1, 5)]))
    if F.release_dir:
        from release_tool import run_release_tool

        r = run_release_tool(F.release_dir, small, F.spm_model_file, F.vocab_file,
                             os.path.join(out_dir, "release.tfrecord"), dupe_factor=5)
        os.remove(os.path.join(out_dir, "release.tfrecord"))
        rows.append(row("release", small, "original_release", 1, 5,
                        [r]))
    else:
        print(f"original release (on record, {ORIGINAL['corpus_mb']} MB sample corpus, seq 128, dupe 5): "
              f"{ORIGINAL['instances'] / ORIGINAL['wall_s']:.0f} instances/s, {ORIGINAL['peak_rss_mb']:.0f} MB peak")
    projection = project(rows)
    print(json.dumps(projection, indent=1))
    from albert_tf.storage import atomic

    atomic.write_json(os.path.join(out_dir, "results.json"), {
        "rows": rows, "projection": projection, "original_on_record": ORIGINAL,
        "corpus": "tools/make_sample_corpus.py --source=installed (docstrings of the installed packages)",
        "corpus_interpreters": [sys.executable, *F.more_pythons], "corpus_repeated_document_share": repeated,
        "python": sys.version.split()[0]})
    with atomic.open_file(os.path.join(out_dir, "results.csv"), "w") as f:
        writer = csv.DictWriter(f, fieldnames=sorted({k for r in rows for k in r}))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out_dir}/results.json and results.csv")


if __name__ == "__main__":
    define_flags()
    app.run(main)
