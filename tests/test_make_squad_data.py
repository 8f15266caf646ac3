"""tools/make_squad_data.py: valid, deterministic SQuAD v1.1 / v2.0 files from docstrings,
with answer offsets that are exact in contexts full of hard strings."""

import json
import os
import re

import pytest
from conftest import run_in_process
from tools import make_squad_data

from albert_tf.data import sample_corpus
from albert_tf.tasks.squad import metrics as squad_metrics


@pytest.fixture(scope="module")
def tool():
    return make_squad_data


def _qas(dataset):
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                yield paragraph["context"], qa


def test_docstring_entries_are_real_return_sentences(entries):
    assert len(entries) > 200
    names = [e["name"] for e in entries]
    assert names == sorted(set(names))
    for e in entries:
        first = e["sentences"][0]
        assert re.match(r"Returns? ", first) and first.endswith(".")
        assert first == first[:e["answer_offset"]] + e["answer"] + "."


@pytest.mark.parametrize("version", ["1.1", "2.0"])
def test_both_versions_are_valid_squad_files(tool, entries, version):
    dataset = tool.make_dataset(version, 90, seed=7, max_context_chars=600, entries=entries)
    assert dataset["version"] == ("1.1" if version == "1.1" else "v2.0")
    assert tool.check_dataset(dataset)[1] == 90
    ids = [qa["id"] for _, qa in _qas(dataset)]
    assert len(ids) == len(set(ids)) == 90
    impossible = 0
    for article in dataset["data"]:
        assert set(article) == {"title", "paragraphs"}
        for paragraph in article["paragraphs"]:
            assert set(paragraph) == {"context", "qas"} and len(paragraph["context"]) <= 600
    for context, qa in _qas(dataset):
        if version == "1.1":
            assert set(qa) == {"id", "question", "answers"} and len(qa["answers"]) == 1
        else:
            assert qa["is_impossible"] == (not qa["answers"])
            assert ("plausible_answers" in qa) == qa["is_impossible"]
            impossible += qa["is_impossible"]
        for answer in qa["answers"] + qa.get("plausible_answers", []):
            assert set(answer) == {"text", "answer_start"}
            start = answer["answer_start"]
            assert context[start:start + len(answer["text"])] == answer["text"]
        # learnable: the function asked about is named in the context, the answer follows a fixed cue
        name = re.search(r"(\S+)\(\)", qa["question"]).group(1)
        if qa["answers"]:
            answer = qa["answers"][0]
            head = context[:answer["answer_start"]]
            assert f"{name}(): " in head
            assert head.endswith(("Return ", "Returns ", "handles up to ", "reviewed by "))
        elif qa["question"].startswith("What does"):
            assert f"{name}()" not in context
    if version == "2.0":
        assert 0.2 <= impossible / 90 <= 0.5
    # the metrics read it, and the gold answers score 100
    questions = squad_metrics.questions_from_squad_json(dataset)
    gold = {q["id"]: (q["answers"][0] if q["answers"] else "") for q in questions}
    if version == "1.1":
        assert squad_metrics.evaluate_v1(questions, gold)["exact_match"] == 100.0
    else:
        assert squad_metrics.evaluate_v2(questions, gold)["f1"] == 100.0


def test_the_same_seed_gives_the_same_file(tool, entries):
    first = tool.make_dataset("2.0", 40, seed=5, max_context_chars=500, entries=entries)
    assert tool.make_dataset("2.0", 40, seed=5, max_context_chars=500, entries=entries) == first
    assert tool.make_dataset("2.0", 40, seed=6, max_context_chars=500, entries=entries) != first
    assert tool.make_dataset("2.0", 40, seed=5, max_context_chars=500) == first  # entries read again


def test_contexts_and_answers_hold_the_hard_strings(tool, entries):
    dataset = tool.make_dataset("1.1", 200, seed=1, max_context_chars=700, entries=entries)
    contexts = [p["context"] for a in dataset["data"] for p in a["paragraphs"]]
    answers = [qa["answers"][0]["text"] for _, qa in _qas(dataset)]
    assert any("1,000" in c for c in contexts)
    for strings in (contexts, answers):
        assert any("  " in s for s in strings)                       # several spaces
        assert any(re.search(r"\d,\d{3}", s) for s in strings)        # digits with commas
        assert any(any(ord(ch) > 127 for ch in s) for s in strings)   # accented letters
    assert any("  " in a and any(ord(ch) > 127 for ch in a) for a in answers)  # e.g. "José  Núñez"


