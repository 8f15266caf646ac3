"""Re-runs the paper's ablations small, with error bars: sentence-level loss (SOP / NSP /
none), cross-layer sharing, embedding size, and pretrained against random init.

    python tools/reproduce.py --output_dir=repro                      # the default grid
    python tools/reproduce.py --tables=sop,sharing --seeds=4 --width=2 --output_dir=repro_gpu
    python tools/reproduce.py --quick --output_dir=/tmp/repro_quick   # the pipeline in minutes
    python tools/reproduce.py --report_only --output_dir=repro        # its report again, no step run

One process runs every step through the project's own commands and task tools (the protocol:
docs/reproduction.md). A step is done when its record `steps/<step>.json` exists: a killed
grid continues at the first step without one. --output_dir is new or this tool's own grid
with the same settings (grid.json, its dtype policy as this machine resolves it), else
refused (exit status 2) before any work. It holds grid.json, results.json, table_<table>.csv,
claims.csv, claims.json, report.md (every claim judged by RULE), data/ (corpus, SentencePiece
model, pretraining data, tasks) and cells/<cell>/seed<k>/ (the runs, their records, log.txt).
"""

import contextlib
import csv
import dataclasses
import fractions
import gc
import glob
import io
import json
import math
import os
import statistics
import time
import zlib

from absl import flags

from albert_tf import cli, entry_points, option_flags
from albert_tf.storage import atomic, outputs
from albert_tf.storage.json_files import read_json
from albert_tf.storage.options import Command, RunDirectory, option
from albert_tf.training.precision import PrecisionOptions

if __package__:  # imported as tools.reproduce
    from . import make_race_data, make_squad_data, make_topic_task
else:  # `python tools/reproduce.py`: tools/ is sys.path[0]
    import make_race_data
    import make_squad_data
    import make_topic_task

# ---- the grid and the paper's numbers (shared/ALBERT_REFERENCE.md section 10) ----

TABLES = ("sop", "sharing", "embedding")
SHARINGS = ("all", "attention", "ffn", "none")
RATIOS = ("1/12", "1/6", "1/3", "1")  # E / H
TASKS = ("topic", "squad", "race")
PAPER_E = {"1/12": 64, "1/6": 128, "1/3": 256, "1": 768}
SHARING_NAMES = {"all": "all-shared", "attention": "shared-attention", "ffn": "shared-FFN", "none": "not-shared"}
OBJECTIVE_NAMES = {"none": "None", "nsp": "NSP", "sop": "SOP", "random": "random init"}
PAPER_AVG = {  # the downstream averages, each table's own numbers
    "embedding": {("none", "1/12"): 81.3, ("none", "1/6"): 81.7, ("none", "1/3"): 81.8, ("none", "1"): 82.3,
                  ("all", "1/12"): 79.0, ("all", "1/6"): 80.1, ("all", "1/3"): 79.6, ("all", "1"): 79.8},
    "sharing": {("all", "1"): 79.8, ("attention", "1"): 81.6, ("ffn", "1"): 79.5, ("none", "1"): 82.3,
                ("all", "1/6"): 80.1, ("attention", "1/6"): 81.7, ("ffn", "1/6"): 80.2, ("none", "1/6"): 81.6},
}
PAPER_SENTENCE = {("nsp", "sop_accuracy"): 52.0, ("sop", "nsp_accuracy"): 78.9, ("sop", "sop_accuracy"): 86.5}


@dataclasses.dataclass(frozen=True)
class Cell:
    """An architecture (AlbertConfig.sharing, E/H) and objective ("sop", "nsp", "none", or
    "random": the control, never pretrained), trained with every seed."""

    sharing: str
    ratio: str
    objective: str

    @property
    def id(self):
        return f"{self.sharing}-e{self.ratio.replace('/', 'of')}-{self.objective}"

    @property
    def pretrained(self):
        return self.objective != "random"

    def label(self):
        """e.g. "all-shared E=H/6 SOP"."""
        return f"{SHARING_NAMES[self.sharing]} E={e_label(self.ratio)} {OBJECTIVE_NAMES[self.objective]}"


def e_label(ratio):
    return "H" if ratio == "1" else f"H/{ratio.split('/')[1]}"


BASE = Cell("all", "1/6", "sop")  # ALBERT-base's own layout, in every table
CONTROL = Cell("all", "1/6", "random")


def table_cells(table):
    """The cells of one table, in the paper's row order."""
    if table == "sop":
        return [Cell("all", "1/6", o) for o in ("none", "nsp", "sop")]
    if table == "sharing":
        return [Cell(s, r, "sop") for r in ("1", "1/6") for s in SHARINGS]
    return [Cell(s, r, "sop") for s in ("none", "all") for r in RATIOS]


