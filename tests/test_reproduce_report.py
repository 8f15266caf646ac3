"""tools/reproduce_report.py: the verdict rule on hand-made results, the tables' rows and
the files it writes (no TensorFlow)."""

import csv
import json
import math
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))

import reproduce_grid as grid  # noqa: E402
import reproduce_report as report  # noqa: E402


def _row(avg_parts, intrinsic=None):
    topic, squad, race = avg_parts
    return {"downstream": {"topic": topic, "squad": squad, "race": race}, "intrinsic": intrinsic or {},
            "avg": (topic + squad + race) / 3}


def _results(values, tables=("sop", "sharing", "embedding"), curve=None):
    """results.json of every cell of `tables`: values[cell_id] = list of per-seed
    (topic, squad, race[, intrinsic dict]); cells not given get 50s."""
    settings = grid.Settings(tables=tuple(tables))
    cells = {}
    for cell in grid.grid_cells(tables):
        seeds = values.get(cell.id, [(50.0, 50.0, 50.0), (50.0, 50.0, 50.0)])
        cells[cell.id] = {"sharing": cell.sharing, "ratio": cell.ratio, "objective": cell.objective,
                          "embedding_size": settings.embedding_size(cell.ratio), "label": cell.label(),
                          "seeds": {str(i + 1): dict(_row(v[:3], v[3] if len(v) > 3 else None),
                                                     **({"curve": curve} if curve else {}))
                                    for i, v in enumerate(seeds)}}
    return {"settings": settings.to_dict(), "cells": cells,
            "tables": {t: [c.id for c in grid.table_cells(t)] for t in tables},
            "control": grid.CONTROL.id, "base": grid.BASE.id}


def _verdict(verdicts, text):
    (found,) = [v for v in verdicts if v["claim"] == text]
    return found


def test_better_claims_follow_the_two_standard_error_rule():
    none1, att1 = grid.Cell("none", "1", "sop").id, grid.Cell("attention", "1", "sop").id
    ffn1, all1 = grid.Cell("ffn", "1", "sop").id, grid.Cell("all", "1", "sop").id
    results = _results({
        # avg 60 and 62 -> mean 61, std sqrt(2); against 50, 50 (std 0): d = 11, se = sqrt(2/2) = 1
        none1: [(60, 60, 60), (62, 62, 62)],
        # shared-attention: 50.5, 49.5 -> mean 50, std sqrt(0.5); against all-shared 50 +- 0: d = 0 -> inconclusive
        att1: [(50.5, 50.5, 50.5), (49.5, 49.5, 49.5)],
        # shared-FFN clearly above shared-attention: the "attention better than FFN" claim does not hold
        ffn1: [(70, 70, 70), (71, 71, 71)],
        all1: [(50, 50, 50), (50, 50, 50)],
    })
    verdicts = report.judged_claims(results)
    first = _verdict(verdicts, "E=H: not-shared better than shared-attention")
    assert first["d"] == pytest.approx(11.0)
    assert first["se"] == pytest.approx(math.sqrt(2 / 2 + 0.5 / 2))
    assert first["verdict"] == "holds"
    assert _verdict(verdicts, "E=H: shared-attention better than all-shared")["verdict"] == "inconclusive"
    ffn = _verdict(verdicts, "E=H: sharing FFN hurts more than sharing attention (shared-attention better than "
                             "shared-FFN)")
    assert ffn["d"] == pytest.approx(50.0 - 70.5) and ffn["verdict"] == "does not hold"
    # all-shared 50 +- 0 against shared-FFN 70.5: far outside the 1-point tolerance
    assert _verdict(verdicts, "E=H: all-shared about shared-FFN (within 1 point)")["verdict"] == "does not hold"