def test_splits_share_no_function_and_contexts_fit(tool, entries):
    def names(split):
        dataset = tool.make_dataset("1.1", 150, seed=2, max_context_chars=400, split=split, entries=entries)
        assert all(len(p["context"]) <= 400 for a in dataset["data"] for p in a["paragraphs"])
        return {re.search(r"(\S+)\(\)", qa["question"]).group(1) for _, qa in _qas(dataset)}

    train, dev = names("train"), names("dev")
    assert train and dev and not train & dev
    with pytest.raises(ValueError, match="max_context_chars >= 200"):
        tool.make_dataset("1.1", 10, seed=0, max_context_chars=100, entries=entries)


def test_check_dataset_rejects_a_wrong_offset_and_duplicate_ids(tool, entries):
    dataset = tool.make_dataset("2.0", 12, seed=0, max_context_chars=600, entries=entries)
    qas = dataset["data"][0]["paragraphs"][0]["qas"]
    answerable = next(qa for qa in qas if qa["answers"])
    answerable["answers"][0]["answer_start"] += 1
    with pytest.raises(ValueError, match="is not at"):
        tool.check_dataset(dataset)
    answerable["answers"][0]["answer_start"] -= 1
    qas.append(dict(qas[0]))
    with pytest.raises(ValueError, match="appears twice"):
        tool.check_dataset(dataset)


def test_command_line(tool, tmp_path):
    out = tmp_path / "squad" / "dev-v2.0.json"
    result = run_in_process(tool, [f"--output_file={out}", "--version=2.0", "--num_questions=25", "--seed=4"])
    assert result.returncode == 0, result.stderr[-1500:]
    dataset = json.loads(out.read_text(encoding="utf-8"))
    paragraphs = sum(len(a["paragraphs"]) for a in dataset["data"])
    impossible = sum(not qa["answers"] for _, qa in _qas(dataset))
    assert result.stdout.strip() == (f"wrote {out}: SQuAD 2.0, {paragraphs} paragraphs, 25 questions "
                                     f"({impossible} unanswerable)")
    assert sorted(os.listdir(out.parent)) == [".dev-v2.0.json.albert_tf_output.json", "dev-v2.0.json"]  # and its marker
    missing = run_in_process(tool, [])
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.strip().splitlines()[-1] == "make_squad_data: error: --output_file is required."


def test_people_kind_asks_one_of_eight_facts_by_name(tool, entries):
    """--kind=people: two people per context with the four attributes each, questions that only
    the person's name and the attribute decide, v2.0 questions about a third person who is not
    in the context, and train / dev people apart."""
    train = tool.make_people_dataset("2.0", 60, seed=3, max_context_chars=500, split="train", entries=entries)
    assert train == tool.make_people_dataset("2.0", 60, seed=3, max_context_chars=500, split="train", entries=entries)
    paragraphs, questions, unanswerable = tool.check_dataset(train)
    assert questions == 60 and 0 < unanswerable < questions
    for article in train["data"]:
        first, second = article["title"].split(" and ")
        paragraph = article["paragraphs"][0]
        context = paragraph["context"]
        for kind, (fact, question, values) in tool.PEOPLE_FACTS.items():
            before, between, _ = fact.split("{}")
            for person in (first, second):
                assert context.count(before + person + between) == 1, (kind, person)  # e.g. "Ana Peña was born in "
        for qa in paragraph["qas"]:
            named = re.search(r"(?:was|did|does) (\S+ \S+) ", qa["question"]).group(1)
            if qa["is_impossible"]:
                assert named not in context and qa["plausible_answers"]
            else:
                assert named in (first, second)
                answer = qa["answers"][0]
                kind = next(k for k, (_, q, _) in tool.PEOPLE_FACTS.items() if q.format(named) == qa["question"])
                # the answer is this person's fact, not the other person's
                assert tool.PEOPLE_FACTS[kind][0].format(named, answer["text"]) in context
    dev = tool.make_people_dataset("1.1", 20, seed=4, max_context_chars=500, split="dev", entries=entries)
    train_people = {name for a in train["data"] for name in a["title"].split(" and ")}
    dev_people = {name for a in dev["data"] for name in a["title"].split(" and ")}
    assert train_people and dev_people and not train_people & dev_people


# ------------------------------------------------------------------------------------ --corpus_file


@pytest.fixture(scope="module")
def corpus_file(tool, tmp_path_factory):
    """A corpus input of real docstrings: the standard-library packages of MODULES (JSON lines)."""
    packages = {m.split("/")[0].removesuffix(".py") for m in tool.MODULES}
    path = tmp_path_factory.mktemp("squad_corpus") / "heldout.jsonl"
    sample_corpus.write_entries(str(path), sample_corpus.iter_entries(packages=packages))
    return path