def grid_cells(tables):
    """Every cell of `tables` once (a cell in several tables is trained once), then the control."""
    cells = []
    for table in tables:
        cells += [c for c in table_cells(table) if c not in cells]
    return cells + [CONTROL]


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a grid is trained with, stored in grid.json and compared on resume (the topic
    task has its own rate: at 5e-4 it collapsed to one class; corpus_mb 0: the whole corpus)."""

    tables: tuple = TABLES
    seeds: int = 3  # MIN_SEEDS: fewer leave every claim "not testable"
    hidden_size: int = 96
    num_attention_heads: int = 4
    num_hidden_layers: int = 4
    max_seq_length: int = 64
    max_predictions_per_seq: int = 10
    vocab_size: int = 8000
    pretrain_steps: int = 400
    pretrain_batch_size: int = 64
    pretrain_learning_rate: float = 0.005
    finetune_steps: int = 150
    finetune_batch_size: int = 32
    finetune_learning_rate: float = 5e-4
    topic_learning_rate: float = 1e-4
    corpus_mb: float = 0.0
    held_out_percent: int = 10
    dtype_policy: str = "auto"

    def validate(self):
        """ValueError naming the flag of the first bad setting."""
        bad = [t for t in self.tables if t not in TABLES]
        if bad or not self.tables:
            raise ValueError(f"--tables: unknown table(s) {', '.join(bad) or '(none given)'}; expected some of "
                             f"{', '.join(TABLES)}.")
        for name in ("seeds", "num_attention_heads", "num_hidden_layers", "pretrain_steps", "finetune_steps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name} must be positive, got {getattr(self, name)}.")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"the hidden size {self.hidden_size} does not divide into {self.num_attention_heads} "
                             "attention heads; pick a --width (or --num_attention_heads) whose hidden size is a "
                             "multiple of the heads.")
        if self.hidden_size % 12:
            raise ValueError(f"the hidden size {self.hidden_size} is not a multiple of 12, so the paper's E/H ratios "
                             f"(1/12, 1/6, 1/3, 1) give no whole embedding sizes; pick another --width.")

    def embedding_size(self, ratio):
        return int(self.hidden_size * fractions.Fraction(ratio))

    def albert_config(self, cell):
        """The albert_config.json values of a cell (no dropout, as the release's v2 configs)."""
        return {
            "attention_probs_dropout_prob": 0.0, "hidden_dropout_prob": 0.0, "hidden_act": "gelu",
            "embedding_size": self.embedding_size(cell.ratio), "hidden_size": self.hidden_size,
            "initializer_range": 0.02, "inner_group_num": 1, "intermediate_size": 4 * self.hidden_size,
            "max_position_embeddings": self.max_seq_length, "num_attention_heads": self.num_attention_heads,
            "num_hidden_groups": 1, "num_hidden_layers": self.num_hidden_layers, "sharing": cell.sharing,
            "type_vocab_size": 2, "vocab_size": self.vocab_size,
        }

    def to_dict(self):
        return dict(dataclasses.asdict(self), tables=list(self.tables))


# ---- the verdicts (docs/reproduction.md quotes RULE, LEARNED_RULE and AVERAGE_RULE) ----

MIN_SEEDS = 3
MARGIN = 2.0  # standard errors
RACE_CHANCE = 25.0  # percent: four options a question
ACCURACIES = ("topic", "race", "mlm_accuracy", "sop_accuracy", "nsp_accuracy")  # shares of N items
RULE = (f"a claim's difference d (a combination sum_i c_i m_i + k of cell means over the seeds) is judged only when "
        f"every cell in it has at least {MIN_SEEDS} seeds and every pretrained cell in it learned its objective "
        "(else 'not testable', with the reason; a claim on a cell's own objective, the SOP model solving SOP, "
        "is judged either way). Its standard error is se = max(sqrt(sum_i c_i^2 s_i^2 / n_i), "
        "floor) (s_i: the sample standard deviation of cell i over its n_i seeds); the floor is the metric's "
        "resolution max_i |c_i| r_i, r = 100 / N points for a score over N dev examples (held-out pairs for a "
        "sentence head, masked positions for masked-LM accuracy; for the average of k tasks, max_t r_t / k), and "
        "for one cell's accuracy over N items against a constant p at least sqrt(p (100 - p) / N). "
        "'A is better than B' (d = A - B): holds when d > 2 se, does not hold when d < -2 se, else inconclusive. "
        "'A is about B' (within a tolerance t): holds when |d| + 2 se <= t, does not hold when |d| - 2 se > t, "
        "else inconclusive. Three seeds make this a weak test (2 se is no 95% interval with two degrees of "
        "freedom): 'holds' says the effect's direction exceeds the seed-to-seed spread and the metric's "
        "resolution, not that it is significant.")
LEARNED_RULE = ("a pretraining cell learned its objective when (same rule, 'holds') its held-out masked-LM accuracy "
                "is above the unigram baseline (the share of the held-out masked positions holding the piece most "
                "frequent among its training data's masked positions: always predicting that piece) and "
                "its sentence head (SOP or NSP; None has none) is above chance on held-out pairs of "
                "its own kind (chance: the larger of 50% and the pairs' more frequent label's share, as in the claims "
                "'above chance').")
AVERAGE_RULE = (f"RACE-style enters the average only when the all-shared E=H/6 SOP cell scores above chance "
                f"({RACE_CHANCE:g}%) by the same rule; else it is reported apart.")


def resolution(results, key):
    """One dev example's worth of `key`, 100 / N points (results["sizes"]); for "avg" the
    largest of its tasks' over their number; None when results.json lacks a size."""
    if key == "avg":
        found = [resolution(results, t) for t in results["average"]["tasks"]]
        return None if None in found else max(found) / len(found)
    size = (results.get("sizes") or {}).get(key)
    return 100.0 / size if size else None


def cell_stats(values):
    """(mean, sample std, n); std is None for fewer than two values."""
    if not values:
        return None, None, 0
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else None), len(values)


def judge(terms, constant, kind, tolerance, results, learned=None, labels=None):
    """The verdict of d = sum c_i m_i + constant by RULE: {"verdict", "reason", "d", "se",
    "rule"}. terms: [(c_i, cell id, key, per-seed values)]; constant None: results.json lacks
    its baseline; kind "better" or "about" (within `tolerance`); learned: {cell id:
    learned(...)} or None (not checked); labels: {cell id: label}. A results.json without
    sizes or baselines (gathered before it held them) settles only too few seeds (se None)."""
    labels = labels or {}
    stats = [(c, cell, key, *cell_stats(values)) for c, cell, key, values in terms]
    if any(mean is None for *_, mean, _, _ in stats):
        return {"verdict": "not testable", "reason": "a cell has no values", "d": None, "se": None, "rule": ""}
    few = sorted({f"{labels.get(cell, cell)}: {n}" for _, cell, _, _, _, n in stats if n < MIN_SEEDS})
    d = None if constant is None else constant + sum(c * mean for c, _, _, mean, _, _ in stats)
    resolutions = [resolution(results, key) for _, _, key, *_ in stats]
    tolerance_text = f", tolerance {tolerance:g}" if kind == "about" else ""
    untestable = {"verdict": "not testable", "reason": f"fewer than {MIN_SEEDS} seeds ({'; '.join(few)})", "d": d}
    if few and (d is None or None in resolutions):
        rule = ("d unknown (results.json has no baselines)" if d is None else
                f"d = {d:+.2f}, se unknown (results.json has no sizes)")
        return dict(untestable, se=None, rule=rule + tolerance_text)
    if d is None or None in resolutions:
        what = "baselines (results['baselines'])" if d is None else "evaluation size (results['sizes'])"
        raise ValueError(f"results.json has no {what}; rerun the grid's gathering (tools/reproduce.py on its "
                         "--output_dir).")
    floor = max(abs(term[0]) * r for term, r in zip(stats, resolutions))
    if len(stats) == 1 and constant and stats[0][2] in ACCURACIES:  # one accuracy over N items against p
        c, _, key = stats[0][:3]
        p = min(max(-constant / c, 0.0), 100.0)
        floor = max(floor, abs(c) * math.sqrt(p * (100.0 - p) / results["sizes"][key]))
    se = max(math.sqrt(sum(c ** 2 * std ** 2 / n for c, _, _, _, std, n in stats if std is not None)), floor)
    judged = dict(untestable, se=se, rule=f"d = {d:+.2f}, 2 se = {MARGIN * se:.2f}" + tolerance_text)
    if few:
        return judged
    unlearned = sorted({cell for _, cell, *_ in stats if learned and learned.get(cell)
                        and learned[cell]["verdict"] != "yes"})
    if unlearned:
        why = "; ".join(f"{labels.get(cell, cell)}: {learned[cell]['reason']}" for cell in unlearned)
        return dict(judged, reason=f"a cell did not learn its objective ({why})")
    if kind == "better":
        verdict = "holds" if d > MARGIN * se else "does not hold" if d < -MARGIN * se else "inconclusive"
    else:
        verdict = ("holds" if abs(d) + MARGIN * se <= tolerance else
                   "does not hold" if abs(d) - MARGIN * se > tolerance else "inconclusive")
    return dict(judged, verdict=verdict, reason="")


def seed_values(cell, key):
    """The per-seed values of `key` (a task, "avg" or an intrinsic metric) of a results.json
    cell; [] when it has none."""
    values = []
    for row in cell["seeds"].values():
        if key == "avg":
            values.append(row["avg"])
        elif key in row["downstream"] or key in row["intrinsic"]:
            values.append(row["downstream"].get(key, row["intrinsic"].get(key)))
    return values


def learned(results, cell_id):
    """LEARNED_RULE for a pretraining cell: {"verdict": "yes", "no" or "not testable",
    "reason", "checks": [{"metric", "against", "d", "se", "verdict"}]}; None for the control."""
    cell = results["cells"][cell_id]
    objective = cell["objective"]
    if objective == "random":
        return None
    base = results.get("baselines") or {}
    wanted = [("mlm_accuracy", (base.get("mlm_accuracy") or {}).get("nsp" if objective == "nsp" else "sop"),
               "masked LM", "the unigram baseline")]
    if objective != "none":
        wanted.append((f"{objective}_accuracy", base.get(f"{objective}_accuracy"), objective.upper(), "chance"))
    checks, failed, untestable = [], [], []
    for key, against, metric, name in wanted:
        verdict = judge([(1, cell_id, key, seed_values(cell, key))], None if against is None else -against,
                        "better", None, results, labels={cell_id: cell.get("label", cell_id)})
        checks.append({"metric": key, "against": against, **{k: verdict[k] for k in ("d", "se", "verdict")}})
        if verdict["verdict"] == "not testable":
            untestable.append(verdict["reason"])
        elif verdict["verdict"] != "holds":
            failed.append(f"held-out {metric} accuracy {against + verdict['d']:.2f} against {name} {against:.2f}, "
                          f"2 se = {MARGIN * verdict['se']:.2f}")
    if untestable:
        return {"verdict": "not testable", "reason": untestable[0], "checks": checks}
    return {"verdict": "no" if failed else "yes", "reason": "; ".join(failed), "checks": checks}