def test_about_claims_and_chance():
    sop, nsp, none = (grid.Cell("all", "1/6", o).id for o in ("sop", "nsp", "none"))
    results = _results({
        sop: [(50, 50, 50, {"mlm_accuracy": 20.0, "sop_accuracy": 80.0, "nsp_accuracy": 70.0}),
              (50, 50, 50, {"mlm_accuracy": 20.2, "sop_accuracy": 82.0, "nsp_accuracy": 72.0})],
        nsp: [(50, 50, 50, {"mlm_accuracy": 20.1, "sop_accuracy": 51.0, "nsp_accuracy": 90.0}),
              (50, 50, 50, {"mlm_accuracy": 20.1, "sop_accuracy": 51.2, "nsp_accuracy": 91.0})],
        none: [(50, 50, 50, {"mlm_accuracy": 25.0, "sop_accuracy": 50.0, "nsp_accuracy": 50.0}),
               (50, 50, 50, {"mlm_accuracy": 25.0, "sop_accuracy": 50.0, "nsp_accuracy": 50.0})],
    }, tables=("sop",))
    verdicts = report.judged_claims(results)
    chance = _verdict(verdicts, "NSP-trained model solves SOP only at chance (paper 52.0%): SOP acc within 5 "
                                "points of 50")
    # d = 51.1 - 50 = 1.1, se = std([51, 51.2]) / sqrt(2) = 0.1: 1.1 + 0.2 <= 5
    assert chance["d"] == pytest.approx(1.1) and chance["se"] == pytest.approx(0.1)
    assert chance["verdict"] == "holds"
    # MLM: SOP 20.1 +- 0.141 against NSP 20.1 +- 0: holds; against None 25: does not hold
    assert _verdict(verdicts, "MLM accuracy about the same with SOP and NSP (within 1 point)")["verdict"] == "holds"
    assert (_verdict(verdicts, "MLM accuracy about the same with SOP and None (within 1 point)")["verdict"]
            == "does not hold")
    assert (_verdict(verdicts, "SOP's model solves NSP better than NSP's model solves SOP (78.9 vs 52.0)")
            ["verdict"] == "holds")
    # only the sentence table's claims (and the premise) are judged when only it ran
    assert {v["table"] for v in verdicts} == {"sop", "premise"}


def test_one_seed_is_always_inconclusive():
    results = _results({grid.Cell("none", "1", "sop").id: [(90, 90, 90)]},
                       tables=("sharing",))
    for cell in results["cells"].values():  # one seed each
        cell["seeds"] = {"1": cell["seeds"]["1"]}
    verdicts = report.judged_claims(results)
    assert verdicts and {v["verdict"] for v in verdicts} == {"inconclusive"}
    assert all("one seed" in v["rule"] for v in verdicts)


def test_files_written(tmp_path):
    curve = "curve.jsonl"
    with open(tmp_path / curve, "w") as f:
        for step in (10, 20):
            f.write(json.dumps({"split": "train", "step": step, "masked_lm_loss": 5.0 - step / 10,
                                "sentence_order_accuracy": 0.5 + step / 100}) + "\n")
    results = _results({grid.BASE.id: [(70, 60, 40), (72, 62, 44)]}, curve=curve)
    written = report.write_report(results, str(tmp_path))
    names = {os.path.relpath(p, tmp_path) for p in written}
    assert {"table_sop.csv", "table_sharing.csv", "table_embedding.csv", "claims.csv", "report.md",
            "table_sop.png", "table_sharing.png", "table_embedding.png", "claims.json"} <= names
    assert f"curves{os.sep}{grid.BASE.id}.png" in names
    for name in names:
        if name.endswith(".png"):
            with open(tmp_path / name, "rb") as f:
                assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(tmp_path / "table_embedding.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["cell"] for r in rows] == [c.id for c in grid.table_cells("embedding")]
    base = [r for r in rows if r["cell"] == grid.BASE.id][0]
    assert float(base["avg_mean"]) == pytest.approx((170 / 3 + 178 / 3) / 2, abs=1e-4)
    assert float(base["paper_avg"]) == 80.1 and base["E"] == "16" and base["seeds"] == "2"
    text = (tmp_path / "report.md").read_text()
    for title in report.TITLES.values():
        assert f"## {title}" in text
    assert "| pretrained (SOP) |" in text and "| random init |" in text
    assert "2 se" in text and "**holds**" in text  # pretrained 57.3/59.3 vs 50: the premise on the topic task
