"""tools/reproduce.py --quick end to end on the built-in sample corpus: the whole pipeline
(corpus, SentencePiece, SOP and NSP data, pretraining, held-out evaluation, two
fine-tuning tasks and the random-init control, the report), resumption after a kill,
and its refusals. The claims themselves are not asserted (tiny models, one seed). The tool
runs in this process (tools/reproduce.py main; it runs every step in its own process too)."""

import csv
import json
import os

import numpy as np
import pytest

from conftest import run_in_process
from tools import reproduce


def _run(args):
    """`python tools/reproduce.py ARGS` in this process: SimpleNamespace(returncode, stdout, stderr)."""
    return run_in_process(reproduce, args)


class _Killed(BaseException):
    """What the grid meets in place of SIGKILL: no handler of the tool or of albert_tf.cli
    catches it (they catch Exception), so the grid stops where it is, writing nothing more."""


def _records(output_dir):
    found = {}
    for dirpath, _, filenames in os.walk(output_dir):
        if os.path.basename(dirpath) == "steps":
            for name in filenames:
                if name.endswith(".json"):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as f:
                        found[os.path.relpath(path, output_dir)] = f.read()
    return found


# The quick grid of this module, smaller still where no assertion depends on the size: one
# layer (half the encoder every run traces) and half the corpus (its reading, the
# SentencePiece model and the pretraining data; at 0.5 MB SQuAD dev lacks functions).
SMALLER = {"num_hidden_layers": 1, "corpus_mb": 0.75}


def _smaller_quick(patch):
    for key, value in SMALLER.items():
        patch.setitem(reproduce.QUICK, key, value)


@pytest.fixture(scope="module")
def quick_grid(tmp_path_factory):
    """A quick grid killed once after its first pretraining run finished (its record written:
    the step after it stops the grid with _Killed, as SIGKILL would), then resumed."""
    import time

    out = str(tmp_path_factory.mktemp("repro") / "grid")
    # float32 on every machine: the fixture's cost and numbers do not depend on what "auto" resolves
    # to here; test_the_grid_stores_its_dtype_policy_resolved_... checks auto's resolution
    args = ["--quick", "--tables=sop", "--dtype_policy=float32", f"--output_dir={out}"]
    marker = os.path.join(out, "cells", reproduce.Cell("all", "1/6", "none").id, "seed1", "steps", "pretrain.json")
    record_done = reproduce.record_done

    def killed_after_the_marker(path, result, seconds):
        record_done(path, result, seconds)
        if os.path.abspath(path) == os.path.abspath(marker):
            raise _Killed(path)

    with pytest.MonkeyPatch.context() as patch:
        _smaller_quick(patch)
        with pytest.MonkeyPatch.context() as kill:
            kill.setattr(reproduce, "record_done", killed_after_the_marker)
            with pytest.raises(_Killed):
                _run(args)
        assert os.path.exists(marker)
        before = _records(out)
        start = time.time()
        second = _run(args)
    return {"out": out, "before": before, "second": second, "seconds": time.time() - start, "args": args}


def test_resumes_after_a_kill_without_redoing_finished_steps(quick_grid):
    second, before = quick_grid["second"], quick_grid["before"]
    assert second.returncode == 0, second.stderr[-3000:] + second.stdout[-3000:]
    # the corpus (and SentencePiece), 4 data sets, tasks and the first pretraining at least were finished
    assert len(before) >= 7
    assert f"{len(before)} already done" in second.stdout
    after = _records(quick_grid["out"])
    for path, text in before.items():  # never redone: the records are byte-identical
        assert after[path] == text, path
    # every step of the grid is recorded: 3 cells x (pretrain with its held-out evaluation + 2 tasks) + control
    # x 2 tasks + 6 data (the corpus with SentencePiece, 4 pretraining data sets, tasks)
    assert len(after) == 3 * 3 + 2 + 6
    # progress with rate and ETA across the grid
    assert "ETA" in second.stdout and "/min" in second.stdout
    # the settings hold the policy every cell computed in, and every cell's runs say the same
    with open(os.path.join(quick_grid["out"], "grid.json"), encoding="utf-8") as f:
        assert json.load(f)["dtype_policy"] == "float32"
    infos = [os.path.join(d, "run_info.json") for d, _, files in os.walk(quick_grid["out"]) if "run_info.json" in files]
    assert infos and all(json.load(open(p, encoding="utf-8"))["sessions"][-1]["dtype_policy"] == "float32"
                         for p in infos)


