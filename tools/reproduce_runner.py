"""Runs a grid of tools/reproduce.py step by step: checks --output_dir and the settings
before any work, plans every step, skips the finished ones, prints progress with an ETA
across the whole grid, gathers `results.json` and hands it to tools/reproduce_report.py.
"""

import gc
import glob
import json
import os
import statistics
import time

from albert_tf.storage import atomic, outputs
from albert_tf.storage.json_files import read_json

if __package__:  # imported as tools.reproduce_runner
    from . import reproduce_grid as grid
    from . import reproduce_report
    from . import reproduce_stats
    from . import reproduce_steps as steps
else:  # imported by a tool run as a script: tools/ is sys.path[0]
    import reproduce_grid as grid
    import reproduce_report
    import reproduce_stats
    import reproduce_steps as steps

SETTINGS_FILE = "grid.json"
# Seconds a step of each kind is guessed to take before one has run (the ETA then uses
# the measured mean of the kind): per pretraining / fine-tuning step and fixed.
GUESS = {"corpus": 25.0, "spm": 30.0, "data": 15.0, "tasks": 10.0, "eval": 15.0}
GUESS_PER_STEP = {"pretrain": 0.2, "finetune": 0.15}
GUESS_FIXED = {"pretrain": 15.0, "finetune": 20.0}


def guess_for_steps(kind, count):
    """The guessed seconds of a "pretrain" or "finetune" step that runs `count` training steps."""
    return GUESS_FIXED[kind] + GUESS_PER_STEP[kind] * count


class Step:
    """One unit of the grid: `kind`, a label, its record (written when done), what runs
    it and its guessed seconds."""

    def __init__(self, kind, label, record, function, guess):
        self.kind, self.label, self.record, self.function, self.guess = kind, label, record, function, guess

    def done(self):
        return steps.read_done(self.record)


def resolved(settings):
    """`settings` with its dtype policy resolved for this machine ("float32" or
    "mixed_bfloat16", as every command of the grid resolves it: training/precision.py), so
    that grid.json records what the cells compute in, never "auto"."""
    import dataclasses

    from albert_tf.training.precision import choose

    return dataclasses.replace(settings, dtype_policy=choose(settings.dtype_policy).policy)


def _legacy_policy(output_dir):
    """The dtype policy the runs of a grid recorded as "auto" (before grid.json held it
    resolved) computed in: their run_info.json's, or None before any run."""
    found = set()
    for path in glob.glob(os.path.join(output_dir, "cells", "*", "seed*", "*", "run_info.json")):
        policy = read_json(path, "albert_tf's record of the run (run_info.json)").get("dtype_policy")
        if policy:
            found.add(policy)
    return ", ".join(sorted(found)) or None


def check_output_dir(output_dir, settings, requested=None):
    """--output_dir: new, or this tool's own grid with the same settings (its dtype policy
    as this machine resolves it, `settings` being `resolved`; `requested`: the flag's value
    for the message); else ValueError (exit 2) before anything is written."""
    outputs.check([outputs.Output("--output_dir", output_dir, outputs.REPRODUCTION)])
    path = os.path.join(output_dir, SETTINGS_FILE)
    if os.path.isfile(path):
        existing = read_json(path, f"the grid's settings ({SETTINGS_FILE})")
        wanted = settings.to_dict()
        there = existing.get("dtype_policy")
        if there == "auto":  # written before the policy was resolved: what its runs computed in
            there = _legacy_policy(output_dir) or wanted["dtype_policy"]
        here = wanted["dtype_policy"]
        if there != here:
            raise ValueError(
                f"--output_dir={output_dir} holds a grid computed in {there}; this machine resolves "
                f"--dtype_policy={requested or here} to {here}: resuming would mix {there} and {here} cells. "
                f"Resume it with --dtype_policy={there} (or on a machine that resolves the same), or choose a new "
                "--output_dir.")
        existing["dtype_policy"] = wanted["dtype_policy"]
        changed = sorted(k for k in set(existing) | set(wanted) if existing.get(k) != wanted.get(k))
        if changed:
            detail = ", ".join(f"{k}: {existing.get(k)!r} there, {wanted.get(k)!r} asked" for k in changed)
            raise ValueError(f"--output_dir={output_dir} holds another grid ({detail}); resume it with its own "
                             f"settings ({path}) or choose a new --output_dir.")


