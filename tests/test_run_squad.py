"""run_squad_v1 / run_squad_v2: a tiny model learns the synthetic SQuAD set, predict-only
reproduces the predictions from the checkpoint, the metrics equal the official rules'
(tests/squad_official.py) on the written predictions, v1 predicts files with questions
without answers, and bad input exits with status 2 without writing anything."""

import json
import os

import pytest
import squad_official as so
from conftest import run_in_process, write_tiny_config
from tools import make_squad_data

SEQ = 96
STRIDE = 48


@pytest.fixture(scope="module")
def squad_files(tmp_path_factory):
    tool = make_squad_data
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
    # one layer: what these runs check (learning, metrics, predictions, exports) does not depend on the
    # depth, and each run traces its steps, its predictions and its export at half the cost of two layers
    return write_tiny_config(tmp_path_factory.mktemp("config"), num_hidden_layers=1, num_hidden_groups=1)


@pytest.fixture(scope="module")
def two_layer_config_file(tmp_path_factory):
    """Two layers, a group each: the --best_checkpoint run's rise and fall of F1 was measured
    with these (one layer rises and stays)."""
    return write_tiny_config(tmp_path_factory.mktemp("config2"), num_hidden_layers=2)


def _long_contexts(path, out_path, version):
    """The questions of `path` with odd characters and whitespace runs around their
    contexts, several contexts joined into one: each context needs several windows."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    prefix = "Ｃａｆé  ``naïve''\u200b 1,000 ﬁx —\n\n   "
    paragraphs = [p for a in data["data"] for p in a["paragraphs"]][:12]
    filler = " ".join(p["context"] for p in paragraphs[:3])
    for p in paragraphs:
        shift = len(prefix) + len(filler) + 1
        p["context"] = prefix + filler + " " + p["context"] + "  \t end"
        for q in p["qas"]:
            for a in q.get("answers", []) + q.get("plausible_answers", []):
                a["answer_start"] += shift
    data["data"] = [{"title": "long", "paragraphs": paragraphs}]
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
    return out_path


def _served(export_dir, *predict_files):
    """The export's answers to every question of each file (and to a question with an empty
    context), the export loaded once with tf.saved_model.load: its signature alone."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the SentencePiece ops)

    qa = tf.saved_model.load(str(export_dir))
    per_file = []
    for path in predict_files:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        rows = [(q["id"], q["question"], p["context"]) for a in data["data"] for p in a["paragraphs"]
                for q in p["qas"]]
        rows.append(("empty-context", "Anything?", ""))
        out = qa.signatures["serving_default"](question=tf.constant([r[1] for r in rows]),
                                               context=tf.constant([r[2] for r in rows]))
        answers = {}
        for i, (qid, _, _) in enumerate(rows):
            answers[qid] = {k: (v[i].numpy().decode("utf-8") if v.dtype == tf.string else v[i].numpy().item())
                            for k, v in out.items()}
        per_file.append(answers)
    return per_file


def _check_export(export_dir, served, output_dir, version):
    """The export's answers (`served`: _served's for one predict file) are the first n-best
    answer of the run's nbest_predictions.json (text and character span) for every question;
    v2 also its null odds; an empty context gets no answer."""
    answers = dict(served)
    empty = answers.pop("empty-context")
    assert {k: empty[k] for k in ("answer", "start", "end", "score")} == {"answer": "", "start": -1, "end": -1,
                                                                         "score": -1e6}
    nbest = json.load(open(os.path.join(output_dir, "nbest_predictions.json"), encoding="utf-8"))
    assert set(answers) == set(nbest)
    for qid, got in answers.items():
        best = nbest[qid][0]
        if best["char_start"] is None:  # the release's v2 placeholder when no span is valid: no answer
            assert best["text"] == "" and (got["answer"], got["start"], got["end"], got["score"]) == ("", -1, -1, -1e6)
            continue
        assert (got["answer"], got["start"], got["end"]) == (best["text"], best["char_start"], best["char_end"]), qid
        scores = ("start_logit", "end_logit") if version == "v1" else ("start_log_prob", "end_log_prob")
        assert got["score"] == pytest.approx(best[scores[0]] + best[scores[1]], abs=1e-4)
    if version == "v2":
        odds = json.load(open(os.path.join(output_dir, "null_odds.json"), encoding="utf-8"))
        for qid, got in answers.items():
            assert got["no_answer_score"] == pytest.approx(odds[qid], abs=1e-4)
    info = json.load(open(os.path.join(export_dir, "qa_info.json"), encoding="utf-8"))
    assert info["version"] == version and info["max_seq_length"] == SEQ and info["doc_stride"] == STRIDE
    return answers


