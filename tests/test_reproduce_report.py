"""tools/reproduce.py's report: the verdict rule on hand-made results, the tables' rows and
the files it writes (no TensorFlow)."""

import csv
import math
import os
import pytest
from tools import reproduce


SIZES = {"topic": 320, "squad": 150, "sop_accuracy": 2560, "nsp_accuracy": 2560, "mlm_accuracy": 20000}
BASELINES = {"sop_accuracy": 50.0, "nsp_accuracy": 50.0}
LEARNED = {"mlm_accuracy": 20.0, "sop_accuracy": 80.0, "nsp_accuracy": 80.0}  # far above chance
FLAT = [(50.0, 50.0)] * 3


def _row(avg_parts, intrinsic=None):
    topic, squad = avg_parts
    return {"downstream": {"topic": topic, "squad": squad}, "intrinsic": intrinsic or {}, "avg": (topic + squad) / 2}


def _results(values, tables=("sop", "sharing", "embedding"), sizes=None, baselines=None):
    """results.json of every cell of `tables`: values[cell_id] = list of per-seed
    (topic, squad[, intrinsic dict]); cells not given get three seeds of 50s, and
    pretrained cells without an intrinsic dict LEARNED's accuracies."""
    settings = reproduce.Settings(tables=tuple(tables))
    cells = {}
    for cell in reproduce.grid_cells(tables):
        seeds = values.get(cell.id, FLAT)
        default = dict(LEARNED) if cell.objective != "random" else None
        cells[cell.id] = {"sharing": cell.sharing, "ratio": cell.ratio, "objective": cell.objective,
                          "embedding_size": settings.embedding_size(cell.ratio), "label": cell.label(),
                          "seeds": {str(i + 1): _row(v[:2], v[2] if len(v) > 2 else default)
                                    for i, v in enumerate(seeds)}}
    return {"settings": settings.to_dict(), "cells": cells,
            "tables": {t: [c.id for c in reproduce.TABLE_CELLS[t]] for t in tables},
            "control": reproduce.CONTROL.id, "base": reproduce.BASE.id, "sizes": dict(sizes or SIZES),
            "baselines": dict(baselines or BASELINES)}


def _verdict(verdicts, text):
    (found,) = [v for v in verdicts if v["claim"] == text]
    return found


PREMISE_TOPIC = "pretrained beats random init on topic cls (acc)"
SOP_OVER_NSP = "SOP's model solves NSP better than NSP's model solves SOP (78.9 vs 52.0)"
NSP_AT_CHANCE = "NSP-trained model solves SOP only at chance (paper 52.0%): SOP acc within 5 points of 50"
SOP_SOLVES_NSP = "SOP-trained model solves NSP well (paper 78.9%): NSP acc above chance"


def test_better_claims_follow_the_two_standard_error_rule():
    none1, att1 = reproduce.Cell("none", "1", "sop").id, reproduce.Cell("attention", "1", "sop").id
    ffn1, all1 = reproduce.Cell("ffn", "1", "sop").id, reproduce.Cell("all", "1", "sop").id
    results = _results({
        # avg 60, 61, 62 -> mean 61, std 1; shared-attention 50.5, 49.5, 50 -> mean 50, std 0.5:
        # d = 11, se = sqrt(1/3 + 0.25/3) = 0.645 (above the Avg floor max(100/320, 100/150) / 2 = 0.333)
        none1: [(60, 60), (61, 61), (62, 62)],
        att1: [(50.5, 50.5), (49.5, 49.5), (50, 50)],
        # shared-FFN clearly above shared-attention: the "attention better than FFN" claim does not hold
        ffn1: [(70, 70), (71, 71), (72, 72)],
        all1: FLAT,
    })
    verdicts = reproduce.judged_claims(results)
    first = _verdict(verdicts, "E=H: not-shared better than shared-attention")
    assert first["d"] == pytest.approx(11.0)
    assert first["se"] == pytest.approx(math.sqrt(1 / 3 + 0.25 / 3))
    assert first["verdict"] == "holds"
    # shared-attention 50 against all-shared 50 +- 0: d = 0; the seeds' se 0.5 / sqrt(3) = 0.29 is
    # below the Avg floor, one SQuAD-style question of 150 over two tasks: 100 / 150 / 2 = 0.333
    same = _verdict(verdicts, "E=H: shared-attention better than all-shared")
    assert same["verdict"] == "inconclusive" and same["se"] == pytest.approx(100 / 150 / 2)
    ffn = _verdict(verdicts, "E=H: sharing FFN hurts more than sharing attention (shared-attention better than "
                             "shared-FFN)")
    assert ffn["d"] == pytest.approx(50.0 - 71.0) and ffn["verdict"] == "does not hold"
    # all-shared 50 +- 0 against shared-FFN 71: far outside the 1-point tolerance
    assert _verdict(verdicts, "E=H: all-shared about shared-FFN (within 1 point)")["verdict"] == "does not hold"


def test_zero_spread_never_holds_the_issues_case():
    """Cells [50, 50, 50] against [49.99, 49.99, 49.99] (no spread at all): the standard error
    is the topic task's resolution, one of 320 dev examples = 0.3125 points, not 0."""
    flat_minus = [(49.99, 50)] * 3
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
    results = _results({reproduce.BASE.id: [(50, 50)] * 2, reproduce.CONTROL.id: [(49.99, 50)] * 2},
                       tables=("sop",))
    claim = _verdict(reproduce.judged_claims(results), PREMISE_TOPIC)
    assert claim["verdict"] == "not testable"
    assert claim["reason"] == ("fewer than 3 seeds (all-shared E=H/6 SOP: 2; all-shared E=H/6 random init: 2)")
    big = reproduce.judge([(1, "a", "topic", [90.0, 91.0]), (-1, "b", "topic", [10.0, 11.0, 12.0])], 0.0, "better",
                      None, {"sizes": {"topic": 320}}, labels={"a": "cell A"})
    assert big["verdict"] == "not testable" and big["reason"] == "fewer than 3 seeds (cell A: 2)"