def claim_grid(output_dir, settings, requested=None, check=None):
    """check_output_dir, then `check()` (a caller's own refusals, before anything is written),
    then claims output_dir as this tool's and writes grid.json (once; a grid.json of before
    the policy was resolved, "auto", gets it resolved). `settings` as check_output_dir's."""
    check_output_dir(output_dir, settings, requested)
    if check is not None:
        check()
    outputs.claim_dir(output_dir, outputs.REPRODUCTION, "--output_dir")
    settings_path = os.path.join(output_dir, SETTINGS_FILE)
    if not os.path.isfile(settings_path) or steps.read_done(settings_path).get("dtype_policy") == "auto":
        atomic.write_text(settings_path, json.dumps(settings.to_dict(), indent=2, sort_keys=True) + "\n")


def plan(settings, paths, quick, state):
    """Every step of the grid in order. `state` carries what later steps need from earlier
    ones (the downstream tasks: topic labels, SQuAD feature count)."""
    data = paths.data
    plan_ = [
        Step("corpus", "corpus", paths.record(None, None, "corpus"), lambda: steps.build_corpus(settings, paths),
             GUESS["corpus"]),
        Step("spm", "SentencePiece model", paths.record(None, None, "spm"),
             lambda: steps.train_spm(settings, paths), GUESS["spm"]),
    ]
    for split, objective, dupe in steps.PRETRAINING_DATA:
        plan_.append(Step("data", f"{split} data ({objective.upper()})",
                          paths.record(None, None, f"{split}_{objective}"),
                          lambda s=split, o=objective, d=dupe, log=os.path.join(data, "log.txt"):
                          steps.make_pretraining_data(settings, paths, s, o, d, log), GUESS["data"]))

    plan_.append(Step("data", "held-out baselines", paths.record(None, None, "baselines"),
                      lambda: steps.baselines(settings, paths), GUESS["data"]))

    def tasks():
        result = steps.make_tasks(settings, paths, quick)
        state["tasks"] = result
        return result

    plan_.append(Step("tasks", "downstream tasks", paths.record(None, None, "tasks"), tasks, GUESS["tasks"]))
    for seed in range(1, settings.seeds + 1):
        for cell in grid.grid_cells(settings.tables):
            log = os.path.join(paths.cell(cell), f"seed{seed}", "log.txt")
            where = f"{cell.id} seed {seed}"
            if cell.pretrained:
                plan_.append(Step("pretrain", f"pretrain {where}", paths.record(cell, seed, "pretrain"),
                                  lambda c=cell, s=seed, log=log: steps.pretrain(settings, paths, c, s, log),
                                  guess_for_steps("pretrain", settings.pretrain_steps)))
                for objective in ("sop", "nsp"):
                    plan_.append(Step("eval", f"held-out {objective.upper()} eval {where}",
                                      paths.record(cell, seed, f"eval_{objective}"),
                                      lambda c=cell, s=seed, o=objective, log=log:
                                      steps.evaluate(settings, paths, c, s, o, log), GUESS["eval"]))
            for task in grid.TASKS:
                plan_.append(Step("finetune", f"{task} {where}", paths.record(cell, seed, task),
                                  lambda c=cell, s=seed, t=task, log=log:
                                  steps.finetune(settings, paths, c, s, t, state["tasks"], log),
                                  guess_for_steps("finetune", settings.finetune_steps)))
    return plan_


