"""tools/reproduce.py's report: the verdict rule on hand-made results, the tables' rows and
the files it writes (no TensorFlow)."""

import csv
import json
import math
import os
import pytest
from tools import reproduce


SIZES = {"topic": 320, "squad": 150, "race": 54, "sop_accuracy": 2560, "nsp_accuracy": 2560, "mlm_accuracy": 20000}
BASELINES = {"mlm_accuracy": {"sop": 5.0, "nsp": 5.0}, "sop_accuracy": 50.0, "nsp_accuracy": 50.0, "race": 25.0}
LEARNED = {"mlm_accuracy": 20.0, "sop_accuracy": 80.0, "nsp_accuracy": 80.0}  # every check far above its baseline
FLAT = [(50.0, 50.0, 50.0)] * 3


def _row(avg_parts, intrinsic=None):
    topic, squad, race = avg_parts
    return {"downstream": {"topic": topic, "squad": squad, "race": race}, "intrinsic": intrinsic or {},
            "avg": (topic + squad + race) / 3}


def _results(values, tables=("sop", "sharing", "embedding"), sizes=None, baselines=None):
    """results.json of every cell of `tables`: values[cell_id] = list of per-seed
    (topic, squad, race[, intrinsic dict]); cells not given get three seeds of 50s, and
    pretrained cells without an intrinsic dict LEARNED's accuracies."""
    settings = reproduce.Settings(tables=tuple(tables))
    cells = {}
    for cell in reproduce.grid_cells(tables):
        seeds = values.get(cell.id, FLAT)
        default = dict(LEARNED) if cell.pretrained else None
        cells[cell.id] = {"sharing": cell.sharing, "ratio": cell.ratio, "objective": cell.objective,
                          "embedding_size": settings.embedding_size(cell.ratio), "label": cell.label(),
                          "seeds": {str(i + 1): _row(v[:3], v[3] if len(v) > 3 else default)
                                    for i, v in enumerate(seeds)}}
    return {"settings": settings.to_dict(), "cells": cells,
            "tables": {t: [c.id for c in reproduce.table_cells(t)] for t in tables},
            "control": reproduce.CONTROL.id, "base": reproduce.BASE.id, "sizes": dict(sizes or SIZES),
            "baselines": dict(baselines or BASELINES)}


def _verdict(verdicts, text):
    (found,) = [v for v in verdicts if v["claim"] == text]
    return found


PREMISE_TOPIC = "pretrained beats random init on topic cls (acc)"
SOP_OVER_NSP = "SOP's model solves NSP better than NSP's model solves SOP (78.9 vs 52.0)"
NSP_AT_CHANCE = "NSP-trained model solves SOP only at chance (paper 52.0%): SOP acc within 5 points of 50"
SOP_SOLVES_SOP = "SOP-trained model solves SOP (paper 86.5%): SOP acc above chance"