def _flags(module, args):
    from absl import flags

    values = flags.FlagValues()
    module.define_flags(values)
    values([module.__name__] + args)
    return values


def _common(spm_model, config_file, output_dir, train_file, policy="float32"):
    # float32 whatever the CPU: these runs are compared with their float32 exports to 1e-4/1e-5, and
    # "auto" trains and evaluates in mixed_bfloat16 on bf16 hardware (tests/test_precision.py covers bf16);
    # `policy`: a learning check's forced policy (tests/conftest.py `learning`)
    return [f"--dtype_policy={policy}", f"--spm_model_file={spm_model}", f"--albert_config_file={config_file}",
            f"--output_dir={output_dir}", f"--train_file={train_file}", f"--predict_file={train_file}",
            f"--max_seq_length={SEQ}", f"--doc_stride={STRIDE}", "--max_query_length=32", "--predict_batch_size=16",
            "--n_best_size=5"]


@pytest.mark.learning
def test_best_checkpoint_scores_every_checkpoint_and_predicts_from_the_best(squad_files, spm_model,
                                                                            two_layer_config_file, tmp_path, learning):
    """--best_checkpoint (the release's model.ckpt-best): the official F1 of the predict file at
    every checkpoint, the best kept in best/ and predicted from. A learning rate too high for
    this data (2e-2) peaks early and then falls apart (measured with the release's tokenization:
    F1 24.4 at step 4, 9.3 at the end): predictions from the final weights would score far lower."""
    from albert_tf import run_squad_v1
    from albert_tf.tasks.squad.task import SquadOptions, check_options
    from albert_tf.training.options import TrainingOptions

    out = tmp_path / "best"
    args = _common(spm_model, two_layer_config_file, out, squad_files["v1"], learning.policy_or("float32"))
    values = _flags(run_squad_v1, args + ["--do_train", "--do_predict", "--best_checkpoint", "--train_batch_size=16",
                                          "--learning_rate=2e-2", "--num_train_epochs=6", "--warmup_proportion=0.1",
                                          "--save_checkpoints_steps=4", "--iterations_per_loop=4",
                                          *learning.flags(policy=None)])
    results = run_squad_v1.run(values, stream=open(os.devnull, "w"))
    evals = [json.loads(line) for line in open(out / "metrics.jsonl") if '"eval"' in line]
    f1 = {r["step"]: r["f1"] for r in evals}
    final = results["final_step"]
    assert sorted(f1) == sorted(set(range(4, final + 1, 4)) | {final}) and len(set(f1.values())) > 2
    best = max(f1, key=lambda step: (f1[step], -step))  # the first of equal scores
    summary = json.load(open(out / "eval_results.json"))
    assert results["best_step"] == summary["best_step"] == best and summary["checkpoint"] == f"best/ckpt-{best}"
    # the best checkpoint is another than the final one and scores higher (the default seed's run: 4.4
    # points; seeds 1-3 at both policies: 5.9 to 14.8, benchmarks/results/learning_checks)
    learning.record("f1_best_minus_final", f1[best] - f1[final], 2.0, "higher", strict=True)
    assert (out / "best" / f"ckpt-{best}.index").exists() and best < final and f1[best] > f1[final] + 2
    # predictions.json, rescored apart from albert_tf, is the best checkpoint's, not the final one's
    predictions = json.load(open(out / "predictions.json"))
    golds = dict(so.questions(json.load(open(squad_files["v1"], encoding="utf-8"))))
    rescored = 100 * sum(max(so.overlap_f1(g, predictions[q]) for g in texts)
                         for q, texts in golds.items()) / len(golds)
    assert rescored == pytest.approx(f1[best]) == pytest.approx(summary["f1"])
    print("F1 by checkpoint", f1, "best", best)
    with pytest.raises(ValueError, match="--best_checkpoint needs --do_train and --do_predict"):
        check_options(SquadOptions(version="v1", output_dir=str(tmp_path / "x"), predict_file=squad_files["v1"],
                                   do_predict=True, best_checkpoint=True),
                      TrainingOptions(output_dir=str(tmp_path / "x")))
    # a predict file without gold answers has nothing to pick by: refused before any work
    dataset = json.load(open(squad_files["v1"], encoding="utf-8"))
    for article in dataset["data"]:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                qa["answers"] = []
    bare = tmp_path / "bare-v1.json"
    bare.write_text(json.dumps(dataset), encoding="utf-8")
    values = _flags(run_squad_v1, _common(spm_model, two_layer_config_file, tmp_path / "refused", squad_files["v1"])
                    + [f"--predict_file={bare}", "--do_train", "--do_predict", "--best_checkpoint"])
    with pytest.raises(ValueError, match="holds no gold answers to score checkpoints by"):
        run_squad_v1.run(values, stream=open(os.devnull, "w"))
    assert not (tmp_path / "refused").exists()


