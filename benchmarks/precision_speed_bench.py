"""bf16 speed, all in one run: pretraining against the bf16 matmul peak and keras-hub,
fine-tuning bf16 against float32, and bf16 exports against float32 ones (issue 29's targets).

    python benchmarks/precision_speed_bench.py [--repeats=5] [--output_dir=results/precision_speed]
    python benchmarks/precision_speed_bench.py --tiny     # smoke test: tiny configs, seconds

Meaningful on hardware that computes bf16 natively (a CPU with avx512_bf16 / amx_bf16, an
A100/H100, a TPU); elsewhere it still runs (emulated bf16 is slower) and says so. Every
variant is built first, then timed in --repeats interleaved rounds (a drift in the
machine's speed hits all), and the median is reported.

(a) Pretraining step, albert_base (V 30000), batch 8, seq 128, 20 predictions: albert_tf's
    full step (MLM + SOP, the release's LAMB, clipping) through the driver's Trainer at
    mixed_bfloat16; keras-hub's AlbertMaskedLM train_on_batch (XLA, keras.optimizers.Lamb) at
    float32 and at mixed_bfloat16, its faster one taken as the peer. Fraction of peak:
    examples/s x the step's analytic FLOPs (train_step_bench.training_flops_per_example)
    against a 2048^3 bf16 matmul timed in this process. Targets: >= 75% of it, >= 1.3x
    keras-hub.
(b) Fine-tuning: the docstring-topics classifier (notebooks/data/docstring_topics, real
    sentences: about 17 pieces each) through the driver's Trainer with run_classifier's
    defaults (length buckets, padding skipping), T 128, batch 32, AdamW, at albert_base dims
    and at a mid-size ALBERT (H 256, L 4, I 1024, 4 heads), each at mixed_bfloat16 and
    float32. Targets: bf16 >= 1.5x float32 at albert_base, >= 1.4x at mid size.
(c) Serving: the albert_base encoder exported (export_tfhub) at float32 and at
    mixed_bfloat16, its serving_default signature called with batch 1 at 16 and 32 tokens
    (latency, ms) and batch 32 at 128 tokens (examples/s). Targets: bf16 latency no higher
    than float32's at 16 and 32 tokens; bf16 batch-32 throughput >= 1.5x float32's.

Writes results.json and results.csv (one row per measurement, with its target and whether
it was met) in --output_dir.
"""

import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(BENCH, ".."))
if ROOT not in sys.path:  # run as a script: this checkout's albert_tf
    sys.path.insert(0, ROOT)

from albert_tf import entry_points  # light: albert_tf.cli is imported when main runs

TOPICS = os.path.join(ROOT, "notebooks", "data", "docstring_topics")
LABELS = ["concurrency", "networking", "numbers", "text"]
MID = {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 1024,
       "embedding_size": 128}
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128,
        "embedding_size": 32, "vocab_size": 3000}


def define_flags(flag_values):
    from absl import flags

    flags.DEFINE_integer("repeats", 5, "Interleaved rounds; the median is reported.", flag_values=flag_values)
    flags.DEFINE_integer("train_steps", 6, "Timed training steps per round (pretraining and fine-tuning).",
                         flag_values=flag_values)
    flags.DEFINE_integer("calls", 20, "Timed serving calls per round.", flag_values=flag_values)
    flags.DEFINE_list("parts", ["pretraining", "finetuning", "serving"], "Which of (a), (b), (c) to run.",
                      flag_values=flag_values)
    flags.DEFINE_string("output_dir", "results/precision_speed", "Where results go.", flag_values=flag_values)
    flags.DEFINE_bool("tiny", False, "Smoke test: tiny configs, few steps.", flag_values=flag_values)


def classifier_trainer(config, policy, spm_model):
    """run(steps) -> seconds, and examples per step, of the topic classifier's training."""
    from albert_tf.tasks.classification.data import get_task, read_examples
    from albert_tf.modeling.pretrainer import AlbertPretrainer
    from albert_tf.tasks.classification.task import ClassificationOptions, ClassificationTask
    from albert_tf.training.driver import Trainer, TrainingOptions

    directory = tempfile.mkdtemp(prefix="precision_speed_")
    pretrained = AlbertPretrainer(config).save_pretrained(os.path.join(directory, "pretrained"))
    task_def = get_task("tsv", labels=LABELS, text_a_column="sentence")
    splits = {"train": read_examples(task_def, TOPICS, "train")}
    options = ClassificationOptions(task_name="tsv", data_dir=TOPICS, output_dir="unused", init_checkpoint=pretrained,
                                    spm_model_file=spm_model,
                                    albert_config_file=os.path.join(pretrained, "albert_config.json"),
                                    max_seq_length=128, text_a_column="sentence", labels=LABELS)
    task = ClassificationTask(options, task_def, splits)
    trainer = Trainer(task, TrainingOptions(output_dir="unused", train_batch_size=32, num_train_steps=100_000,
                                            learning_rate=1e-5, optimizer="adamw", dtype_policy=policy))
    iterator = iter(task.train_dataset(None, 32, 0).repeat())
    trainer.train(iterator, 2)

    def run(n):
        start = time.perf_counter()
        trainer.train(iterator, n)
        return time.perf_counter() - start

    return run


