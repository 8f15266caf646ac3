"""Re-runs the paper's ablations small, with error bars: sentence-level loss (SOP / NSP /
none), cross-layer sharing, embedding size, and pretrained against random init.

    python tools/reproduce.py --output_dir=repro                      # the default grid
    python tools/reproduce.py --tables=sop,sharing --seeds=4 --width=2 --output_dir=repro_gpu
    python tools/reproduce.py --quick --output_dir=/tmp/repro_quick   # the pipeline in minutes
    python tools/reproduce.py --report_only --output_dir=repro        # its report again, no step run

One process runs everything through the project's own commands (tools/reproduce_steps.py):
the docstring corpus of the installed environment split by source file into pretraining
and held-out documents, a SentencePiece model, pretraining data for SOP and NSP
(create_pretraining_data), every cell of the chosen tables pretrained with the same
budget and every seed (run_pretraining; the "none" objective is SOP data with
--nosentence_loss), each model's held-out masked-LM accuracy and its sentence head's
accuracy on held-out SOP and NSP pairs, then three downstream tasks made from the held-out
documents by the project's task tools (topic classification with run_classifier,
SQuAD-style QA with run_squad_v1, RACE-style multiple choice with run_race), fine-tuned
from every pretrained model and from random weights (the control).

Resumable: every finished step is recorded (`step.json`) and never redone; a killed run
continues at the first unfinished step (a training run from its newest checkpoint).
--output_dir holding a grid with other settings is refused (exit status 2) before any
work, as is any directory albert_tf did not make. grid.json stores --dtype_policy as this
machine resolves it (auto: float32 or mixed_bfloat16), so a grid resumed on a machine that
resolves it otherwise is refused rather than mixing float32 and bf16 cells. Writes `results.json`, one CSV per
table, `report.md` (our mean +- std beside the paper's numbers, whether each cell learned its
objective, and each claim's verdict by tools/reproduce_stats.py's rule) and PNG figures.
--report_only writes them again from `results.json` alone (a rule changed: no retraining).
"""

import dataclasses
import sys

from absl import flags

from albert_tf import entry_points, option_flags
from albert_tf.storage.options import Command, RunDirectory, option
from albert_tf.training.precision import PrecisionOptions

if __package__:  # imported as tools.reproduce
    from . import reproduce_grid as grid
    from . import reproduce_runner
else:  # `python tools/reproduce.py`, or imported by a tool run so: tools/ is sys.path[0]
    import reproduce_grid as grid
    import reproduce_runner

QUICK = {"tables": ("sop",), "seeds": 1, "hidden_size": 24, "num_attention_heads": 2, "num_hidden_layers": 2,
         "max_seq_length": 48, "max_predictions_per_seq": 6, "vocab_size": 1000, "pretrain_steps": 20,
         "pretrain_batch_size": 16, "finetune_steps": 6, "finetune_batch_size": 8, "corpus_mb": 1.5,
         "held_out_percent": 30}
BASE_HIDDEN = grid.Settings().hidden_size


@dataclasses.dataclass(kw_only=True)
class GridSize:
    """What tools/reproduce.py and tools/reproduce_pilot.py share of a grid's size."""

    seeds: int = option(grid.Settings().seeds, "Seeds: reproduce, per cell (pretraining and fine-tuning; a claim is "
                                               "judged only when each of its cells has at least 3); "
                                               "reproduce_pilot, fine-tuning seeds per source and task.")
    width: float = option(1.0, f"Width multiplier: hidden size {BASE_HIDDEN} x width (a multiple of 12 and of the "
                               "heads), embedding sizes at the paper's E/H ratios.")
    finetune_steps: int = option(grid.Settings().finetune_steps, "Steps of every fine-tuning run.")


@dataclasses.dataclass(kw_only=True)
class ReproduceOptions:
    """reproduce's own flags (the rest are the fields it shares: RECORD)."""

    tables: list = option(",".join(grid.TABLES), f"Which of the paper's tables: {', '.join(grid.TABLES)}.")
    num_attention_heads: int = option(grid.Settings().num_attention_heads, "Attention heads.")
    num_hidden_layers: int = option(grid.Settings().num_hidden_layers, "Transformer layers.")
    steps: int = option(grid.Settings().pretrain_steps, "Pretraining steps of every cell.")
    corpus_mb: float = option(grid.Settings().corpus_mb, "MB of docstring text to use (0: all found).")
    report_only: bool = option(False, "Run no step: write the report (CSVs, claims, report.md, figures) again from "
                                      "--output_dir's results.json by today's rule (tools/reproduce_stats.py); "
                                      "--output_dir must be this tool's own, the other flags are not read.")
    quick: bool = option(False, "Tiny models on the built-in sample corpus (1.5 MB), one seed, the sentence-level "
                                "table unless --tables says otherwise: the whole pipeline at test size (for tests; "
                                "its numbers mean nothing, and with one seed every claim is 'not testable').")


# --output_dir: where the grid lives (a new directory, or this tool's own: resumed)
RECORD = Command("reproduce", (
    (RunDirectory, None), (ReproduceOptions, ("tables",)), (GridSize, ("seeds", "width")),
    (ReproduceOptions, ("num_attention_heads", "num_hidden_layers", "steps")), (GridSize, ("finetune_steps",)),
    (ReproduceOptions, ("corpus_mb",)), (PrecisionOptions, None), (ReproduceOptions, ("report_only", "quick"))))


def define_flags(flag_values=None):
    option_flags.define_command(flags.FLAGS if flag_values is None else flag_values, RECORD)


def settings_from_flags(f):
    """The grid's Settings (ValueError naming the flag for bad values)."""
    tables = tuple(t.strip() for t in f.tables if t.strip())
    if f.quick:  # its own sizes; --tables, --seeds, --steps and --finetune_steps when given
        values = dict(QUICK, dtype_policy=f.dtype_policy)
        for flag, key in (("tables", "tables"), ("seeds", "seeds"), ("steps", "pretrain_steps"),
                          ("finetune_steps", "finetune_steps")):
            if f[flag].present:
                values[key] = tables if flag == "tables" else f[flag].value
        return grid.Settings(**values)
    hidden = BASE_HIDDEN * f.width
    if f.width <= 0 or abs(hidden - round(hidden)) > 1e-9:
        raise ValueError(f"--width={f.width} gives a hidden size of {hidden:g}, not a whole number.")
    return grid.Settings(tables=tables, seeds=f.seeds, hidden_size=int(round(hidden)),
                         num_attention_heads=f.num_attention_heads, num_hidden_layers=f.num_hidden_layers,
                         pretrain_steps=f.steps, finetune_steps=f.finetune_steps, corpus_mb=f.corpus_mb,
                         dtype_policy=f.dtype_policy)


def check_options(f):
    """Every check of the flags, before any step (ValueError naming the flag). Returns the
    grid's Settings, or None with --report_only (the other flags are not read)."""
    from albert_tf.training.precision import check_policy

    if not f.output_dir:
        raise ValueError("--output_dir is required.")
    if f.report_only:
        return None
    settings = settings_from_flags(f)
    settings.validate()
    check_policy(settings.dtype_policy)
    return settings


def run(f):
    settings = check_options(f)  # before any step
    if settings is None:
        return reproduce_runner.report_again(f.output_dir, stream=sys.stdout)
    return reproduce_runner.run_grid(settings, f.output_dir, quick=f.quick, stream=sys.stdout)


main, entry = entry_points.command("reproduce", define_flags, run)


if __name__ == "__main__":
    entry()