def _duration(seconds):
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def run_grid(settings, output_dir, quick=False, stream=None):
    """Runs (or resumes) the grid in output_dir; returns 0. See tools/reproduce.py. The
    dtype policy is resolved for this machine first (`resolved`) and stored so."""
    requested = settings.dtype_policy
    settings = resolved(settings)
    claim_grid(output_dir, settings, requested)
    paths = steps.Paths(output_dir)
    state = saved_state(paths)
    todo = plan(settings, paths, quick, state)
    finished = [s for s in todo if s.done()]
    steps.log_line(stream, f"reproduce: {len(todo)} steps, {len(finished)} already done "
                           f"({len(grid.grid_cells(settings.tables))} cells x {settings.seeds} seeds; "
                           f"H={settings.hidden_size}, L={settings.num_hidden_layers}, "
                           f"{settings.pretrain_steps} pretraining steps; dtype policy {settings.dtype_policy})")
    import keras  # noqa: F401 (with TensorFlow: what every step imports)

    # the objects of those imports live as long as the process: the garbage collection after
    # each step (keras.backend.clear_session) skips them
    gc.freeze()
    run_steps(todo, stream)
    results = gather(settings, paths)
    atomic.write_text(os.path.join(output_dir, "results.json"), json.dumps(results, indent=2, sort_keys=True) + "\n")
    written = reproduce_report.write_report(results, output_dir)
    steps.log_line(stream, f"reproduce: wrote results.json, {', '.join(os.path.basename(p) for p in written)} "
                           f"in {output_dir}")
    return 0


def report_again(output_dir, stream=None):
    """--report_only: reproduce_report.write_report of output_dir's results.json, no step run
    (a changed rule re-judges the grid without retraining); output_dir must be this tool's
    own and hold results.json (else ValueError, exit 2, before anything is written). Returns 0."""
    outputs.check([outputs.Output("--output_dir", output_dir, outputs.REPRODUCTION)])
    path = os.path.join(output_dir, "results.json")
    if not os.path.isfile(path):
        raise ValueError(f"--output_dir={output_dir} has no results.json: --report_only reports a gathered grid "
                         "(run it without --report_only first).")
    results = read_json(path, "the grid's results")
    written = reproduce_report.write_report(results, output_dir)
    steps.log_line(stream, f"reproduce: wrote {', '.join(os.path.relpath(p, output_dir) for p in written)} "
                           f"in {output_dir} from its results.json")
    return 0


def saved_state(paths):
    """What later steps need from finished ones (`plan`'s `state`): the downstream tasks'
    record, when their step is done."""
    tasks_done = steps.read_done(paths.record(None, None, "tasks"))
    return {"tasks": tasks_done["result"]} if tasks_done else {}


def run_steps(todo, stream):
    """Runs the Steps of `todo` not yet done, in order, each recorded when it finishes, with a
    progress line each (its result, steps per minute, ETA from the guesses scaled by the
    measured seconds of its kind)."""
    measured = {}
    start = time.perf_counter()
    done_now = 0
    for index, step in enumerate(todo, 1):
        if step.done():
            continue
        result, seconds = steps.timed(step.function)
        steps.record_done(step.record, result, seconds)
        measured.setdefault(step.kind, []).append(seconds / step.guess)
        done_now += 1
        remaining = [s for s in todo[index:] if not s.done()]
        eta = sum(s.guess * statistics.mean(measured.get(s.kind, [1.0])) for s in remaining)
        elapsed = time.perf_counter() - start
        steps.log_line(stream, f"[{index}/{len(todo)}] {step.label}: {_summary(step.kind, result)} "
                               f"({seconds:.0f}s); {done_now} steps in {_duration(elapsed)}, "
                               f"{done_now / elapsed * 60:.1f}/min, ETA {_duration(eta)}")


def _summary(kind, result):
    if kind == "pretrain":
        return f"{result['final_step']} steps"
    if kind == "eval":
        return (f"mlm_acc {result['masked_lm_accuracy']:.4f}, sentence head acc "
                f"{result['sentence_order_accuracy']:.4f}")
    if kind == "finetune":
        return f"dev score {result['score']:.2f}"
    return ", ".join(f"{k} {v}" for k, v in result.items() if not isinstance(v, (list, dict)))[:160]