def served_encoder(pretrainer, policy, spm_model, directory):
    """`pretrainer`'s encoder exported at `policy` and loaded: call(ids) -> outputs."""
    import tensorflow as tf

    from albert_tf.export.exporter import export_tfhub

    path = os.path.join(directory, policy)
    export_tfhub(pretrainer, spm_model, path, dtype_policy=policy, with_preprocess=False)  # the encoder is served
    signature = tf.saved_model.load(os.path.join(path, "encoder")).signatures["serving_default"]
    return lambda inputs: signature(**inputs)


def encoder_inputs(batch, length, vocab, seed=0):
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab, (batch, length)).astype("int32")
    ids[:, 0], ids[:, -1] = 2, 3
    return {"input_word_ids": tf.constant(ids), "input_mask": tf.ones((batch, length), tf.int32),
            "input_type_ids": tf.zeros((batch, length), tf.int32)}


def interleaved(runners, repeats, label):
    """{name: [value per round]}; runners: {name: () -> value}."""
    values = {name: [] for name in runners}
    for i in range(repeats):
        for name, runner in runners.items():
            values[name].append(runner())
        print(f"  {label} round {i + 1}/{repeats}: " + ", ".join(f"{n} {v[-1]:.3f}" for n, v in values.items()),
              flush=True)
    return {name: statistics.median(v) for name, v in values.items()}, values