def assess(results):
    """Adds to results.json (in place; returns it) "average" {"tasks", "left_out"} by
    AVERAGE_RULE, each seed row's "avg" over those tasks, and "learned" {cell id: learned}."""
    tasks, left_out = list(TASKS), {}
    base = results["cells"].get(results["base"])
    if base is not None:
        label = base.get("label", results["base"])
        race = judge([(1, results["base"], "race", seed_values(base, "race"))], -RACE_CHANCE, "better", None,
                     results, labels={results["base"]: label})
        if race["verdict"] == "not testable":
            left_out["race"] = f"not shown to learn above chance: {race['reason']}"
        elif race["verdict"] != "holds":
            left_out["race"] = (f"{label} scores {RACE_CHANCE + race['d']:.2f} against chance {RACE_CHANCE:g} "
                                f"({race['rule']}): not above chance by more than 2 se")
        tasks = [t for t in TASKS if t not in left_out]
    results["average"] = {"tasks": tasks, "left_out": left_out}
    for cell in results["cells"].values():
        for row in cell["seeds"].values():
            row["avg"] = statistics.mean(row["downstream"][t] for t in tasks)
    results["learned"] = {cell_id: verdict for cell_id in results["cells"]
                          if (verdict := learned(results, cell_id)) is not None}
    return results


# ---- the claims (shared/ALBERT_REFERENCE.md section 10) and the report ----

CHANCE = "chance"  # a claim's constant: minus the chance of its one term's held-out pairs (results["baselines"])
SCORES = TASKS + ("avg",)
METRICS = ("mlm_accuracy", "sop_accuracy", "nsp_accuracy")
SCORE_NAMES = {"topic": "topic cls (acc)", "squad": "SQuAD-style (F1/EM)", "race": "RACE-style (acc)",
               "avg": "Avg", "mlm_accuracy": "MLM acc", "sop_accuracy": "SOP acc", "nsp_accuracy": "NSP acc"}
TITLES = {"sop": "Sentence-level loss (all-shared, E=H/6)", "sharing": "Cross-layer sharing",
          "embedding": "Embedding size E"}


@dataclasses.dataclass
class Claim:
    """d = sum c_i m_i + constant over `terms` [(c_i, cell id, key)], judged "better" (d > 0)
    or "about" (|d| <= tolerance); gated False: a cell's own objective, judged even unlearned."""

    table: str
    text: str
    terms: list
    kind: str = "better"
    tolerance: float = None
    constant: object = 0.0
    paper: str = None
    gated: bool = True

    def judge(self, results):
        """judge's dict for an assessed results.json."""
        constant = self.constant
        if constant == CHANCE:
            chance = (results.get("baselines") or {}).get(self.terms[0][2])
            constant = None if chance is None else -chance
        return judge([(c, cell, key, seed_values(results["cells"][cell], key)) for c, cell, key in self.terms],
                     constant, self.kind, self.tolerance, results, results.get("learned") if self.gated else None,
                     {cell: results["cells"][cell].get("label", cell) for _, cell, _ in self.terms})


def _id(sharing, ratio, objective="sop"):
    return Cell(sharing, ratio, objective).id


def claims():
    """Every claim of the issue's list, as data."""
    sop, nsp, none = (_id("all", "1/6", o) for o in ("sop", "nsp", "none"))
    made = [
        Claim("sop", "NSP-trained model solves SOP only at chance (paper 52.0%): SOP acc within 5 points of 50",
              [(1, nsp, "sop_accuracy")], kind="about", tolerance=5.0, constant=-50.0, paper="52.0"),
        Claim("sop", "SOP-trained model solves NSP well (paper 78.9%): NSP acc above chance",
              [(1, sop, "nsp_accuracy")], constant=CHANCE, paper="78.9"),
        Claim("sop", "SOP-trained model solves SOP (paper 86.5%): SOP acc above chance",
              [(1, sop, "sop_accuracy")], constant=CHANCE, paper="86.5", gated=False),
        Claim("sop", "SOP's model solves NSP better than NSP's model solves SOP (78.9 vs 52.0)",
              [(1, sop, "nsp_accuracy"), (-1, nsp, "sop_accuracy")], paper="78.9 > 52.0"),
        Claim("sop", "MLM accuracy about the same with SOP and None (within 1 point)",
              [(1, sop, "mlm_accuracy"), (-1, none, "mlm_accuracy")], kind="about", tolerance=1.0),
        Claim("sop", "MLM accuracy about the same with SOP and NSP (within 1 point)",
              [(1, sop, "mlm_accuracy"), (-1, nsp, "mlm_accuracy")], kind="about", tolerance=1.0),
        Claim("sop", "SOP gives a better downstream average than NSP",
              [(1, sop, "avg"), (-1, nsp, "avg")], paper="about one point"),
        Claim("sop", "SOP gives a better downstream average than None",
              [(1, sop, "avg"), (-1, none, "avg")]),
        Claim("sop", "SOP better than NSP on the multi-sentence task SQuAD-style QA",
              [(1, sop, "squad"), (-1, nsp, "squad")], paper="SOP's gain is mostly on SQuAD and RACE"),
        Claim("sop", "SOP better than NSP on the multi-sentence task RACE-style multiple choice",
              [(1, sop, "race"), (-1, nsp, "race")], paper="SOP's gain is mostly on SQuAD and RACE"),
    ]
    avg = PAPER_AVG["sharing"]
    for ratio, paper_e in (("1", 768), ("1/6", 128)):
        a = {s: _id(s, ratio) for s in SHARINGS}
        made += [
            Claim("sharing", f"E={e_label(ratio)}: not-shared better than shared-attention",
                  [(1, a["none"], "avg"), (-1, a["attention"], "avg")],
                  paper=f"E={paper_e}: {avg[('none', ratio)]} vs {avg[('attention', ratio)]}"),
            Claim("sharing", f"E={e_label(ratio)}: sharing FFN hurts more than sharing attention "
                  "(shared-attention better than shared-FFN)", [(1, a["attention"], "avg"), (-1, a["ffn"], "avg")],
                  paper=f"E={paper_e}: {avg[('attention', ratio)]} vs {avg[('ffn', ratio)]}"),
        ]
    a = {s: _id(s, "1") for s in SHARINGS}
    made += [
        Claim("sharing", "E=H: shared-attention better than all-shared",
              [(1, a["attention"], "avg"), (-1, a["all"], "avg")], paper="E=768: 81.6 vs 79.8"),
        Claim("sharing", "E=H: all-shared about shared-FFN (within 1 point)",
              [(1, a["all"], "avg"), (-1, a["ffn"], "avg")], kind="about", tolerance=1.0,
              paper="E=768: 79.8 vs 79.5"),
        Claim("sharing", "The drop from sharing everything is smaller at E=H/6 than at E=H",
              [(1, _id("none", "1"), "avg"), (-1, _id("all", "1"), "avg"),
               (-1, _id("none", "1/6"), "avg"), (1, _id("all", "1/6"), "avg")],
              paper="drop 2.5 at E=768, 1.5 at E=128"),
        Claim("embedding", "all-shared: E=H/6 better than E=H (a small E is as good or better)",
              [(1, _id("all", "1/6"), "avg"), (-1, _id("all", "1"), "avg")], paper="80.1 vs 79.8"),
        Claim("embedding", "all-shared: E=H/6 better than E=H/12",
              [(1, _id("all", "1/6"), "avg"), (-1, _id("all", "1/12"), "avg")], paper="80.1 vs 79.0"),
        Claim("embedding", "not-shared: a larger E is better (E=H better than E=H/12)",
              [(1, _id("none", "1"), "avg"), (-1, _id("none", "1/12"), "avg")], paper="82.3 vs 81.3"),
    ]
    for task in TASKS:
        made.append(Claim("premise", f"pretrained beats random init on {SCORE_NAMES[task]}",
                          [(1, BASE.id, task), (-1, CONTROL.id, task)]))
    made.append(Claim("premise", "pretrained beats random init on the downstream average",
                      [(1, BASE.id, "avg"), (-1, CONTROL.id, "avg")]))
    return made