def test_better_claims_follow_the_two_standard_error_rule():
    none1, att1 = reproduce.Cell("none", "1", "sop").id, reproduce.Cell("attention", "1", "sop").id
    ffn1, all1 = reproduce.Cell("ffn", "1", "sop").id, reproduce.Cell("all", "1", "sop").id
    results = _results({
        # avg 60, 61, 62 -> mean 61, std 1; shared-attention 50.5, 49.5, 50 -> mean 50, std 0.5:
        # d = 11, se = sqrt(1/3 + 0.25/3) = 0.645 (above the Avg floor max(100/320, 100/150, 100/54) / 3 = 0.617)
        none1: [(60, 60, 60), (61, 61, 61), (62, 62, 62)],
        att1: [(50.5, 50.5, 50.5), (49.5, 49.5, 49.5), (50, 50, 50)],
        # shared-FFN clearly above shared-attention: the "attention better than FFN" claim does not hold
        ffn1: [(70, 70, 70), (71, 71, 71), (72, 72, 72)],
        all1: FLAT,
    })
    verdicts = reproduce.judged_claims(results)
    first = _verdict(verdicts, "E=H: not-shared better than shared-attention")
    assert first["d"] == pytest.approx(11.0)
    assert first["se"] == pytest.approx(math.sqrt(1 / 3 + 0.25 / 3))
    assert first["verdict"] == "holds"
    # shared-attention 50 against all-shared 50 +- 0: d = 0; the seeds' se 0.5 / sqrt(3) = 0.29 is
    # below the Avg floor, one RACE-style question of 54 over three tasks: 100 / 54 / 3 = 0.617
    same = _verdict(verdicts, "E=H: shared-attention better than all-shared")
    assert same["verdict"] == "inconclusive" and same["se"] == pytest.approx(100 / 54 / 3)
    ffn = _verdict(verdicts, "E=H: sharing FFN hurts more than sharing attention (shared-attention better than "
                             "shared-FFN)")
    assert ffn["d"] == pytest.approx(50.0 - 71.0) and ffn["verdict"] == "does not hold"
    # all-shared 50 +- 0 against shared-FFN 71: far outside the 1-point tolerance
    assert _verdict(verdicts, "E=H: all-shared about shared-FFN (within 1 point)")["verdict"] == "does not hold"


def test_zero_spread_never_holds_the_issues_case():
    """Cells [50, 50, 50] against [49.99, 49.99, 49.99] (no spread at all): the standard error
    is the topic task's resolution, one of 320 dev examples = 0.3125 points, not 0."""
    flat_minus = [(49.99, 50, 50)] * 3
    results = _results({reproduce.BASE.id: FLAT, reproduce.CONTROL.id: flat_minus}, tables=("sop",))
    claim = _verdict(reproduce.judged_claims(results), PREMISE_TOPIC)
    assert claim["d"] == pytest.approx(0.01)
    assert claim["se"] == pytest.approx(100 / 320)
    assert claim["verdict"] == "inconclusive" and claim["reason"] == ""
    # the rule alone, on hand-made numbers: zero spread, resolution 100/N
    judged = reproduce.judge([(1, "a", "topic", [50.0, 50.0, 50.0]), (-1, "b", "topic", [49.99, 49.99, 49.99])],
                         0.0, "better", None, {"sizes": {"topic": 320}})
    assert judged["se"] == pytest.approx(0.3125) and judged["verdict"] == "inconclusive"


def test_two_seeds_are_not_judged():
    """The issue's [50, 50] against [49.99, 49.99] and a large difference alike: with two seeds
    a claim is "not testable", the reason naming the cells."""
    results = _results({reproduce.BASE.id: [(50, 50, 50)] * 2, reproduce.CONTROL.id: [(49.99, 50, 50)] * 2},
                       tables=("sop",))
    claim = _verdict(reproduce.judged_claims(results), PREMISE_TOPIC)
    assert claim["verdict"] == "not testable"
    assert claim["reason"] == ("fewer than 3 seeds (all-shared E=H/6 SOP: 2; all-shared E=H/6 random init: 2)")
    big = reproduce.judge([(1, "a", "topic", [90.0, 91.0]), (-1, "b", "topic", [10.0, 11.0, 12.0])], 0.0, "better",
                      None, {"sizes": {"topic": 320}}, labels={"a": "cell A"})
    assert big["verdict"] == "not testable" and big["reason"] == "fewer than 3 seeds (cell A: 2)"


def test_three_seeds_can_hold():
    results = _results({reproduce.BASE.id: [(60, 50, 50), (61, 50, 50), (62, 50, 50)],
                        reproduce.CONTROL.id: [(50, 50, 50), (50.5, 50, 50), (51, 50, 50)]}, tables=("sop",))
    claim = _verdict(reproduce.judged_claims(results), PREMISE_TOPIC)
    # d = 61 - 50.5; se = sqrt(1^2/3 + 0.5^2/3) = 0.645 > 2 x ... : d / se = 16.3
    assert claim["d"] == pytest.approx(10.5) and claim["se"] == pytest.approx(math.sqrt(1 / 3 + 0.25 / 3))
    assert claim["verdict"] == "holds"