def test_results_and_report(quick_grid):
    out = quick_grid["out"]
    with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    assert set(results["cells"]) == {c.id for c in reproduce.grid_cells(("sop",))}
    for cell_id, cell in results["cells"].items():
        row = cell["seeds"]["1"]
        for task in reproduce.TASKS:
            assert 0.0 <= row["downstream"][task] <= 100.0
        assert row["avg"] == pytest.approx((row["downstream"]["topic"] + row["downstream"]["squad"]) / 2)
        if cell["objective"] != "random":
            assert set(row["intrinsic"]) == {"mlm_accuracy", "sop_accuracy", "nsp_accuracy"}
            assert all(0.0 <= v <= 100.0 for v in row["intrinsic"].values())
            with open(_curve(out, cell_id), encoding="utf-8") as f:
                assert [json.loads(line)["step"] for line in f if '"train"' in line][-1] == 20
    # the 'none' objective trained masked LM alone (its loss is the masked-LM loss), the others
    # both terms
    for cell_id, cell in results["cells"].items():
        if cell["objective"] != "random":
            with open(_curve(out, cell_id), encoding="utf-8") as f:
                last = [json.loads(line) for line in f if '"train"' in line][-1]
            trained = last["masked_lm_loss"] + (last["sentence_order_loss"] if cell["objective"] != "none" else 0)
            assert last["loss"] == pytest.approx(trained, rel=1e-6), cell_id
    # the topic task fine-tunes at its own rate (5e-4 collapsed it), the others at the grid's
    # (the held-out evaluations, run_pretraining without training, take no rate)
    log = open(os.path.join(out, "cells", reproduce.BASE.id, "seed1", "log.txt"), encoding="utf-8").read()
    runs = [line for line in log.splitlines() if line.startswith("$ python -m albert_tf.run_")]
    rates = {line.split()[3].split(".")[-1]: float(line.split("--learning_rate=")[1].split()[0])
             for line in runs if "--learning_rate=" in line}
    assert rates == {"run_pretraining": 0.005, "run_classifier": 1e-4, "run_squad_v1": 5e-4}
    # the table's CSV holds the same numbers as results.json
    with open(os.path.join(out, "table_sop.csv"), newline="") as f:
        rows = {r["cell"]: r for r in csv.DictReader(f)}
    assert list(rows) == [c.id for c in reproduce.TABLE_CELLS["sop"]]
    for cell_id, row in rows.items():
        seed = results["cells"][cell_id]["seeds"]["1"]
        assert float(row["avg_mean"]) == pytest.approx(seed["avg"], abs=1e-4)
        assert float(row["sop_accuracy_mean"]) == pytest.approx(seed["intrinsic"]["sop_accuracy"], abs=1e-4)
    report = open(os.path.join(out, "report.md"), encoding="utf-8").read()
    assert "## Sentence-level loss" in report and "## Claims" in report
    with open(os.path.join(out, "claims.json"), encoding="utf-8") as f:
        verdicts = json.load(f)
    # one seed: nothing is judged, and the reasons say so
    assert verdicts and {v["verdict"] for v in verdicts} == {"not testable"}
    assert all(v["reason"].startswith("fewer than 3 seeds (") for v in verdicts)
    # the downstream tasks were made from held-out documents only
    with open(os.path.join(out, "data", "corpus", "held_out.jsonl"), encoding="utf-8") as f:
        held = [json.loads(line) for line in f]
    pretrain_text = open(os.path.join(out, "data", "corpus", "pretrain.txt"), encoding="utf-8").read()
    assert held and not any(e["sentences"][0] + "\n" + e["sentences"][1] in pretrain_text for e in held[:50])


def _curve(out, cell_id):
    """A pretraining run's metrics.jsonl (its learning curve)."""
    return os.path.join(out, "cells", cell_id, "seed1", "pretrain", "metrics.jsonl")