def judged_claims(results):
    """The claims whose cells the grid has, each with its verdict (`results` assessed here)."""
    assess(results)
    return [{"table": claim.table, "claim": claim.text, "paper": claim.paper, **claim.judge(results)}
            for claim in claims() if {cell for _, cell, _ in claim.terms} <= set(results["cells"])]


def _fmt(mean, std):
    if mean is None:
        return ""
    return f"{mean:.2f}" if std is None else f"{mean:.2f} ± {std:.2f}"


def _paper(value):
    return "—" if value is None else f"{value:.1f}"


def table_rows(results, table):
    """The table's CSV rows, a dict per cell: settings, per key mean/std/seeds, whether it
    learned its objective, the paper's numbers."""
    rows = []
    for cell_id in results["tables"][table]:
        cell = results["cells"][cell_id]
        row = {"cell": cell_id, "sharing": SHARING_NAMES[cell["sharing"]], "E": cell["embedding_size"],
               "E/H": cell["ratio"], "paper_E": PAPER_E[cell["ratio"]], "objective": cell["objective"]}
        for key in METRICS + SCORES:
            row[f"{key}_mean"], row[f"{key}_std"], row["seeds"] = cell_stats(seed_values(cell, key))
        verdict = results["learned"].get(cell_id) or {}
        row["learned_objective"], row["learned_reason"] = verdict.get("verdict"), verdict.get("reason")
        if table in PAPER_AVG:
            row["paper_avg"] = PAPER_AVG[table].get((cell["sharing"], cell["ratio"]))
        else:
            for key in ("sop_accuracy", "nsp_accuracy"):
                row[f"paper_{key}"] = PAPER_SENTENCE.get((cell["objective"], key))
        rows.append(row)
    return rows


def write_csv(rows, path):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
    atomic.write_text(path, buffer.getvalue())


def _markdown(head, rows):
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]


def _table_markdown(results, table, rows):
    keys = (METRICS if table == "sop" else ()) + SCORES
    papers = ("paper_sop_accuracy", "paper_nsp_accuracy") if table == "sop" else ("paper_avg",)
    head = ["cell", "learned its objective", *[SCORE_NAMES[k] for k in keys],
            *(["paper SOP acc", "paper NSP acc"] if table == "sop" else ["paper Avg"])]
    lines = []
    for row in rows:
        cell = results["cells"][row["cell"]]
        learned_text = "—"  # the control
        if row["learned_objective"] is not None:
            learned_text = row["learned_objective"] + (f" ({row['learned_reason']})" if row["learned_reason"] else "")
        lines.append([f"{cell['label']} ({cell['embedding_size']})", learned_text,
                      *[_fmt(row[f"{k}_mean"], row[f"{k}_std"]) for k in keys], *[_paper(row[p]) for p in papers]])
    return _markdown(head, lines)


def write_report(results, output_dir):
    """Writes table_<table>.csv, claims.csv, report.md and claims.json from results.json
    (assessed here); returns their paths."""
    verdicts = judged_claims(results)
    s, average = results["settings"], results["average"]
    average_text = ", ".join(SCORE_NAMES[t] for t in average["tasks"]) + "".join(
        f"; {SCORE_NAMES[task]} is left out of it and reported apart ({why})"
        for task, why in average["left_out"].items())
    md = ["# The paper's ablations, reproduced small", "",
          f"Grid: H={s['hidden_size']}, L={s['num_hidden_layers']}, {s['num_attention_heads']} heads, "
          f"sequence {s['max_seq_length']}, vocabulary {s['vocab_size']}; {s['pretrain_steps']} LAMB steps at batch "
          f"{s['pretrain_batch_size']} per cell, {s['seeds']} seed(s); fine-tuning {s['finetune_steps']} steps at "
          f"batch {s['finetune_batch_size']}, learning rate {s['finetune_learning_rate']:g} (topic "
          f"{s['topic_learning_rate']:g}); dtype policy {s['dtype_policy']}. Scores are dev percentages; "
          f"mean ± sample std over seeds. Avg = mean of {average_text} (the paper's Avg averages "
          "SQuAD1.1, SQuAD2.0, MNLI, SST-2 and RACE; compare directions, not values).", "",
          "Learned its objective: " + LEARNED_RULE, "", "Average: " + AVERAGE_RULE]
    if not results.get("sizes") or not results.get("baselines"):
        md += ["", "This results.json was gathered before it held the held-out sizes and baselines the rule needs: "
               "the standard errors and the differences against chance or the unigram baseline are unknown, and "
               "a verdict is given only where too few seeds settle it ('not testable').", ""]
    if "machine" in results:
        m = results["machine"]
        cpu_flags = ", ".join(m["cpu_flags"]) or "no bf16 flags"
        md.append(f"Run {m['date']} on {m['cpu']} ({m['cores']} cores; {cpu_flags}); "
                  f"the grid's steps took {results['step_seconds'] / 60:.1f} minutes.")
    md.append("")
    written = []
    for table in [t for t in TABLES if t in results["tables"]]:  # the paper's order
        rows = table_rows(results, table)
        written.append(os.path.join(output_dir, f"table_{table}.csv"))
        write_csv(rows, written[-1])
        md += [f"## {TITLES[table]}", "", *_table_markdown(results, table, rows), ""]
    if results["control"] in results["cells"]:
        starts = ((results["base"], "pretrained (SOP)"), (results["control"], "random init"))
        rows = [[name, *[_fmt(*cell_stats(seed_values(results["cells"][cell_id], k))[:2]) for k in SCORES]]
                for cell_id, name in starts]
        md += ["## Pretrained against random init (same architecture: all-shared, E=H/6)", "",
               *_markdown(["start", *[SCORE_NAMES[k] for k in SCORES]], rows), ""]
    rows = [[v["table"], v["claim"], v["paper"] or "", v["rule"],
             f"**{v['verdict']}**" + (f": {v['reason']}" if v["reason"] else "")] for v in verdicts]
    md += ["## Claims", "", "Rule: " + RULE, "", *_markdown(["table", "claim", "paper", "ours", "verdict"], rows), ""]
    if verdicts:
        written.append(os.path.join(output_dir, "claims.csv"))
        columns = ("table", "claim", "paper", "d", "se", "verdict", "reason")
        write_csv([{k: v[k] for k in columns} for v in verdicts], written[-1])
    written += [os.path.join(output_dir, "report.md"), os.path.join(output_dir, "claims.json")]
    atomic.write_text(written[-2], "\n".join(md))
    atomic.write_json(written[-1], verdicts, sort_keys=False)
    return written


# ---- the steps: each through a project command (in this process) or a task tool ----

