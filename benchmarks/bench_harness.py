"""What every benchmark shares: the machine record, interleaved rounds and their medians, a
command run in two source trees in turn, the pretraining step's batch, FLOPs and peer, and the
results files. Imports only the standard library at the top (the hf memory cell and the GPU
machines, JAX without TensorFlow, import it too).

    record = harness.machine()                       # CPU model and flags, interpreter, versions
    runs = harness.interleaved({"a": time_a, "b": time_b}, rounds=5)   # {name: [value per round]}
    medians = harness.run_in_trees({"base": "/tmp/base", "head": harness.ROOT}, [script, ...], rounds=5)
    harness.write_results(out_dir, record, rows)     # results.json and results.csv
"""

import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
if ROOT not in sys.path and not os.environ.get("PYTHONPATH"):  # run as a script: this checkout's albert_tf
    sys.path.insert(0, ROOT)
RESULT_PREFIX = "BENCH_RESULT "  # the line a benchmark prints for run_in_trees (`report`)
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
PACKAGES = ("tensorflow", "keras", "keras-hub", "jax", "jaxlib", "numpy", "torch", "transformers")


def output_dir(path):
    """`path` made absolute against the repository root (the benchmarks' defaults are relative)."""
    return path if os.path.isabs(path) else os.path.join(ROOT, path)


def commit(tree=ROOT):
    """The git commit checked out in `tree` (None outside git)."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def machine():
    """The machine and software a measurement ran on: CPU model, core count, the CPU flags that
    decide the kernels (avx512_bf16 and amx_bf16: bf16 native), interpreter, installed versions
    of the frameworks, the commit."""
    cpu, flags = None, set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and cpu is None:
                    cpu = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return {"cpu_model": cpu or platform.processor(), "cpu_count": os.cpu_count(),
            "cpu_flags": " ".join(x for x in CPU_FLAGS if x in flags),
            "python": f"{platform.python_implementation()} {platform.python_version()}", "python_executable":
            sys.executable, "versions": versions, "commit": commit(), "date": time.strftime("%Y-%m-%d")}


def interleaved(runners, rounds, stream=None):
    """{name: [runner() per round]}: round 1 of every runner, then round 2, ..., so that a drift
    in the machine's speed hits all of them alike; prints each round."""
    values = {name: [] for name in runners}
    for round_ in range(rounds):
        for name, runner in runners.items():
            values[name].append(runner())
        print(f"round {round_ + 1}/{rounds}: " + ", ".join(f"{n} {v[-1]:.4g}" for n, v in values.items()),
              file=stream or sys.stdout, flush=True)
    return values


def medians(values):
    """{name: median} of interleaved()'s lists."""
    return {name: statistics.median(runs) for name, runs in values.items()}


def report(result):
    """Prints `result` (a dict of numbers) as the line run_in_trees reads back."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def read_report(stdout):
    """The last `report` line of a run's output, as a dict (ValueError when there is none)."""
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if not lines:
        raise ValueError("the command printed no " + RESULT_PREFIX.strip() + " line")
    return json.loads(lines[-1][len(RESULT_PREFIX):])


def run_in_trees(trees, argv, rounds, python=sys.executable, env=None, stream=None):
    """Runs `python ARGV` in each source tree (cwd and PYTHONPATH: the tree, so its albert_tf; a
    script of another tree runs there too, named by its absolute path) in turn, `rounds` times,
    each run a fresh process; returns {tree name: {"runs": [report per round], "median": {key:
    median over the rounds}}} of each run's `report` line, or of its wall seconds ({"seconds":
    ...}) where it prints none. E.g. a change's step time against its base commit: trees
    {"base": a `git worktree add --detach DIR COMMIT`, "head": ROOT}."""

    def runner(tree):
        def once():
            started = time.perf_counter()
            done = subprocess.run([python, *argv], cwd=tree, capture_output=True, text=True,
                                  env=dict(os.environ, **(env or {}), PYTHONPATH=tree))
            seconds = time.perf_counter() - started
            if done.returncode:
                raise RuntimeError(f"{argv} in {tree} exited {done.returncode}: {done.stderr[-2000:]}")
            try:
                result = read_report(done.stdout)
            except ValueError:
                result = {"seconds": seconds}
            runs[tree].append(result)
            return next(iter(result.values()))

        return once

    runs = {tree: [] for tree in trees.values()}
    interleaved({name: runner(tree) for name, tree in trees.items()}, rounds, stream)
    out = {}
    for name, tree in trees.items():
        keys = [k for k, v in runs[tree][0].items() if isinstance(v, (int, float))]
        out[name] = {"runs": runs[tree], "median": {k: statistics.median(r[k] for r in runs[tree]) for k in keys}}
    return out