def test_corpus_entries_pass_the_same_filter(tool, entries, corpus_file):
    records = sample_corpus.read_entries(str(corpus_file))
    from_corpus = tool.corpus_docstring_entries(records)
    names = [e["name"] for e in from_corpus]
    assert len(names) > 100 and names == sorted(set(names))
    kinds = {r["name"]: r["kind"] for r in records}
    modules = {r["name"]: r["source"][:-3].replace("/", ".").removesuffix(".__init__") for r in records}
    assert {kinds[name] for name in names} == {"function"}
    assert not any(part.startswith("_") for name in names for part in name[len(modules[name]) + 1:].split("."))
    # the functions MODULES also holds come out identical (one filter, return_entry)
    by_name = {e["name"]: e for e in entries}
    shared = [e for e in from_corpus if e["name"] in by_name]
    assert len(shared) > 100 and all(by_name[e["name"]] == e for e in shared)
    assert tool.corpus_docstring_entries([]) == []


def test_corpus_file_gives_valid_data_of_both_kinds(tool, corpus_file, tmp_path):
    entries = tool.corpus_docstring_entries(sample_corpus.read_entries(str(corpus_file)))
    datasets = {}
    for kind, make in (("functions", tool.make_dataset), ("people", tool.make_people_dataset)):
        for split in ("train", "dev"):
            datasets[kind, split] = make("2.0", 60, seed=3, max_context_chars=500, split=split, entries=entries)
            assert tool.check_dataset(datasets[kind, split])[1] == 60
            for context, qa in _qas(datasets[kind, split]):
                for answer in qa["answers"] + qa.get("plausible_answers", []):
                    start = answer["answer_start"]
                    assert context[start:start + len(answer["text"])] == answer["text"]

    def asked(split):
        return {re.search(r"(\S+)\(\)", qa["question"]).group(1) for _, qa in _qas(datasets["functions", split])}

    assert asked("train") and asked("dev") and not asked("train") & asked("dev")
    assert asked("train") | asked("dev") <= {e["name"] for e in entries}

    bad = tmp_path / "bad.jsonl"
    bad.write_text(corpus_file.read_text(encoding="utf-8").splitlines()[0] + "\n[1, 2]\n", encoding="utf-8")
    small = tmp_path / "small.jsonl"
    sample_corpus.write_entries(str(small), [r for r in sample_corpus.read_entries(str(corpus_file))
                                             if r["source"] in ("glob.py", "hmac.py", "secrets.py")])
    small_count = len(tool.corpus_docstring_entries(sample_corpus.read_entries(str(small))))
    out = tmp_path / "squad"
    ok, people, bad_line, too_small = [run_in_process(tool, args) for args in [
        [f"--output_file={out}/dev-v2.0.json", f"--corpus_file={corpus_file}", "--version=2.0",
         "--num_questions=25", "--seed=4", "--split=dev"],
        [f"--output_file={out}/people.json", f"--corpus_file={corpus_file}", "--kind=people", "--num_questions=20"],
        [f"--output_file={out}/bad.json", f"--corpus_file={bad}"],
        [f"--output_file={out}/small.json", f"--corpus_file={small}"],
    ]]
    assert ok.returncode == 0, ok.stderr[-1500:]
    dataset = json.loads((out / "dev-v2.0.json").read_text(encoding="utf-8"))
    assert dataset == tool.make_dataset("2.0", 25, seed=4, max_context_chars=600, split="dev", entries=entries)
    assert ok.stdout.strip().startswith(f"wrote {out}/dev-v2.0.json: SQuAD 2.0, ")
    assert people.returncode == 0, people.stderr[-1500:]
    assert tool.check_dataset(json.loads((out / "people.json").read_text(encoding="utf-8")))[1] == 20
    assert bad_line.returncode == 2 and "Traceback" not in bad_line.stderr
    assert bad_line.stderr.strip().splitlines()[-1] == (
        f"make_squad_data: error: {bad}:2: a JSON array, not an object; expected a docstring entry "
        '{"source", "name", "sentences"}: fix or replace the file.')
    assert too_small.returncode == 2 and "Traceback" not in too_small.stderr
    assert 0 < small_count < 8
    assert too_small.stderr.strip().splitlines()[-1] == (
        f"make_squad_data: error: {small}: too few usable entries: only {small_count} docstring entries fit "
        f"--max_context_chars=600 and --split=all; need at least 8. Of its "
        f"{len(sample_corpus.read_entries(str(small)))} entries, {small_count} are public functions whose docstring "
        "starts \"Return(s) ...\"; use a larger corpus (or --split=all, a larger --max_context_chars).")
    assert sorted(os.listdir(out)) == [".dev-v2.0.json.albert_tf_output.json", ".people.json.albert_tf_output.json",
                                       "dev-v2.0.json", "people.json"]
