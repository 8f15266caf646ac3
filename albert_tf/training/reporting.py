"""What a run shows and leaves behind: the console progress line, metrics.jsonl,
TensorBoard summaries and the PNG curves. One writer for every command.

metrics.jsonl holds one JSON record a line: `{"split": "train", "step", <metrics>,
"learning_rate", "examples_per_second"}` every `iterations_per_loop` steps and
`{"split": "eval", "step", <metrics>}` after each evaluation.
"""

import json
import math
import os
import sys

from albert_tf.data.tfrecord_file import read_records as read_tfrecords
from albert_tf.storage import atomic
from albert_tf.storage.json_files import read_json_lines
from albert_tf.storage import files

METRICS_FILE = "metrics.jsonl"


def _duration(seconds):
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


class MetricsLogger:
    """Console progress, output_dir/metrics.jsonl and TensorBoard (chief only).

    Args:
        output_dir: the run directory.
        num_train_steps: for the progress line.
        progress_metrics: (metric key, console label) pairs shown on the progress line.
        enabled: False on non-chief workers.
        stream: the console.
        fresh: a new run (an old metrics.jsonl is replaced); False when resuming.
        drop_after: when resuming training, the step of the checkpoint resumed from: the records
            of later steps (a killed session's, logged again as they are done again) are dropped.
    """

    def __init__(self, output_dir, num_train_steps, progress_metrics=(("loss", "loss"),), enabled=True,
                 stream=None, fresh=True, drop_after=None):
        import tensorflow as tf

        self.enabled = enabled
        self.num_train_steps = num_train_steps
        self.progress_metrics = tuple(progress_metrics)
        self.stream = stream or sys.stdout  # the console as it is now, not at import
        self.path = files.join(output_dir, METRICS_FILE)
        self._tf = tf
        self.writer = tf.summary.create_file_writer(files.join(output_dir, "train")) if enabled else None
        self.eval_writer = tf.summary.create_file_writer(files.join(output_dir, "eval")) if enabled else None
        if enabled and fresh and files.exists(self.path):
            atomic.write_text(self.path, "")
        elif enabled and drop_after is not None and files.exists(self.path):
            self._drop_after(drop_after)

    def _drop_after(self, step):
        later = {n for n, record in read_json_lines(self.path, f"a {METRICS_FILE} record") if record["step"] > step}
        if later:
            with files.open(self.path) as f:
                lines = f.read().split("\n")
            atomic.write_text(self.path, "".join(f"{line}\n" for n, line in enumerate(lines, 1)
                                                 if line.strip() and n not in later))

    def evaluation_at(self, step):
        """The metrics of the evaluation at `step` that metrics.jsonl holds (a session killed after
        logging them), or None."""
        evaluations = [r for r in read_records(self.path) if r["split"] == "eval" and r["step"] == step]
        if not evaluations:
            return None
        return {k: v for k, v in evaluations[-1].items() if k not in ("split", "step")}

    def _scalars(self, writer, step, values):
        with writer.as_default(step=step):
            for k, v in values.items():
                if isinstance(v, (int, float)) and k not in ("step", "global_step"):
                    self._tf.summary.scalar(k, v)
        writer.flush()

    def log_train(self, step, metrics, learning_rate, examples_per_second, seconds_left):
        if not self.enabled:
            return
        record = {"split": "train", "step": int(step), **metrics, "learning_rate": learning_rate,
                  "examples_per_second": examples_per_second}
        atomic.append_line(self.path, json.dumps(record))
        self._scalars(self.writer, step, {**metrics, "learning_rate": learning_rate,
                                          "examples_per_second": examples_per_second})
        shown = "  ".join(f"{label} {metrics[k]:.4f}" for k, label in self.progress_metrics if k in metrics)
        print(f"step {step}/{self.num_train_steps}  {shown}  lr {learning_rate:.3g}  {examples_per_second:.1f} ex/s  "
              f"ETA {_duration(seconds_left)}", file=self.stream, flush=True)

    def log_eval(self, step, metrics, best=False):
        if not self.enabled:
            return
        atomic.append_line(self.path, json.dumps({"split": "eval", "step": int(step), **metrics}))
        self._scalars(self.eval_writer, step, metrics)
        shown = "  ".join(f"{k} {v:.4f}" for k, v in metrics.items()
                          if isinstance(v, float) and k not in ("global_step",))
        print(f"eval at step {step} ({metrics.get('examples', '?')} examples, {metrics.get('steps', '?')} batches): "
              f"{shown}" + ("  (best so far)" if best else ""), file=self.stream, flush=True)

    def close(self):
        for writer in (self.writer, self.eval_writer):
            if writer is not None:
                writer.close()


