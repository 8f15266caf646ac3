"""Training-step speed of albert_base against keras-hub, and the fraction of matmul peak.

    python benchmarks/train_step_bench.py [--steps=8] [--repeats=3] [--dtype_policy=auto] \
        [--output_dir=results/bench_train_step]

albert_tf: AlbertPretrainer (albert_base, V=30000), batch 8, seq 128, 20 predictions,
the full step (masked LM + sentence order + release LAMB + global-norm clipping) run by
the training driver's `Trainer` with the pretraining task, in graph mode and with XLA. Peer, timed in the
same run: keras-hub's
AlbertMaskedLM on the same backbone size (masked LM only) with keras.optimizers.Lamb and
jit_compile=True, trained with train_on_batch. Each variant is timed over --steps steps
after warm-up, --repeats rounds that interleave the variants (so a drift in the machine's
speed hits all of them); the median examples/s is reported.

GFLOP/s: training FLOPs per example (counted analytically: 2 FLOPs per multiply-add,
x3 for forward + backward, encoder + MLM head on the predicted positions) times
examples/s; the peak is the best fp32 matmul GFLOP/s (n = 2048, graph mode) measured
in the same run. Writes results.json and results.csv.
"""

import csv
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

BATCH, SEQ, PREDICTIONS = 8, 128, 20


def define_flags():
    from absl import flags

    flags.DEFINE_integer("steps", 8, "Timed steps per repeat.")
    flags.DEFINE_integer("repeats", 3, "Repeats per variant (the median is reported).")
    flags.DEFINE_string("output_dir", "results/bench_train_step", "Where results go.")
    flags.DEFINE_string("variants", "albert_tf,albert_tf_xla,keras_hub", "Comma list of variants to time.")
    from absl import flags

    from albert_tf import option_flags

    option_flags.define_precision(flags.FLAGS)  # albert_tf's step and keras-hub's


def training_flops_per_example(config, seq=SEQ, predictions=PREDICTIONS):
    """Analytic training FLOPs of one example (forward + backward = 3x forward)."""
    H, I, E, V, L = (config.hidden_size, config.intermediate_size, config.embedding_size, config.vocab_size,
                     config.num_hidden_layers)
    per_token = L * (4 * H * H + 2 * H * I + 2 * seq * H)  # projections, FFN, scores and context
    if E != H:
        per_token += E * H
    head = predictions * (H * E + E * V) + H * H + 2 * H  # MLM transform + logits, pooler, SOP
    return 2 * 3 * (seq * per_token + head)


def matmul_peak_gflops(n=2048, runs=5, dtype="float32"):
    """Best GFLOP/s of an n^3 matmul in `dtype` (graph mode)."""
    import tensorflow as tf

    a = tf.cast(tf.random.normal((n, n)), dtype)
    b = tf.cast(tf.random.normal((n, n)), dtype)
    f = tf.function(lambda x, y: tf.matmul(x, y))
    return best_rate(lambda: f(a, b).numpy(), 2 * n**3, runs) / 1e9


def best_rate(call, flops, runs):
    """The best flops / seconds of `call()` (which must wait for its result) over `runs`
    timed calls after one untimed call."""
    call()
    best = 0.0
    for _ in range(runs):
        start = time.perf_counter()
        call()
        best = max(best, flops / (time.perf_counter() - start))
    return best


