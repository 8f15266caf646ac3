"""LiteRT files of albert_base (none / float16 / dynamic_int8) against the float32
SavedModel: file size and batch-1 latency at 16, 32 and 128 tokens on 1 and on all threads.

    python benchmarks/litert_bench.py [--config=albert_base] [--repeats=5] [--calls=20] \\
        [--output_dir=benchmarks/results/litert]

The model is albert_base's encoder (vocab 30000) with random weights (size and speed do
not depend on the values). The SavedModel is the encoder's serving function (the three id
inputs, dynamic batch and length) saved at float32 and loaded with tf.saved_model.load, as
a server would. Each thread count runs in its own process (TensorFlow fixes its thread
pools at start): TF_NUM_INTRAOP_THREADS=N, TF_NUM_INTEROP_THREADS=1 and the interpreter's
num_threads=N. In a process, each round times every variant at every length (interleaved,
`--calls` calls after 3 warm-up calls); the figure is the median over `--repeats` rounds of
the per-call mean. Writes OUTPUT_DIR/litert_bench.json and .csv, and prints a table.
"""

import argparse
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
VARIANTS = ("saved_model_float32", "litert_none", "litert_float16", "litert_dynamic_int8")
LENGTHS = (16, 32, 128)


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def build(config_name, work):
    """Writes the SavedModel and the three LiteRT files into `work`; returns their sizes."""
    import keras
    import numpy as np
    import tensorflow as tf

    keras.config.set_dtype_policy("float32")
    from albert_tf import AlbertConfig, AlbertEncoder
    from albert_tf.export.litert_model import INPUT_NAMES, litert_bytes

    keras.utils.set_random_seed(0)
    encoder = AlbertEncoder(AlbertConfig.from_preset(config_name))
    specs = [tf.TensorSpec([None, None], tf.int32, name=n) for n in INPUT_NAMES]

    class Serving(tf.Module):
        def __init__(self):
            super().__init__()
            self.encoder = encoder

        @tf.function(input_signature=specs)
        def __call__(self, input_word_ids, input_mask, input_type_ids):
            out = self.encoder({"input_word_ids": input_word_ids, "input_mask": input_mask,
                                "input_type_ids": input_type_ids}, training=False)
            return {"pooled_output": out["pooled_output"], "sequence_output": out["sequence_output"]}

    module = Serving()
    saved = os.path.join(work, "saved_model")
    tf.saved_model.save(module, saved, signatures={"serving_default": module.__call__.get_concrete_function()})
    sizes = {"saved_model_float32": sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(saved)
                                        for f in fs)}
    for quantization in ("none", "float16", "dynamic_int8"):
        data = litert_bytes(encoder, quantization)
        with open(os.path.join(work, f"{quantization}.tflite"), "wb") as f:
            f.write(data)
        sizes[f"litert_{quantization}"] = len(data)
    sizes["parameters"] = int(encoder.count_params())
    del np
    return sizes


def worker(work, threads, repeats, calls, vocab):
    """Times every variant at every length in this process; prints one JSON line."""
    import numpy as np
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    loaded = tf.saved_model.load(os.path.join(work, "saved_model")).signatures["serving_default"]
    runners = {}
    for quantization in ("none", "float16", "dynamic_int8"):
        interpreter = Interpreter(model_path=os.path.join(work, f"{quantization}.tflite"), num_threads=threads)
        runners[f"litert_{quantization}"] = interpreter.get_signature_runner("serving_default")
    rng = np.random.default_rng(0)
    inputs = {}
    for length in LENGTHS:
        ids = rng.integers(5, vocab, (1, length)).astype("int32")
        inputs[length] = {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)}

    def call(variant, x):
        if variant == "saved_model_float32":
            return loaded(**{k: tf.constant(v) for k, v in x.items()})["pooled_output"].numpy()
        return runners[variant](**x)["pooled_output"]

    rounds = {(v, n): [] for v in VARIANTS for n in LENGTHS}
    for _ in range(repeats):
        for length in LENGTHS:
            for variant in VARIANTS:
                for _ in range(3):
                    call(variant, inputs[length])
                start = time.perf_counter()
                for _ in range(calls):
                    call(variant, inputs[length])
                rounds[(variant, length)].append((time.perf_counter() - start) / calls * 1000)
    print(json.dumps({f"{v}|{n}": r for (v, n), r in rounds.items()}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="albert_base")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--output_dir", default=os.path.join(HERE, "results", "litert"))
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--vocab", type=int, default=30000, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.calls < 1:
        print("litert_bench: --repeats and --calls must be positive", file=sys.stderr)
        return 2
    if args.worker:
        worker(args.worker, args.threads, args.repeats, args.calls, args.vocab)
        return 0
    from albert_tf import AlbertConfig

    vocab = AlbertConfig.from_preset(args.config).vocab_size
    work = tempfile.mkdtemp(prefix="litert_bench_")
    print(f"building {args.config} (SavedModel and three LiteRT files) in {work}", flush=True)
    sizes = build(args.config, work)
    result = {"config": args.config, "cpu": cpu_name(), "cpu_count": os.cpu_count(), "sizes_bytes": sizes,
              "int8_over_float32_file": sizes["litert_dynamic_int8"] / sizes["litert_none"],
              "repeats": args.repeats, "calls": args.calls, "latency_ms": {}}
    for threads in sorted({1, os.cpu_count() or 1}):
        env = dict(os.environ, TF_NUM_INTRAOP_THREADS=str(threads), TF_NUM_INTEROP_THREADS="1",
                   TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
        print(f"timing on {threads} thread(s)", flush=True)
        done = subprocess.run([sys.executable, os.path.abspath(__file__), f"--worker={work}", f"--threads={threads}",
                               f"--repeats={args.repeats}", f"--calls={args.calls}", f"--vocab={vocab}"],
                              capture_output=True, text=True, env=env, timeout=3600)
        if done.returncode:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        rounds = json.loads(done.stdout.strip().splitlines()[-1])
        result["latency_ms"][str(threads)] = {k: {"median": statistics.median(v), "rounds": v}
                                              for k, v in rounds.items()}
    os.makedirs(args.output_dir, exist_ok=True)
    path = os.path.join(args.output_dir, "litert_bench.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f, indent=2)
    os.replace(path + ".tmp", path)
    rows = []
    for threads, table in result["latency_ms"].items():
        for length in LENGTHS:
            base = table[f"saved_model_float32|{length}"]["median"]
            for variant in VARIANTS:
                ms = table[f"{variant}|{length}"]["median"]
                rows.append({"threads": threads, "tokens": length, "variant": variant, "median_ms": round(ms, 3),
                             "speedup_vs_saved_model": round(base / ms, 3), "file_bytes": sizes[variant]})
    with open(os.path.join(args.output_dir, "litert_bench.csv.tmp"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    os.replace(os.path.join(args.output_dir, "litert_bench.csv.tmp"), os.path.join(args.output_dir, "litert_bench.csv"))
    print(f"{args.config} on {result['cpu']} ({result['cpu_count']} cores); file sizes: "
          + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sizes.items() if k != "parameters")
          + f"; int8 / float32 file {result['int8_over_float32_file']:.3f}")
    print("threads tokens variant                 median ms  vs SavedModel")
    for r in rows:
        print(f"{r['threads']:>7} {r['tokens']:>6} {r['variant']:24s} {r['median_ms']:9.2f}  "
              f"{r['speedup_vs_saved_model']:.2f}x")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