def test_one_seed_is_never_judged():
    results = _results({reproduce.Cell("none", "1", "sop").id: [(90, 90, 90)]}, tables=("sharing",))
    for cell in results["cells"].values():  # one seed each
        cell["seeds"] = {"1": cell["seeds"]["1"]}
    verdicts = reproduce.judged_claims(results)
    assert verdicts and {v["verdict"] for v in verdicts} == {"not testable"}
    assert all(v["reason"].startswith("fewer than 3 seeds (") for v in verdicts)
    assert {v["verdict"] for v in results["learned"].values()} == {"not testable"}


def test_about_claims_and_chance():
    sop, nsp, none = (reproduce.Cell("all", "1/6", o).id for o in ("sop", "nsp", "none"))
    results = _results({
        sop: [(50, 50, 50, {"mlm_accuracy": 20.0, "sop_accuracy": 80.0, "nsp_accuracy": 70.0}),
              (50, 50, 50, {"mlm_accuracy": 20.2, "sop_accuracy": 82.0, "nsp_accuracy": 72.0}),
              (50, 50, 50, {"mlm_accuracy": 20.1, "sop_accuracy": 81.0, "nsp_accuracy": 71.0})],
        nsp: [(50, 50, 50, {"mlm_accuracy": 20.1, "sop_accuracy": s, "nsp_accuracy": 90.0})
              for s in (51.0, 51.2, 51.1)],
        none: [(50, 50, 50, {"mlm_accuracy": 25.0, "sop_accuracy": 50.0, "nsp_accuracy": 50.0})] * 3,
    }, tables=("sop",))
    verdicts = reproduce.judged_claims(results)
    chance = _verdict(verdicts, NSP_AT_CHANCE)
    # d = 51.1 - 50 = 1.1; the seeds' se 0.1 / sqrt(3) = 0.058 is below the floor of an accuracy
    # of 50% over 2560 held-out pairs, sqrt(50 x 50 / 2560) = 0.988: 1.1 + 2 x 0.988 <= 5
    assert chance["d"] == pytest.approx(1.1) and chance["se"] == pytest.approx(math.sqrt(2500 / 2560))
    assert chance["verdict"] == "holds"
    # MLM: SOP 20.1 +- 0.1 against NSP 20.1 +- 0: holds; against None 25: does not hold
    assert _verdict(verdicts, "MLM accuracy about the same with SOP and NSP (within 1 point)")["verdict"] == "holds"
    assert (_verdict(verdicts, "MLM accuracy about the same with SOP and None (within 1 point)")["verdict"]
            == "does not hold")
    assert _verdict(verdicts, SOP_OVER_NSP)["verdict"] == "holds"
    assert {cell: v["verdict"] for cell, v in results["learned"].items()} == {sop: "yes", nsp: "yes", none: "yes"}
    # only the sentence table's claims (and the premise) are judged when only it ran
    assert {v["table"] for v in verdicts} == {"sop", "premise"}


