"""The report of tools/reproduce.py: from `results.json` to one CSV per table, `report.md`
(our mean +- std beside the paper's numbers, each claim's verdict) and PNG figures.

The verdict rule, the learned-objective check and the downstream average's tasks are
tools/reproduce_stats.py's (RULE, LEARNED_RULE, AVERAGE_RULE, printed in the report).
Pure Python plus matplotlib; nothing here imports TensorFlow.
"""

import csv
import io
import json
import os

from albert_tf.storage import atomic
from albert_tf.training.reporting import read_records

if __package__:  # imported as tools.reproduce_report
    from . import reproduce_grid as grid
    from . import reproduce_stats as stats
else:  # imported by a tool run as a script: tools/ is sys.path[0]
    import reproduce_grid as grid
    import reproduce_stats as stats

RULE, LEARNED_RULE, AVERAGE_RULE = stats.RULE, stats.LEARNED_RULE, stats.AVERAGE_RULE
METRICS = ("mlm_accuracy", "sop_accuracy", "nsp_accuracy")
SCORES = grid.TASKS + ("avg",)
SCORE_NAMES = {"topic": "topic cls (acc)", "squad": "SQuAD-style (F1/EM)", "race": "RACE-style (acc)",
               "avg": "Avg", "mlm_accuracy": "MLM acc", "sop_accuracy": "SOP acc", "nsp_accuracy": "NSP acc"}
MARGIN = stats.MARGIN


def seed_values(cell, key):
    """The per-seed values of `key` (a downstream task, "avg", or an intrinsic metric) of a
    cell of results.json; [] when the cell has none (the random-init control's intrinsic)."""
    return stats.seed_values(cell, key)


def mean_std(values):
    """(mean, sample std, n); std is None for fewer than two values."""
    return stats.cell_stats(values)


CHANCE = "chance"


class Claim:
    """One claim of the paper: a linear combination `terms` [(coefficient, cell id, key)]
    of cell means plus `constant` (a number, or CHANCE: minus the chance of the one term's
    held-out pairs, results["baselines"][key]), and how it is judged: kind "better" (d > 0)
    or "about" (|d| <= tolerance)."""

    def __init__(self, table, text, terms, kind="better", tolerance=None, constant=0.0, paper=None, gated=True):
        self.table, self.text, self.terms, self.kind = table, text, terms, kind
        self.tolerance, self.constant, self.paper = tolerance, constant, paper
        self.gated = gated  # False: the claim is a cell's own objective (its failure is "does not hold")

    def cells(self):
        return {cell for _, cell, _ in self.terms}

    def judge(self, results):
        """-> dict(verdict, reason, d, se, rule) by reproduce_stats.judge; `results` assessed
        (reproduce_stats.assess: its "learned" and "average")."""
        terms = [(c, cell, key, seed_values(results["cells"][cell], key)) for c, cell, key in self.terms]
        constant = self.constant
        if constant == CHANCE:  # minus the held-out pairs' chance (stats.learned's): one term; None: unknown
            chance = (results.get("baselines") or {}).get(self.terms[0][2])
            constant = None if chance is None else -chance
        labels = {cell: results["cells"][cell].get("label", cell) for cell in self.cells()}
        return stats.judge(terms, constant, self.kind, self.tolerance, results,
                           results.get("learned") if self.gated else None, labels)


def _id(sharing, ratio, objective="sop"):
    return grid.Cell(sharing, ratio, objective).id


