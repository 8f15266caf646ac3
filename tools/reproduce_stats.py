"""The statistics of tools/reproduce.py's verdicts: when a difference is judged, its
standard error with a floor, whether each pretraining cell learned its own objective, and
which downstream tasks enter the average. Pure Python; nothing here imports TensorFlow.

The rule (RULE, printed in the report and stated the same in docs/reproduction.md):

- A claim is a linear combination d = sum_i c_i m_i + k of cell means m_i over the seeds
  (k a constant, e.g. -50 for "above chance").
- It is judged only when every cell in it has at least MIN_SEEDS (3) seeds; else its verdict
  is "not testable" ("fewer than 3 seeds").
- It is judged only when every pretrained cell in it learned its own objective (`learned`);
  else "not testable" naming the cell ("did not learn its objective"). A claim on a cell's
  own objective (the SOP model solving SOP) is judged either way: its failure is the result.
- se = max(sqrt(sum_i c_i^2 s_i^2 / n_i), floor), s_i the sample standard deviation of cell
  i over its n_i seeds. The floor is the metric's resolution, max_i |c_i| r_i, where r is
  one dev example's worth, 100 / N points for a score over N dev examples (N held-out pairs
  for a sentence-head accuracy, N masked positions for masked-LM accuracy); for the average
  of k tasks, max_t r_t / k. A claim of one cell against a constant p (chance, the unigram
  baseline, the paper's 52.0% read as "within 5 points of 50") on an accuracy over N items
  takes as floor at least the sampling error of that accuracy, sqrt(p (100 - p) / N): the
  seeds share one held-out set, so their spread does not show that set's own noise.
- "better" (d > 0): holds when d > 2 se, does not hold when d < -2 se, else inconclusive.
  "about" (|d| <= t): holds when |d| + 2 se <= t, does not hold when |d| - 2 se > t, else
  inconclusive.

A pretraining cell learned its objective when, by the rule above (3 seeds, the floors), its
held-out masked-LM accuracy is above the unigram baseline (always predicting the piece most
frequent among the masked positions of the cell's own training data, scored on the held-out
positions) and, for SOP and NSP cells, its sentence head's accuracy on held-out pairs of its
own kind is above chance (the larger of 50% and the share of the held-out pairs' more
frequent label: what a head that always answers one class scores), each with "holds".

RACE-style enters the downstream average only when the all-shared E=H/6 SOP cell (ALBERT's
own layout, in every table) scores above chance (25%, four options) by the same rule;
else it leaves the average, reported apart with the reason.
"""

import math
import statistics

if __package__:  # imported as tools.reproduce_stats
    from . import reproduce_grid as grid
else:  # imported by a tool run as a script: tools/ is sys.path[0]
    import reproduce_grid as grid


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


def resolution(results, key, average_tasks=None):
    """One dev example's worth of `key`, in points: 100 / N (results["sizes"][key]); for
    "avg", the largest of its tasks' divided by their number."""
    if key == "avg":
        tasks = average_tasks or results["average"]["tasks"]
        return max(resolution(results, t) for t in tasks) / len(tasks)
    sizes = results.get("sizes") or {}
    if not sizes.get(key):
        raise ValueError(f"results.json has no evaluation size for {key!r} (results['sizes']); rerun the grid's "
                         "gathering (tools/reproduce.py on its --output_dir).")
    return 100.0 / sizes[key]


def _sized(results, key):
    """Whether results.json holds the evaluation sizes `resolution` needs for `key`."""
    if key == "avg":
        return all(_sized(results, t) for t in results["average"]["tasks"])
    return bool((results.get("sizes") or {}).get(key))


def cell_stats(values):
    """(mean, sample std, n); std is None for fewer than two values."""
    if not values:
        return None, None, 0
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else None), len(values)


