"""Two trees' encoders against each other: pretraining and fine-tuning step time, and the peak
memory of a pretraining step with remat, each tree's cells alternating in fresh processes.

    python benchmarks/encoder_ab_bench.py --base=/tmp/base [--result=.] [--rounds=5] \
        [--size=base] [--seq=128] [--batch=8] [--steps=5]

--base and --result are checkouts (e.g. `mkdir /tmp/base && git archive d5fa711 | tar -x -C
/tmp/base`); each cell runs that tree's albert_tf. Per round and tree (the order alternating
from round to round, so a drift in the machine's speed hits both):
- pretrain: benchmarks/memory_cell.py of the tree (the training driver's pretraining step,
  float32, LAMB), --steps timed steps after a warm-up;
- pretrain_remat: the same with --remat, whose peak memory over the baseline (resident set,
  and TensorFlow's allocator) is compared;
- finetune: an AlbertClassifier training step (AdamW, dropout 0.1, padding skipped as the
  driver runs it, rows of varied lengths) in a tf.function, --steps timed after a warm-up.
Prints per cell the medians over the rounds and result / base.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

FINETUNE = r"""
import json, statistics, sys, time
import keras, numpy as np, tensorflow as tf
from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.losses import classifier_nll

cell = json.loads(sys.argv[1])
config = AlbertConfig.from_preset("albert_" + cell["size"]).replace(hidden_dropout_prob=0.1,
                                                                    attention_probs_dropout_prob=0.1)
keras.utils.set_random_seed(0)
model = AlbertClassifier(AlbertEncoder(config, name="encoder"), 2)
model.configure_runtime(skip_padding=True, replica_index=lambda: 0)  # as the training driver
optimizer = keras.optimizers.AdamW(1e-5)
rng = np.random.default_rng(0)
batch, seq = cell["batch"], cell["seq"]
mask = (np.arange(seq)[None] < rng.integers(seq // 4, seq + 1, (batch, 1))).astype("int32")
inputs = {"input_word_ids": rng.integers(5, config.vocab_size, (batch, seq)).astype("int32") * mask,
          "input_mask": mask, "input_type_ids": np.zeros((batch, seq), "int32")}
labels = rng.integers(0, 2, batch).astype("int32")

@tf.function
def step(inputs, labels):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(classifier_nll(model(inputs, training=True), labels))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss

step(inputs, labels).numpy()
times = []
for _ in range(cell["steps"]):
    start = time.perf_counter()
    step(inputs, labels).numpy()
    times.append(time.perf_counter() - start)
print("MEMORY_CELL " + json.dumps(dict(cell, step_seconds=times)), flush=True)
"""


def run_cell(tree, name, cell):
    """One cell in a fresh process running `tree`'s albert_tf; its record (memory_cell's keys)."""
    if name == "finetune":
        argv = [sys.executable, "-c", FINETUNE, json.dumps(cell)]
    else:
        cell = dict(cell, system="albert_tf", policy="float32", remat=name == "pretrain_remat")
        argv = [sys.executable, os.path.join(tree, "benchmarks", "memory_cell.py"), json.dumps(cell)]
    env = dict(os.environ, PYTHONPATH=tree, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("MEMORY_CELL ")]
    if proc.returncode or not lines:
        sys.exit(f"{tree} {name}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("MEMORY_CELL "):])


def figures(name, record):
    """{figure: value} of a cell's record: its median step seconds, and with remat its peaks."""
    out = {"step_seconds": statistics.median(record["step_seconds"])}
    if name == "pretrain_remat":
        out["peak_rss_over_baseline"] = record["peak_rss"] - record["baseline_rss"]
        if "tensor_peak" in record:
            out["tensor_peak_over_baseline"] = record["tensor_peak"] - record["tensor_baseline"]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the base checkout")
    parser.add_argument("--result", default=".", help="the checkout measured against it")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", default="base", help="an ALBERT preset size: tiny, base, large, ...")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per cell, after a warm-up step")
    parser.add_argument("--cells", default="pretrain,pretrain_remat,finetune")
    f = parser.parse_args(argv)
    trees = {"base": os.path.abspath(f.base), "result": os.path.abspath(f.result)}
    cell = {"size": f.size, "seq": f.seq, "batch": f.batch, "steps": f.steps}
    values = {}  # (cell, tree, figure) -> [one value per round]
    for round_ in range(f.rounds):
        order = ["base", "result"] if round_ % 2 == 0 else ["result", "base"]
        for name in f.cells.split(","):
            for tree in order:
                for figure, value in figures(name, run_cell(trees[tree], name, cell)).items():
                    values.setdefault((name, tree, figure), []).append(value)
        print(f"round {round_ + 1}/{f.rounds} done", flush=True)
    print(f"{'cell':<16}{'figure':<28}{'base':>14}{'result':>14}{'ratio':>8}")
    for (name, tree, figure), base in values.items():
        if tree == "base":
            a, b = statistics.median(base), statistics.median(values[(name, "result", figure)])
            print(f"{name:<16}{figure:<28}{a:>14.4g}{b:>14.4g}{b / a:>8.3f}")


if __name__ == "__main__":
    main()