def cut_partial_events(output_dir):
    """Cuts each local TensorBoard events file of run directory `output_dir` (train/, eval/) to
    its last whole record, and removes one with none: TensorFlow's events writer leaves a record
    cut short where a write failed for space (a reader stops there with a DataLossError)."""
    if files.is_url(output_dir):
        return
    for directory in (files.join(output_dir, "train"), files.join(output_dir, "eval")):
        for name in files.listdir(directory) if files.isdir(directory) else ():
            path, whole = files.join(directory, name), 0
            try:
                with files.open(path, "rb") as f:
                    for record in read_tfrecords(f, source=path):
                        whole += len(record) + 16  # its length, the checksums
            except ValueError as e:
                if "truncated" not in str(e):  # changed bytes: no failed write's, left as they are
                    continue
            if not whole:
                files.remove(path)
            elif whole < files.getsize(path):
                os.truncate(path, whole)


def read_records(path):
    """The records of a metrics.jsonl.

    Raises:
        JsonFileError (a ValueError): a line that is not a JSON object (named by file and line).
    """
    if not files.exists(path):
        return []
    return [record for _, record in read_json_lines(path, f"a {METRICS_FILE} record")]


NOT_PLOTTED = {"step", "global_step", "split", "examples", "steps", "learning_rate", "examples_per_second"}


def plot_curves(records, path, title="", baseline=None, baseline_metric=None):
    """One panel per metric (train and eval against the step), plus the learning rate;
    a dashed line for `baseline` on `baseline_metric`. Writes a PNG atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in records if r["split"] == "train"]
    evals = [r for r in records if r["split"] == "eval"]
    keys = sorted({k for r in records for k, v in r.items() if k not in NOT_PLOTTED and isinstance(v, (int, float))},
                  key=lambda k: (k != "loss", "accuracy" in k, k))
    panels = keys + (["learning_rate"] if any("learning_rate" in r for r in train) else [])
    if not panels:
        raise ValueError("no metric to plot in the records.")
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), squeeze=False)
    for ax, key in zip(axes.flat, panels):
        for split, points, style in (("train", train, "-"), ("eval", evals, "o-")):
            xs = [r["step"] for r in points if key in r]
            if xs:
                ax.plot(xs, [r[key] for r in points if key in r], style, label=split, markersize=4)
        if baseline is not None and key == baseline_metric:
            ax.axhline(baseline, color="gray", linestyle="--", label="majority baseline")
        ax.set_title(key)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.locator_params(nbins=4)  # a few round ticks (each tick's text is laid out when drawn)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    # one legend for the figure: every panel draws train and eval alike
    handles = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(list(handles.values()), list(handles), loc="upper right", fontsize=8, ncol=len(handles))
    if title:
        fig.suptitle(title)
    # fixed margins (inches) instead of tight_layout, which is slow (it lays out every panel's text)
    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=0.7 / width, right=1 - 0.2 / width, bottom=0.55 / height,
                        top=1 - (0.75 if title else 0.4) / height, wspace=0.3, hspace=0.55)
    with atomic.output_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return path
