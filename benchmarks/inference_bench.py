"""Encoder inference speed: albert_tf's exported encoder SavedModel against keras-hub's
AlbertBackbone of the same dims, at fixed length.

    python benchmarks/inference_bench.py [--repeats=3] [--calls=20] [--batch_size=16] [--seq_length=128] \\
        [--profile_calls=2] [--output_dir=results/inference_bench]
    python benchmarks/inference_bench.py --tiny   # smoke test: 2-layer hidden-64 config, seconds

albert_tf: an AlbertPretrainer on configs/albert_base.json (vocab_size = the SentencePiece
model's: --vocab_size pieces, trained at start on the built-in sample corpus and kept in
--output_dir/spm) with random weights, exported by albert_tf.export.exporter.export_tfhub
(encoder/ alone: the preprocessing model is not measured) twice, as exported by default and with jit_compile=True (the
`--jit_compile` of albert_tf.export_tfhub: its `serve` and `serving_default` run as one XLA
program), each encoder loaded back with tf.saved_model.load in this process and called:
the default export's `serving_default` signature (flat outputs) and its root
`__call__(inputs, training=False)` (the TF-Hub contract), and the XLA export's
`serving_default` signature. keras-hub: AlbertBackbone of the
same dims and vocabulary holding the same weights (copied with
albert_tf.convert.keras_hub.write_keras_hub_backbone; the pooled outputs are compared and
the largest difference reported), called with predict_on_batch (the compiled predict
function) after compile(jit_compile=False) — what "auto" resolves to on a CPU-only machine —
and after compile(jit_compile=True) (XLA); the faster is reported as keras-hub's.

Inputs: one batch of --batch_size rows of --seq_length random ids, every position real
(no padding, no bucketing), the same for every variant; outputs are fetched to NumPy
(pooled and sequence output) in every variant. Each of --repeats rounds times --calls calls
of every variant in turn (interleaved, so a drift in the machine's speed hits all); the
median examples/s is reported, and albert_tf / keras-hub: the default export's signature and
the XLA export's, each over keras-hub's faster variant (> 1: albert_tf faster). The roofline: the encoder's
matmul FLOPs per call (encoder_flops) over the rate of
its largest matmul alone (graph and XLA, measured before and after the rounds), so each
variant's share of the attainable rate shows, and what a ratio over keras-hub would need.
The profile (--profile_calls, after the rounds): a tf.profiler trace of albert_tf's signature,
its XLA export's and keras-hub's fastest variant, read back into op-level self times
(op_profile.json/csv; the traces stay in --output_dir/profile for TensorBoard), and the bound
it sets: for albert_tf's faster export, 1 / the matmuls' share of op time is the most any
change to the other ops could gain. Writes results.json and results.csv in
--output_dir with the CPU model, its bf16 flags and the fp32 matmul peak.
"""

import csv
import os
import statistics
import time

from finetune_bench import describe_machine  # benchmarks/ is on sys.path
from squad_bench import TINY_CONFIG, define_sentencepiece_flags, sentencepiece_model

from albert_tf import entry_points, option_flags
from albert_tf.training.precision import choose

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TINY_DEFAULTS = {"calls": 3, "warmup_calls": 1, "repeats": 2, "vocab_size": 1000, "corpus_mb": 0.3}


def encoder_flops(config, batch, length):
    """Multiply-add FLOPs (2 per multiply-add) of one encoder call on [batch, length]: the
    embedding projection, per layer Q, K, V and output projections (8 B T H^2), the feed-forward
    (4 B T H I) and attention scores and context (4 B T^2 H), then the pooler. Elementwise work
    (GELU, softmax, LayerNorm) is left out: it is memory-bound, not counted in FLOP/s."""
    B, T, H = batch, length, config.hidden_size
    E, I, L = config.embedding_size, config.intermediate_size, config.num_hidden_layers
    return 2 * B * T * E * H + L * (8 * B * T * H * H + 4 * B * T * H * I + 4 * B * T * T * H) + 2 * B * H * H