def judge(terms, constant, kind, tolerance, results, learned=None, labels=None):
    """The verdict of d = sum c_i m_i + constant.

    Args:
        terms: [(coefficient, cell id, key, per-seed values)].
        constant: k of d; None when results.json lacks the baseline it is made of.
        kind: "better" or "about" (with `tolerance`, points).
        results: results.json (its "sizes" for the floors, "average" for "avg").
        learned: {cell id: learned(...) dict} or None (not checked).
        labels: {cell id: label} for the reasons (default: the ids).
    Returns:
        {"verdict", "reason", "d", "se", "rule"}; d and se are None when a cell has no values.
        A results.json of before it held "sizes" and "baselines": a claim with a cell of fewer
        than MIN_SEEDS seeds is "not testable" (se None, d None without the baseline); any other
        raises ValueError.
    """
    labels = labels or {}
    stats = [(c, cell, key, *cell_stats(values)) for c, cell, key, values in terms]
    if any(mean is None for *_, mean, _, _ in stats):
        return {"verdict": "not testable", "reason": "a cell has no values", "d": None, "se": None, "rule": ""}
    few = sorted({f"{labels.get(cell, cell)}: {n}" for _, cell, _, _, _, n in stats if n < MIN_SEEDS})
    few_reason = f"fewer than {MIN_SEEDS} seeds ({'; '.join(few)})"
    if few and (constant is None or not all(_sized(results, key) for _, _, key, *_ in stats)):
        # a results.json gathered before it held the sizes and baselines (the committed 2-seed
        # default run): too few seeds settle the verdict without the floor (se) or the baseline (d)
        d = None if constant is None else constant + sum(c * mean for c, _, _, mean, _, _ in stats)
        rule = ("d unknown (results.json has no baselines)" if d is None else
                f"d = {d:+.2f}, se unknown (results.json has no sizes)")
        return {"verdict": "not testable", "reason": few_reason, "d": d, "se": None,
                "rule": rule + (f", tolerance {tolerance:g}" if kind == "about" else "")}
    if constant is None:
        raise ValueError("results.json has no baselines (results['baselines']); rerun the grid's gathering "
                         "(tools/reproduce.py on its --output_dir).")
    d = constant + sum(c * mean for c, _, _, mean, _, _ in stats)
    variance = sum(c ** 2 * std ** 2 / n for c, _, _, _, std, n in stats if std is not None)
    floor = max(abs(c) * resolution(results, key) for c, _, key, *_ in stats)
    if len(stats) == 1 and constant and stats[0][2] in ACCURACIES:
        c, _, key = stats[0][:3]
        p = min(max(-constant / c, 0.0), 100.0)
        floor = max(floor, abs(c) * math.sqrt(p * (100.0 - p) / results["sizes"][key]))
    se = max(math.sqrt(variance), floor)
    rule = f"d = {d:+.2f}, 2 se = {MARGIN * se:.2f}" + (f", tolerance {tolerance:g}" if kind == "about" else "")
    if few:
        return {"verdict": "not testable", "reason": few_reason, "d": d, "se": se, "rule": rule}
    unlearned = sorted({cell for _, cell, *_ in stats if learned and learned.get(cell)
                        and learned[cell]["verdict"] != "yes"})
    if unlearned:
        why = "; ".join(f"{labels.get(cell, cell)}: {learned[cell]['reason']}" for cell in unlearned)
        return {"verdict": "not testable", "reason": f"a cell did not learn its objective ({why})", "d": d,
                "se": se, "rule": rule}
    if kind == "better":
        verdict = "holds" if d > MARGIN * se else "does not hold" if d < -MARGIN * se else "inconclusive"
    else:
        verdict = ("holds" if abs(d) + MARGIN * se <= tolerance else
                   "does not hold" if abs(d) - MARGIN * se > tolerance else "inconclusive")
    return {"verdict": verdict, "reason": "", "d": d, "se": se, "rule": rule}