PRETRAINING_DATA = (("train", "sop", 3), ("train", "nsp", 3), ("eval", "sop", 1), ("eval", "nsp", 1))  # dupe factor
EVAL_BATCHES, EVAL_BATCH_SIZE = 20, 128  # the standard error of an accuracy near 50% is about 1 point
EVAL_EXAMPLES = EVAL_BATCHES * EVAL_BATCH_SIZE  # what evaluate reads: the first of the file
SQUAD_STRIDE, SQUAD_QUERY_LENGTH = 24, 20
TASK_SIZES = {"default": {"per_class": 400, "squad_train": 600, "squad_dev": 150, "race_articles": 60},
              "quick": {"per_class": 40, "squad_train": 60, "squad_dev": 20, "race_articles": 3}}


class Paths:
    """Where a grid's files live (module docstring)."""

    def __init__(self, root):
        self.root, self.data = root, os.path.join(root, "data")
        self.spm_model = os.path.join(self.data, "spm.model")

    def corpus(self, name):
        return os.path.join(self.data, "corpus", name)

    def records(self, split, objective):
        return os.path.join(self.data, f"{split}_{objective}.tfrecord")

    def run(self, cell, seed, step):
        return os.path.join(self.root, "cells", cell.id, f"seed{seed}", step)

    def record(self, cell, seed, step):
        """The record of a finished step: of a cell's seed, or (cell None) of the data."""
        return os.path.join(self.data if cell is None else self.run(cell, seed, ""), "steps", f"{step}.json")

    def task(self, name):
        return os.path.join(self.data, "tasks", name)


def read_done(path):
    """The record of a finished step ({"result", "seconds"}), or None."""
    return read_json(path, "the record of a finished step") if os.path.isfile(path) else None


def record_done(path, result, seconds):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic.write_json(path, {"result": result, "seconds": round(seconds, 2)})


def call_command(module, args, log_path):
    """`python -m albert_tf.<command> ARGS` in this process (its own flags and checks), what
    it prints appended to `log_path`; returns its run()'s result (errors propagate)."""
    name = module.__name__.rsplit(".", 1)[-1]
    values = flags.FlagValues()
    module.define_flags(values)
    cli.parse_flags(name, [name, *args], values)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "a", encoding="utf-8") as log, contextlib.redirect_stdout(log), \
            contextlib.redirect_stderr(log):
        print(f"$ python -m albert_tf.{name} " + " ".join(args), flush=True)
        try:
            return module.run(values)
        finally:
            import keras

            keras.backend.clear_session()  # collects garbage itself (free_memory=True)


def build_corpus(settings, paths):
    """The fixed sample corpus (--corpus_mb of its documents; 0: all) split by a hash of the
    source file: pretrain.txt, held_out.txt and held_out.jsonl (the task tools' entries)."""
    from albert_tf.data import sample_corpus

    parts, held_entries, total = {"pretrain": [], "held_out": []}, [], 0
    for entry in sample_corpus.iter_entries():
        block = "\n".join(entry["sentences"]) + "\n\n"
        total += len(block.encode("utf-8"))
        held = zlib.crc32(entry["source"].encode("utf-8")) % 100 < settings.held_out_percent
        parts["held_out" if held else "pretrain"].append(block)
        held_entries += [entry] if held else []
        if settings.corpus_mb and total >= int(settings.corpus_mb * 1_000_000):
            break
    os.makedirs(os.path.dirname(paths.corpus("")), exist_ok=True)
    for name, blocks in parts.items():
        atomic.write_text(paths.corpus(f"{name}.txt"), "".join(blocks))
    sample_corpus.write_entries(paths.corpus("held_out.jsonl"), held_entries)
    return {f"{name}_{what}": value for name, blocks in parts.items()
            for what, value in (("documents", len(blocks)), ("bytes", sum(len(b.encode("utf-8")) for b in blocks)))}


def train_spm(settings, paths):
    """The release's SentencePiece recipe on pretrain.txt."""
    from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece

    options = SentencePieceOptions(vocab_size=settings.vocab_size, input_sentence_size=1_000_000,
                                   num_threads=os.cpu_count() or 1)
    train_sentencepiece([paths.corpus("pretrain.txt")], paths.spm_model[:-len(".model")], options)
    return {"spm_model": paths.spm_model, "vocab_size": settings.vocab_size}


def make_pretraining_data(settings, paths, split, objective, dupe_factor):
    """create_pretraining_data on pretrain.txt (train) or held_out.txt (eval): SOP pairs or NSP
    (--random_next_sentence)."""
    from albert_tf import create_pretraining_data

    call_command(create_pretraining_data, [
        f"--input_file={paths.corpus('pretrain.txt' if split == 'train' else 'held_out.txt')}",
        f"--output_file={paths.records(split, objective)}", f"--spm_model_file={paths.spm_model}",
        f"--max_seq_length={settings.max_seq_length}", f"--max_predictions_per_seq={settings.max_predictions_per_seq}",
        f"--dupe_factor={dupe_factor}", f"--random_next_sentence={objective == 'nsp'}", "--num_workers=1",
        f"--random_seed={12345 + (split == 'eval')}"], os.path.join(paths.data, "log.txt"))
    return {"records": paths.records(split, objective)}


