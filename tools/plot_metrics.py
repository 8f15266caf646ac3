"""Draws the curves of a run (output_dir/metrics.jsonl of any albert_tf command) to PNG:
one panel per metric, train and eval against the step, and the learning rate. The
training driver writes the same picture as output_dir/training_curves.png at the end of
a run; this tool draws it at any time (e.g. during a run).

    python tools/plot_metrics.py --run_dir=runs/base [--output=runs/base/curves.png]

--output is written when new, replaced when this tool drew it (its marker), and refused
otherwise (exit status 2) before anything is drawn (albert_tf.storage.outputs).
"""

import dataclasses
import os


from albert_tf import entry_points, option_flags
from albert_tf.storage import outputs
from albert_tf.storage.options import Command, Output, option


@dataclasses.dataclass(kw_only=True)
class PlotOptions:
    """plot_metrics's own flag (--output is the one several commands share)."""

    run_dir: str = option(None, "An output_dir of run_pretraining, run_classifier, ... (holding metrics.jsonl).")


RECORD = Command("plot_metrics", ((PlotOptions, None), (Output, None)))


def define_flags(flag_values):
    option_flags.define_command(flag_values, RECORD)


def check_options(f):
    """Every check of the tool, before anything is read: --run_dir (ValueError) and --output
    (albert_tf.storage.outputs). Returns (the metrics file, the PNG)."""
    from albert_tf.training.reporting import METRICS_FILE

    if not f.run_dir:
        raise ValueError("--run_dir is required.")
    path = os.path.join(f.run_dir, METRICS_FILE)
    if not os.path.isfile(path):
        raise ValueError(f"{path} does not exist: is --run_dir the output_dir of a run?")
    output = f.output or os.path.join(f.run_dir, "curves.png")
    outputs.check([outputs.Output("--output", output, outputs.PLOT)], [outputs.Input("--run_dir", path)])
    return path, output


def run(f):
    from albert_tf.training.reporting import plot_curves, read_records

    path, output = check_options(f)
    records = read_records(path)
    if not records:
        raise ValueError(f"{path} holds no logged step yet.")
    with outputs.replacing_file(output, outputs.PLOT, "--output"):
        plot_curves(records, output, title=os.path.basename(os.path.normpath(f.run_dir)))
    print(f"wrote {output} ({len(records)} logged records)")
    return 0


main, entry = entry_points.command("plot_metrics", define_flags, run)


if __name__ == "__main__":
    entry()