def matmul_gflops(m, k, n, jit_compile, dtype="float32", runs=7):
    """The best GFLOP/s of a [m, k] x [k, n] matmul of `dtype` (the policy's compute dtype) in a
    tf.function (XLA with jit_compile): the encoder's largest matmul shape, the attainable rate
    for its FLOPs."""
    import tensorflow as tf

    a, b = tf.cast(tf.random.normal((m, k)), dtype), tf.cast(tf.random.normal((k, n)), dtype)
    fn = tf.function(lambda x, y: tf.matmul(x, y), jit_compile=jit_compile)
    fn(a, b).numpy()
    best = 0.0
    for _ in range(runs):
        start = time.perf_counter()
        fn(a, b).numpy()
        best = max(best, 2 * m * k * n / (time.perf_counter() - start) / 1e9)
    return best


# Events of the runtime, not ops: the caller waiting on the XLA program or the executor, and
# the executor's and XLA's own bookkeeping. Their self time is left out of the op shares.
RUNTIME_EVENTS = frozenset({"BlockUntilReady", "Await", "Process", "Execute", "ExecuteAsyncOnStream", "Start",
                            "Done", "ExecutorDoneCallback", "ParallelFor", "StartRegion", "StopRegion", "Record"})


def is_matmul(op):
    """A profiled op that is a matmul: graph MatMul / BatchMatMulV2 (oneDNN's _Mkl*MatMul*,
    fused ones included), Einsum, or an XLA dot."""
    return "MatMul" in op or "Einsum" in op or op.startswith("dot")


def op_profile(fn, calls, logdir):
    """Op-level timing of `calls` calls of fn from a tf.profiler trace (kept in logdir for
    TensorBoard's profile plugin): each op's self time (its event's duration less the events
    nested in it, on the same thread), summed over threads and grouped by op type (a graph
    op's type, an XLA instruction's name without its ".N"), in ms per call, with its share of
    all op time and its count per call. Only TensorFlow's worker threads (tf_Compute,
    tf_numa_*_Eigen) are read, and RUNTIME_EVENTS are left out."""
    import collections
    import glob
    import re
    import shutil

    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    shutil.rmtree(logdir, ignore_errors=True)
    tf.profiler.experimental.start(logdir)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    wall = (time.perf_counter() - start) / calls
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))[-1], "rb") as fh:
        space.ParseFromString(fh.read())
    self_ps, count = collections.Counter(), collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            if not line.name.startswith("tf_"):  # only TensorFlow's worker threads, not the caller's
                continue
            stack = []  # [end_ps, op, self_ps] of the open events, innermost last

            def close(event):
                self_ps[event[1]] += event[2]
                count[event[1]] += 1

            for e in sorted((e for e in line.events if e.duration_ps > 0), key=lambda e: (e.offset_ps, -e.duration_ps)):
                while stack and stack[-1][0] <= e.offset_ps:
                    close(stack.pop())
                if stack:
                    stack[-1][2] -= e.duration_ps
                name = plane.event_metadata[e.metadata_id].name.split(":")[-1].strip()
                stack.append([e.offset_ps + e.duration_ps, re.sub(r"\.\d+$", "", name), e.duration_ps])
            while stack:
                close(stack.pop())
    ops = {op: ps for op, ps in self_ps.items() if op not in RUNTIME_EVENTS}
    total = sum(ops.values()) or 1
    rows = [{"op": op, "ms_per_call": round(ps / 1e9 / calls, 2), "share": round(ps / total, 4),
             "count_per_call": count[op] / calls} for op, ps in sorted(ops.items(), key=lambda kv: -kv[1])]
    matmul = sum(r["share"] for r in rows if is_matmul(r["op"]))
    return {"wall_ms_per_call": round(1000 * wall, 1), "op_ms_per_call": round(total / 1e9 / calls, 1),
            "matmul_share": round(matmul, 4), "ops": rows, "trace_dir": logdir}


