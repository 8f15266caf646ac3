"""run_squad_v1 / run_squad_v2: a tiny model learns the synthetic SQuAD set, predict-only
reproduces the predictions from the checkpoint, v2 writes null odds and every official
key, and bad input exits with status 2 without writing anything."""

import json
import os
import subprocess
import sys

import pytest
from conftest import load_tool

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
SEQ = 128


@pytest.fixture(scope="module")
def squad_files(tmp_path_factory):
    tool = load_tool("make_squad_data")
    entries = tool.docstring_entries()
    d = tmp_path_factory.mktemp("squad")
    paths = {}
    for name, version, n in (("v1", "1.1", 64), ("v2", "2.0", 32)):
        path = str(d / f"train-{name}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(tool.make_dataset(version, n, seed=3, max_context_chars=300, entries=entries), f)
        paths[name] = path
    return paths


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    with open(os.path.join(ROOT, "configs", "albert_tiny.json"), encoding="utf-8") as f:
        config = json.load(f)
    config.update(vocab_size=3000, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    path = str(tmp_path_factory.mktemp("config") / "albert_config.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return path


def _flags(module, args):
    from absl import flags

    values = flags.FlagValues()
    module.define_flags(values)
    values([module.__name__] + args)
    return values


def _common(spm_model, config_file, output_dir, train_file):
    return [f"--spm_model_file={spm_model}", f"--albert_config_file={config_file}", f"--output_dir={output_dir}",
            f"--train_file={train_file}", f"--predict_file={train_file}", f"--max_seq_length={SEQ}",
            "--doc_stride=64", "--max_query_length=32", "--predict_batch_size=16", "--n_best_size=5"]


def test_v1_learns_the_training_set_and_predict_only_reproduces_it(squad_files, spm_model, config_file, tmp_path,
                                                                     capfd):
    from albert_tf import run_squad_v1

    out = tmp_path / "v1"
    args = _common(spm_model, config_file, out, squad_files["v1"])
    values = _flags(run_squad_v1, args + ["--do_train", "--do_predict", "--train_batch_size=16",
                                          "--learning_rate=3e-3", "--num_train_epochs=150",
                                          "--warmup_proportion=0.1", "--save_checkpoints_steps=100000",
                                          "--iterations_per_loop=50"])
    results = run_squad_v1.run(values, stream=open(os.devnull, "w"))
    assert "WARNING: no --init_checkpoint" in capfd.readouterr().err
    metrics = results["metrics"]
    print("v1 metrics", metrics, "steps", results["num_train_steps"])
    assert metrics["exact_match"] >= 90.0 and metrics["f1"] >= 90.0, metrics
    summary = json.load(open(out / "eval_results.json"))
    assert summary["initialized_from"] == "random" and summary["exact_match"] == metrics["exact_match"]
    predictions = json.load(open(out / "predictions.json"))
    nbest = json.load(open(out / "nbest_predictions.json"))
    assert set(predictions) == set(nbest) and len(predictions) == metrics["total"]
    assert not (out / "null_odds.json").exists()

    # predict-only from the same output_dir: the newest checkpoint, the same predictions
    os.remove(out / "predictions.json")
    values = _flags(run_squad_v1, args + ["--do_predict"])
    again = run_squad_v1.run(values, stream=open(os.devnull, "w"))
    assert again["final_step"] == results["final_step"]
    assert json.load(open(out / "predictions.json")) == predictions
    assert again["metrics"]["exact_match"] == metrics["exact_match"]


def test_v2_writes_null_odds_and_every_official_key(squad_files, spm_model, config_file, tmp_path):
    from albert_tf import run_squad_v2

    out = tmp_path / "v2"
    values = _flags(run_squad_v2, _common(spm_model, config_file, out, squad_files["v2"]) + [
        "--do_train", "--do_predict", "--train_batch_size=8", "--learning_rate=1e-3", "--num_train_epochs=2",
        "--start_n_top=3", "--end_n_top=3", "--iterations_per_loop=10"])
    results = run_squad_v2.run(values, stream=open(os.devnull, "w"))
    metrics = results["metrics"]
    for key in ("exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact", "NoAns_f1",
                "NoAns_total", "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh", "no_answer_share"):
        assert key in metrics, key
    null_odds = json.load(open(out / "null_odds.json"))
    predictions = json.load(open(out / "predictions.json"))
    assert set(null_odds) == set(predictions) and len(predictions) == metrics["total"]
    summary = json.load(open(out / "eval_results.json"))
    assert summary["initialized_from"] == "random" and summary["best_f1"] == pytest.approx(metrics["best_f1"])


@pytest.mark.parametrize("case", ["no_predict_file", "bad_json"])
def test_bad_input_exits_2_without_writing(case, squad_files, spm_model, config_file, tmp_path):
    out = tmp_path / "out"
    args = [f"--spm_model_file={spm_model}", f"--albert_config_file={config_file}", f"--output_dir={out}",
            "--max_seq_length=128", "--do_predict"]
    if case == "bad_json":
        bad = tmp_path / "broken.json"
        bad.write_text('{"version": "1.1", "data": [\n  {"title": "x",,}\n]}\n', encoding="utf-8")
        args.append(f"--predict_file={bad}")
        expected = "broken.json"
    else:
        expected = "--predict_file"
    result = subprocess.run([sys.executable, "-m", "albert_tf.run_squad_v1", *args], capture_output=True, text=True,
                            env=ENV, cwd=ROOT, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert expected in result.stderr, result.stderr
    assert not out.exists()