def run(f):
    sys.path.insert(0, BENCH)
    import train_step_bench as tsb

    from albert_tf.data.sample_corpus import source_for, write_corpus
    from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.storage import atomic
    from albert_tf.training.precision import choose, read_cpuinfo

    bad = [p for p in f.parts if p not in ("pretraining", "finetuning", "serving")]
    if bad or f.repeats < 1 or f.train_steps < 1 or f.calls < 1:
        raise ValueError(f"--parts must be of pretraining, finetuning, serving (got {bad}); --repeats, "
                         "--train_steps and --calls must be positive.")
    cpu, flags_ = read_cpuinfo()
    native = choose("auto")
    bf16_flags = sorted(x for x in flags_ if x in ("avx512_bf16", "amx_bf16"))
    print(f"CPU {cpu}; bf16 flags: {', '.join(bf16_flags) or 'none'}; auto = {native.policy}", flush=True)
    out = f.output_dir
    os.makedirs(out, exist_ok=True)
    base = AlbertConfig.from_preset("albert_base").replace(**(TINY if f.tiny else {}))
    peaks = {dtype: tsb.matmul_peak_gflops(dtype=dtype) for dtype in ("bfloat16", "float32")}
    print(f"2048^3 matmul: bf16 {peaks['bfloat16']:.1f} GFLOP/s, float32 {peaks['float32']:.1f} GFLOP/s", flush=True)
    rows = []

    def row(part, name, value, unit, target=None, met=None, **extra):
        rows.append({"part": part, "measurement": name, "value": round(value, 4), "unit": unit,
                     "target": target or "", "met": "" if met is None else bool(met), **extra})
        verdict = "" if met is None else ("MET" if met else "MISSED")
        print(f"{part:<12} {name:<52} {value:10.3f} {unit:<6} {target or ''} {verdict}",
              flush=True)

    spm_model = None
    if {"finetuning", "serving"} & set(f.parts):
        prefix = os.path.join(out, "spm", "sample")
        spm_model = prefix + ".model"
        if not os.path.exists(spm_model):
            os.makedirs(os.path.dirname(prefix), exist_ok=True)
            corpus = os.path.join(out, "spm", "corpus.txt")
            write_corpus(corpus, 1.0 if f.tiny else 4.0, source_for(1.0 if f.tiny else 4.0))
            train_sentencepiece([corpus], prefix, SentencePieceOptions(vocab_size=3000 if f.tiny else 8000))

    if "pretraining" in f.parts:
        flops = tsb.training_flops_per_example(base)
        runners = {"albert_tf bf16": tsb.build_albert_tf(base, jit=False, dtype_policy="mixed_bfloat16"),
                   "keras-hub float32": tsb.build_keras_hub(base, dtype_policy="float32"),
                   "keras-hub bf16": tsb.build_keras_hub(base, dtype_policy="mixed_bfloat16")}
        steps = f.train_steps
        medians, _ = interleaved({k: (lambda r=r: steps * tsb.BATCH / r(steps)) for k, r in runners.items()},
                                 f.repeats, "pretraining ex/s")
        peer = max(("keras-hub float32", "keras-hub bf16"), key=medians.get)
        fraction = medians["albert_tf bf16"] * flops / 1e9 / peaks["bfloat16"]
        for name, value in medians.items():
            row("pretraining", f"{name} examples/s (B8 T128 P20)", value, "ex/s")
        row("pretraining", "albert_tf bf16: fraction of the bf16 matmul peak", fraction, "", ">= 0.75",
            fraction >= 0.75)
        ratio = medians["albert_tf bf16"] / medians[peer]
        row("pretraining", f"albert_tf bf16 / {peer} (keras-hub's fastest)", ratio, "x", ">= 1.3", ratio >= 1.3)

    if "finetuning" in f.parts:
        for label, config in (("albert_base", base), ("mid (H256 L4)", base.replace(**MID) if not f.tiny else base)):
            runners = {policy: classifier_trainer(config.replace(vocab_size=3000 if f.tiny else 8000), policy,
                                                  spm_model)
                       for policy in ("float32", "mixed_bfloat16")}
            steps = f.train_steps
            medians, _ = interleaved({k: (lambda r=r: steps * 32 / r(steps)) for k, r in runners.items()}, f.repeats,
                                     f"fine-tuning {label} ex/s")
            for policy, value in medians.items():
                row("finetuning", f"{label} {policy} examples/s", value, "ex/s")
            ratio = medians["mixed_bfloat16"] / medians["float32"]
            target = 1.5 if label == "albert_base" else 1.4
            row("finetuning", f"{label} bf16 / float32", ratio, "x", f">= {target}", ratio >= target)

    if "serving" in f.parts:
        directory = tempfile.mkdtemp(prefix="precision_speed_export_")
        config = base.replace(vocab_size=3000 if f.tiny else 8000)
        from albert_tf.modeling.pretrainer import AlbertPretrainer

        pretrainer = AlbertPretrainer(config)  # one set of weights, exported at both policies
        served = {policy: served_encoder(pretrainer, policy, spm_model, directory)
                  for policy in ("float32", "mixed_bfloat16")}
        for batch, length in ((1, 16), (1, 32), (32, 128)):
            inputs = encoder_inputs(batch, length, config.vocab_size)
            pooled = {p: fn(inputs)["pooled_output"].numpy() for p, fn in served.items()}  # also warms up
            difference = float(abs(pooled["float32"] - pooled["mixed_bfloat16"]).max())
            row("serving", f"batch {batch} x {length}: |bf16 - float32| pooled_output, max", difference, "")
            calls = f.calls if batch == 1 else max(2, f.calls // 8)

            def timer(fn, calls=calls, inputs=inputs):
                start = time.perf_counter()
                for _ in range(calls):
                    fn(inputs)["pooled_output"].numpy()
                return (time.perf_counter() - start) / calls

            medians, _ = interleaved({p: (lambda fn=fn: timer(fn)) for p, fn in served.items()}, f.repeats,
                                     f"serving batch {batch} x {length} s/call")
            if batch == 1:
                for policy, value in medians.items():
                    row("serving", f"batch 1 x {length} tokens, {policy} export", 1000 * value, "ms")
                ratio = medians["mixed_bfloat16"] / medians["float32"]
                row("serving", f"batch 1 x {length}: bf16 latency / float32 latency", ratio, "x", "<= 1.0",
                    ratio <= 1.0)
            else:
                for policy, value in medians.items():
                    row("serving", f"batch 32 x 128, {policy} export", batch / value, "ex/s")
                ratio = medians["float32"] / medians["mixed_bfloat16"]
                row("serving", "batch 32 x 128: bf16 throughput / float32", ratio, "x", ">= 1.5", ratio >= 1.5)

    results = {"cpu_model": cpu, "cpu_bf16_flags": bf16_flags, "auto_policy": native.policy,
               "matmul_gflops": peaks, "tiny": bool(f.tiny), "repeats": f.repeats, "rows": rows}
    atomic.write_json(os.path.join(out, "results.json"), results)
    atomic.write_csv(os.path.join(out, "results.csv"), rows, ["part", "measurement", "value", "unit", "target", "met"])
    print(f"wrote {out}/results.json and results.csv", flush=True)
    return 0


main, entry = entry_points.command("precision_speed_bench", define_flags, run)


if __name__ == "__main__":
    entry()
