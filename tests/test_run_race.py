"""run_race: a tiny model learns the synthetic RACE training set (official one-file-per-article
layout), predict-only from its output_dir reproduces the predictions, the raw-string export
answers as the run did through its signature alone; the release's all.txt layout and the generic
multiple-choice JSON lines (3 options) run; bad input exits with status 2 naming the file."""

import json
import os
import shutil

import numpy as np
import pytest
from conftest import Capture, run_in_process, write_tiny_config
from tools import make_race_data
from real_data import real_path

SEQ = 64


@pytest.fixture(scope="module")
def race_dirs(tmp_path_factory):
    """{"files", "all.txt", "jsonl"}: data made by tools/make_race_data.py; "learn" is the files
    layout with the training set also as the dev set (to measure learning it)."""
    tool = make_race_data
    base = tmp_path_factory.mktemp("race")
    entries = tool.docstring_entries()
    dirs = {}
    for layout in ("files", "all.txt", "jsonl"):
        dirs[layout] = base / layout.replace(".", "_")
        tool.make_race(dirs[layout], num_articles=6, seed=7, layout=layout, entries=entries)
    learn = base / "learn" / "RACE"
    shutil.copytree(dirs["files"] / "RACE" / "train", learn / "train")
    shutil.copytree(dirs["files"] / "RACE" / "train", learn / "dev")
    shutil.copytree(dirs["files"] / "RACE" / "test", learn / "test")
    dirs["learn"] = base / "learn"
    return dirs


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    # one layer: what these runs check (layouts, metrics, predictions, export, conversion) does not depend on
    # the depth, and each run traces its steps and its export at half the cost of two layers
    return write_tiny_config(tmp_path_factory.mktemp("config"), num_hidden_layers=1, num_hidden_groups=1)


def _run(args, stream=None):
    from absl import flags

    from albert_tf import run_race

    values = flags.FlagValues()
    run_race.define_flags(values)
    values(["run_race"] + args)
    return run_race.run(values, stream=stream or open(os.devnull, "w"))


def _common(data_dir, spm_model, config_file, output_dir, policy="float32"):
    # float32 whatever the CPU: these runs are compared with their float32 exports to 1e-4/1e-5, and
    # "auto" trains and evaluates in mixed_bfloat16 on bf16 hardware (tests/test_precision.py covers bf16);
    # `policy`: a learning check's forced policy (tests/conftest.py `learning`)
    return [f"--dtype_policy={policy}", f"--data_dir={data_dir}", f"--spm_model_file={spm_model}",
            f"--albert_config_file={config_file}", f"--output_dir={output_dir}", f"--max_seq_length={SEQ}",
            "--max_qa_length=32", "--eval_batch_size=16", "--predict_batch_size=16"]