def random_batch(vocab_size, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    return {
        "input_word_ids": rng.integers(5, vocab_size, (BATCH, SEQ)).astype("int32"),
        "input_mask": np.ones((BATCH, SEQ), "int32"),
        "input_type_ids": np.concatenate([np.zeros((BATCH, SEQ // 2)), np.ones((BATCH, SEQ // 2))], 1).astype("int32"),
        "masked_lm_positions": np.sort(rng.choice(np.arange(1, SEQ), (BATCH, PREDICTIONS)), 1).astype("int32"),
        "masked_lm_ids": rng.integers(5, vocab_size, (BATCH, PREDICTIONS)).astype("int32"),
        "masked_lm_weights": np.ones((BATCH, PREDICTIONS), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (BATCH, 1)).astype("int32"),
    }


def build_albert_tf(config, jit, dtype_policy="float32"):
    """Returns run(steps) -> seconds for albert_tf's full pretraining step."""
    import tensorflow as tf

    from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask
    from albert_tf.training.driver import Trainer, TrainingOptions

    task = PretrainingTask(PretrainingOptions(config, [], max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS,
                                              global_batch_size=BATCH))
    trainer = Trainer(task, TrainingOptions(output_dir="unused", train_batch_size=BATCH, optimizer="lamb",
                                            learning_rate=1e-4, num_train_steps=10_000, jit_compile=jit,
                                            dtype_policy=dtype_policy))
    data = tf.data.Dataset.from_tensors(random_batch(config.vocab_size)).repeat()
    iterator = iter(data)
    trainer.train(iterator, 2)  # trace and warm up

    def run(steps):
        start = time.perf_counter()
        trainer.train(iterator, steps)
        return time.perf_counter() - start

    return run


def keras_hub_masked_lm(config, dtype_policy="float32"):
    """keras-hub's AlbertMaskedLM with `config`'s sizes (dropout 0), no preprocessor."""
    import keras_hub

    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers, num_heads=config.num_attention_heads,
        embedding_dim=config.embedding_size, hidden_dim=config.hidden_size, intermediate_dim=config.intermediate_size,
        num_groups=config.num_hidden_groups, num_inner_repetitions=config.inner_group_num, dropout=0.0,
        max_sequence_length=config.max_position_embeddings, dtype=dtype_policy)
    return keras_hub.models.AlbertMaskedLM(backbone=backbone, preprocessor=None, dtype=dtype_policy)


def build_keras_hub(config, dtype_policy="float32"):
    """Returns run(steps) -> seconds for keras-hub's AlbertMaskedLM train_on_batch."""
    import keras

    model = keras_hub_masked_lm(config, dtype_policy)
    model.compile(optimizer=keras.optimizers.Lamb(learning_rate=1e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
    b = random_batch(config.vocab_size)
    x = {"token_ids": b["input_word_ids"], "segment_ids": b["input_type_ids"], "padding_mask": b["input_mask"],
         "mask_positions": b["masked_lm_positions"]}
    y, w = b["masked_lm_ids"], b["masked_lm_weights"]
    for _ in range(2):
        model.train_on_batch(x, y, sample_weight=w)

    def run(steps):
        start = time.perf_counter()
        for _ in range(steps):
            model.train_on_batch(x, y, sample_weight=w)
        return time.perf_counter() - start

    return run


def main(argv):
    del argv
    from absl import flags

    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.training.precision import choose

    f = flags.FLAGS
    precision = choose(f.dtype_policy)
    policy = precision.policy
    print(f"dtype policy {policy} ({precision.reason})", flush=True)
    config = AlbertConfig.from_preset("albert_base")
    flops = training_flops_per_example(config)
    peak = matmul_peak_gflops()
    print(f"fp32 matmul peak (n=2048, graph, best of 5): {peak:.1f} GFLOP/s; "
          f"albert_base training cost {flops / 1e9:.1f} GFLOP per example ({flops / SEQ / 1e9:.3f} per token)",
          flush=True)
    builders = {
        "albert_tf": lambda: build_albert_tf(config, jit=False, dtype_policy=policy),
        "albert_tf_xla": lambda: build_albert_tf(config, jit=True, dtype_policy=policy),
        "keras_hub": lambda: build_keras_hub(config, dtype_policy=policy),
    }
    names = f.variants.split(",")
    runners = {name: builders[name]() for name in names}
    rates = {name: [] for name in names}
    for repeat in range(f.repeats):  # interleaved, so drifts in machine speed hit every variant
        for name in names:
            rates[name].append(f.steps * BATCH / runners[name](f.steps))
        print(f"round {repeat + 1}/{f.repeats}: " + ", ".join(f"{n} {rates[n][-1]:.3f}" for n in names), flush=True)
    rows = []
    for name in names:
        rates_ = rates[name]
        median = statistics.median(rates_)
        gflops = median * flops / 1e9
        rows.append({"variant": name, "median_examples_per_second": round(median, 3),
                     "runs": [round(r, 3) for r in rates_], "gflops_per_second": round(gflops, 1),
                     "fraction_of_matmul_peak": round(gflops / peak, 3),
                     "computes": "MLM" if name == "keras_hub" else "MLM+SOP"})
        print(f"{name:<14} {median:6.3f} examples/s  (runs {', '.join(f'{r:.3f}' for r in rates_)})  "
              f"{gflops:6.1f} GFLOP/s = {gflops / peak:.0%} of matmul peak", flush=True)
    by_name = {r["variant"]: r for r in rows}
    if "keras_hub" in by_name:
        base = by_name["keras_hub"]["median_examples_per_second"]
        for r in rows:
            r["ratio_vs_keras_hub"] = round(r["median_examples_per_second"] / base, 3)
            print(f"{r['variant']:<14} {r['ratio_vs_keras_hub']:.2f}x keras-hub's examples/s")
    out = os.path.join(ROOT, f.output_dir) if not os.path.isabs(f.output_dir) else f.output_dir
    os.makedirs(out, exist_ok=True)
    from albert_tf.storage import atomic

    atomic.write_json(os.path.join(out, "results.json"),
                      {"matmul_peak_gflops": peak, "training_flops_per_example": flops, "batch": BATCH, "seq": SEQ,
                       "dtype_policy": policy, "dtype_policy_reason": precision.reason,
                       "predictions": PREDICTIONS, "rows": rows})
    with atomic.open_file(os.path.join(out, "results.csv"), "w") as fh:
        writer = csv.DictWriter(fh, fieldnames=[k for k in rows[0] if k != "runs"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out}/results.json and results.csv")


if __name__ == "__main__":
    from absl import app

    define_flags()
    app.run(main)