def seed_values(cell, key, tasks=None):
    """The per-seed values of `key` (a downstream task, "avg" over `tasks`, or an intrinsic
    metric) of a cell of results.json; [] when the cell has none."""
    values = []
    for row in cell["seeds"].values():
        if key == "avg":
            values.append(statistics.mean(row["downstream"][t] for t in tasks) if tasks else row["avg"])
        elif key in row["downstream"]:
            values.append(row["downstream"][key])
        elif key in row["intrinsic"]:
            values.append(row["intrinsic"][key])
    return values


def learned(results, cell_id):
    """Whether a pretraining cell learned its objective (module docstring): {"verdict": "yes",
    "no" or "not testable", "reason", "checks": [{"metric", "against", "d", "se", "verdict"}]};
    None for the random-init control."""
    cell = results["cells"][cell_id]
    objective = cell["objective"]
    if objective == "random":
        return None
    data = "nsp" if objective == "nsp" else "sop"
    base = results.get("baselines") or {}  # none in a results.json of before they were gathered: None
    wanted = [("mlm_accuracy", (base.get("mlm_accuracy") or {}).get(data), "the unigram baseline")]
    if objective != "none":
        key = f"{objective}_accuracy"
        wanted.append((key, base.get(key), "chance"))
    checks, failed, untestable = [], [], []
    for key, against, name in wanted:
        verdict = judge([(1, cell_id, key, seed_values(cell, key))], None if against is None else -against,
                        "better", None, results, labels={cell_id: cell.get("label", cell_id)})
        checks.append({"metric": key, "against": against, "d": verdict["d"], "se": verdict["se"],
                       "verdict": verdict["verdict"]})
        metric = {"mlm_accuracy": "masked LM", "sop_accuracy": "SOP", "nsp_accuracy": "NSP"}[key]
        if verdict["verdict"] == "not testable":
            untestable.append(verdict["reason"])
        elif verdict["verdict"] != "holds":
            mean = against + verdict["d"]
            failed.append(f"held-out {metric} accuracy {mean:.2f} against {name} {against:.2f}, "
                          f"2 se = {MARGIN * verdict['se']:.2f}")
    if untestable:
        return {"verdict": "not testable", "reason": untestable[0], "checks": checks}
    if failed:
        return {"verdict": "no", "reason": "; ".join(failed), "checks": checks}
    return {"verdict": "yes", "reason": "", "checks": checks}


def average_tasks(results):
    """(tasks of the downstream average, {task left out: reason}): RACE-style stays when the
    base cell scores above chance by the rule."""
    base = results["cells"].get(results["base"])
    tasks = [t for t in grid.TASKS if t != "race"]
    if base is None:
        return list(grid.TASKS), {}
    label = base.get("label", results["base"])
    verdict = judge([(1, results["base"], "race", seed_values(base, "race"))], -RACE_CHANCE, "better", None,
                    results, labels={results["base"]: label})
    if verdict["verdict"] == "holds":
        return list(grid.TASKS), {}
    if verdict["verdict"] == "not testable":
        why = f"not shown to learn above chance: {verdict['reason']}"
    else:
        why = (f"{label} scores {RACE_CHANCE + verdict['d']:.2f} against chance {RACE_CHANCE:g} "
               f"({verdict['rule']}): not above chance by more than 2 se")
    return tasks, {"race": why}


def assess(results):
    """Adds to results.json (in place; returns it): "average" {"tasks", "left_out"},
    "learned" {cell id: learned(...)}, and each seed row's "avg" over the average's tasks."""
    tasks, left_out = average_tasks(results)
    results["average"] = {"tasks": tasks, "left_out": left_out}
    for cell in results["cells"].values():
        for row in cell["seeds"].values():
            row["avg"] = statistics.mean(row["downstream"][t] for t in tasks)
    results["learned"] = {cell_id: verdict for cell_id in results["cells"]
                          if (verdict := learned(results, cell_id)) is not None}
    return results