def define_flags(flag_values):
    from absl import flags

    flags.DEFINE_integer("repeats", 3, "Interleaved rounds; the median is reported.", flag_values=flag_values)
    flags.DEFINE_integer("calls", 20, "Timed calls per round and variant.", flag_values=flag_values)
    flags.DEFINE_integer("warmup_calls", 3, "Untimed calls per variant before the rounds.", flag_values=flag_values)
    flags.DEFINE_integer("batch_size", 16, "Rows per call.", flag_values=flag_values)
    flags.DEFINE_integer("seq_length", 128, "Fixed sequence length (every position real).", flag_values=flag_values)
    flags.DEFINE_integer("seed", 12345, "Seed of the weights and inputs.", flag_values=flag_values)
    option_flags.define_precision(flag_values)  # the exported encoder's and keras-hub's backbone's
    define_sentencepiece_flags(flag_values)
    flags.DEFINE_integer("profile_calls", 2, "Calls traced with tf.profiler per profiled variant (albert_tf's "
                         "signature, its XLA export's, keras-hub's fastest variant) after the rounds, for the "
                         "op-level table op_profile.json/csv; 0 turns the profile off.", flag_values=flag_values)
    flags.DEFINE_string("output_dir", "results/inference_bench", "Where results (and the export) go.",
                        flag_values=flag_values)
    flags.DEFINE_bool("tiny", False, "Smoke test: a 2-layer hidden-64 config, few calls, a 1000-piece "
                      "SentencePiece model (flags given explicitly still win).", flag_values=flag_values)