def _read(path):
    """(masked ids where weight > 0, labels) of a pretraining TFRecord file's records, parsed
    here by TensorFlow's tf.io.parse_example."""
    import tensorflow as tf

    spec = {"masked_lm_ids": tf.io.VarLenFeature(tf.int64), "masked_lm_weights": tf.io.VarLenFeature(tf.float32),
            "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)}
    records = tf.data.TFRecordDataset(path)
    parsed = tf.io.parse_example(tf.concat(list(records.batch(100_000)), 0), spec)
    ids = tf.sparse.to_dense(parsed["masked_lm_ids"]).numpy()
    weights = tf.sparse.to_dense(parsed["masked_lm_weights"]).numpy()
    return ids[weights > 0], parsed["next_sentence_labels"].numpy().ravel()


def test_the_baselines_and_sizes_the_verdicts_use(quick_grid):
    """results.json's sizes and baselines against the TFRecords read here: the held-out pairs
    (evaluate reads them all), the more frequent label's share, and their masked positions."""
    out = quick_grid["out"]
    with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    data = os.path.join(out, "data")
    for objective in ("sop", "nsp"):
        _, labels = _read(os.path.join(data, f"eval_{objective}.tfrecord"))
        assert results["sizes"][f"{objective}_accuracy"] == labels.size > 0
        share = 100 * max(np.sum(labels == 0), np.sum(labels == 1)) / labels.size
        assert results["baselines"][f"{objective}_accuracy"] == pytest.approx(share)
    held, _ = _read(os.path.join(data, "eval_sop.tfrecord"))
    assert results["sizes"]["mlm_accuracy"] == held.size
    with open(os.path.join(data, "tasks", "topic", "dev.tsv"), encoding="utf-8") as f:
        assert results["sizes"]["topic"] == len(f.read().splitlines()) - 1  # its header


def test_a_finished_grid_run_again_runs_no_step_and_writes_its_report_anew(quick_grid, tmp_path):
    """The same command on a finished grid: every step has its record, so none runs (no
    progress line, every record unchanged), and results.json and the report are written
    again by today's rule (report.md, removed here, is back as write_report writes it)."""
    out = quick_grid["out"]
    before = _records(out)
    os.remove(os.path.join(out, "report.md"))
    with pytest.MonkeyPatch.context() as patch:
        _smaller_quick(patch)
        again = _run(quick_grid["args"])
    assert again.returncode == 0, again.stderr[-3000:] + again.stdout[-3000:]
    assert f"reproduce: {len(before)} steps, {len(before)} already done" in again.stdout
    assert "ETA" not in again.stdout and _records(out) == before
    with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
        reproduce.write_report(json.load(f), str(tmp_path))
    for name in ("report.md", "claims.json", "table_sop.csv"):
        with open(os.path.join(out, name), encoding="utf-8") as f:
            assert f.read() == (tmp_path / name).read_text(encoding="utf-8"), name


def test_another_grid_in_the_same_directory_is_refused(quick_grid):
    out = quick_grid["out"]
    before = _records(out)
    with pytest.MonkeyPatch.context() as patch:
        _smaller_quick(patch)
        done = _run(["--quick", "--tables=sop,sharing", "--dtype_policy=float32", f"--output_dir={out}"])
    assert done.returncode == 2, done.stderr
    assert "holds another grid" in done.stderr and "tables" in done.stderr
    assert _records(out) == before


@pytest.mark.parametrize("args,message", [
    (["--tables=sop,nsp_only"], "unknown table(s) nsp_only"),
    (["--width=1.1"], "not a whole number"),
    (["--num_attention_heads=5"], "does not divide into 5 attention heads"),
    (["--width=0.0625", "--num_attention_heads=2"], "multiple of 12"),
])
def test_bad_settings_exit_2_before_any_work(tmp_path, args, message):
    out = tmp_path / "grid"
    done = _run([*args, f"--output_dir={out}"])
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not out.exists()


def test_a_users_directory_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    done = _run(["--quick", f"--output_dir={tmp_path}"])
    assert done.returncode == 2 and "--output_dir" in done.stderr, done.stderr
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


def _grid_made_elsewhere(out, policy):
    """A grid directory of this tool whose grid.json says `policy` (a quick grid's settings)."""
    from albert_tf.storage import outputs

    outputs.claim_dir(str(out), outputs.REPRODUCTION, "--output_dir")
    settings = reproduce.Settings(**dict(reproduce.QUICK, dtype_policy=policy))
    (out / "grid.json").write_text(json.dumps(settings.to_dict(), indent=2, sort_keys=True) + "\n")
    return settings


def test_the_grid_stores_its_dtype_policy_resolved_and_refuses_a_machine_that_resolves_it_otherwise(tmp_path):
    """grid.json holds what the cells compute in (float32 or mixed_bfloat16, never "auto"):
    a grid resumed where --dtype_policy resolves otherwise is refused with exit 2 naming
    both policies, before any work."""
    from albert_tf.training.precision import choose

    here = choose("auto").policy
    other = "mixed_bfloat16" if here == "float32" else "float32"

    out = tmp_path / "grid"
    _grid_made_elsewhere(out, other)
    before = sorted(os.listdir(out)), (out / "grid.json").read_text()
    done = _run(["--quick", "--dtype_policy=auto", f"--output_dir={out}"])
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert f"holds another grid (dtype_policy: '{other}' there, '{here}' asked)" in done.stderr, done.stderr
    assert (sorted(os.listdir(out)), (out / "grid.json").read_text()) == before