def _rows(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _race_by_hand(data_dir, split, levels=("middle", "high")):
    """[(id, question index, level, answer letter)] of data_dir/RACE/<split>, read here with json:
    per level all.txt (one article a line) if there is one, else <n>.txt in number order."""
    out = []
    for level in levels:
        directory = os.path.join(data_dir, "RACE", split, level)
        if os.path.exists(os.path.join(directory, "all.txt")):
            with open(os.path.join(directory, "all.txt"), encoding="utf-8") as f:
                articles = [json.loads(line) for line in f if line.strip()]
        else:
            articles = []
            for name in sorted(os.listdir(directory), key=lambda n: int(n[:-len(".txt")])):
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    articles.append(json.load(f))
        out += [(a["id"], i, level, answer) for a in articles for i, answer in enumerate(a["answers"])]
    return out


def _accuracy(rows):
    return sum(r["prediction"] == r["label"] for r in rows) / len(rows)


def _check_probabilities(rows, num_options=4):
    """Each row's probabilities: the model's float32 values written exactly (no rounding), and
    its prediction their most probable option (the first of equals)."""
    for row in rows:
        probabilities = row["probabilities"]
        assert len(probabilities) == num_options and abs(sum(probabilities) - 1) < 1e-6
        assert all(float(np.float32(p)) == p for p in probabilities), probabilities
        assert row["prediction"] == "ABCD"[probabilities.index(max(probabilities))]


def _answer(export_dir, data_dir):
    """The multiple-choice export loaded with tf.saved_model.load (no Keras object of the run:
    its signature alone) answering every dev question of `data_dir`."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the SentencePiece ops)

    from albert_tf.tasks.race.reading import read_race

    model = tf.saved_model.load(str(export_dir))
    examples = read_race(str(data_dir), "dev")
    out = model.signatures["serving_default"](article=tf.constant([e.context for e in examples]),
                                              question=tf.constant([e.question for e in examples]),
                                              options=tf.constant([list(e.options) for e in examples]))
    return {"probabilities": out["probabilities"].numpy().tolist(),
            "letter": [x.decode() for x in out["letter"].numpy()]}


@pytest.mark.learning
def test_race_learns_the_training_set_predicts_again_and_exports(race_dirs, spm_model, config_file, tmp_path,
                                                                capfd, learning):
    out = tmp_path / "race"
    common = _common(race_dirs["learn"], spm_model, config_file, out, learning.policy_or("float32"))
    common += learning.flags(policy=None)  # --random_seed, where forced
    results = _run(common + ["--do_train", "--do_eval", "--do_predict", "--train_batch_size=16",
                             "--learning_rate=2e-3", "--train_step=90", "--warmup_step=9",
                             "--save_checkpoints_steps=90", "--iterations_per_loop=90", "--dropout_prob=0.0",
                             f"--export_dir={out / 'export'}"])
    assert "WARNING: no --init_checkpoint" in capfd.readouterr().err
    summary = json.load(open(out / "eval_results.json"))
    print("race eval", summary)
    # it learned the training set (chance: 0.25; the default seed's run 0.98, seeds 1-3 at both
    # policies 0.98 to 1.0: benchmarks/results/learning_checks_race)
    learning.record("accuracy", summary["accuracy"], 0.6, "higher")
    assert summary["accuracy"] >= 0.6, summary
    if learning.policy == "mixed_bfloat16":
        return  # the rest compares the run with its float32 export: checked at float32
    assert summary["initialized_from"] == "random"
    assert results["eval"]["accuracy"] == summary["accuracy"]

    # every question of the files, in their order, with the file's answer letter as the label; the
    # summary's accuracies and counts are those of these rows (per level too)
    dev_rows = _rows(out / "dev_predictions.jsonl")
    dev = _race_by_hand(race_dirs["learn"], "dev")
    assert [(r["id"], r["question_index"], r["level"], r["label"]) for r in dev_rows] == dev
    for level in ("middle", "high"):
        rows = [r for r in dev_rows if r["level"] == level]
        assert 0 < summary[f"count_{level}"] == len(rows) < len(dev_rows)
        assert summary[f"accuracy_{level}"] == _accuracy(rows)
    assert summary["count"] == len(dev_rows) == 54 and summary["accuracy"] == _accuracy(dev_rows)
    _check_probabilities(dev_rows)

    test_rows = _rows(out / "predictions.jsonl")
    assert [(r["id"], r["question_index"], r["level"], r["label"]) for r in test_rows] == \
           _race_by_hand(race_dirs["learn"], "test")
    assert len(test_rows) == 27
    _check_probabilities(test_rows)

    # predict-only from the same output_dir: the best checkpoint, the same predictions (with
    # the default --dropout_prob: a checkpoint without dropout RNG states still predicts)
    os.remove(out / "predictions.jsonl")
    again = _run(common + ["--do_predict"])
    assert again["final_step"] == results["final_step"]
    assert _rows(out / "predictions.jsonl") == test_rows

    # the export (raw strings in), loaded through its signature alone, gives the run's dev probabilities
    served = _answer(out / "export", race_dirs["learn"])
    np.testing.assert_allclose(served["probabilities"], [r["probabilities"] for r in dev_rows], atol=1e-5)
    assert served["letter"] == [r["prediction"] for r in dev_rows]
    info = json.load(open(out / "export" / "multiple_choice_info.json"))
    assert info["max_seq_length"] == SEQ and info["max_qa_length"] == 32 and info["skips_padding"] is True
    from made_by import check_made_by

    check_made_by(info["made_by"], "run_race", {"export_dir": str(out / "export"), "spm_model_file": spm_model,
                                               "dtype_policy": "float32"}, dtype_policy="float32")

    # the run directory converts to transformers' AlbertForMultipleChoice: its best checkpoint,
    # every variable read (the head compared here with the checkpoint file itself)
    import tensorflow as tf
    from safetensors.numpy import load_file

    from albert_tf.convert.api import load_source, write_target

    model = load_source("albert_tf", str(out))
    assert type(model).__name__ == "AlbertForMultipleChoice" and "best" in model.run_checkpoint
    hf_dir, kind, left_behind = write_target(model, "hf", str(tmp_path / "hf"), spm_model)
    assert (kind, left_behind) == ("AlbertForMultipleChoice", [])
    reader = tf.train.load_checkpoint(model.run_checkpoint)
    [head] = [n for n in reader.get_variable_to_shape_map() if n.endswith("output_weights/.ATTRIBUTES/VARIABLE_VALUE")]
    np.testing.assert_array_equal(load_file(os.path.join(hf_dir, "model.safetensors"))["classifier.weight"],
                                  reader.get_tensor(head))


def test_all_txt_layout_and_generic_multiple_choice(race_dirs, spm_model, config_file, tmp_path):
    # the release's all.txt layout: found, said, and evaluated over every dev question
    # --middle_only: high school has no question, so no accuracy (none written, "n/a" printed)
    out = tmp_path / "all_txt"
    printed = Capture()
    _run(_common(race_dirs["all.txt"], spm_model, config_file, out) + [
        "--do_train", "--do_eval", "--train_step=2", "--warmup_step=0", "--train_batch_size=8",
        "--iterations_per_loop=2", "--middle_only"], stream=printed)
    summary = json.load(open(out / "eval_results.json"))
    dev_rows = _rows(out / "dev_predictions.jsonl")
    assert [(r["id"], r["question_index"], r["level"], r["label"]) for r in dev_rows] == \
           _race_by_hand(race_dirs["all.txt"], "dev", levels=("middle",))
    assert summary["count"] == summary["count_middle"] == len(dev_rows) > 0 and summary["count_high"] == 0
    assert summary["accuracy"] == summary["accuracy_middle"] == _accuracy(dev_rows)
    assert "accuracy_high" not in summary
    evals = [r for r in _rows(out / "metrics.jsonl") if r["split"] == "eval"]
    assert evals and all("accuracy_high" not in r and r["count_high"] == 0 for r in evals)
    _check_probabilities(dev_rows)
    [line] = [line for line in printed.text.splitlines() if line.startswith("eval: ")]
    assert line == (f"eval: accuracy {summary['accuracy']:.4f} ({len(dev_rows)} questions), accuracy_middle "
                    f"{summary['accuracy']:.4f} ({len(dev_rows)} questions), accuracy_high n/a (0 questions)"), line

    # generic JSON lines with three options per question
    data = tmp_path / "mc3"
    data.mkdir()
    for split in ("train", "dev"):
        lines = []
        with open(race_dirs["jsonl"] / f"{split}.jsonl", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                answer = "ABCD".index(row["answer"])
                keep = [answer] + [i for i in range(4) if i != answer][:2]
                keep.sort()
                row["options"] = [row["options"][i] for i in keep]
                row["answer"] = keep.index(answer)  # an index this time, not a letter
                lines.append(json.dumps(row))
        (data / f"{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "mc3_out"
    _run(_common(data, spm_model, config_file, out) + [
        "--task_name=multiple_choice", "--do_train", "--do_eval", "--train_step=2", "--warmup_step=0",
        "--train_batch_size=8", "--iterations_per_loop=2"])
    dev_rows = _rows(out / "dev_predictions.jsonl")
    # the labels are the file's answer indexes as letters, the predictions the most probable of 3 options
    with open(data / "dev.jsonl", encoding="utf-8") as f:
        dev = [json.loads(line) for line in f]
    assert [(r["id"], r["label"]) for r in dev_rows] == [(row["id"], "ABC"[row["answer"]]) for row in dev]
    _check_probabilities(dev_rows, num_options=3)
    summary = json.load(open(out / "eval_results.json"))
    assert summary["count"] == len(dev_rows) and summary["accuracy"] == _accuracy(dev_rows)
    # no levels in generic data: no level accuracies
    assert (summary["count_middle"], summary["count_high"]) == (0, 0)
    assert "accuracy_middle" not in summary and "accuracy_high" not in summary


def test_real_race_articles_metrics_recomputed_from_the_predictions(spm_model, config_file, tmp_path):
    """Real RACE dev articles (the first 3 files of each level, linked as train and dev): every
    accuracy and count of eval_results.json equals the one recomputed from dev_predictions.jsonl,
    whose rows are the files' questions with their answers."""
    data = tmp_path / "data"
    for level in ("middle", "high"):
        source = real_path(f"race/RACE/dev/{level}")
        names = sorted(os.listdir(source), key=lambda n: int(n[:-len(".txt")]))[:3]
        for split in ("train", "dev"):
            (data / "RACE" / split / level).mkdir(parents=True)
            for name in names:
                os.symlink(os.path.join(source, name), data / "RACE" / split / level / name)
    out = tmp_path / "out"
    _run(_common(data, spm_model, config_file, out) + [
        "--do_train", "--do_eval", "--train_step=2", "--warmup_step=0", "--train_batch_size=8",
        "--iterations_per_loop=2"])
    summary = json.load(open(out / "eval_results.json"))
    dev_rows = _rows(out / "dev_predictions.jsonl")
    assert [(r["id"], r["question_index"], r["level"], r["label"]) for r in dev_rows] == _race_by_hand(data, "dev")
    _check_probabilities(dev_rows)
    assert summary["count"] == len(dev_rows) and summary["accuracy"] == _accuracy(dev_rows)
    for level in ("middle", "high"):
        rows = [r for r in dev_rows if r["level"] == level]
        assert summary[f"count_{level}"] == len(rows) > 0 and summary[f"accuracy_{level}"] == _accuracy(rows)


def test_accuracy_by_level_by_hand():
    """RACE's three accuracies (the trained run above scores 1.0 on every level, so these are checked
    here): argmax of the probabilities against the label, per level, questions without a label
    (-1) not counted."""
    from albert_tf.tasks.race.task import accuracy_by_level, eval_line

    probabilities = [[.1, .7, .1, .1], [.4, .3, .2, .1], [.1, .1, .1, .7], [.2, .5, .2, .1], [.25, .25, .4, .1],
                     [.1, .2, .3, .4]]  # argmax 1, 0, 3, 1, 2, 3
    labels = [1, 2, 3, -1, 0, 3]
    levels = ["middle", "middle", "high", "high", "high", "high"]
    assert accuracy_by_level(probabilities, labels, levels) == {
        "accuracy": 3 / 5, "count": 5, "accuracy_middle": 1 / 2, "count_middle": 2,
        "accuracy_high": 2 / 3, "count_high": 3}
    # a level without questions (generic data's level "", --middle_only's high) has no accuracy
    assert accuracy_by_level(probabilities[:2], labels[:2], ["", ""]) == {
        "accuracy": 1 / 2, "count": 2, "count_middle": 0, "count_high": 0}
    assert accuracy_by_level(probabilities[:2], labels[:2], ["middle", "middle"]) == {
        "accuracy": 1 / 2, "count": 2, "accuracy_middle": 1 / 2, "count_middle": 2, "count_high": 0}
    assert eval_line({"accuracy": 0.5, "count": 2, "accuracy_middle": 0.5, "count_middle": 2, "count_high": 0}) == (
        "accuracy 0.5000 (2 questions), accuracy_middle 0.5000 (2 questions), accuracy_high n/a (0 questions)")
    assert eval_line({"accuracy": 0.5, "count": 2, "count_middle": 0, "count_high": 0}, levels=False) == \
        "accuracy 0.5000 (2 questions)"


def test_bad_input_exits_2_naming_the_file(race_dirs, spm_model, config_file, tmp_path):
    from albert_tf import run_race

    cases = []
    for case in ("empty_split", "not_json", "bad_answer", "missing_init_checkpoint", "bad_dtype_policy",
                 "multi_worker"):
        data = tmp_path / case / "data"
        shutil.copytree(race_dirs["files"], data)
        out = tmp_path / case / "out"
        args = _common(data, spm_model, config_file, out) + ["--do_train", "--train_step=2", "--warmup_step=0"]
        middle = data / "RACE" / "train" / "middle"
        if case == "empty_split":
            shutil.rmtree(data / "RACE" / "train")
            (data / "RACE" / "train" / "middle").mkdir(parents=True)
            (data / "RACE" / "train" / "high").mkdir()
            expected = "train"
        elif case == "not_json":
            (middle / "1.txt").write_text('{"article": "x", "questions": [\n', encoding="utf-8")
            expected = "1.txt"
        elif case == "bad_answer":
            article = json.loads((middle / "2.txt").read_text(encoding="utf-8"))
            article["answers"][0] = "F"
            (middle / "2.txt").write_text(json.dumps(article), encoding="utf-8")
            expected = "2.txt"
        elif case == "bad_dtype_policy":
            args.append("--dtype_policy=mixed_float16")
            expected = "--dtype_policy='mixed_float16' is not one of auto, float32, mixed_bfloat16"
        elif case == "multi_worker":  # its workers would each act as the chief (docs/fine_tuning.md)
            args.append("--strategy=multi_worker_mirrored")
            expected = ("--strategy must be one of mirrored, one_device, default, got 'multi_worker_mirrored': "
                        "fine-tuning runs on one machine (--strategy=mirrored uses all its devices; a TPU: "
                        "--use_tpu with --tpu_name).")
        else:
            args.append(f"--init_checkpoint={tmp_path / 'no_such_checkpoint'}")
            expected = "no_such_checkpoint"
        cases.append((case, args, expected, out))
    results = [run_in_process(run_race, args) for _, args, _, _ in cases]
    for (case, _, expected, out), result in zip(cases, results, strict=True):
        assert result.returncode == 2, (case, result.stderr[-3000:])
        assert "Traceback" not in result.stderr
        assert expected in result.stderr, (case, result.stderr[-3000:])
        # the input is checked before anything is written; a refused --init_checkpoint (found
        # after the output directory was made) leaves none behind
        assert not out.exists(), case


@pytest.mark.parametrize("command", ["run_race", "run_squad_v1", "run_squad_v2"])
def test_release_tpu_flags_map_to_the_tpu_strategy(command):
    import importlib

    from absl import flags

    from albert_tf import run_squad_v1

    module = importlib.import_module(f"albert_tf.{command}")

    def options(args):
        values = flags.FlagValues()
        module.define_flags(values)
        values([command, "--output_dir=x", *args])
        if command == "run_race":
            return module.options_from_flags(values)[0]
        return run_squad_v1.options_from_flags(values, command[-2:])[0]

    task = options(["--use_tpu", "--master=grpc://10.0.0.2:8470", "--tpu_zone=us-central1-b", "--num_tpu_cores=8",
                    "--gcp_project=p"])
    assert task.strategy_and_tpu() == ("tpu", "grpc://10.0.0.2:8470")
    task = options(["--strategy=mirrored"])
    assert task.strategy_and_tpu() == ("mirrored", None)


def test_a_data_set_in_race_layout_is_one_file(race_dirs, spm_model, config_file, tmp_path):
    """docs/fine_tuning.md's quiz data set, the page's file as written: RACE's layout under QUIZ/
    with levels easy and hard, a tiny fine-tuning through it, each level's accuracy reported."""
    from test_run_classifier import load_doc_file

    from albert_tf.tasks.race import reading

    for split in ("train", "dev"):
        for race_level, level in (("middle", "easy"), ("high", "hard")):
            shutil.copytree(race_dirs["files"] / "RACE" / split / race_level, tmp_path / "data/QUIZ" / split / level)
    try:
        command = load_doc_file('DATA_SETS["quiz"]', "quiz")
        out = tmp_path / "run"
        result = run_in_process(command, [*_common(tmp_path / "data", spm_model, config_file, out), "--task_name=quiz",
                                          "--do_train", "--do_eval", "--train_batch_size=8", "--train_step=2",
                                          "--warmup_step=0", "--save_checkpoints_steps=2", "--iterations_per_loop=2"])
    finally:
        reading.DATA_SETS.pop("quiz", None)  # the file added its set to the process's table
    assert result.returncode == 0, result.stderr[-3000:]
    assert "train: QUIZ train at" in result.stdout and "accuracy_easy" in result.stdout, result.stdout
    summary = json.load(open(out / "eval_results.json"))
    assert summary["task"] == "quiz" and summary["count"] == summary["count_easy"] + summary["count_hard"] > 0
    assert "count_middle" not in summary