def run(f):
    if f.tiny:
        for name, value in TINY_DEFAULTS.items():
            if not f[name].present:
                setattr(f, name, value)
    for name in ("repeats", "calls", "warmup_calls", "batch_size", "seq_length"):
        if getattr(f, name) < 1:
            raise ValueError(f"--{name} must be positive.")
    if f.profile_calls < 0:
        raise ValueError(f"--profile_calls={f.profile_calls}: give 0 (no profile) or more.")
    precision = choose(f.dtype_policy)
    policy = precision.policy
    import keras
    import keras_hub
    import numpy as np
    import tensorflow as tf

    from albert_tf.convert.keras_hub import write_keras_hub_backbone
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.export.exporter import export_tfhub
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.modeling.pretrainer import AlbertPretrainer
    from albert_tf.storage import atomic

    keras.utils.set_random_seed(f.seed)
    out = f.output_dir if os.path.isabs(f.output_dir) else os.path.join(ROOT, f.output_dir)
    os.makedirs(out, exist_ok=True)
    spm_model, spm_seconds = sentencepiece_model(out, f.vocab_size, f.corpus_mb)
    vocab = SentencePieceTokenizer(spm_model).vocab_size
    config = AlbertConfig.from_json_file(os.path.join(ROOT, "configs", "albert_base.json"))
    config = config.replace(vocab_size=vocab, **(TINY_CONFIG if f.tiny else {}))
    if f.seq_length > config.max_position_embeddings:
        raise ValueError(f"--seq_length={f.seq_length} exceeds max_position_embeddings "
                         f"({config.max_position_embeddings}).")
    cpu, bf16, peak = describe_machine(spm_model, vocab, spm_seconds)
    B, T = f.batch_size, f.seq_length
    print(f"{'tiny' if f.tiny else 'albert_base'} config (H {config.hidden_size}, L {config.num_hidden_layers}, "
          f"V {vocab}); batch {B}, length {T} (no padding, no bucketing), {policy} ({precision.reason})", flush=True)

    # --- albert_tf: export, load the encoder SavedModel --------------------------------------
    pretrainer = AlbertPretrainer(config)
    rng = np.random.default_rng(f.seed)
    ids = rng.integers(5, vocab, (B, T)).astype("int32")
    inputs = {"input_word_ids": tf.constant(ids), "input_mask": tf.ones((B, T), tf.int32),
              "input_type_ids": tf.zeros((B, T), tf.int32)}
    pretrainer.encoder(inputs)  # builds the weights
    start = time.perf_counter()
    export_dir = export_tfhub(pretrainer, spm_model, os.path.join(out, "export"), seq_length=T, dtype_policy=policy,
                              with_preprocess=False)
    encoder = tf.saved_model.load(os.path.join(export_dir, "encoder"))
    print(f"export_tfhub + load: {time.perf_counter() - start:.1f}s ({export_dir})", flush=True)
    xla_dir = export_tfhub(pretrainer, spm_model, os.path.join(out, "export_xla"), seq_length=T, dtype_policy=policy,
                           jit_compile=True, with_preprocess=False)
    signature = encoder.signatures["serving_default"]
    xla_signature = tf.saved_model.load(os.path.join(xla_dir, "encoder")).signatures["serving_default"]

    def albert_tf_signature():
        o = signature(**inputs)
        return o["pooled_output"].numpy(), o["sequence_output"].numpy()

    def albert_tf_call():
        o = encoder(inputs, training=False)
        return o["pooled_output"].numpy(), o["sequence_output"].numpy()

    def albert_tf_signature_xla():
        o = xla_signature(**inputs)
        return o["pooled_output"].numpy(), o["sequence_output"].numpy()

    # --- keras-hub: the same dims and weights -------------------------------------------------
    def backbone(jit):
        model = keras_hub.models.AlbertBackbone(
            vocabulary_size=vocab, num_layers=config.num_hidden_layers, num_heads=config.num_attention_heads,
            embedding_dim=config.embedding_size, hidden_dim=config.hidden_size,
            intermediate_dim=config.intermediate_size, num_groups=config.num_hidden_groups,
            num_inner_repetitions=config.inner_group_num, dropout=config.hidden_dropout_prob,
            max_sequence_length=config.max_position_embeddings, dtype=policy)
        write_keras_hub_backbone(pretrainer.encoder, model)
        model.compile(jit_compile=jit)
        return model

    hub_inputs = {"token_ids": ids, "segment_ids": np.zeros((B, T), "int32"), "padding_mask": np.ones((B, T), "int32")}
    hub_plain, hub_jit = backbone(False), backbone(True)

    def keras_hub_predict_on_batch():
        o = hub_plain.predict_on_batch(hub_inputs)
        return o["pooled_output"], o["sequence_output"]

    def keras_hub_predict_on_batch_jit():
        o = hub_jit.predict_on_batch(hub_inputs)
        return o["pooled_output"], o["sequence_output"]

    variants = {
        "albert_tf_saved_model_signature": (albert_tf_signature, "encoder SavedModel signatures['serving_default']"),
        "albert_tf_saved_model_call": (albert_tf_call, "encoder SavedModel __call__(inputs, training=False)"),
        "albert_tf_saved_model_signature_xla": (albert_tf_signature_xla, "encoder SavedModel exported with "
                                                "jit_compile=True, signatures['serving_default'] (XLA)"),
        "keras_hub_predict_on_batch": (keras_hub_predict_on_batch,
                                       "AlbertBackbone.predict_on_batch, jit_compile=False"),
        "keras_hub_predict_on_batch_jit": (keras_hub_predict_on_batch_jit,
                                           "AlbertBackbone.predict_on_batch, jit_compile=True (XLA)"),
    }
    pooled = {}
    for name, (fn, _) in variants.items():
        for _ in range(f.warmup_calls):
            pooled[name] = fn()[0]
    diffs = {name: float(np.max(np.abs(p - pooled["albert_tf_saved_model_signature"]))) for name, p in pooled.items()}
    print("pooled_output max |diff| against albert_tf's signature: "
          + ", ".join(f"{n} {d:.1e}" for n, d in diffs.items()), flush=True)

    # the attainable rate: the encoder's feed-forward matmul shape, graph and XLA, before and after the rounds
    shape = (B * T, config.hidden_size, config.intermediate_size)
    compute_dtype = keras.mixed_precision.DTypePolicy(policy).compute_dtype  # bfloat16 under mixed_bfloat16
    peaks = {"graph": [matmul_gflops(*shape, False, compute_dtype)],
             "xla": [matmul_gflops(*shape, True, compute_dtype)]}
    rates = {name: [] for name in variants}
    for r in range(f.repeats):
        for name, (fn, _) in variants.items():
            start = time.perf_counter()
            for _ in range(f.calls):
                fn()
            rates[name].append(f.calls * B / (time.perf_counter() - start))
        print(f"round {r + 1}/{f.repeats}: " + ", ".join(f"{n} {v[-1]:.2f}" for n, v in rates.items()), flush=True)

    peaks["graph"].append(matmul_gflops(*shape, False, compute_dtype))
    peaks["xla"].append(matmul_gflops(*shape, True, compute_dtype))
    flops = encoder_flops(config, B, T)
    attainable = max(max(v) for v in peaks.values())
    rows = []
    for name, (_, path) in variants.items():
        median = statistics.median(rates[name])
        gflops = median / B * flops / 1e9
        rows.append({"variant": name, "system": name.split("_saved")[0].split("_predict")[0], "path": path,
                     "median_examples_per_second": round(median, 3), "runs": [round(x, 3) for x in rates[name]],
                     "pooled_output_max_abs_diff": diffs[name], "gflops_per_second": round(gflops, 1),
                     "share_of_matmul_peak": round(gflops / attainable, 3)})
    by = {r["variant"]: r for r in rows}
    hub_best = max(("keras_hub_predict_on_batch", "keras_hub_predict_on_batch_jit"),
                   key=lambda n: by[n]["median_examples_per_second"])
    base = by[hub_best]["median_examples_per_second"]
    for r in rows:
        r["ratio_vs_keras_hub_fastest"] = round(r["median_examples_per_second"] / base, 3)
    ratio = by["albert_tf_saved_model_signature"]["ratio_vs_keras_hub_fastest"]
    ratio_xla = by["albert_tf_saved_model_signature_xla"]["ratio_vs_keras_hub_fastest"]
    print(f"\nmedians of {f.repeats} interleaved rounds of {f.calls} calls (batch {B}, length {T}):")
    for r in rows:
        print(f"{r['variant']:<36} {r['median_examples_per_second']:10.2f} examples/s  "
              f"{r['ratio_vs_keras_hub_fastest']:.2f}x keras-hub's fastest  (runs "
              f"{', '.join(f'{x:.2f}' for x in r['runs'])})")
    print(f"albert_tf / keras-hub: {ratio:.2f}x (albert_tf's serving signature over keras-hub's {hub_best}); "
          f"{ratio_xla:.2f}x exported with --jit_compile (its signature under XLA)")
    roofline = {
        "encoder_gflop_per_call": round(flops / 1e9, 2), "matmul_shape": list(shape), "matmul_dtype": compute_dtype,
        "matmul_gflops_graph": [round(x, 1) for x in peaks["graph"]],
        "matmul_gflops_xla": [round(x, 1) for x in peaks["xla"]], "attainable_gflops": round(attainable, 1),
        "keras_hub_fastest_share_of_peak": by[hub_best]["share_of_matmul_peak"],
        "share_of_peak_needed_for_1_1x": round(1.1 * by[hub_best]["share_of_matmul_peak"], 3)}
    needed = roofline["share_of_peak_needed_for_1_1x"]
    print(f"roofline: {flops / 1e9:.1f} GFLOP per call; the {shape[0]}x{shape[1]}x{shape[2]} {compute_dtype} matmul "
          f"ran at {', '.join(f'{x:.1f}' for x in peaks['graph'])} GFLOP/s in graph and "
          f"{', '.join(f'{x:.1f}' for x in peaks['xla'])} under XLA (before, after the rounds); keras-hub's "
          f"fastest computed at {100 * roofline['keras_hub_fastest_share_of_peak']:.0f}% of the best of those, so "
          f"1.1x it needs {100 * needed:.0f}%" + (" (more than 100%: beyond this machine's matmul rate for the same "
                                                   "FLOPs)" if needed > 1 else ""))

    # --- op-level profile: where each path's time goes ----------------------------------------
    profiles = {}
    if f.profile_calls:
        albert_best = max(("albert_tf_saved_model_signature", "albert_tf_saved_model_signature_xla"),
                          key=lambda n: by[n]["median_examples_per_second"])
        for name in ("albert_tf_saved_model_signature", "albert_tf_saved_model_signature_xla", hub_best):
            profiles[name] = p = op_profile(variants[name][0], f.profile_calls, os.path.join(out, "profile", name))
            print(f"profile {name}: {p['wall_ms_per_call']:.0f} ms per call, op time {p['op_ms_per_call']:.0f} ms "
                  f"(summed over threads), matmuls {100 * p['matmul_share']:.1f}%; top: "
                  + ", ".join(f"{r['op']} {100 * r['share']:.1f}%" for r in p["ops"][:6]), flush=True)
        share = profiles[albert_best]["matmul_share"]
        roofline.update(albert_tf_fastest=albert_best, albert_tf_fastest_matmul_share_of_op_time=share,
                        speedup_bound_if_every_other_op_were_free=round(1 / share, 3))
        print(f"profile: matmuls are {100 * share:.1f}% of the op time of albert_tf's fastest ({albert_best}), so "
              f"with every other op free (and matmuls at the same rate) a call would be at most "
              f"{roofline['speedup_bound_if_every_other_op_were_free']:.2f}x faster", flush=True)
        atomic.write_json(os.path.join(out, "op_profile.json"), {"profile_calls": f.profile_calls, "batch_size": B,
                                                                  "seq_length": T, "variants": profiles})
        with atomic.open_file(os.path.join(out, "op_profile.csv"), "w") as fh:
            writer = csv.DictWriter(fh, fieldnames=["variant", "op", "ms_per_call", "share", "count_per_call"])
            writer.writeheader()
            writer.writerows(dict(r, variant=name) for name, p in profiles.items() for r in p["ops"])

    common = {"cpu_model": cpu, "cpu_bf16_flags": " ".join(bf16), "matmul_peak_gflops": round(peak, 1),
              "tiny": bool(f.tiny), "repeats": f.repeats, "calls": f.calls, "batch_size": B, "seq_length": T,
              "dtype_policy": policy, "vocab_size": vocab}
    atomic.write_json(os.path.join(out, "results.json"), dict(
        common, cpu_bf16_flags=bf16, config=config.to_dict(), export_dir=export_dir, export_xla_dir=xla_dir, rows=rows,
        keras_hub_fastest=hub_best, albert_tf_over_keras_hub=ratio, albert_tf_xla_over_keras_hub=ratio_xla,
        roofline=roofline,
        versions={"tensorflow": tf.__version__, "keras": keras.__version__, "keras_hub": keras_hub.__version__}))
    with atomic.open_file(os.path.join(out, "results.csv"), "w") as fh:
        fields = list(common) + [k for k in rows[0] if k != "runs"]
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(dict(common, **r) for r in rows)
    print(f"wrote {out}/results.json and results.csv" + (" (op_profile.json, op_profile.csv, traces in profile/)"
                                                         if profiles else ""))
    return 0


main, entry = entry_points.command("inference_bench", define_flags, run)


if __name__ == "__main__":
    entry()