def test_three_seeds_can_hold():
    results = _results({reproduce.BASE.id: [(60, 50), (61, 50), (62, 50)],
                        reproduce.CONTROL.id: [(50, 50), (50.5, 50), (51, 50)]}, tables=("sop",))
    claim = _verdict(reproduce.judged_claims(results), PREMISE_TOPIC)
    # d = 61 - 50.5; se = sqrt(1^2/3 + 0.5^2/3) = 0.645 > 2 x ... : d / se = 16.3
    assert claim["d"] == pytest.approx(10.5) and claim["se"] == pytest.approx(math.sqrt(1 / 3 + 0.25 / 3))
    assert claim["verdict"] == "holds"


def test_one_seed_is_never_judged():
    results = _results({reproduce.Cell("none", "1", "sop").id: [(90, 90)]}, tables=("sharing",))
    for cell in results["cells"].values():  # one seed each
        cell["seeds"] = {"1": cell["seeds"]["1"]}
    verdicts = reproduce.judged_claims(results)
    assert verdicts and {v["verdict"] for v in verdicts} == {"not testable"}
    assert all(v["reason"].startswith("fewer than 3 seeds (") for v in verdicts)


def test_about_claims_and_chance():
    sop, nsp, none = (reproduce.Cell("all", "1/6", o).id for o in ("sop", "nsp", "none"))
    results = _results({
        sop: [(50, 50, {"mlm_accuracy": 20.0, "sop_accuracy": 80.0, "nsp_accuracy": 70.0}),
              (50, 50, {"mlm_accuracy": 20.2, "sop_accuracy": 82.0, "nsp_accuracy": 72.0}),
              (50, 50, {"mlm_accuracy": 20.1, "sop_accuracy": 81.0, "nsp_accuracy": 71.0})],
        nsp: [(50, 50, {"mlm_accuracy": 20.1, "sop_accuracy": s, "nsp_accuracy": 90.0})
              for s in (51.0, 51.2, 51.1)],
        none: [(50, 50, {"mlm_accuracy": 25.0, "sop_accuracy": 50.0, "nsp_accuracy": 50.0})] * 3,
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
    # only the sentence table's claims (and the premise) are judged when only it ran
    assert {v["table"] for v in verdicts} == {"sop", "premise"}


def test_identical_seeds_at_a_constant_class_share_are_not_above_chance():
    """Three seeds at 51.09375 NSP accuracy, no spread: against chance 50 the floor
    sqrt(50 x 50 / 2560) = 0.988 keeps it (1.09 < 2 x 0.988), where the seeds' spread (0) and
    the resolution (100 / 2560 = 0.039) alone would let it through; against the held-out
    pairs' larger label share 51.09375, d is 0."""
    seeds = [(50, 50, {"mlm_accuracy": 20.0, "sop_accuracy": 50.0, "nsp_accuracy": 51.09375})] * 3
    for chance in (50.0, 51.09375):
        results = _results({reproduce.BASE.id: seeds}, tables=("sop",), baselines=dict(BASELINES, nsp_accuracy=chance))
        claim = _verdict(reproduce.judged_claims(results), SOP_SOLVES_NSP)
        # the floor at p = chance: sqrt(p (100 - p) / 2560), 0.988 at 50%
        assert claim["se"] == pytest.approx(math.sqrt(chance * (100 - chance) / 2560))
        assert claim["d"] == pytest.approx(51.09375 - chance)
        assert claim["verdict"] == "inconclusive"


def test_the_docs_state_the_rule_as_the_code_does():
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "reproduction.md"),
              encoding="utf-8") as f:
        docs = " ".join(f.read().split())
    assert " ".join(reproduce.RULE.split()) in docs


def test_files_written(tmp_path):
    nsp = reproduce.Cell("all", "1/6", "nsp").id
    results = _results({reproduce.BASE.id: [(70, 60), (72, 62), (71, 61)],
                        nsp: [(50, 50, {"mlm_accuracy": 20.0, "sop_accuracy": 50.0, "nsp_accuracy": 50.5})] * 3})
    written = reproduce.write_report(results, str(tmp_path))
    names = {os.path.relpath(p, tmp_path) for p in written}
    assert {"table_sop.csv", "table_sharing.csv", "table_embedding.csv", "claims.csv", "report.md",
            "claims.json"} <= names
    with open(tmp_path / "table_embedding.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["cell"] for r in rows] == [c.id for c in reproduce.TABLE_CELLS["embedding"]]
    base = [r for r in rows if r["cell"] == reproduce.BASE.id][0]
    assert float(base["avg_mean"]) == pytest.approx((130 / 2 + 134 / 2 + 132 / 2) / 3, abs=1e-4)
    assert base["E"] == "16" and base["seeds"] == "3"
    with open(tmp_path / "claims.csv", newline="") as f:
        claims = {r["claim"]: r for r in csv.DictReader(f)}
    assert claims[SOP_OVER_NSP]["verdict"] == "holds"  # SOP's NSP 80 +- 0 against NSP's SOP 50 +- 0
    text = (tmp_path / "report.md").read_text()
    assert "| cell | MLM acc |" in text and "| all-shared E=H/6 NSP (16) | 20.00 ± 0.00 | 50.00 ± 0.00 |" in text
    for title in reproduce.TITLES.values():
        assert f"## {title}" in text
    assert "| pretrained (SOP) |" in text and "| random init |" in text
    assert "2 se" in text and "**holds**" in text  # pretrained 71 +- 1 vs 50: the premise on the topic task
