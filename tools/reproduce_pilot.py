"""Transfer pilots for tools/reproduce.py's protocol: does pretraining beat random weights
downstream, and after how many pretraining steps?

    python tools/reproduce_pilot.py --output_dir=pilot --checkpoints=400,1000,2500 --seeds=3 \\
        [--tasks=topic,squad,race] [--scarce_per_class=20] [--width=1] [--finetune_steps=150]

On the grid's own data (the same corpus split, SentencePiece model, pretraining data and
downstream tasks as tools/reproduce.py with the same settings, made by its steps), it
pretrains ALBERT's own layout (all-shared, E = H/6, SOP) once, seed 1, to the last of
--checkpoints, keeping a checkpoint at each (one learning-rate schedule over the whole run:
a checkpoint at 400 steps is not the grid's 400-step run, whose rate decays to 0 there); then

- each checkpoint's held-out masked-LM and SOP accuracy (as the grid's evaluation);
- each of --tasks (topic, SQuAD-style, RACE-style; with --scarce_per_class also
  "topic_scarce": the topic task with that many training sentences a class, the same dev
  set) fine-tuned from each checkpoint and from random weights (the grid's control), with
  --seeds fine-tuning seeds each, the grid's fine-tuning settings.

The seeds vary the fine-tuning (and the control's random weights) only: one pretraining run
serves every checkpoint, so the spread leaves out pretraining's own seed noise.

Writes `pilot.json` (settings, per source its intrinsic accuracies and per task its
per-seed scores, per checkpoint and task the difference to random init judged by
tools/reproduce_stats.py's rule) and prints a table. Resumable as the grid: every finished
unit has a record under `pilot/` and is not redone. --output_dir is new or this tool's own
with the same settings (exit 2 otherwise).
"""

import dataclasses
import functools
import json
import math
import os

from absl import flags

from albert_tf import entry_points, option_flags
from albert_tf.storage.options import Command, RunDirectory, option
from albert_tf.training.precision import PrecisionOptions

if __package__:  # imported as tools.reproduce_pilot
    from . import reproduce
    from . import make_topic_task
    from . import reproduce_grid as grid
    from . import reproduce_runner as runner
    from .reproduce_runner import GUESS, Step, guess_for_steps
    from . import reproduce_stats as stats
    from . import reproduce_steps as steps
else:  # `python tools/reproduce_pilot.py`, or imported by a tool run so: tools/ is sys.path[0]
    import reproduce
    import make_topic_task
    import reproduce_grid as grid
    import reproduce_runner as runner
    from reproduce_runner import GUESS, Step, guess_for_steps
    import reproduce_stats as stats
    import reproduce_steps as steps

SCARCE = "topic_scarce"


@dataclasses.dataclass(kw_only=True)
class PilotOptions:
    """reproduce_pilot's own flags (the rest are the fields it shares: RECORD)."""

    checkpoints: list = option("400,1000,2500", "Pretraining steps to fine-tune from (the last is the run's "
                                                "length); multiples of 100.")
    tasks: list = option(",".join(grid.TASKS), f"Downstream tasks to fine-tune: some of {', '.join(grid.TASKS)}.")
    scarce_per_class: int = option(0, "Also the topic task with this many training sentences a class (0: not).")


# --output_dir: a new directory, or this tool's own (resumed)
RECORD = Command("reproduce_pilot", (
    (RunDirectory, None), (PilotOptions, ("checkpoints",)), (reproduce.GridSize, ("seeds",)),
    (PilotOptions, ("tasks", "scarce_per_class")), (reproduce.GridSize, ("width", "finetune_steps")),
    (PrecisionOptions, None)))


def define_flags(flag_values=None):
    option_flags.define_command(flags.FLAGS if flag_values is None else flag_values, RECORD)


class SourcePaths(steps.Paths):
    """The grid's paths, with one source's runs under pilot/<source>/ and, for
    --scarce_per_class, the scarce topic task in place of the topic task."""

    def __init__(self, output_dir, source, checkpoint=None, topic_dir=None):
        super().__init__(output_dir)
        self.source, self.checkpoint, self.topic_dir = source, checkpoint, topic_dir

    def run(self, cell, seed, step):
        if step == "pretrain" and self.checkpoint:
            return self.checkpoint
        return os.path.join(self.root, "pilot", self.source, f"seed{seed}", step)

    def task(self, name):
        return self.topic_dir if name == "topic" and self.topic_dir else super().task(name)


def make_scarce_topic(paths, per_class):
    """topic_scarce/: the first `per_class` training rows of each label of the topic task (its
    rows are in a fixed hash order), the same dev rows; written as tools/make_topic_task.py
    writes a task."""
    def rows(name):
        with open(os.path.join(paths.task("topic"), name), encoding="utf-8") as f:
            return [tuple(line.split("\t")) for line in f.read().splitlines()[1:]]

    kept, counts = [], {}
    for sentence, label in rows("train.tsv"):
        if counts.get(label, 0) < per_class:
            counts[label] = counts.get(label, 0) + 1
            kept.append((sentence, label))
    if min(counts.values()) < per_class:
        raise ValueError(f"--scarce_per_class={per_class}: the topic task has only {min(counts.values())} training "
                         "sentences in its smallest class.")
    make_topic_task.write_task(paths.task(SCARCE), kept, rows("dev.tsv"))
    return {"train": len(kept), "per_class": per_class}