def claims():
    """Every claim of the issue's list, as data (shared/ALBERT_REFERENCE.md section 10)."""
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
    avg = grid.PAPER_AVG["sharing"]
    for ratio, paper_e in (("1", 768), ("1/6", 128)):
        a = {s: _id(s, ratio) for s in grid.SHARINGS}
        made += [
            Claim("sharing", f"E={grid.e_label(ratio)}: not-shared better than shared-attention",
                  [(1, a["none"], "avg"), (-1, a["attention"], "avg")],
                  paper=f"E={paper_e}: {avg[('none', ratio)]} vs {avg[('attention', ratio)]}"),
            Claim("sharing", f"E={grid.e_label(ratio)}: sharing FFN hurts more than sharing attention "
                  "(shared-attention better than shared-FFN)", [(1, a["attention"], "avg"), (-1, a["ffn"], "avg")],
                  paper=f"E={paper_e}: {avg[('attention', ratio)]} vs {avg[('ffn', ratio)]}"),
        ]
    a = {s: _id(s, "1") for s in grid.SHARINGS}
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
    for task in grid.TASKS:
        made.append(Claim("premise", f"pretrained beats random init on {SCORE_NAMES[task]}",
                          [(1, grid.BASE.id, task), (-1, grid.CONTROL.id, task)]))
    made.append(Claim("premise", "pretrained beats random init on the downstream average",
                      [(1, grid.BASE.id, "avg"), (-1, grid.CONTROL.id, "avg")]))
    return made


def judged_claims(results):
    """The claims whose cells the grid has, each with its verdict (`results` assessed first:
    reproduce_stats.assess)."""
    stats.assess(results)
    out = []
    for claim in claims():
        judged = claim.judge(results) if claim.cells() <= set(results["cells"]) else None
        if judged:
            out.append({"table": claim.table, "claim": claim.text, "paper": claim.paper, **judged})
    return out


def _fmt(mean, std):
    if mean is None:
        return ""
    return f"{mean:.2f}" if std is None else f"{mean:.2f} ± {std:.2f}"


def table_rows(results, table):
    """One dict per cell of a table: settings, per key mean/std/n and the paper's numbers."""
    if "learned" not in results:
        stats.assess(results)
    rows = []
    for cell_id in results["tables"][table]:
        cell = results["cells"][cell_id]
        row = {"cell": cell_id, "sharing": grid.SHARING_NAMES[cell["sharing"]], "E": cell["embedding_size"],
               "E/H": cell["ratio"], "paper_E": grid.PAPER_E[cell["ratio"]], "objective": cell["objective"]}
        for key in METRICS + SCORES:
            mean, std, n = mean_std(seed_values(cell, key))
            row[f"{key}_mean"], row[f"{key}_std"], row["seeds"] = mean, std, n
        learned = results["learned"].get(cell_id)
        row["learned_objective"] = learned["verdict"] if learned else None
        row["learned_reason"] = learned["reason"] if learned else None
        if table in grid.PAPER_AVG:
            row["paper_avg"] = grid.PAPER_AVG[table].get((cell["sharing"], cell["ratio"]))
        else:
            for key in ("sop_accuracy", "nsp_accuracy"):
                row[f"paper_{key}"] = grid.PAPER_SENTENCE.get((cell["objective"], key))
        rows.append(row)
    return rows


def write_csv(rows, path):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
    atomic.write_text(path, buffer.getvalue())


def _markdown_table(results, table, rows):
    keys = (METRICS if table == "sop" else ()) + SCORES
    paper = ["paper SOP acc", "paper NSP acc"] if table == "sop" else ["paper Avg"]
    head = ["cell", "learned its objective", *[SCORE_NAMES[k] for k in keys], *paper]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cell = results["cells"][row["cell"]]
        values = [_fmt(row[f"{k}_mean"], row[f"{k}_std"]) for k in keys]
        if table == "sop":
            values += [_paper(row["paper_sop_accuracy"]), _paper(row["paper_nsp_accuracy"])]
        else:
            values.append(_paper(row["paper_avg"]))
        learned = _learned(row)
        lines.append("| " + " | ".join([f"{cell['label']} ({cell['embedding_size']})", learned, *values]) + " |")
    return "\n".join(lines)