def machine():
    """The CPU (model name and its bf16 flags), its cores and the date of the report."""
    model, flags_ = "unknown", []
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model == "unknown":
                    model = value.strip()
                elif key.strip() == "flags" and not flags_:
                    flags_ = [x for x in value.split() if x in ("avx512_bf16", "amx_bf16", "avx512f", "amx_tile")]
    except OSError:
        pass
    return {"cpu": model, "cpu_flags": flags_, "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d")}


def gather(settings, paths):
    """results.json: the settings, the data's counts, the machine, the seconds of all the
    grid's steps (over every session that worked on it), and per cell and seed the
    intrinsic accuracies (percent), downstream scores (percent) and their average, the step
    times and the pretraining curve's file; the sizes and baselines the verdicts use and what
    reproduce_stats.assess adds (each cell's "learned", the average's tasks)."""
    data = {name: (steps.read_done(paths.record(None, None, name)) or {}).get("result", {})
            for name in ("corpus", "spm", "tasks", "baselines")}
    cells = {}
    for cell in grid.grid_cells(settings.tables):
        seeds = {}
        for seed in range(1, settings.seeds + 1):
            row = {"intrinsic": {}, "downstream": {}, "seconds": {}}
            if cell.pretrained:
                pre = steps.read_done(paths.record(cell, seed, "pretrain"))
                row["seconds"]["pretrain"] = pre["seconds"]
                row["curve"] = os.path.relpath(os.path.join(paths.run(cell, seed, "pretrain"), "metrics.jsonl"),
                                               paths.root)
                for objective in ("sop", "nsp"):
                    ev = steps.read_done(paths.record(cell, seed, f"eval_{objective}"))["result"]
                    row["intrinsic"][f"{objective}_accuracy"] = 100 * ev["sentence_order_accuracy"]
                    if objective == "sop":
                        row["intrinsic"]["mlm_accuracy"] = 100 * ev["masked_lm_accuracy"]
            for task in grid.TASKS:
                done = steps.read_done(paths.record(cell, seed, task))
                row["downstream"][task] = done["result"]["score"]
                row["seconds"][task] = done["seconds"]
                if task == "squad":
                    row["downstream"]["squad_f1"] = done["result"]["f1"]
                    row["downstream"]["squad_exact_match"] = done["result"]["exact_match"]
            seeds[str(seed)] = row  # its "avg": reproduce_stats.assess (over the average's tasks)
        cells[cell.id] = {"sharing": cell.sharing, "ratio": cell.ratio, "objective": cell.objective,
                          "embedding_size": settings.embedding_size(cell.ratio), "label": cell.label(),
                          "seeds": seeds}
    step_seconds = sum(steps.read_done(path)["seconds"] for path in
                       glob.glob(os.path.join(paths.root, "**", "steps", "*.json"), recursive=True))
    tasks, base = data["tasks"], data["baselines"]
    race_dev = tasks.get("race_dev") or steps.race_dev_questions(paths)
    results = {"settings": settings.to_dict(), "data": data, "cells": cells,
               "machine": machine(), "step_seconds": round(step_seconds, 1),
               "tables": {t: [c.id for c in grid.table_cells(t)] for t in settings.tables},
               "control": grid.CONTROL.id, "base": grid.BASE.id,
               # what the floors of reproduce_stats divide by: dev examples, held-out pairs, masked positions
               "sizes": {"topic": tasks["topic_dev"], "squad": tasks["squad_dev"], "race": race_dev,
                         "sop_accuracy": base["sop_pairs"], "nsp_accuracy": base["nsp_pairs"],
                         "mlm_accuracy": base["mlm_positions"]},
               "baselines": {"mlm_accuracy": base["mlm_accuracy"], "sop_accuracy": base["sop_accuracy"],
                             "nsp_accuracy": base["nsp_accuracy"], "race": reproduce_stats.RACE_CHANCE}}
    return reproduce_stats.assess(results)