def test_a_cell_that_did_not_learn_its_objective_makes_its_claims_not_testable():
    """The issue's NSP cell: constant-class heads (48.906 / 51.094 on a held-out NSP set whose
    more frequent label has 51.094%) and a None cell whose masked LM is at the unigram baseline."""
    sop, nsp, none = (reproduce.Cell("all", "1/6", o).id for o in ("sop", "nsp", "none"))
    results = _results({
        sop: [(50, 50, 50, {"mlm_accuracy": 7.0 + i / 10, "sop_accuracy": 62.0 + i, "nsp_accuracy": 60.0})
              for i in range(3)],
        nsp: [(50, 50, 50, {"mlm_accuracy": 7.0, "sop_accuracy": 50.0, "nsp_accuracy": a})
              for a in (48.90625, 51.09375, 51.09375)],
        none: [(50, 50, 50, {"mlm_accuracy": m, "sop_accuracy": 50.0, "nsp_accuracy": 50.0}) for m in (5.0, 5.1, 4.9)],
    }, tables=("sop",), baselines=dict(BASELINES, nsp_accuracy=51.09375))
    verdicts = reproduce.judged_claims(results)
    learned = results["learned"]
    assert learned[sop]["verdict"] == "yes"
    assert learned[nsp]["verdict"] == "no" and "held-out NSP accuracy 50.36 against chance 51.09" in \
        learned[nsp]["reason"]
    assert learned[none]["verdict"] == "no" and learned[none]["reason"].startswith(
        "held-out masked LM accuracy 5.00 against the unigram baseline 5.00")
    for text in (SOP_OVER_NSP, NSP_AT_CHANCE, "SOP gives a better downstream average than NSP",
                 "MLM accuracy about the same with SOP and None (within 1 point)"):
        claim = _verdict(verdicts, text)
        assert claim["verdict"] == "not testable", text
        assert claim["reason"].startswith("a cell did not learn its objective (all-shared E=H/6 "), text
    assert "all-shared E=H/6 NSP: held-out NSP accuracy" in _verdict(verdicts, SOP_OVER_NSP)["reason"]
    # a claim on the cell's own objective is judged: the SOP cell solves SOP
    assert _verdict(verdicts, SOP_SOLVES_SOP)["verdict"] == "holds"


def test_identical_seeds_at_a_constant_class_share_do_not_learn():
    """Three seeds at 51.09375 NSP accuracy, no spread: against chance 50 the floor
    sqrt(50 x 50 / 2560) = 0.988 keeps it (1.09 < 2 x 0.988), where the seeds' spread (0) and
    the resolution (100 / 2560 = 0.039) alone would let it through; against the held-out
    pairs' larger label share 51.09375, d is 0."""
    nsp = reproduce.Cell("all", "1/6", "nsp").id
    seeds = [(50, 50, 50, {"mlm_accuracy": 20.0, "sop_accuracy": 50.0, "nsp_accuracy": 51.09375})] * 3
    for chance in (50.0, 51.09375):
        made = _results({nsp: seeds}, tables=("sop",), baselines=dict(BASELINES, nsp_accuracy=chance))
        results = reproduce.assess(made)
        (_, check) = results["learned"][nsp]["checks"]
        # the floor at p = chance: sqrt(p (100 - p) / 2560), 0.988 at 50%
        assert check["metric"] == "nsp_accuracy"
        assert check["se"] == pytest.approx(math.sqrt(chance * (100 - chance) / 2560))
        assert check["d"] == pytest.approx(51.09375 - chance)
        assert results["learned"][nsp]["verdict"] == "no"


def test_race_leaves_the_average_unless_it_learns():
    near_chance = [(60, 40, 27), (60, 40, 30), (60, 40, 24)]
    results = reproduce.assess(_results({reproduce.BASE.id: near_chance}, tables=("sop",)))
    # d = 27 - 25 = 2; se = sqrt(25 x 75 / 54) = 5.89 (54 dev questions): not above chance
    assert results["average"]["tasks"] == ["topic", "squad"]
    assert results["average"]["left_out"]["race"].startswith(
        "all-shared E=H/6 SOP scores 27.00 against chance 25 (d = +2.00, 2 se = 11.79)")
    assert [row["avg"] for row in results["cells"][reproduce.BASE.id]["seeds"].values()] == [50.0, 50.0, 50.0]
    learned = [(60, 40, 61), (60, 40, 62), (60, 40, 63)]
    results = reproduce.assess(_results({reproduce.BASE.id: learned}, tables=("sop",)))
    assert results["average"] == {"tasks": ["topic", "squad", "race"], "left_out": {}}
    assert results["cells"][reproduce.BASE.id]["seeds"]["1"]["avg"] == pytest.approx((60 + 40 + 61) / 3)
    # two seeds: not shown to learn, so it leaves the average with that reason
    results = reproduce.assess(_results({reproduce.BASE.id: learned[:2]}, tables=("sop",)))
    assert results["average"]["left_out"]["race"] == (
        "not shown to learn above chance: fewer than 3 seeds (all-shared E=H/6 SOP: 2)")


