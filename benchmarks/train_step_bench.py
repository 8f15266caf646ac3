"""Training-step speed of albert_base against keras-hub, and the fraction of the matmul peak.

    python benchmarks/train_step_bench.py [--steps=8] [--repeats=3] [--dtype_policy=auto] \
        [--variants=albert_tf,albert_tf_xla,keras_hub] [--output_dir=results/bench_train_step]

The full pretraining step run by the training driver's `Trainer` (graph mode and XLA) against
keras-hub's AlbertMaskedLM of the same size, in --repeats interleaved rounds; writes results.json
(with the machine record) and results.csv and prints the line harness.run_in_trees reads.
Method and figures: benchmarks/README.md.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_harness as harness  # noqa: E402

from albert_tf import entry_points  # noqa: E402  (light: albert_tf.cli is imported when main runs)

BATCH, SEQ, PREDICTIONS = 8, 128, 20


def define_flags(flag_values):
    from absl import flags

    from albert_tf import option_flags

    fv = {"flag_values": flag_values}
    flags.DEFINE_integer("steps", 8, "Timed steps per round.", **fv)
    flags.DEFINE_integer("repeats", 3, "Interleaved rounds (the median is reported).", **fv)
    flags.DEFINE_string("output_dir", "results/bench_train_step", "Where results go.", **fv)
    flags.DEFINE_list("variants", ["albert_tf", "albert_tf_xla", "keras_hub"], "Variants to time.", **fv)
    option_flags.define_precision(flag_values)  # albert_tf's step and keras-hub's


def matmul_peak_gflops(n=2048, runs=5, dtype="float32"):
    """Best GFLOP/s of an n^3 matmul in `dtype` (graph mode)."""
    import tensorflow as tf

    a = tf.cast(tf.random.normal((n, n)), dtype)
    b = tf.cast(tf.random.normal((n, n)), dtype)
    f = tf.function(lambda x, y: tf.matmul(x, y))
    return harness.best_rate(lambda: f(a, b).numpy(), 2 * n**3, runs) / 1e9


def timed(train, steps):
    """A round's runner: `train(steps)` timed, returning examples/s."""

    def run():
        start = time.perf_counter()
        train(steps)
        return steps * BATCH / (time.perf_counter() - start)

    return run


def build_albert_tf(config, jit, dtype_policy):
    """train(steps) for albert_tf's full pretraining step, traced and warmed up."""
    import tensorflow as tf

    from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask
    from albert_tf.training.driver import Trainer, TrainingOptions

    task = PretrainingTask(PretrainingOptions(config, [], max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS,
                                              global_batch_size=BATCH))
    trainer = Trainer(task, TrainingOptions(output_dir="unused", train_batch_size=BATCH, optimizer="lamb",
                                            learning_rate=1e-4, num_train_steps=10_000, jit_compile=jit,
                                            dtype_policy=dtype_policy))
    batch = harness.pretraining_batch(config.vocab_size, BATCH, SEQ, PREDICTIONS)
    iterator = iter(tf.data.Dataset.from_tensors(batch).repeat())
    trainer.train(iterator, 2)
    return lambda steps: trainer.train(iterator, steps)


def build_keras_hub(config, dtype_policy):
    """train(steps) for keras-hub's AlbertMaskedLM train_on_batch, compiled and warmed up."""
    import keras

    model = harness.keras_hub_masked_lm(config, dtype_policy)
    model.compile(optimizer=keras.optimizers.Lamb(learning_rate=1e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
    b = harness.pretraining_batch(config.vocab_size, BATCH, SEQ, PREDICTIONS)
    x, y, w = harness.keras_hub_inputs(b), b["masked_lm_ids"], b["masked_lm_weights"]

    def train(steps):
        for _ in range(steps):
            model.train_on_batch(x, y, sample_weight=w)

    train(2)
    return train


def run(f):
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.training.precision import choose

    builders = {"albert_tf": lambda: build_albert_tf(config, False, policy),
                "albert_tf_xla": lambda: build_albert_tf(config, True, policy),
                "keras_hub": lambda: build_keras_hub(config, policy)}
    unknown = [v for v in f.variants if v not in builders]
    if unknown or f.steps < 1 or f.repeats < 1:
        raise ValueError(f"--variants: some of {', '.join(builders)} ({', '.join(unknown)} is not); "
                         "--steps and --repeats at least 1.")
    precision = choose(f.dtype_policy)
    policy = precision.policy
    config = AlbertConfig.from_preset("albert_base")
    flops = harness.training_flops_per_example(config, SEQ, PREDICTIONS)
    peak = matmul_peak_gflops()
    print(f"dtype policy {policy} ({precision.reason}); fp32 matmul peak (n=2048, best of 5) {peak:.1f} GFLOP/s; "
          f"albert_base training cost {flops / 1e9:.1f} GFLOP per example", flush=True)
    rates = harness.interleaved({name: timed(builders[name](), f.steps) for name in f.variants}, f.repeats)
    medians = harness.medians(rates)
    rows = []
    for name, median in medians.items():
        gflops = median * flops / 1e9
        rows.append({"variant": name, "median_examples_per_second": round(median, 3),
                     "runs": [round(r, 3) for r in rates[name]], "gflops_per_second": round(gflops, 1),
                     "fraction_of_matmul_peak": round(gflops / peak, 3),
                     "computes": "MLM" if name == "keras_hub" else "MLM+SOP"})
        if "keras_hub" in medians:
            rows[-1]["ratio_vs_keras_hub"] = round(median / medians["keras_hub"], 3)
        print(f"{name:<14} {median:7.3f} examples/s  {gflops:6.1f} GFLOP/s = {gflops / peak:.0%} of matmul peak"
              + (f", {rows[-1]['ratio_vs_keras_hub']:.2f}x keras-hub" if "keras_hub" in medians else ""), flush=True)
    out = harness.output_dir(f.output_dir)
    harness.write_results(out, {"machine": harness.machine(), "matmul_peak_gflops": peak, "batch": BATCH,
                                "seq": SEQ, "predictions": PREDICTIONS, "training_flops_per_example": flops,
                                "dtype_policy": policy, "dtype_policy_reason": precision.reason}, rows)
    harness.report({name: medians[name] for name in medians if name != "keras_hub"})
    print(f"wrote {out}/results.json and results.csv")
    return 0


main, entry = entry_points.command("train_step_bench", define_flags, run)


if __name__ == "__main__":
    entry()