def check_options(f):
    """Every check of the flags, before any step (ValueError naming the flag). Returns
    (checkpoints, tasks, the grid's settings from the flags, resolved)."""
    from albert_tf.training.precision import check_policy

    if not f.output_dir:
        raise ValueError("--output_dir is required.")
    try:
        checkpoints = sorted({int(c) for c in f.checkpoints})
    except ValueError:
        raise ValueError(f"--checkpoints={','.join(f.checkpoints)}: expected whole numbers of steps.") from None
    if not checkpoints or any(c <= 0 or c % 100 for c in checkpoints):
        raise ValueError(f"--checkpoints={','.join(f.checkpoints)}: expected positive multiples of 100.")
    tasks = [t.strip() for t in f.tasks if t.strip()]
    if any(t not in grid.TASKS for t in tasks) or not (tasks or f.scarce_per_class):
        raise ValueError(f"--tasks={','.join(f.tasks)}: expected some of {', '.join(grid.TASKS)}.")
    if f.seeds < 1 or f.scarce_per_class < 0:
        raise ValueError("--seeds must be at least 1 and --scarce_per_class at least 0.")
    flag_settings = reproduce.settings_from_flags(_GridFlags(f, checkpoints[-1]))
    settings = runner.resolved(flag_settings)
    check_policy(settings.dtype_policy)
    return checkpoints, tasks, flag_settings, settings


def run(f):
    checkpoints, tasks, flag_settings, settings = check_options(f)  # before any step
    pilot = {"checkpoints": checkpoints, "seeds": f.seeds, "scarce_per_class": f.scarce_per_class, "tasks": tasks}
    pilot_file = os.path.join(f.output_dir, "pilot", "settings.json")

    def check_pilot():
        if os.path.isfile(pilot_file) and steps.read_done(pilot_file) != pilot:
            raise ValueError(f"--output_dir={f.output_dir} holds a pilot with other settings ({pilot_file}); resume "
                             "it with those or choose a new --output_dir.")

    runner.claim_grid(f.output_dir, settings, flag_settings.dtype_policy, check_pilot)
    from albert_tf.storage import atomic

    os.makedirs(os.path.dirname(pilot_file), exist_ok=True)
    atomic.write_text(pilot_file, json.dumps(pilot, indent=2, sort_keys=True) + "\n")
    return _run_units(settings, f.output_dir, pilot)


class _GridFlags:
    """The flag values tools/reproduce.py's settings_from_flags reads, for this pilot."""

    def __init__(self, f, steps_):
        self.quick, self.tables, self.seeds, self.width = False, ["sop"], 1, f.width
        self.num_attention_heads, self.num_hidden_layers = grid.Settings().num_attention_heads, \
            grid.Settings().num_hidden_layers
        self.steps, self.finetune_steps, self.corpus_mb = steps_, f.finetune_steps, grid.Settings().corpus_mb
        self.dtype_policy = f.dtype_policy


def pilot_tasks(pilot):
    """The pilot's downstream tasks in order (--tasks, then topic_scarce with
    --scarce_per_class)."""
    return list(pilot.get("tasks", grid.TASKS)) + ([SCARCE] if pilot["scarce_per_class"] else [])


def _units(settings, root, pilot, state):
    """The Steps (reproduce_runner.Step) of every unit after the grid's data steps."""
    paths = steps.Paths(root)
    cell, control = grid.BASE, grid.CONTROL
    pretrain_dir = os.path.join(root, "pilot", "pretrain")
    record = functools.partial(_record, root)
    log = os.path.join(root, "pilot", "log.txt")
    last = pilot["checkpoints"][-1]
    every = math.gcd(*pilot["checkpoints"])  # a checkpoint at each of them, and only as many as needed

    def pretrain():
        from albert_tf import run_pretraining

        args = [f"--albert_config_file={steps.write_cell_config(settings, paths, cell)}",
                f"--input_file={paths.records('train', 'sop')}", f"--output_dir={pretrain_dir}",
                f"--max_seq_length={settings.max_seq_length}",
                f"--max_predictions_per_seq={settings.max_predictions_per_seq}",
                f"--train_batch_size={settings.pretrain_batch_size}",
                f"--learning_rate={settings.pretrain_learning_rate}", f"--num_train_steps={last}",
                f"--num_warmup_steps={last // 10}", f"--save_checkpoints_steps={every}",
                f"--keep_checkpoint_max={last // every}", "--iterations_per_loop=100", "--do_train", "--nodo_eval",
                "--dynamic_masking", "--sentence_loss=true", "--optimizer=lamb", "--random_seed=1",
                f"--dtype_policy={settings.dtype_policy}"]
        return {"final_step": steps.call_command(run_pretraining, "run_pretraining", args, log)["final_step"]}

    finetune_guess = guess_for_steps("finetune", settings.finetune_steps)
    units = [Step("pretrain", "pretrain", record("pretrain"), pretrain,
                  guess_for_steps("pretrain", last))]
    tasks = pilot_tasks(pilot)
    if pilot["scarce_per_class"]:
        units.append(Step("tasks", "scarce topic task", record("scarce_task"),
                          lambda: make_scarce_topic(paths, pilot["scarce_per_class"]), GUESS["tasks"]))
    sources = [("random", None)] + [(f"step{c}", os.path.join(pretrain_dir, f"ckpt-{c}"))
                                    for c in pilot["checkpoints"]]
    for source, checkpoint in sources:
        which = cell if checkpoint else control
        if checkpoint:
            units.append(Step("eval", f"held-out SOP eval {source}", record(source, "eval", "sop"),
                              lambda p=SourcePaths(root, source, checkpoint): steps.evaluate(settings, p, cell, 1,
                                                                                             "sop", log),
                              GUESS["eval"]))
        for task in tasks:
            # topic_scarce is the grid's topic run on the scarce files, in its own directories
            task_paths = (SourcePaths(root, source + "_scarce", checkpoint, paths.task(SCARCE)) if task == SCARCE
                          else SourcePaths(root, source, checkpoint))
            for seed in range(1, pilot["seeds"] + 1):
                units.append(Step("finetune", f"{task} {source} seed {seed}", record(source, task, seed),
                                  lambda p=task_paths, c=which, s=seed, t="topic" if task == SCARCE else task:
                                  steps.finetune(settings, p, c, s, t, state["tasks"], log), finetune_guess))
    return units