def best_rate(call, flops, runs):
    """The best flops / seconds of `call()` (which must wait for its result) over `runs` timed
    calls after one untimed call."""
    call()
    best = 0.0
    for _ in range(runs):
        start = time.perf_counter()
        call()
        best = max(best, flops / (time.perf_counter() - start))
    return best


def training_flops_per_example(config, seq, predictions):
    """Analytic training FLOPs of one pretraining example: 2 per multiply-add, x3 for forward and
    backward; the encoder's projections, feed-forward, scores and context, the embedding
    projection, the masked LM head on the predicted positions, pooler and sentence order."""
    H, I, E, V, L = (config.hidden_size, config.intermediate_size, config.embedding_size, config.vocab_size,
                     config.num_hidden_layers)
    per_token = L * (4 * H * H + 2 * H * I + 2 * seq * H)
    if E != H:
        per_token += E * H
    head = predictions * (H * E + E * V) + H * H + 2 * H
    return 2 * 3 * (seq * per_token + head)


def pretraining_batch(vocab_size, batch, seq, predictions, seed=0):
    """A random batch (numpy) in the pretraining TFRecords' format: ids, full mask, the two
    segments split at the middle, `predictions` distinct masked positions a sequence (never
    [CLS]), their ids and weights, the sentence-order label."""
    import numpy as np

    rng = np.random.default_rng(seed)
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq), predictions, replace=False) for _ in range(batch)]), 1)
    return {
        "input_word_ids": rng.integers(5, vocab_size, (batch, seq)).astype("int32"),
        "input_mask": np.ones((batch, seq), "int32"),
        "input_type_ids": (np.arange(seq)[None, :] >= seq // 2).repeat(batch, 0).astype("int32"),
        "masked_lm_positions": positions.astype("int32"),
        "masked_lm_ids": rng.integers(5, vocab_size, (batch, predictions)).astype("int32"),
        "masked_lm_weights": np.ones((batch, predictions), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype("int32"),
    }


def keras_hub_inputs(batch):
    """pretraining_batch's arrays as keras-hub's AlbertMaskedLM takes them."""
    return {"token_ids": batch["input_word_ids"], "segment_ids": batch["input_type_ids"],
            "padding_mask": batch["input_mask"], "mask_positions": batch["masked_lm_positions"]}


def keras_hub_masked_lm(config, dtype_policy="float32"):
    """keras-hub's AlbertMaskedLM with the sizes of `config` (an AlbertConfig), dropout 0, no
    preprocessor: the peer of albert_tf's pretraining step."""
    import keras_hub

    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers, num_heads=config.num_attention_heads,
        embedding_dim=config.embedding_size, hidden_dim=config.hidden_size, intermediate_dim=config.intermediate_size,
        num_groups=config.num_hidden_groups, num_inner_repetitions=config.inner_group_num, dropout=0.0,
        max_sequence_length=config.max_position_embeddings, dtype=dtype_policy)
    return keras_hub.models.AlbertMaskedLM(backbone=backbone, preprocessor=None, dtype=dtype_policy)


def write_results(out_dir, record, rows, fields=None, name="results"):
    """NAME.json (`record` with its "rows") and NAME.csv (the rows' scalar `fields`, default every
    scalar key of the first row) into `out_dir`, each written whole or not at all."""
    from albert_tf.storage import atomic

    os.makedirs(out_dir, exist_ok=True)
    atomic.write_json(os.path.join(out_dir, f"{name}.json"), dict(record, rows=rows))
    if rows:
        fields = fields or [k for k, v in rows[0].items() if not isinstance(v, (list, dict))]
        atomic.write_csv(os.path.join(out_dir, f"{name}.csv"), rows, fields)
    return os.path.join(out_dir, f"{name}.json")
