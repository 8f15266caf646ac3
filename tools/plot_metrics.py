"""Draws the loss and accuracy curves of a run (output_dir/metrics.jsonl) to PNG.

    python tools/plot_metrics.py --run_dir=runs/base [--output=runs/base/curves.png]
"""

import json
import os

from absl import flags

from albert_tf import cli
from albert_tf.storage import atomic


def define_flags():
    flags.DEFINE_string("run_dir", None, "A run_pretraining --output_dir (holding metrics.jsonl).")
    flags.DEFINE_string("output", None, "PNG path (default RUN_DIR/curves.png).")


def read_metrics(path):
    """metrics.jsonl -> list of dicts; ValueError naming the file and line when broken."""
    if not os.path.isfile(path):
        raise ValueError(f"{path} does not exist: is --run_dir a run_pretraining output_dir?")
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{number}: not JSON ({e.msg}).") from None
    if not rows:
        raise ValueError(f"{path} holds no logged step yet.")
    return rows


def plot(rows, output, title=""):
    """Writes a 3-panel PNG (losses, accuracies, learning rate) atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for key in ("loss", "masked_lm_loss", "sentence_order_loss"):
        axes[0].plot(steps, [r[key] for r in rows], label=key)
    axes[0].set_title("losses")
    for key in ("masked_lm_accuracy", "sentence_order_accuracy"):
        axes[1].plot(steps, [r[key] for r in rows], label=key)
    axes[1].set_title("accuracies")
    axes[2].plot(steps, [r["learning_rate"] for r in rows], label="learning_rate")
    axes[2].set_title("learning rate")
    for ax in axes:
        ax.set_xlabel("step")
        ax.legend()
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    try:
        with atomic.output_path(output) as tmp:
            fig.savefig(tmp, dpi=100, format="png")
    finally:
        plt.close(fig)
    return output


def run(f):
    if not f.run_dir:
        raise ValueError("--run_dir is required.")
    run_dir = f.run_dir
    output = f.output or os.path.join(run_dir, "curves.png")
    rows = read_metrics(os.path.join(run_dir, "metrics.jsonl"))
    plot(rows, output, title=os.path.basename(os.path.normpath(run_dir)))
    print(f"wrote {output} ({len(rows)} logged steps)")
    return 0


def entry():
    cli.main("plot_metrics", define_flags, run)


if __name__ == "__main__":
    entry()