def _record(root, *parts):
    """The record of a finished pilot unit: pilot/steps/<parts joined by '-'>.json."""
    return os.path.join(root, "pilot", "steps", "-".join(str(p) for p in parts) + ".json")


def _run_units(settings, root, pilot):
    paths = steps.Paths(root)
    state = runner.saved_state(paths)
    data_steps = [s for s in runner.plan(settings, paths, False, state) if s.kind in ("corpus", "spm", "data", "tasks")]
    runner.run_steps(data_steps + _units(settings, root, pilot, state), None)
    summary = gather(root, pilot, state["tasks"])
    from albert_tf.storage import atomic

    atomic.write_text(os.path.join(root, "pilot.json"), json.dumps(summary, indent=2, sort_keys=True) + "\n")
    for line in table(summary):
        print(line)
    return 0


def gather(root, pilot, tasks_info):
    """pilot.json's content from the unit records."""
    record = functools.partial(_record, root)
    tasks = pilot_tasks(pilot)
    sizes = {"topic": tasks_info["topic_dev"], SCARCE: tasks_info["topic_dev"], "squad": tasks_info["squad_dev"],
             "race": tasks_info["race_dev"]}
    out = {"settings": pilot, "sizes": sizes, "sources": {}, "versus_random": {}}
    for source in ["random"] + [f"step{c}" for c in pilot["checkpoints"]]:
        entry = {"scores": {}, "seconds": {}}
        if source != "random":
            evaluation = steps.read_done(record(source, "eval", "sop"))["result"]
            entry["mlm_accuracy"] = 100 * evaluation["masked_lm_accuracy"]
            entry["sop_accuracy"] = 100 * evaluation["sentence_order_accuracy"]
        for task in tasks:
            done = [steps.read_done(record(source, task, s)) for s in range(1, pilot["seeds"] + 1)]
            entry["scores"][task] = [d["result"]["score"] for d in done]
            entry["seconds"][task] = [d["seconds"] for d in done]
        out["sources"][source] = entry
    judged_sizes = {"sizes": {task: size for task, size in sizes.items()}}
    for source in out["sources"]:
        if source == "random":
            continue
        out["versus_random"][source] = {
            task: stats.judge([(1.0, source, task, out["sources"][source]["scores"][task]),
                               (-1.0, "random", task, out["sources"]["random"]["scores"][task])],
                              0.0, "better", None, judged_sizes)
            for task in tasks}
    return out


def table(summary):
    """The printed table: per source, MLM/SOP and each task's mean +- std, then the verdicts."""
    import statistics

    tasks = list(summary["sources"]["random"]["scores"])
    lines = ["| source | MLM acc | SOP acc | " + " | ".join(tasks) + " |",
             "|---|---|---|" + "---|" * len(tasks)]
    for source, entry in summary["sources"].items():
        cells = []
        for task in tasks:
            values = entry["scores"][task]
            std = statistics.stdev(values) if len(values) > 1 else 0.0
            verdict = summary["versus_random"].get(source, {}).get(task)
            mark = f" ({verdict['verdict']}, {verdict['rule']})" if verdict else ""
            cells.append(f"{statistics.mean(values):.2f} +- {std:.2f}{mark}")
        mlm = f"{entry['mlm_accuracy']:.2f}" if "mlm_accuracy" in entry else ""
        sop = f"{entry['sop_accuracy']:.2f}" if "sop_accuracy" in entry else ""
        lines.append(f"| {source} | {mlm} | {sop} | " + " | ".join(cells) + " |")
    return lines


main, entry = entry_points.command("reproduce_pilot", define_flags, run)

if __name__ == "__main__":
    entry()