@pytest.mark.learning
def test_v1_learns_the_training_set_and_predict_only_reproduces_it(squad_files, spm_model, config_file, tmp_path,
                                                                     capfd, learning):
    from albert_tf import run_squad_v1

    out = tmp_path / "v1"
    policy = learning.policy_or("float32")  # every run below: predict-only reproduces the training run's
    args = _common(spm_model, config_file, out, squad_files["v1"], policy)
    values = _flags(run_squad_v1, args + ["--do_train", "--do_predict", "--train_batch_size=16",
                                          "--learning_rate=3e-3", "--num_train_epochs=40",
                                          "--warmup_proportion=0.1", "--save_checkpoints_steps=100000",
                                          "--iterations_per_loop=50", f"--export_dir={out / 'export'}",
                                          *learning.flags(policy=None)])
    results = run_squad_v1.run(values, stream=open(os.devnull, "w"))
    assert "WARNING: no --init_checkpoint" in capfd.readouterr().err
    metrics = results["metrics"]
    print("v1 metrics", metrics, "steps", results["num_train_steps"])
    # it learned the training set (a model that did not answers a few percent); the worst of 3 seeds at
    # each policy: benchmarks/results/learning_checks
    learning.record("exact_match", metrics["exact_match"], 75.0, "higher")
    learning.record("f1", metrics["f1"], 75.0, "higher")
    assert metrics["exact_match"] >= 75.0 and metrics["f1"] >= 75.0, metrics
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
    # the metrics, re-scored apart from our code (exact match and F1 need no v1/v2 distinction here:
    # every gold answer has words)
    dataset = json.load(open(squad_files["v1"], encoding="utf-8"))
    golds = dict(so.questions(dataset))
    assert all(so.words(g) for texts in golds.values() for g in texts)
    # (eval_results.json's numbers, up to float summation order)
    assert summary["exact_match"] == pytest.approx(
        100 * sum(max(so.same_text(g, predictions[q]) for g in texts) for q, texts in golds.items()) / len(golds),
        rel=1e-12, abs=1e-12)
    assert summary["f1"] == pytest.approx(
        100 * sum(max(so.overlap_f1(g, predictions[q]) for g in texts) for q, texts in golds.items()) / len(golds),
        rel=1e-12, abs=1e-12)
    assert summary["total"] == len(golds) and summary["f1"] == metrics["f1"]

    # a predict file where some questions have no gold answer: every question is predicted (as
    # before), the metrics cover the others and count them; none with an answer: no metrics
    qas = [qa for article in dataset["data"] for p in article["paragraphs"] for qa in p["qas"]]
    bare = [qa["id"] for qa in qas[::4]]
    for qa in qas:
        if qa["id"] in bare:
            qa["answers"] = []
    partial = tmp_path / "partial-v1.json"
    partial.write_text(json.dumps(dataset), encoding="utf-8")
    values = _flags(run_squad_v1, _common(spm_model, config_file, out, partial, policy) + [
        "--do_predict", f"--predict_feature_file={tmp_path / 'partial.tf_record'}"])
    scored = run_squad_v1.run(values, stream=open(os.devnull, "w"))["metrics"]
    assert json.load(open(out / "predictions.json")) == predictions
    answered = [q for q in golds if q not in bare]
    assert scored["questions_without_answers"] == len(bare) == 16 and scored["total"] == len(answered) == 48
    assert scored["missing"] == 0 and json.load(open(out / "eval_results.json"))["questions_without_answers"] == 16
    assert scored["exact_match"] == pytest.approx(
        100 * sum(max(so.same_text(g, predictions[q]) for g in golds[q]) for q in answered) / len(answered),
        rel=1e-12, abs=1e-12)
    assert scored["f1"] == pytest.approx(
        100 * sum(max(so.overlap_f1(g, predictions[q]) for g in golds[q]) for q in answered) / len(answered),
        rel=1e-12, abs=1e-12)
    for qa in qas:
        qa["answers"] = []
    partial.write_text(json.dumps(dataset), encoding="utf-8")
    os.remove(out / "eval_results.json")
    none = run_squad_v1.run(values, stream=open(os.devnull, "w"))
    assert none["metrics"] is None and not (out / "eval_results.json").exists()
    assert json.load(open(out / "predictions.json")) == predictions

    if learning.policy == "mixed_bfloat16":
        return  # the rest compares the run with its float32 export: checked at float32
    # the QA SavedModel (raw strings in), exported at the end of training, answers as the run did
    long_file = _long_contexts(squad_files["v1"], tmp_path / "long-v1.json", "v1")
    served, served_long = _served(out / "export", squad_files["v1"], long_file)
    answers = _check_export(out / "export", served, out, "v1")
    assert sum(answers[qid]["answer"] == text for qid, text in predictions.items()) == len(predictions)

    # long contexts (several windows each, odd characters): predict-only from the same
    # output_dir and the export agree question by question
    values = _flags(run_squad_v1, _common(spm_model, config_file, out, long_file, policy)[:-1] + [
        "--n_best_size=5", "--do_predict", f"--predict_feature_file={tmp_path / 'long.tf_record'}"])
    run_squad_v1.run(values, stream=open(os.devnull, "w"))
    windows = json.load(open(f"{tmp_path / 'long.tf_record'}.spans.json", encoding="utf-8"))["qas_id"]
    per_question = {qid: windows.count(qid) for qid in set(windows)}
    long_ids = [qid for qid, _ in so.questions(json.load(open(long_file, encoding="utf-8")))]
    assert set(per_question) == set(long_ids) and min(per_question.values()) >= 2, per_question
    _check_export(out / "export", served_long, out, "v1")