def test_the_docs_state_the_rule_as_the_code_does():
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "reproduction.md"),
              encoding="utf-8") as f:
        docs = " ".join(f.read().split())
    for rule in (reproduce.RULE, reproduce.LEARNED_RULE, reproduce.AVERAGE_RULE):
        assert " ".join(rule.split()) in docs


def test_files_written(tmp_path):
    nsp = reproduce.Cell("all", "1/6", "nsp").id
    results = _results({reproduce.BASE.id: [(70, 60, 40), (72, 62, 44), (71, 61, 42)],
                        nsp: [(50, 50, 50, {"mlm_accuracy": 20.0, "sop_accuracy": 50.0, "nsp_accuracy": 50.5})] * 3})
    written = reproduce.write_report(results, str(tmp_path))
    names = {os.path.relpath(p, tmp_path) for p in written}
    assert {"table_sop.csv", "table_sharing.csv", "table_embedding.csv", "claims.csv", "report.md",
            "claims.json"} <= names
    with open(tmp_path / "table_embedding.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["cell"] for r in rows] == [c.id for c in reproduce.table_cells("embedding")]
    base = [r for r in rows if r["cell"] == reproduce.BASE.id][0]
    # RACE-style 42 +- 2 against chance 25 over 54 questions (2 se = 11.79): in the average
    assert float(base["avg_mean"]) == pytest.approx((170 / 3 + 178 / 3 + 174 / 3) / 3, abs=1e-4)
    assert float(base["paper_avg"]) == 80.1 and base["E"] == "16" and base["seeds"] == "3"
    assert {r["learned_objective"] for r in rows} == {"yes"} and {r["learned_reason"] for r in rows} == {""}
    with open(tmp_path / "table_sop.csv", newline="") as f:
        learned = {r["cell"]: (r["learned_objective"], r["learned_reason"]) for r in csv.DictReader(f)}
    assert learned[nsp][0] == "no" and learned[nsp][1].startswith("held-out NSP accuracy 50.50 against chance 50.00")
    with open(tmp_path / "claims.csv", newline="") as f:
        claims = {r["claim"]: r for r in csv.DictReader(f)}
    assert claims[SOP_OVER_NSP]["verdict"] == "not testable"
    assert claims[SOP_OVER_NSP]["reason"].startswith("a cell did not learn its objective (all-shared E=H/6 NSP: ")
    text = (tmp_path / "report.md").read_text()
    assert "| cell | learned its objective | MLM acc |" in text
    assert "| all-shared E=H/6 NSP (16) | no (held-out NSP accuracy 50.50 against chance 50.00" in text
    assert "**not testable**: a cell did not learn its objective" in text
    for title in reproduce.TITLES.values():
        assert f"## {title}" in text
    assert "| pretrained (SOP) |" in text and "| random init |" in text
    assert "2 se" in text and "**holds**" in text  # pretrained 71 +- 1 vs 50: the premise on the topic task


COMMITTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks", "results", "reproduce")


def test_the_committed_report_is_what_todays_rule_says_of_its_results(tmp_path):
    """benchmarks/results/reproduce: every file the report writes is what write_report makes
    of the committed results.json today (a rule changed: `tools/reproduce.py --report_only`
    writes them again, no retraining), so README's and the docs' quotes cannot drift from it."""
    from albert_tf.storage import outputs

    # committed with the tool's marker, so --report_only rewrites them in place
    assert outputs.examine(COMMITTED, outputs.REPRODUCTION).status == "own"
    with open(os.path.join(COMMITTED, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    written = reproduce.write_report(results, str(tmp_path))
    names = sorted(os.path.relpath(p, tmp_path) for p in written)
    assert {"claims.json", "claims.csv", "report.md", "table_sop.csv", "table_sharing.csv"} <= set(names)
    for name in names:
        assert os.path.isfile(os.path.join(COMMITTED, name)), name
        with open(os.path.join(COMMITTED, name), encoding="utf-8") as committed, \
                open(tmp_path / name, encoding="utf-8") as made:
            assert committed.read() == made.read(), f"{name}: run tools/reproduce.py --report_only " \
                                                    "--output_dir=benchmarks/results/reproduce"


def test_a_results_json_without_sizes_or_baselines():
    """The committed 2-seed run predates results.json's "sizes" and "baselines": too few seeds
    settle "not testable" without them (se unknown, d unknown against a missing baseline);
    with enough seeds the verdict needs them and is refused."""
    two = reproduce.judge([(1, "a", "topic", [60.0, 61.0]), (-1, "b", "topic", [50.0, 52.0])], 0.0, "better", None,
                          {}, labels={"a": "cell A", "b": "cell B"})
    assert two == {"verdict": "not testable", "reason": "fewer than 3 seeds (cell A: 2; cell B: 2)", "d": 9.5,
                   "se": None, "rule": "d = +9.50, se unknown (results.json has no sizes)"}
    chance = reproduce.judge([(1, "a", "sop_accuracy", [60.0, 61.0])], None, "better", None, {})
    assert chance["verdict"] == "not testable" and chance["d"] is None and chance["se"] is None
    with pytest.raises(ValueError, match="no evaluation size"):
        reproduce.judge([(1, "a", "topic", [60.0, 61.0, 62.0])], 0.0, "better", None, {})
    with pytest.raises(ValueError, match="no baselines"):
        reproduce.judge([(1, "a", "topic", [60.0, 61.0, 62.0])], None, "better", None, {"sizes": SIZES})
    results = _results({}, tables=("sop",))
    for cell in results["cells"].values():
        cell["seeds"] = {"1": cell["seeds"]["1"], "2": cell["seeds"]["2"]}
    del results["sizes"], results["baselines"]
    verdicts = reproduce.judged_claims(results)
    assert {v["verdict"] for v in verdicts} == {"not testable"}
    assert {v["verdict"] for v in results["learned"].values()} == {"not testable"}
    assert _verdict(verdicts, SOP_SOLVES_SOP)["rule"] == "d unknown (results.json has no baselines)"


def test_report_only_writes_the_report_again_from_results_json(tmp_path, capsys):
    from albert_tf.storage import outputs

    grid_dir = tmp_path / "grid"
    grid_dir.mkdir()
    with open(os.path.join(COMMITTED, "results.json"), encoding="utf-8") as f:
        (grid_dir / "results.json").write_text(f.read())
    # not this tool's directory (no marker): refused before anything is written
    assert reproduce.main(["--report_only", f"--output_dir={grid_dir}"]) == 2
    assert "never overwrites what it did not make" in capsys.readouterr().err
    assert sorted(os.listdir(grid_dir)) == ["results.json"]
    assert reproduce.main(["--report_only", f"--output_dir={tmp_path / 'new'}"]) == 2
    assert "has no results.json" in capsys.readouterr().err
    outputs.write_marker(str(grid_dir), outputs.REPRODUCTION)
    assert reproduce.main(["--report_only", f"--output_dir={grid_dir}"]) == 0
    with open(os.path.join(COMMITTED, "claims.json"), encoding="utf-8") as f:
        assert (grid_dir / "claims.json").read_text() == f.read()
    assert (grid_dir / "report.md").is_file() and (grid_dir / "table_sop.csv").is_file()