def _learned(row):
    """The table's "learned its objective" entry: yes, or the verdict with its reason; "—"
    for the random-init control."""
    if row["learned_objective"] is None:
        return "—"
    return row["learned_objective"] + (f" ({row['learned_reason']})" if row["learned_reason"] else "")


def _verdict(v):
    return f"**{v['verdict']}**" + (f": {v['reason']}" if v["reason"] else "")


def _paper(value):
    return "—" if value is None else f"{value:.1f}"


TITLES = {"sop": "Sentence-level loss (all-shared, E=H/6)", "sharing": "Cross-layer sharing",
          "embedding": "Embedding size E"}


def _average_text(results):
    tasks = results["average"]["tasks"]
    text = ", ".join(SCORE_NAMES[t] for t in tasks)
    for task, why in results["average"]["left_out"].items():
        text += f"; {SCORE_NAMES[task]} is left out of it and reported apart ({why})"
    return text


def write_report(results, output_dir, figures=True):
    """Writes table_<t>.csv, claims.csv, report.md and (figures) the PNGs; returns the paths."""
    written = []
    verdicts = judged_claims(results)
    tables = [t for t in grid.TABLES if t in results["tables"]]  # the paper's order (results.json sorts its keys)
    s = results["settings"]
    md = ["# The paper's ablations, reproduced small", "",
          f"Grid: H={s['hidden_size']}, L={s['num_hidden_layers']}, {s['num_attention_heads']} heads, "
          f"sequence {s['max_seq_length']}, vocabulary {s['vocab_size']}; {s['pretrain_steps']} LAMB steps at batch "
          f"{s['pretrain_batch_size']} per cell, {s['seeds']} seed(s); fine-tuning {s['finetune_steps']} steps at "
          f"batch {s['finetune_batch_size']}, learning rate {s['finetune_learning_rate']:g} (topic "
          f"{s['topic_learning_rate']:g}); dtype policy {s['dtype_policy']}. "
          "Scores are dev percentages; "
          f"mean ± sample std over seeds. Avg = mean of {_average_text(results)} (the paper's Avg averages "
          "SQuAD1.1, SQuAD2.0, MNLI, SST-2 and RACE; compare directions, not values).", "",
          "Learned its objective: " + LEARNED_RULE, "", "Average: " + AVERAGE_RULE]
    if not results.get("sizes") or not results.get("baselines"):
        md += ["", "This results.json was gathered before it held the held-out sizes and baselines the rule needs: "
               "the standard errors and the differences against chance or the unigram baseline are unknown, and "
               "a verdict is given only where too few seeds settle it ('not testable').", ""]
    if "machine" in results:
        m = results["machine"]
        flags = ", ".join(m["cpu_flags"]) or "no bf16 flags"
        md.append(f"Run {m['date']} on {m['cpu']} ({m['cores']} cores; {flags}); "
                  f"the grid's steps took {results['step_seconds'] / 60:.1f} minutes.")
    md.append("")
    for table in tables:
        rows = table_rows(results, table)
        path = os.path.join(output_dir, f"table_{table}.csv")
        write_csv(rows, path)
        written.append(path)
        md += [f"## {TITLES[table]}", "", _markdown_table(results, table, rows), ""]
        if figures:
            written.append(_bar_chart(results, table, rows, output_dir))
    control = results["cells"].get(results["control"])
    if control:
        md += ["## Pretrained against random init (same architecture: all-shared, E=H/6)", "",
               "| start | " + " | ".join(SCORE_NAMES[k] for k in SCORES) + " |", "|---|" + "---|" * len(SCORES)]
        for cell_id, name in ((results["base"], "pretrained (SOP)"), (results["control"], "random init")):
            cell = results["cells"][cell_id]
            md.append(f"| {name} | " + " | ".join(_fmt(*mean_std(seed_values(cell, k))[:2]) for k in SCORES) + " |")
        md.append("")
    md += ["## Claims", "", "Rule: " + RULE, "",
           "| table | claim | paper | ours | verdict |", "|---|---|---|---|---|"]
    for v in verdicts:
        md.append(f"| {v['table']} | {v['claim']} | {v['paper'] or ''} | {v['rule']} | {_verdict(v)} |")
    md.append("")
    if verdicts:
        path = os.path.join(output_dir, "claims.csv")
        columns = ("table", "claim", "paper", "d", "se", "verdict", "reason")
        write_csv([{k: v[k] for k in columns} for v in verdicts], path)
        written.append(path)
    if figures:
        written += _curves(results, output_dir)
        md += ["## Figures", "", *[f"![{t}](table_{t}.png)" for t in tables],
               "", "Learning curves per cell: `curves/<cell>.png`.", ""]
    path = os.path.join(output_dir, "report.md")
    atomic.write_text(path, "\n".join(md))
    written.append(path)
    results_claims = os.path.join(output_dir, "claims.json")
    atomic.write_text(results_claims, json.dumps(verdicts, indent=2) + "\n")
    return written + [results_claims]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bar_chart(results, table, rows, output_dir):
    """Our downstream average per cell with +- std error bars, beside the paper's numbers."""
    plt = _pyplot()
    keys = ("sop_accuracy", "nsp_accuracy", "avg") if table == "sop" else ("avg",)
    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys) + 1, 4), squeeze=False)
    labels = [f"{r['sharing']}\nE={r['E']}" + (f"\n{r['objective']}" if table == "sop" else "") for r in rows]
    for ax, key in zip(axes[0], keys):
        means = [r[f"{key}_mean"] or 0.0 for r in rows]
        errors = [r[f"{key}_std"] or 0.0 for r in rows]
        ax.bar(range(len(rows)), means, yerr=errors, capsize=4, color="tab:blue", label="ours (mean ± std)")
        paper = [r.get(f"paper_{key}", r.get("paper_avg") if key == "avg" else None) for r in rows]
        if any(p is not None for p in paper):
            ax.scatter([i for i, p in enumerate(paper) if p is not None], [p for p in paper if p is not None],
                       color="tab:red", marker="D", zorder=3, label="paper")
        ax.set_xticks(range(len(rows)), labels, fontsize=7)
        ax.set_title(SCORE_NAMES[key])
        ax.legend(fontsize=7)
    fig.suptitle(TITLES[table])
    fig.tight_layout()
    path = os.path.join(output_dir, f"table_{table}.png")
    with atomic.open_file(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
    return path


def _read_curve(path):
    return [r for r in read_records(path)
            if "masked_lm_loss" in r and "step" in r and r.get("split", "train") == "train"]


def _curves(results, output_dir):
    """curves/<cell>.png: masked-LM loss and sentence-head accuracy against step, one line
    per seed."""
    plt = _pyplot()
    written = []
    os.makedirs(os.path.join(output_dir, "curves"), exist_ok=True)
    for cell_id, cell in results["cells"].items():
        runs = {seed: _read_curve(os.path.join(output_dir, row["curve"]))
                for seed, row in cell["seeds"].items() if row.get("curve")}
        if not any(runs.values()):
            continue
        fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
        for seed, points in runs.items():
            steps = [p["step"] for p in points]
            left.plot(steps, [p["masked_lm_loss"] for p in points], label=f"seed {seed}")
            right.plot(steps, [p["sentence_order_accuracy"] for p in points], label=f"seed {seed}")
        left.set(xlabel="step", ylabel="masked-LM loss (train)")
        right.set(xlabel="step", ylabel="sentence head accuracy (train)")
        left.legend(fontsize=7)
        fig.suptitle(cell["label"])
        fig.tight_layout()
        path = os.path.join(output_dir, "curves", f"{cell_id}.png")
        with atomic.open_file(path, "wb") as f:
            fig.savefig(f, format="png", dpi=100)
        plt.close(fig)
        written.append(path)
    return written