def test_v2_metrics_and_the_best_threshold_file_under_the_official_rules(squad_files, spm_model, config_file,
                                                                         tmp_path):
    """Every official number in eval_results.json equals the official v2.0 rules' (written
    apart from our code, tests/squad_official.py) on the run's predictions.json and
    null_odds.json; predictions_best_f1_thresh.json is predictions.json blanked above the
    threshold in eval_results.json and qa_info.json, and a plain evaluation of it gives
    best_f1 (else eval_results.json says why); with nothing to sweep, qa_info.json has no
    threshold."""
    from albert_tf import run_squad_v2

    out = tmp_path / "v2"
    values = _flags(run_squad_v2, _common(spm_model, config_file, out, squad_files["v2"]) + [
        "--do_train", "--do_predict", "--train_batch_size=8", "--learning_rate=1e-3", "--num_train_epochs=2",
        "--start_n_top=3", "--end_n_top=3", "--iterations_per_loop=5", "--save_checkpoints_steps=5",
        "--best_checkpoint", f"--export_dir={out / 'export'}"])
    results = run_squad_v2.run(values, stream=open(os.devnull, "w"))
    # --best_checkpoint at v2: every checkpoint scored by best_f1, the files from the best one
    evals = {r["step"]: r for r in map(json.loads, open(out / "metrics.jsonl")) if r.get("split") == "eval"}
    assert len(evals) >= 2 and all("best_f1" in r for r in evals.values())
    best = max(evals, key=lambda step: (evals[step]["best_f1"], -step))
    assert results["best_step"] == best
    null_odds = json.load(open(out / "null_odds.json"))
    predictions = json.load(open(out / "predictions.json"))
    dataset = json.load(open(squad_files["v2"], encoding="utf-8"))
    qids = [q for q, _ in so.questions(dataset)]
    assert list(predictions) == list(null_odds) == qids  # file order: the official sweep breaks ties by it
    official = so.evaluate(dataset, predictions, null_odds)
    assert official["HasAns_total"] > 0 and official["NoAns_total"] > 0
    summary = json.load(open(out / "eval_results.json"))
    assert summary["initialized_from"] == "random" and summary["best_step"] == best
    assert official["best_f1"] == pytest.approx(evals[best]["best_f1"], rel=1e-9)  # the files are the best's
    for key, value in official.items():
        assert summary[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
        assert results["metrics"][key] == summary[key], key
    assert summary["no_answer_questions"] == sum(v > 0 for v in null_odds.values())
    assert summary["no_answer_share"] == pytest.approx(summary["no_answer_questions"] / len(qids), rel=1e-12)

    written = json.load(open(out / "predictions_best_f1_thresh.json"))
    threshold = summary["best_f1_reachable_thresh"]
    assert written == {q: ("" if null_odds[q] > threshold else p) for q, p in predictions.items()}
    plain = so.evaluate(dataset, written)["f1"]
    assert summary["best_f1_reachable"] == pytest.approx(plain, rel=1e-12, abs=1e-12)
    quirks = so.sweep_disagrees(dataset, predictions)
    if not quirks:
        assert plain == pytest.approx(so.best_reachable_f1(dataset, predictions, null_odds)[0], rel=1e-12, abs=1e-12)
    if "best_f1_note" not in summary:
        assert plain == pytest.approx(official["best_f1"], rel=1e-12, abs=1e-12)
        assert threshold == official["best_f1_thresh"]
    else:  # only for a reason: shared null odds, a start below 0.0 reported as 0.0, or a sweep quirk
        tied = len(set(null_odds.values())) < len(null_odds)
        assert tied or quirks or (official["best_f1_thresh"] == 0.0 and min(null_odds.values()) <= 0.0), summary
    print("v2", {k: summary[k] for k in ("f1", "best_f1", "best_f1_thresh", "best_f1_reachable_thresh")},
          summary.get("best_f1_note"))

    assert len(predictions) == summary["total"] == len(qids)
    _check_export(out / "export", _served(out / "export", squad_files["v2"])[0], out, "v2")
    info = json.load(open(out / "export" / "qa_info.json"))
    assert info["null_threshold"] == threshold and info["start_n_top"] == 3
    from made_by import check_made_by

    check_made_by(info["made_by"], "run_squad_v2", {"export_dir": str(out / "export"), "best_checkpoint": True,
                                                    "dtype_policy": "float32"}, dtype_policy="float32")

    # a predict file without answers: predictions, no metrics, no threshold in the export
    for article in dataset["data"]:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                qa["answers"], qa["is_impossible"] = [], False
                qa.pop("plausible_answers", None)
    bare = tmp_path / "bare-v2.json"
    bare.write_text(json.dumps(dataset), encoding="utf-8")
    values = _flags(run_squad_v2, _common(spm_model, config_file, out, bare) + [
        "--do_predict", "--start_n_top=3", "--end_n_top=3", f"--predict_feature_file={tmp_path / 'bare.tf_record'}",
        f"--export_dir={out / 'export-bare'}"])
    assert run_squad_v2.run(values, stream=open(os.devnull, "w"))["metrics"] is None
    assert json.load(open(out / "predictions.json")) == predictions
    info = json.load(open(out / "export-bare" / "qa_info.json"))
    assert "null_threshold" not in info and info["version"] == "v2"


def _bad_input_cases(squad_files, spm_model, config_file, tmp_path):
    cases = []
    for case in ("no_predict_file", "bad_json", "bad_dtype_policy"):
        out = tmp_path / case / "out"
        args = [f"--spm_model_file={spm_model}", f"--albert_config_file={config_file}", f"--output_dir={out}",
                "--max_seq_length=128", "--do_predict"]
        if case == "bad_dtype_policy":
            args += [f"--predict_file={squad_files['v1']}", "--dtype_policy=float16"]
            expected = "--dtype_policy='float16' is not one of auto, float32, mixed_bfloat16"
        elif case == "bad_json":
            bad = tmp_path / "broken.json"
            bad.write_text('{"version": "1.1", "data": [\n  {"title": "x",,}\n]}\n', encoding="utf-8")
            args.append(f"--predict_file={bad}")
            expected = "broken.json"
        else:
            expected = "--predict_file"
        cases.append((args, expected, out))
    return cases


@pytest.mark.parametrize("start", ["init_checkpoint", "hub"])
def test_starts_from_a_pretrained_directory_or_an_export(start, squad_files, tiny_export, tmp_path):
    from albert_tf import run_squad_v1

    out = tmp_path / start
    given = tiny_export["pretrained"] if start == "init_checkpoint" else tiny_export["hub"]
    args = [f"--{'init_checkpoint' if start == 'init_checkpoint' else 'albert_hub_module_handle'}={given}",
            f"--output_dir={out}", f"--train_file={squad_files['v1']}", f"--predict_file={squad_files['v1']}",
            f"--max_seq_length={SEQ}", f"--doc_stride={STRIDE}", "--max_query_length=32", "--predict_batch_size=32",
            "--do_train", "--do_predict", "--train_batch_size=32", "--num_train_epochs=0.5"]
    if start == "init_checkpoint":
        args.append(f"--spm_model_file={tiny_export['spm']}")  # the export brings its own
    results = run_squad_v1.run(_flags(run_squad_v1, args), stream=open(os.devnull, "w"))
    assert results["initialized_from"] != "random"
    assert os.path.abspath(given) in results["initialized_from"]
    summary = json.load(open(out / "eval_results.json"))
    assert summary["initialized_from"] == results["initialized_from"] and summary["global_step"] == 1
    # the default --dtype_policy=auto, resolved for this machine and recorded with its reason
    assert summary["dtype_policy_requested"] == "auto" and summary["dtype_policy"] in ("float32", "mixed_bfloat16")
    assert summary["dtype_policy_reason"].startswith("auto: ")


def test_bad_input_and_an_unusable_init_checkpoint_exit_2_without_writing(squad_files, spm_model, tiny_export,
                                                                           config_file, tmp_path):
    """Bad input (no --predict_file, a broken JSON file, a bad --dtype_policy) exits 2 naming
    it, with nothing written. An unusable --init_checkpoint exits 2 naming the checkpoint;
    the output directory this run made (here with its parent) is removed again, while a
    directory the user had is refused before any work (albert_tf.storage.outputs) and keeps
    their file. All cases in this process (run_squad_v1.main)."""
    from albert_tf import run_squad_v1

    bad_input = _bad_input_cases(squad_files, spm_model, config_file, tmp_path)
    users = tmp_path / "mismatched_into_users_dir" / "out"
    users.mkdir(parents=True)
    (users / "notes.txt").write_bytes(b"my notes\x00\xff")
    cases = []
    for case in ("missing", "mismatched", "mismatched_into_users_dir"):
        out = tmp_path / case / "out"
        if case == "missing":
            init, config, expected = tmp_path / "no_such_checkpoint", config_file, "no_such_checkpoint"
        else:
            # the tiny pretrained weights under a config with another embedding size
            with open(config_file, encoding="utf-8") as f:
                config = json.load(f)
            config["embedding_size"] = config["embedding_size"] * 2
            config_path = tmp_path / "other_config.json"
            config_path.write_text(json.dumps(config), encoding="utf-8")
            init, config, expected = tiny_export["pretrained"], config_path, "shape mismatches"
            if case == "mismatched_into_users_dir":
                expected = f"--output_dir={out} is a directory that albert_tf did not make"
        cases.append(([f"--init_checkpoint={init}", f"--albert_config_file={config}",
                       f"--spm_model_file={tiny_export['spm']}", f"--output_dir={out}",
                       f"--train_file={squad_files['v1']}", "--max_seq_length=128", "--do_train"], expected, out))
    results = [run_in_process(run_squad_v1, args) for args, _, _ in bad_input + cases]
    for (args, expected, out), result in zip(bad_input, results, strict=False):
        assert result.returncode == 2, result.stderr[-2000:]
        assert "Traceback" not in result.stderr
        assert expected in result.stderr, result.stderr
        assert not out.exists()
    for (args, expected, out), result in zip(cases, results[len(bad_input):], strict=True):
        assert result.returncode == 2, result.stderr[-3000:]
        assert "Traceback" not in result.stderr
        assert expected in result.stderr, result.stderr[-3000:]
        assert not (out / "checkpoint").exists() and not (out / "eval_results.json").exists()
    assert not (tmp_path / "missing").exists() and not (tmp_path / "mismatched").exists()
    assert (users / "notes.txt").read_bytes() == b"my notes\x00\xff"