def baselines(settings, paths):
    """What the held-out accuracies are judged against, from what evaluate reads (the first
    EVAL_EXAMPLES of each eval set): mlm_piece and mlm_accuracy {"sop", "nsp"} (the piece most
    frequent among train_<data>'s masked positions, ties the smaller id, and the percent of
    eval_sop's masked positions holding it), mlm_positions (those read), {sop,nsp}_pairs (the
    pairs read) and {sop,nsp}_accuracy (chance: their more frequent label's percent)."""
    import numpy as np
    import tensorflow as tf

    from albert_tf.data.example_codec import feature_lengths

    lengths = feature_lengths(settings.max_seq_length, settings.max_predictions_per_seq)
    spec = {name: tf.io.FixedLenFeature([lengths[name][0]], tf.float32 if lengths[name][1] == "float32" else tf.int64)
            for name in ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")}

    def read(split, data, limit=-1):
        """(masked ids of weight > 0, labels) of the file's first `limit` records (-1: all)."""
        dataset = tf.data.TFRecordDataset(paths.records(split, data)).take(limit).batch(4096)
        batches = list(dataset.map(lambda x: tf.io.parse_example(x, spec)).as_numpy_iterator())
        ids = [b["masked_lm_ids"].ravel()[b["masked_lm_weights"].ravel() > 0] for b in batches]
        return np.concatenate(ids), np.concatenate([b["next_sentence_labels"].ravel() for b in batches])

    held_ids, _ = read("eval", "sop", EVAL_EXAMPLES)
    out = {"mlm_piece": {}, "mlm_accuracy": {}, "mlm_positions": int(held_ids.size)}
    for data in ("sop", "nsp"):
        piece = int(np.argmax(np.bincount(read("train", data)[0])))
        out["mlm_piece"][data], out["mlm_accuracy"][data] = piece, 100.0 * float(np.mean(held_ids == piece))
        _, labels = read("eval", data, EVAL_EXAMPLES)
        out[f"{data}_pairs"] = int(labels.size)
        out[f"{data}_accuracy"] = 100.0 * max(float(np.mean(labels == 0)), float(np.mean(labels == 1)))
    return out


def make_tasks(settings, paths, quick):
    """The three tasks from the held-out entries, by the task tools (the topic task without
    tf_keras, Keras 2's copy of keras's docstrings); the SQuAD training features built once,
    so that every run takes exactly --finetune_steps steps."""
    from albert_tf.data import sample_corpus
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.tasks.squad.cache import load_or_build_features
    from albert_tf.tasks.squad.features import FeatureSettings

    entries = sample_corpus.read_entries(paths.corpus("held_out.jsonl"))
    sizes = TASK_SIZES["quick" if quick else "default"]
    topical = [e for e in entries if make_topic_task.package_of(e["source"]) != "tf_keras"]
    train, dev, labels = make_topic_task.make_corpus_task(topical, num_classes=4, per_class=sizes["per_class"],
                                                          source=paths.corpus("held_out.jsonl"))
    make_topic_task.write_task(paths.task("topic"), train, dev)
    functions, squad = make_squad_data.corpus_docstring_entries(entries), paths.task("squad")
    os.makedirs(squad, exist_ok=True)
    for split in ("train", "dev"):
        dataset = make_squad_data.make_dataset("1.1", sizes[f"squad_{split}"], 12345, 600, split, functions)
        atomic.write_text(os.path.join(squad, f"{split}.json"), json.dumps(dataset, ensure_ascii=False))
    race = make_race_data.make_race(paths.task("race"), sizes["race_articles"], 12345, entries=functions)
    features = load_or_build_features(
        os.path.join(squad, "train.json"), os.path.join(squad, "train_features.tfrecord"),
        SentencePieceTokenizer(paths.spm_model, do_lower_case=True),
        FeatureSettings(settings.max_seq_length, SQUAD_STRIDE, SQUAD_QUERY_LENGTH, True, "v1"))
    return {"topic_labels": list(labels), "topic_train": len(train), "topic_dev": len(dev),
            "squad_train": sizes["squad_train"], "squad_dev": sizes["squad_dev"],
            "race_dev": sum(level["questions"] for level in race["counts"]["dev"].values()),
            "squad_train_features": features.num_features}


def _model_args(settings, paths, cell, seed):
    config = os.path.join(paths.root, "cells", cell.id, "albert_config.json")
    if not os.path.isfile(config):
        atomic.write_json(config, settings.albert_config(cell))
    return [f"--albert_config_file={config}", f"--max_seq_length={settings.max_seq_length}",
            f"--random_seed={seed}", f"--dtype_policy={settings.dtype_policy}"]


def pretrain(settings, paths, cell, seed):
    """run_pretraining of one cell: its objective's data ("none": the SOP data without the
    sentence loss), the grid's budget; metrics.jsonl holds its learning curve."""
    from albert_tf import run_pretraining

    steps = settings.pretrain_steps
    results = call_command(run_pretraining, [
        *_model_args(settings, paths, cell, seed), f"--max_predictions_per_seq={settings.max_predictions_per_seq}",
        f"--input_file={paths.records('train', 'nsp' if cell.objective == 'nsp' else 'sop')}",
        f"--output_dir={paths.run(cell, seed, 'pretrain')}", f"--train_batch_size={settings.pretrain_batch_size}",
        f"--learning_rate={settings.pretrain_learning_rate}", f"--num_train_steps={steps}",
        f"--num_warmup_steps={steps // 10}", f"--save_checkpoints_steps={steps}", "--keep_checkpoint_max=1",
        f"--iterations_per_loop={max(1, min(100, steps // 10))}", "--do_train", "--nodo_eval", "--dynamic_masking",
        f"--sentence_loss={cell.objective != 'none'}", "--optimizer=lamb"], paths.run(cell, seed, "log.txt"))
    return {"final_step": results["final_step"]}


def evaluate(settings, paths, cell, seed, objective):
    """The pretrained cell on held-out SOP or NSP pairs (run_pretraining --nodo_train): its
    masked-LM and sentence-head accuracy."""
    from albert_tf import run_pretraining

    results = call_command(run_pretraining, [
        *_model_args(settings, paths, cell, seed), f"--max_predictions_per_seq={settings.max_predictions_per_seq}",
        f"--init_checkpoint={paths.run(cell, seed, 'pretrain')}",
        f"--eval_input_file={paths.records('eval', objective)}",
        f"--output_dir={paths.run(cell, seed, 'eval_' + objective)}", f"--eval_batch_size={EVAL_BATCH_SIZE}",
        f"--max_eval_steps={EVAL_BATCHES}", "--nodo_train", "--do_eval"], paths.run(cell, seed, "log.txt"))
    return {k: float(v) for k, v in results["eval"].items() if isinstance(v, (int, float))}


def finetune(settings, paths, cell, seed, task, tasks):
    """One task from the cell's pretrained model (the control: random weights), the same budget
    for every cell: its dev score in percent at the best dev checkpoint (the paper's protocol)."""
    from albert_tf import run_classifier, run_race, run_squad_v1

    steps, batch, where = settings.finetune_steps, settings.finetune_batch_size, paths.task(task)
    if task == "race":  # a question is four sequences: half the batch keeps a step's cost near the others'
        batch = max(1, batch // 2)
    every = steps // 3 if steps >= 30 else steps  # three dev evaluations; a --quick run's once, at its end
    args = [*_model_args(settings, paths, cell, seed), f"--spm_model_file={paths.spm_model}",
            f"--output_dir={paths.run(cell, seed, task)}", f"--train_batch_size={batch}",
            f"--learning_rate={settings.topic_learning_rate if task == 'topic' else settings.finetune_learning_rate}",
            "--do_train", f"--save_checkpoints_steps={every}", f"--iterations_per_loop={every}"]
    args += [f"--init_checkpoint={paths.run(cell, seed, 'pretrain')}"] if cell.pretrained else []
    log = paths.run(cell, seed, "log.txt")
    if task == "squad":
        epochs = (steps + 0.5) * batch / tasks["squad_train_features"]  # int(features / batch x epochs) = steps
        metrics = call_command(run_squad_v1, [
            *args, f"--train_file={where}/train.json", f"--predict_file={where}/dev.json",
            f"--train_feature_file={where}/train_features.tfrecord", "--do_predict", "--best_checkpoint",
            f"--predict_feature_file={where}/dev_features.tfrecord", "--keep_checkpoint_max=1",
            f"--predict_feature_left_file={where}/dev_features_left.pkl", f"--num_train_epochs={epochs!r}",
            f"--doc_stride={SQUAD_STRIDE}", f"--max_query_length={SQUAD_QUERY_LENGTH}", "--predict_batch_size=64"],
            log)
        return {"score": (metrics["metrics"]["f1"] + metrics["metrics"]["exact_match"]) / 2,
                "f1": metrics["metrics"]["f1"], "exact_match": metrics["metrics"]["exact_match"],
                "best_step": metrics.get("best_step")}
    args += ["--do_eval", f"--train_step={steps}", f"--warmup_step={steps // 10}", "--eval_batch_size=64"]
    if task == "topic":
        results = call_command(run_classifier, [
            *args, "--task_name=tsv", f"--data_dir={where}", "--text_a_column=sentence",
            f"--labels={','.join(tasks['topic_labels'])}", "--keep_checkpoint_max=1"], log)
    else:
        results = call_command(run_race, [
            *args, f"--data_dir={where}/RACE", f"--train_file={where}/train_features.tfrecord",
            f"--eval_file={where}/dev_features.tfrecord", "--num_keep_checkpoint=1",
            f"--max_qa_length={settings.max_seq_length // 3}"], log)
    return {"score": 100 * results["eval"]["accuracy"], "best_step": results["eval"].get("best_step")}


# ---- the runner ----

GUESS = {"corpus": 25.0, "spm": 30.0, "data": 15.0, "tasks": 10.0, "eval": 15.0, "pretrain": 15.0, "finetune": 20.0}
GUESS_PER_STEP = {"pretrain": 0.2, "finetune": 0.15}  # seconds a training step, until a step of the kind has run


@dataclasses.dataclass
class Step:
    """One unit of the grid: kind, label, its record (written when it is done), what runs it
    and its training steps (its guessed seconds, which the ETA scales by the measured)."""

    kind: str
    label: str
    record: str
    function: object
    training_steps: int = 0

    @property
    def guess(self):
        return GUESS[self.kind] + GUESS_PER_STEP.get(self.kind, 0.0) * self.training_steps


def plan(settings, paths, quick, state):
    """Every Step of the grid in order; `state` hands the tasks' record to the fine-tuning."""
    def tasks():
        state["tasks"] = make_tasks(settings, paths, quick)
        return state["tasks"]

    todo = [Step("corpus", "corpus", paths.record(None, None, "corpus"), lambda: build_corpus(settings, paths)),
            Step("spm", "SentencePiece model", paths.record(None, None, "spm"), lambda: train_spm(settings, paths))]
    todo += [Step("data", f"{split} data ({objective.upper()})", paths.record(None, None, f"{split}_{objective}"),
                  lambda s=split, o=objective, d=dupe: make_pretraining_data(settings, paths, s, o, d))
             for split, objective, dupe in PRETRAINING_DATA]
    todo += [Step("data", "held-out baselines", paths.record(None, None, "baselines"),
                  lambda: baselines(settings, paths)),
             Step("tasks", "downstream tasks", paths.record(None, None, "tasks"), tasks)]
    for seed in range(1, settings.seeds + 1):
        for cell in grid_cells(settings.tables):
            where = f"{cell.id} seed {seed}"
            if cell.pretrained:
                todo += [Step("pretrain", f"pretrain {where}", paths.record(cell, seed, "pretrain"),
                              lambda c=cell, s=seed: pretrain(settings, paths, c, s), settings.pretrain_steps)]
                todo += [Step("eval", f"held-out {o.upper()} eval {where}", paths.record(cell, seed, f"eval_{o}"),
                              lambda c=cell, s=seed, o=o: evaluate(settings, paths, c, s, o)) for o in ("sop", "nsp")]
            todo += [Step("finetune", f"{task} {where}", paths.record(cell, seed, task),
                          lambda c=cell, s=seed, t=task: finetune(settings, paths, c, s, t, state["tasks"]),
                          settings.finetune_steps) for task in TASKS]
    return todo


def _summary(kind, result):
    if kind == "pretrain":
        return f"{result['final_step']} steps"
    if kind == "eval":
        return f"mlm_acc {result['masked_lm_accuracy']:.4f}, sentence head acc {result['sentence_order_accuracy']:.4f}"
    if kind == "finetune":
        return f"dev score {result['score']:.2f}"
    return ", ".join(f"{k} {v}" for k, v in result.items() if not isinstance(v, (list, dict)))[:160]


def _duration(seconds):
    hours, rest = divmod(int(round(seconds)), 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def run_steps(todo):
    """Runs the Steps not yet done, in order, each recorded when it finishes, with a progress
    line each: its result, steps a minute, an ETA (the guesses scaled by the measured)."""
    measured, start, done_now = {}, time.perf_counter(), 0
    for index, step in enumerate(todo, 1):
        if read_done(step.record):
            continue
        began = time.perf_counter()
        result = step.function()
        seconds = time.perf_counter() - began
        record_done(step.record, result, seconds)
        measured.setdefault(step.kind, []).append(seconds / step.guess)
        done_now += 1
        remaining = [s for s in todo[index:] if not read_done(s.record)]
        eta = sum(s.guess * statistics.mean(measured.get(s.kind, [1.0])) for s in remaining)
        elapsed = time.perf_counter() - start
        print(f"[{index}/{len(todo)}] {step.label}: {_summary(step.kind, result)} ({seconds:.0f}s); {done_now} steps "
              f"in {_duration(elapsed)}, {done_now / elapsed * 60:.1f}/min, ETA {_duration(eta)}", flush=True)


def machine():
    """The CPU (its model and bf16 flags), its cores and the date of the run."""
    found = {}
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            key, _, value = line.partition(":")
            found.setdefault(key.strip(), value.strip())
    cpu_flags = [x for x in found.get("flags", "").split() if x in ("avx512_bf16", "amx_bf16", "avx512f", "amx_tile")]
    return {"cpu": found.get("model name", "unknown"), "cpu_flags": cpu_flags, "cores": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d")}


def gather(settings, paths):
    """results.json: the settings, the data steps' results, the machine, the seconds of all steps,
    per cell and seed the intrinsic accuracies and task scores (percent), the step times and
    the pretraining curve; the sizes and baselines the verdicts use; what `assess` adds."""
    data = {name: read_done(paths.record(None, None, name))["result"]
            for name in ("corpus", "spm", "tasks", "baselines")}
    cells = {}
    for cell in grid_cells(settings.tables):
        seeds = {}
        for seed in range(1, settings.seeds + 1):
            row = seeds[str(seed)] = {"intrinsic": {}, "downstream": {}, "seconds": {}}
            if cell.pretrained:
                row["seconds"]["pretrain"] = read_done(paths.record(cell, seed, "pretrain"))["seconds"]
                row["curve"] = os.path.relpath(paths.run(cell, seed, "pretrain/metrics.jsonl"), paths.root)
                for objective in ("sop", "nsp"):
                    evaluation = read_done(paths.record(cell, seed, f"eval_{objective}"))["result"]
                    row["intrinsic"][f"{objective}_accuracy"] = 100 * evaluation["sentence_order_accuracy"]
                    if objective == "sop":
                        row["intrinsic"]["mlm_accuracy"] = 100 * evaluation["masked_lm_accuracy"]
            for task in TASKS:
                done = read_done(paths.record(cell, seed, task))
                row["downstream"][task], row["seconds"][task] = done["result"]["score"], done["seconds"]
                if task == "squad":
                    row["downstream"]["squad_f1"] = done["result"]["f1"]
                    row["downstream"]["squad_exact_match"] = done["result"]["exact_match"]
        cells[cell.id] = {"sharing": cell.sharing, "ratio": cell.ratio, "objective": cell.objective,
                          "embedding_size": settings.embedding_size(cell.ratio), "label": cell.label(), "seeds": seeds}
    tasks, base = data["tasks"], data["baselines"]
    return assess({
        "settings": settings.to_dict(), "data": data, "cells": cells, "control": CONTROL.id, "base": BASE.id,
        "machine": machine(),
        "step_seconds": round(sum(read_done(path)["seconds"] for path in glob.glob(
            os.path.join(paths.root, "**", "steps", "*.json"), recursive=True)), 1),
        "tables": {t: [c.id for c in table_cells(t)] for t in settings.tables},
        # what the floors divide by: dev examples, held-out pairs, masked positions
        "sizes": {"topic": tasks["topic_dev"], "squad": tasks["squad_dev"], "race": tasks["race_dev"],
                  "sop_accuracy": base["sop_pairs"], "nsp_accuracy": base["nsp_pairs"],
                  "mlm_accuracy": base["mlm_positions"]},
        "baselines": {"mlm_accuracy": base["mlm_accuracy"], "sop_accuracy": base["sop_accuracy"],
                      "nsp_accuracy": base["nsp_accuracy"], "race": RACE_CHANCE}})


def check_output_dir(output_dir, settings, requested):
    """--output_dir new, or this tool's own grid with the same `settings` (their dtype policy
    as this machine resolves `requested`); else ValueError (exit 2) before anything is written."""
    outputs.check([outputs.Output("--output_dir", output_dir, outputs.REPRODUCTION)])
    path = os.path.join(output_dir, "grid.json")
    if not os.path.isfile(path):
        return
    existing, wanted = read_json(path, "the grid's settings (grid.json)"), settings.to_dict()
    there, here = existing.get("dtype_policy"), wanted["dtype_policy"]
    if there not in (here, "auto"):  # "auto": a grid.json of before the policy was resolved: another grid
        raise ValueError(
            f"--output_dir={output_dir} holds a grid computed in {there}; this machine resolves "
            f"--dtype_policy={requested} to {here}: resuming would mix {there} and {here} cells. Resume it with "
            f"--dtype_policy={there} (or on a machine that resolves the same), or choose a new --output_dir.")
    changed = sorted(k for k in set(existing) | set(wanted) if existing.get(k) != wanted.get(k))
    if changed:
        detail = ", ".join(f"{k}: {existing.get(k)!r} there, {wanted.get(k)!r} asked" for k in changed)
        raise ValueError(f"--output_dir={output_dir} holds another grid ({detail}); resume it with its own "
                         f"settings ({path}) or choose a new --output_dir.")


def resolved(settings):
    """`settings` with the dtype policy this machine resolves it to, as every command of the
    grid does (training/precision.py): grid.json records what the cells compute in."""
    from albert_tf.training.precision import choose

    return dataclasses.replace(settings, dtype_policy=choose(settings.dtype_policy).policy)


def run_grid(settings, output_dir, quick=False):
    """Runs (or resumes) the grid in output_dir, then writes results.json and the report."""
    requested, settings = settings.dtype_policy, resolved(settings)
    check_output_dir(output_dir, settings, requested)
    outputs.claim_dir(output_dir, outputs.REPRODUCTION, "--output_dir")
    if not os.path.isfile(os.path.join(output_dir, "grid.json")):
        atomic.write_json(os.path.join(output_dir, "grid.json"), settings.to_dict())
    paths = Paths(output_dir)
    state = {"tasks": (read_done(paths.record(None, None, "tasks")) or {}).get("result")}
    todo = plan(settings, paths, quick, state)
    print(f"reproduce: {len(todo)} steps, {sum(1 for s in todo if read_done(s.record))} already done "
          f"({len(grid_cells(settings.tables))} cells x {settings.seeds} seeds; H={settings.hidden_size}, "
          f"L={settings.num_hidden_layers}, {settings.pretrain_steps} pretraining steps; dtype policy "
          f"{settings.dtype_policy})", flush=True)
    import keras  # noqa: F401 (with TensorFlow: what every step imports)

    gc.freeze()  # those imports live as long as the process: the collection after each step skips them
    run_steps(todo)
    results = gather(settings, paths)
    atomic.write_json(os.path.join(output_dir, "results.json"), results)
    written = write_report(results, output_dir)
    print(f"reproduce: wrote results.json, {', '.join(os.path.basename(p) for p in written)} in {output_dir}",
          flush=True)
    return 0


# ---- the command ----

QUICK = {"tables": ("sop",), "seeds": 1, "hidden_size": 24, "num_attention_heads": 2, "num_hidden_layers": 2,
         "max_seq_length": 48, "max_predictions_per_seq": 6, "vocab_size": 1000, "pretrain_steps": 20,
         "pretrain_batch_size": 16, "finetune_steps": 6, "finetune_batch_size": 8, "corpus_mb": 1.5,
         "held_out_percent": 30}


@dataclasses.dataclass(kw_only=True)
class ReproduceOptions:
    """reproduce's own flags (RECORD adds --output_dir and --dtype_policy)."""

    tables: list = option(",".join(TABLES), f"Which of the paper's tables: {', '.join(TABLES)}.")
    seeds: int = option(Settings.seeds, "Seeds per cell (pretraining and fine-tuning; a claim is judged only when "
                                        "each of its cells has at least 3).")
    width: float = option(1.0, f"Width multiplier: hidden size {Settings.hidden_size} x width (a multiple of 12 and "
                               "of the heads), embedding sizes at the paper's E/H ratios.")
    num_attention_heads: int = option(Settings.num_attention_heads, "Attention heads.")
    num_hidden_layers: int = option(Settings.num_hidden_layers, "Transformer layers.")
    steps: int = option(Settings.pretrain_steps, "Pretraining steps of every cell.")
    finetune_steps: int = option(Settings.finetune_steps, "Steps of every fine-tuning run.")
    corpus_mb: float = option(Settings.corpus_mb, "MB of docstring text to use (0: all found).")
    report_only: bool = option(False, "Run no step: write the report (CSVs, claims, report.md) again from "
                                      "--output_dir's results.json by today's rule; --output_dir must be this "
                                      "tool's own, the other flags are not read.")
    quick: bool = option(False, "Tiny models on the built-in sample corpus (1.5 MB), one seed, the sentence-level "
                                "table unless --tables says otherwise: the whole pipeline at test size (for tests; "
                                "its numbers mean nothing, and with one seed every claim is 'not testable').")


# --output_dir: where the grid lives (a new directory, or this tool's own: resumed)
RECORD = Command("reproduce", ((RunDirectory, None), (ReproduceOptions, (
    "tables", "seeds", "width", "num_attention_heads", "num_hidden_layers", "steps", "finetune_steps", "corpus_mb")),
    (PrecisionOptions, None), (ReproduceOptions, ("report_only", "quick"))))


def define_flags(flag_values=None):
    option_flags.define_command(flags.FLAGS if flag_values is None else flag_values, RECORD)


def settings_from_flags(f):
    """The grid's Settings (ValueError naming a bad flag); --quick: its own sizes, with
    --tables, --seeds, --steps and --finetune_steps where given."""
    tables = tuple(t.strip() for t in f.tables if t.strip())
    if f.quick:
        values = dict(QUICK, dtype_policy=f.dtype_policy)
        for flag, key in (("seeds", "seeds"), ("steps", "pretrain_steps"), ("finetune_steps", "finetune_steps")):
            values[key] = f[flag].value if f[flag].present else values[key]
        return Settings(**dict(values, tables=tables if f["tables"].present else values["tables"]))
    hidden = Settings.hidden_size * f.width
    if f.width <= 0 or abs(hidden - round(hidden)) > 1e-9:
        raise ValueError(f"--width={f.width} gives a hidden size of {hidden:g}, not a whole number.")
    return Settings(tables=tables, seeds=f.seeds, hidden_size=int(round(hidden)),
                    num_attention_heads=f.num_attention_heads, num_hidden_layers=f.num_hidden_layers,
                    pretrain_steps=f.steps, finetune_steps=f.finetune_steps, corpus_mb=f.corpus_mb,
                    dtype_policy=f.dtype_policy)


def run(f):
    from albert_tf.training.precision import check_policy

    if not f.output_dir:
        raise ValueError("--output_dir is required.")
    if not f.report_only:
        settings = settings_from_flags(f)  # every check before any step
        settings.validate()
        check_policy(settings.dtype_policy)
        return run_grid(settings, f.output_dir, quick=f.quick)
    outputs.check([outputs.Output("--output_dir", f.output_dir, outputs.REPRODUCTION)])
    path = os.path.join(f.output_dir, "results.json")
    if not os.path.isfile(path):
        raise ValueError(f"--output_dir={f.output_dir} has no results.json: --report_only reports a gathered grid "
                         "(run it without --report_only first).")
    written = write_report(read_json(path, "the grid's results"), f.output_dir)
    print(f"reproduce: wrote {', '.join(os.path.relpath(p, f.output_dir) for p in written)} in {f.output_dir} "
          "from its results.json", flush=True)
    return 0


main, entry = entry_points.command("reproduce", define_flags, run)


if __name__ == "__main__":
    entry()
