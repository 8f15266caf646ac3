"""RACE / multiple-choice data: both RACE layouts, generic JSON lines, the release's feature
layout (checked by hand), every bad input naming its file, and the feature cache."""

import dataclasses
import hashlib
import json
import os
import re

import numpy as np
import pytest
from conftest import flip_a_bit, listing, run_in_process
from tools import make_race_data, make_squad_data
from real_data import real_path

from albert_tf.data import feature_cache, sample_corpus
from albert_tf.tasks.race.cache import load_or_build_features, read_feature_arrays
from albert_tf.tasks.race.examples import MultipleChoiceDataError, MultipleChoiceExample
from albert_tf.tasks.race.features import MultipleChoiceSettings, convert_example, examples_to_arrays, qa_text
from albert_tf.tasks.race.reading import read_multiple_choice_jsonl, read_race
from albert_tf.data.tokenization import SentencePieceTokenizer, preprocess_text


@pytest.fixture(scope="module")
def tok(spm_model):
    return SentencePieceTokenizer(spm_model)


@pytest.fixture(scope="module")
def tool():
    return make_race_data


@pytest.fixture(scope="module")
def made(tool, entries, tmp_path_factory):
    """The same tiny data in the three layouts: {layout: output_dir}."""
    out = {}
    for layout in ("files", "all.txt", "jsonl"):
        directory = tmp_path_factory.mktemp(layout.replace(".", "_"))
        tool.make_race(str(directory), num_articles=6, seed=3, layout=layout, entries=entries)
        out[layout] = str(directory)
    return out


def _content(example):
    d = dataclasses.asdict(example)
    d.pop("source")
    return d


def _article(questions=("What is it?",), options=(("a", "b", "c", "d"),), answers=("A",), article_id="x1.txt",
             article="Some text about things."):
    return {"article": article, "questions": list(questions), "options": [list(o) for o in options],
            "answers": list(answers), "id": article_id}


def _race_files(root, split="train", levels=None):
    """Writes root/RACE/<split>/<level>/<name> from {level: {name: text or article dict}}."""
    for level, files in (levels or {}).items():
        directory = os.path.join(root, "RACE", split, level)
        os.makedirs(directory, exist_ok=True)
        for name, content in files.items():
            with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
                f.write(content if isinstance(content, str) else json.dumps(content))
    return str(root)


def _race_by_hand(root, split):
    """[(level, id, question index, article, question, options, label)] of root/RACE/<split>/<level>/<n>.txt,
    middle then high, files in number order; label = "ABCD".index(answer)."""
    out = []
    for level in ("middle", "high"):
        directory = os.path.join(root, "RACE", split, level)
        for name in sorted(os.listdir(directory), key=lambda n: int(n[:-len(".txt")])):
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                article = json.load(f)
            for i, (question, options, answer) in enumerate(zip(article["questions"], article["options"],
                                                                article["answers"], strict=True)):
                out.append((level, article["id"], i, article["article"], question, tuple(options),
                            "ABCD".index(answer)))
    return out


def _jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return str(path)


# ---------------------------------------------------------------------------------------------- reading


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_both_race_layouts_and_jsonl_give_the_same_examples(made, split):
    files = read_race(made["files"], split)
    lines = read_race(made["all.txt"], split)
    assert len(files) == len(lines) > 0
    assert [_content(e) for e in files] == [_content(e) for e in lines]
    assert files.summary.layout == "files" and lines.summary.layout == "all.txt"
    assert "files layout" in files.summary.source and "all.txt layout" in lines.summary.source
    assert files.summary.levels.keys() == lines.summary.levels.keys() == {"middle", "high"}
    for level in ("middle", "high"):
        a, b = files.summary.levels[level], lines.summary.levels[level]
        assert (a["articles"], a["questions"]) == (b["articles"], b["questions"])
        assert a["questions"] == sum(e.level == level for e in files)
        assert a["path"] == os.path.join(made["files"], "RACE", split, level)
    assert files.summary.questions == len(files) and files.summary.num_choices == 4
    assert files.summary.articles == len({(e.level, e.example_id) for e in files})
    assert len(files.summary.paths) == files.summary.articles and len(lines.summary.paths) == 2
    assert all(re.fullmatch(r".*/RACE/%s/(middle|high)/\d+\.txt" % split, e.source) for e in files)
    assert all(re.fullmatch(r".*/RACE/%s/(middle|high)/all\.txt:\d+" % split, e.source) for e in lines)
    first = files[0]
    assert first.level == "middle" and first.example_id == "middle1.txt" and first.question_index == 0
    assert isinstance(first.options, tuple)
    # every question against the files themselves (read here with json): the text, the options and
    # the label, the index of the answer's letter
    assert [(e.level, e.example_id, e.question_index, e.context, e.question, e.options, e.label) for e in files] == \
           _race_by_hand(made["files"], split)
    assert len({e.label for e in files}) == 4  # every letter is someone's answer: a letter mix-up would show

    generic = read_multiple_choice_jsonl(os.path.join(made["jsonl"], f"{split}.jsonl"))
    assert generic.summary.layout == "jsonl" and generic.summary.num_choices == 4
    assert [(e.example_id, e.question_index, e.context, e.question, e.options, e.label) for e in generic] == \
           [(e.example_id, e.question_index, e.context, e.question, e.options, e.label) for e in files]
    assert {e.level for e in generic} == {""}


def test_levels_and_data_dir_forms(made):
    both = read_race(made["files"], "train")
    high = read_race(made["files"], "train", high_only=True)
    middle = read_race(made["files"], "train", middle_only=True)
    assert {e.level for e in high} == {"high"} and {e.level for e in middle} == {"middle"}
    assert [_content(e) for e in middle + high] == [_content(e) for e in both]
    assert list(high.summary.levels) == ["high"] and high.summary.questions == len(high)
    assert all("/high/" in p for p in high.summary.paths)
    # data_dir may be the RACE directory itself
    inner = read_race(os.path.join(made["all.txt"], "RACE"), "dev", middle_only=True)
    assert [_content(e) for e in inner] == [_content(e) for e in read_race(made["files"], "dev", middle_only=True)]
    with pytest.raises(ValueError, match="exclude each other"):
        read_race(made["files"], "train", high_only=True, middle_only=True)
    with pytest.raises(MultipleChoiceDataError, match="'validation' is not one of train, dev, test"):
        read_race(made["files"], "validation")


def test_real_race_dev_reads_every_question():
    """The real RACE dev set (../shared/data/real/race): the published 4,887 questions (middle
    1,436 in 368 articles, high 3,451 in 1,021), 1,389 files, 4 options each; every question's
    text, options and answer equal the file's, read here with json."""
    data_dir = real_path("race")
    examples = read_race(data_dir, "dev")
    summary = examples.summary
    assert len(examples) == summary.questions == 4887 and summary.layout == "files" and summary.num_choices == 4
    assert {lv: (v["articles"], v["questions"]) for lv, v in summary.levels.items()} == {
        "middle": (368, 1436), "high": (1021, 3451)}
    listed = [os.path.join(data_dir, "RACE", "dev", lv, n) for lv in ("middle", "high")
              for n in os.listdir(os.path.join(data_dir, "RACE", "dev", lv))]
    assert sorted(summary.paths) == sorted(listed) and len(listed) == 1389
    assert [sum(e.level == lv for e in examples) for lv in ("middle", "high")] == [1436, 3451]
    by_hand = []
    for path in summary.paths:
        with open(path, encoding="utf-8") as f:
            article = json.load(f)
        by_hand += [(article["id"], i, article["article"], q, tuple(o), "ABCD".index(a))
                    for i, (q, o, a) in enumerate(zip(article["questions"], article["options"], article["answers"],
                                                      strict=True))]
    assert [(e.example_id, e.question_index, e.context, e.question, e.options, e.label) for e in examples] == by_hand
    middle = read_race(data_dir, "dev", middle_only=True)
    assert len(middle) == 1436 and {e.level for e in middle} == {"middle"}


def test_files_in_natural_order_and_all_txt_wins(tmp_path):
    articles = {f"{n}.txt": _article(article_id=f"high{n}.txt") for n in (10, 2, 1)}
    root = _race_files(tmp_path, "dev", {"high": articles})
    examples = read_race(root, "dev", high_only=True)
    assert [e.example_id for e in examples] == ["high1.txt", "high2.txt", "high10.txt"]
    assert examples.summary.layout == "files" and examples.summary.ignored == []
    lines = "\n".join(json.dumps(_article(article_id=f"line{n}")) for n in range(3)) + "\n\n"
    _race_files(tmp_path, "dev", {"high": {"all.txt": lines}})
    examples = read_race(root, "dev", high_only=True)
    assert [e.example_id for e in examples] == ["line0", "line1", "line2"]
    assert examples.summary.layout == "all.txt" and len(examples.summary.ignored) == 3
    assert examples.summary.paths == [os.path.join(root, "RACE", "dev", "high", "all.txt")]


def test_generic_jsonl_any_option_count_letters_and_indexes(tmp_path):
    two = _jsonl(tmp_path / "two.jsonl", [
        {"context": "Cats purr.", "question": "Do cats purr?", "options": ["yes", "no"], "answer": "A", "id": "c"},
        {"context": "Cats purr.", "question": "Do dogs purr?", "options": ["yes", "no"], "answer": 1, "id": "c"},
        "",
        {"context": "Dogs bark.", "question": "Who barks?", "options": ["cats", "dogs"]}])
    ex = read_multiple_choice_jsonl(two)
    assert [(e.example_id, e.question_index, e.label) for e in ex] == \
           [("c", 0, 0), ("c", 1, 1), ("two.jsonl:4", 0, None)]
    assert ex[2].source == f"{two}:4" and ex.summary.unlabeled == 1 and ex.summary.articles == 2
    assert ex.summary.num_choices == 2 and ex.summary.paths == [two] and "without answer" in ex.summary.source
    three = _jsonl(tmp_path / "three.jsonl", [
        {"context": "x y z", "question": "_ comes last", "options": ["x", "y", "z"], "answer": "C"},
        {"context": "x y z", "question": "first?", "options": ["x", "y", "z"], "answer": 0, "id": 7}])
    ex = read_multiple_choice_jsonl(three)
    assert [e.label for e in ex] == [2, 0] and ex[1].example_id == "7" and ex.summary.num_choices == 3
    five = _jsonl(tmp_path / "five.jsonl", [
        {"context": "one two three four five", "question": "the fifth", "options": list("abcde"), "answer": "E"},
        {"context": "one two three four five", "question": "the fourth", "options": list("abcde"), "answer": 3},
        {"context": "one two three four five", "question": "unknown", "options": list("abcde"), "answer": None}])
    ex = read_multiple_choice_jsonl(five)
    assert [e.label for e in ex] == [4, 3, None] and ex.summary.num_choices == 5


# ---------------------------------------------------------------------------------------------- bad input

GOOD = _article(questions=("Q1?", "Q2?"), options=(list("abcd"), list("efgh")), answers=("A", "D"))


@pytest.mark.parametrize("name,content,message", [
    ("3.txt", "{\"article\": \"text\", ", r"3\.txt:1:21: not valid JSON \(Expecting property name"),
    ("4.txt", dict(GOOD, answers=["A"]), r"4\.txt \(id 'x1\.txt'\): 2 questions, 2 option lists and 1 answers"),
    ("5.txt", dict(GOOD, options=[list("abcd")]), r"5\.txt .*2 questions, 1 option lists and 2 answers"),
    ("6.txt", dict(GOOD, answers=["A", "E"]), r"6\.txt .*question 1: answer 'E' is outside the options .*A-D"),
    ("7.txt", dict(GOOD, answers=["A", "b"]), r"7\.txt .*question 1: answer 'b' is not a letter A-D"),
    ("8.txt", {k: v for k, v in GOOD.items() if k != "options"}, r"8\.txt: missing key 'options'"),
    ("9.txt", {k: v for k, v in GOOD.items() if k != "id"}, r"9\.txt: missing key 'id'"),
    ("10.txt", dict(GOOD, options=[list("abcd"), list("efg")], answers=["A", "B"]),
     r"10\.txt .*question 1: 3 options, but .*question 0 has 4"),
    ("11.txt", dict(GOOD, article=7), r"11\.txt: key 'article' is int 7, expected str"),
    ("12.txt", [GOOD], r"12\.txt: a JSON array, not an object; expected a RACE article"),
])
def test_bad_race_files_name_the_file(tmp_path, name, content, message):
    root = _race_files(tmp_path, "train", {"middle": {"1.txt": GOOD, name: content}})
    with pytest.raises(MultipleChoiceDataError, match=message) as info:
        read_race(root, "train", middle_only=True)
    assert isinstance(info.value, ValueError)
    assert os.path.join(root, "RACE", "train", "middle", name) in str(info.value)


def test_bad_all_txt_names_the_line(tmp_path):
    good = json.dumps(GOOD)
    root = _race_files(tmp_path, "test", {"high": {"all.txt": f"{good}\n\n{good[:-5]}\n"}})
    path = os.path.join(root, "RACE", "test", "high", "all.txt")
    with pytest.raises(MultipleChoiceDataError, match=re.escape(f"{path}:3:") + r"\d+: not valid JSON"):
        read_race(root, "test", high_only=True)
    _race_files(tmp_path, "test", {"high": {"all.txt": f"{good}\n{json.dumps(dict(GOOD, answers=['A', 'Z']))}\n"}})
    with pytest.raises(MultipleChoiceDataError, match=re.escape(f"{path}:2 (id 'x1.txt') question 1: answer 'Z'")):
        read_race(root, "test", high_only=True)


def test_missing_or_empty_directories(tmp_path):
    with pytest.raises(MultipleChoiceDataError, match=r"no RACE/train directory; expected .*RACE/train/\{middle"):
        read_race(tmp_path, "train")
    root = _race_files(tmp_path, "train", {"middle": {"1.txt": GOOD}})
    with pytest.raises(MultipleChoiceDataError, match=r"train/high: no such directory.*high_only or middle_only"):
        read_race(root, "train")
    os.makedirs(tmp_path / "RACE" / "train" / "high")
    (tmp_path / "RACE" / "train" / "high" / "notes.md").write_text("not an article")
    with pytest.raises(MultipleChoiceDataError, match=r"train/high: empty, no \.txt article file"):
        read_race(root, "train")
    (tmp_path / "RACE" / "train" / "high" / "all.txt").write_text("\n\n")
    with pytest.raises(MultipleChoiceDataError, match=r"train/high: no article in all\.txt"):
        read_race(root, "train")


@pytest.mark.parametrize("row,message", [
    ("{not json", r":2:2: not valid JSON"),
    ({"question": "q", "options": ["a", "b"]}, r":2: missing key 'context'"),
    ({"context": "c", "question": "q"}, r":2: missing key 'options'"),
    ({"context": "c", "question": "q", "options": ["a"]}, r":2: 1 options; a question needs 2"),
    ({"context": "c", "question": "q", "options": ["a", "b", "c"]}, r":2: 3 options, but .*:1 has 2"),
    ({"context": "c", "question": "q", "options": ["a", "b"], "answer": 2}, r":2: answer index 2 is outside"),
    ({"context": "c", "question": "q", "options": ["a", "b"], "answer": "C"}, r":2: answer 'C' is outside .*A-B"),
    ({"context": "c", "question": "q", "options": ["a", "b"], "answer": True}, r":2: answer True is neither"),
    ({"context": " ", "question": "q", "options": ["a", "b"]}, r":2: empty context"),
])
def test_bad_jsonl_names_file_and_line(tmp_path, row, message):
    path = _jsonl(tmp_path / "mc.jsonl", [{"context": "c", "question": "q", "options": ["a", "b"], "answer": 0}, row])
    with pytest.raises(MultipleChoiceDataError, match=re.escape(path) + message):
        read_multiple_choice_jsonl(path)


def test_empty_or_missing_jsonl(tmp_path):
    with pytest.raises(MultipleChoiceDataError, match="no such file"):
        read_multiple_choice_jsonl(tmp_path / "none.jsonl")
    with pytest.raises(MultipleChoiceDataError, match="no question in the file"):
        read_multiple_choice_jsonl(_jsonl(tmp_path / "empty.jsonl", ["", "  "]))


# ---------------------------------------------------------------------------------------------- features


def test_qa_text_blank_and_join():
    assert qa_text("the cat sat on the _ .", "mat") == "the cat sat on the mat ."
    assert qa_text("_ and _", "x") == "x and x"  # every blank, as the release's str.replace
    assert qa_text("where did the cat sit?", "on the mat") == "where did the cat sit? on the mat"


def _expected(tok, context, question, option, T, L):
    """The release's layout of one (question, option), computed by hand (race_utils: the blank
    filled with the option, else question and option joined by a space)."""
    q, o = preprocess_text(question), preprocess_text(option)
    ending = tok.encode(q.replace("_", o) if "_" in q else q + " " + o)[-L:]
    ctx = tok.encode(preprocess_text(context))
    if len(ctx) + len(ending) > T - 3:
        ctx = ctx[:T - 3 - len(ending)]
    ids = [tok.cls_id] + ctx + [tok.sep_id] + ending + [tok.sep_id]
    n = len(ids)
    return (ids + [tok.pad_id] * (T - n), [1] * n + [0] * (T - n),
            [0] * (len(ctx) + 2) + [1] * (len(ending) + 1) + [0] * (T - n))


def test_convert_example_truncation_layout_by_hand(tok):
    context = " ".join(f"Sentence {i} says the parser returns a list of tokens." for i in range(12))
    question = "According to the passage, which of the following statements about the parser is true?"
    options = ("It returns a list of tokens", "It raises an error", "It never stops", "It writes a file to _ disk")
    ex = MultipleChoiceExample("a1", 0, context, question, options, 0)
    T, L = 48, 10
    assert len(tok.encode(qa_text(preprocess_text(question), preprocess_text(options[0])))) > L
    assert len(tok.encode(context)) > T
    out = convert_example(ex, tok, MultipleChoiceSettings(max_seq_length=T, max_qa_length=L))
    assert set(out) == {"input_ids", "input_mask", "segment_ids"}
    assert all(v.shape == (4, T) and v.dtype == np.int32 for v in out.values())
    for j, option in enumerate(options):
        ids, mask, segments = _expected(tok, context, question, option, T, L)
        assert out["input_ids"][j].tolist() == ids
        assert out["input_mask"][j].tolist() == mask and out["segment_ids"][j].tolist() == segments
        assert sum(mask) == T  # the article fills what the ending leaves
    # the ending keeps the LAST max_qa_length pieces: the option's, not the question's start
    row = out["input_ids"][1].tolist()
    option_ids = tok.encode(options[1])
    assert row[T - 1] == tok.sep_id and row[T - 1 - len(option_ids):T - 1] == option_ids
    assert row[1:T - 2 - L] == tok.encode(context)[:T - 3 - L] and row[T - 2 - L] == tok.sep_id
    # a cloze option: "_" in the question is filled, nothing is appended
    cloze = MultipleChoiceExample("a1", 1, "The quick brown fox jumps.", "The quick _ fox jumps.",
                                     ("brown", "green"), None)
    short = convert_example(cloze, tok, MultipleChoiceSettings(max_seq_length=40, max_qa_length=20))
    ids, mask, segments = _expected(tok, cloze.context, cloze.question, "green", 40, 20)
    assert short["input_ids"][1].tolist() == ids and short["input_mask"][1].tolist() == mask
    assert short["segment_ids"][1].tolist() == segments and sum(mask) < 40
    ending = tok.encode("the quick green fox jumps.")
    n_ctx = len(tok.encode(cloze.context))
    assert ids[n_ctx + 2:n_ctx + 2 + len(ending)] == ending


def test_examples_to_arrays(tok, made):
    examples = read_race(made["files"], "dev")
    settings = MultipleChoiceSettings(max_seq_length=64, max_qa_length=24)
    arrays = examples_to_arrays(examples, tok, settings)
    N = len(examples)
    assert arrays.keys() == {"input_ids", "input_mask", "segment_ids", "label_ids"}
    assert arrays["input_ids"].shape == arrays["input_mask"].shape == arrays["segment_ids"].shape == (N, 4, 64)
    assert arrays["label_ids"].tolist() == [e.label for e in examples]
    assert all(v.dtype == np.int32 for v in arrays.values())
    for i in range(N):  # every row (the article is tokenized once per run of questions on it)
        one = convert_example(examples[i], tok, settings)
        assert all(np.array_equal(one[k], arrays[k][i]) for k in one), i
    unlabeled = [dataclasses.replace(examples[0], label=None), examples[1]]
    assert examples_to_arrays(unlabeled, tok, settings)["label_ids"].tolist() == [-1, examples[1].label]
    odd = dataclasses.replace(examples[1], options=examples[1].options[:3])
    with pytest.raises(MultipleChoiceDataError, match="3 options, but .* has 4"):
        examples_to_arrays([examples[0], odd], tok, settings)
    with pytest.raises(MultipleChoiceDataError, match="no examples"):
        examples_to_arrays([], tok, settings)


def test_settings_validate():
    assert MultipleChoiceSettings() == MultipleChoiceSettings(512, 128)
    with pytest.raises(ValueError, match="must exceed max_qa_length"):
        MultipleChoiceSettings(max_seq_length=64, max_qa_length=61).validate()
    with pytest.raises(ValueError, match="max_qa_length must be >= 1"):
        MultipleChoiceSettings(max_seq_length=64, max_qa_length=0).validate()
    assert MultipleChoiceSettings(max_seq_length=64, max_qa_length=60).validate()


# ---------------------------------------------------------------------------------------------- caching


def test_feature_cache_reused_or_rebuilt_with_the_reason(tmp_path, tok, tool, entries, spm_model):
    tool.make_race(str(tmp_path / "data"), num_articles=2, seed=5, layout="files", entries=entries)
    data = str(tmp_path / "data")
    settings = MultipleChoiceSettings(max_seq_length=64, max_qa_length=16)
    out = tmp_path / "cache"
    feature_file = str(out / "train.tfrecord")

    def load(s=settings, high_only=False, tokenizer=tok):
        examples = read_race(data, "train", high_only=high_only)
        return load_or_build_features(examples, feature_file, tokenizer, s), examples

    first, examples = load()
    assert first.rebuilt and "does not exist" in first.reason and first.num_features == len(examples)
    assert listing(out) == ["train.tfrecord", "train.tfrecord.json"]  # no temporaries left behind
    expected = examples_to_arrays(examples, tok, settings)
    assert all(np.array_equal(first.arrays[k], expected[k]) for k in expected)
    sidecar = json.loads((out / "train.tfrecord.json").read_text())
    assert sidecar["kind"] == "albert_tf multiple-choice features"
    record = sidecar["settings"]
    assert (record["max_seq_length"], record["max_qa_length"], record["num_choices"], record["do_lower_case"]) == \
           (64, 16, 4, True)
    with open(spm_model, "rb") as f:
        assert record["spm_model_sha256"] == hashlib.sha256(f.read()).hexdigest()
    on_disk = [n for level in ("middle", "high") for n in os.listdir(os.path.join(data, "RACE", "train", level))]
    assert record["input_files"] == len(on_disk) == len(examples.summary.paths)
    assert record["input_file"] == os.path.join(data, "RACE", "train")
    assert sidecar["source"].startswith("RACE train at ") and sidecar["read_summary"]["questions"] == len(examples)

    old_sidecar = dict(sidecar, settings={k: v for k, v in record.items() if k != "tokenization"})
    (out / "train.tfrecord.json").write_text(json.dumps(old_sidecar))  # made before the release's tokenization
    stale, _ = load()
    assert stale.rebuilt and stale.reason == "the tokenization changed (version 1 -> 2: the release's encode_pieces)"
    assert record["tokenization"] == json.loads((out / "train.tfrecord.json").read_text())["settings"]["tokenization"]

    again, _ = load()
    assert not again.rebuilt and again.reason == "reused: settings and input unchanged"
    assert again.arrays.keys() == expected.keys()
    assert all(np.array_equal(again.arrays[k], expected[k]) and again.arrays[k].dtype == np.int32 for k in expected)

    one_file = examples.summary.paths[0]
    later = os.path.getmtime(one_file) + 100
    os.utime(one_file, (later, later))  # mtime only: content unchanged -> reused
    touched, _ = load()
    assert not touched.rebuilt and "mtime" in touched.reason

    changed, _ = load(MultipleChoiceSettings(max_seq_length=64, max_qa_length=8))
    assert changed.rebuilt and changed.reason == "max_qa_length 16 -> 8"
    cased_tok = SentencePieceTokenizer(spm_model, do_lower_case=False)
    cased, _ = load(MultipleChoiceSettings(max_seq_length=64, max_qa_length=8), tokenizer=cased_tok)
    assert cased.rebuilt and cased.reason == "do_lower_case True -> False"
    assert not np.array_equal(cased.arrays["input_ids"], changed.arrays["input_ids"])

    article = json.loads(open(one_file, encoding="utf-8").read())
    article["questions"][0] += " really"
    with open(one_file, "w", encoding="utf-8") as f:
        f.write(json.dumps(article))
    edited, _ = load(MultipleChoiceSettings(max_seq_length=64, max_qa_length=8), tokenizer=cased_tok)
    assert edited.rebuilt and edited.reason == "the input's content changed (sha256)"

    high, high_examples = load(MultipleChoiceSettings(max_seq_length=64, max_qa_length=8), high_only=True,
                               tokenizer=cased_tok)
    assert high.rebuilt and "the input's content changed (sha256)" in high.reason
    assert high.num_features == len(high_examples) < len(examples)
    assert listing(out) == ["train.tfrecord", "train.tfrecord.json"]

    flip_a_bit(out / "train.tfrecord")  # TensorFlow's CRC check refuses the file
    with pytest.raises(MultipleChoiceDataError, match="unreadable feature file"):
        read_feature_arrays(feature_file)


def test_feature_cache_of_jsonl_keeps_unlabeled(tmp_path, tok):
    path = _jsonl(tmp_path / "mc.jsonl", [
        {"context": "Cats purr and dogs bark.", "question": "Who barks?", "options": ["cats", "dogs", "cows"],
         "answer": 1},
        {"context": "Cats purr and dogs bark.", "question": "Who moos?", "options": ["cats", "dogs", "cows"]}])
    examples = read_multiple_choice_jsonl(path)
    settings = MultipleChoiceSettings(max_seq_length=24, max_qa_length=8)
    feature_file = str(tmp_path / "mc.tfrecord")
    built = load_or_build_features(examples, feature_file, tok, settings)
    cached = load_or_build_features(list(examples), feature_file, tok, settings, source_description="my questions",
                                       input_paths=[path])
    assert built.rebuilt and not cached.rebuilt and cached.source == "my questions"
    assert cached.arrays["label_ids"].tolist() == [1, -1] and cached.arrays["input_ids"].shape == (2, 3, 24)
    assert all(np.array_equal(built.arrays[k], cached.arrays[k]) for k in built.arrays)
    # a file made from other examples than those given (same input): rebuilt, not trusted
    fewer = load_or_build_features(examples[:1], feature_file, tok, settings, input_paths=path)
    assert fewer.rebuilt and fewer.reason == "2 features in the file, 1 examples given"


def test_input_record_of_several_files(tmp_path):
    a, b = tmp_path / "d" / "a.txt", tmp_path / "d" / "sub" / "b.txt"
    b.parent.mkdir(parents=True)
    a.write_text("one")
    b.write_text("two")
    record = feature_cache.input_record([str(a), str(b)])
    assert record["input_files"] == 2 and record["input_size"] == 6 and record["input_file"] == str(tmp_path / "d")
    assert feature_cache.input_record([str(b), str(a)])["input_sha256"] == record["input_sha256"]
    b.rename(tmp_path / "d" / "sub" / "c.txt")  # a renamed file changes the combined hash
    assert feature_cache.input_record([str(a), str(tmp_path / "d" / "sub" / "c.txt")])["input_sha256"] != \
        record["input_sha256"]
    assert "input_files" not in feature_cache.input_record(str(a))
    with pytest.raises(feature_cache.FeatureFileError, match="no such file"):
        feature_cache.input_record([str(a), str(b)])


# ---------------------------------------------------------------------------------------------- the tool


def test_tool_data_is_answerable_from_the_article(tool, entries):
    dataset = tool.make_dataset(6, seed=11, entries=entries)
    train = [a for level in ("middle", "high") for a in dataset["train"][level]]
    questions = sum(len(a["questions"]) for a in train)
    assert 40 <= questions <= 80  # a tiny model can memorize it
    letters, cloze, which = [], 0, 0
    for article in train:
        text = article["article"]
        for question, options, answer in zip(article["questions"], article["options"], article["answers"]):
            assert len(options) == len(set(options)) == 4 and answer in "ABCD"
            letters.append(answer)
            correct = options["ABCD".index(answer)]
            if "_" in question:
                cloze += 1
                assert question.count("_") == 1 and qa_text(question, correct) in text
                for other in options:
                    if other != correct:
                        assert other.lower() not in re.findall(r"[a-z]+", text.lower())
            else:
                which += 1
                returned = re.fullmatch(r"Which function returns (.+)\?", question).group(1)
                assert re.search(re.escape(correct) + r"\(\): Returns? " + re.escape(returned), text)
                assert sum(bool(re.search(re.escape(o) + r"\(\): Returns? " + re.escape(returned), text))
                           for o in options) == 1
    assert cloze >= 20 and which >= 20
    shares = [letters.count(letter) for letter in "ABCD"]
    assert max(shares) - min(shares) <= 2  # every letter is the answer about equally often
    names = {split: {e["name"] for level in dataset[split].values() for a in level for e in entries
                     if e["name"] + "(): " in a["article"]} for split in dataset}
    assert not names["train"] & names["dev"] and not names["train"] & names["test"] and not names["dev"] & names["test"]
    assert tool.make_dataset(6, seed=11, entries=entries) == dataset
    assert tool.make_dataset(6, seed=12, entries=entries) != dataset


def test_tool_replaces_the_race_directory(tool, entries, tmp_path):
    first = tool.make_race(str(tmp_path), num_articles=2, seed=1, layout="files", entries=entries)
    assert first["counts"]["train"]["middle"] == {"articles": 2, "questions": 8}
    assert first["counts"]["dev"]["high"]["articles"] == 1 and all(os.path.isfile(p) for p in first["paths"])
    second = tool.make_race(str(tmp_path), num_articles=2, seed=1, layout="all.txt", entries=entries)
    assert sorted(os.listdir(tmp_path / "RACE" / "train" / "high")) == ["all.txt"]  # no files of the old layout
    assert read_race(str(tmp_path), "train").summary.layout == "all.txt" and len(second["paths"]) == 6
    assert sorted(os.listdir(tmp_path)) == ["RACE"]
    with pytest.raises(ValueError, match="--layout must be one of"):
        tool.make_race(str(tmp_path), layout="csv", entries=entries)


def test_command_line(tool, tmp_path):
    result = run_in_process(tool, [f"--output_dir={tmp_path}", "--layout=jsonl", "--num_articles=2", "--seed=4"])
    assert result.returncode == 0, result.stderr[-1500:]
    assert result.stdout.strip() == f"wrote {tmp_path} (jsonl): 8 articles; questions: train 18, dev 9, test 9"
    assert sorted(n for n in os.listdir(tmp_path) if not n.startswith(".")) == ["dev.jsonl", "test.jsonl",
                                                                                "train.jsonl"]
    assert len(read_multiple_choice_jsonl(tmp_path / "train.jsonl")) == 18
    missing = run_in_process(tool, [])
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.strip().splitlines()[-1] == "make_race_data: error: --output_dir is required."


def _check_answerable(article):
    """Every question of a tool-made article has 4 distinct options and its answer in the article."""
    text = article["article"]
    for question, options, answer in zip(article["questions"], article["options"], article["answers"]):
        assert len(options) == len(set(options)) == 4 and answer in "ABCD"
        correct = options["ABCD".index(answer)]
        if "_" in question:
            assert question.count("_") == 1 and qa_text(question, correct) in text
        else:
            returned = re.fullmatch(r"Which function returns (.+)\?", question).group(1)
            assert re.search(re.escape(correct) + r"\(\): Returns? " + re.escape(returned), text)


def test_corpus_file_gives_valid_data(tool, tmp_path):
    """--corpus_file: the functions of a corpus input (make_squad_data.corpus_docstring_entries
    of its JSON lines) instead of the standard library's MODULES."""
    squad = make_squad_data
    packages = {m.split("/")[0].removesuffix(".py") for m in squad.MODULES}
    corpus = tmp_path / "heldout.jsonl"
    sample_corpus.write_entries(str(corpus), sample_corpus.iter_entries(packages=packages))
    entries = tool.corpus_entries(str(corpus))
    assert entries == squad.corpus_docstring_entries(sample_corpus.read_entries(str(corpus)))
    dataset = tool.make_dataset(2, seed=5, entries=entries)
    names = {}
    for split, levels in dataset.items():
        for article in (a for level in levels.values() for a in level):
            _check_answerable(article)
        names[split] = {e["name"] for level in levels.values() for a in level for e in entries
                        if e["name"] + "(): " in a["article"]}
        assert names[split] and {tool.split_of(n) for n in names[split]} == {split}
    assert not names["train"] & names["dev"] and not names["train"] & names["test"] and not names["dev"] & names["test"]

    bad = tmp_path / "bad.jsonl"
    bad.write_text(corpus.read_text(encoding="utf-8").splitlines()[0] + "\n{broken\n", encoding="utf-8")
    small = tmp_path / "small.jsonl"
    sample_corpus.write_entries(str(small), [r for r in sample_corpus.read_entries(str(corpus)) if r["source"] in (
        "glob.py", "hmac.py", "secrets.py", "shutil.py", "tarfile.py", "zipfile/__init__.py")])
    small_entries = tool.corpus_entries(str(small))
    in_train = sum(tool.split_of(e["name"]) == "train" for e in small_entries)
    out = tmp_path / "out"
    ok, bad_line, too_small = [run_in_process(tool, args) for args in [
        [f"--output_dir={out}", f"--corpus_file={corpus}", "--layout=jsonl", "--num_articles=2", "--seed=5"],
        [f"--output_dir={tmp_path}/bad", f"--corpus_file={bad}"],
        [f"--output_dir={tmp_path}/small", f"--corpus_file={small}"],
    ]]
    assert ok.returncode == 0, ok.stderr[-1500:]
    assert ok.stdout.strip() == f"wrote {out} (jsonl): 8 articles; questions: train 18, dev 9, test 9"
    expected = {split: tool.jsonl_lines([a for level in ("middle", "high") for a in dataset[split][level]])
                for split in dataset}
    for split in ("train", "dev", "test"):
        assert (out / f"{split}.jsonl").read_text(encoding="utf-8").splitlines() == expected[split]
        assert len(read_multiple_choice_jsonl(out / f"{split}.jsonl")) == len(expected[split])
    assert bad_line.returncode == 2 and "Traceback" not in bad_line.stderr
    assert bad_line.stderr.strip().splitlines()[-1] == (
        f"make_race_data: error: {bad}:2:2: not valid JSON (Expecting property name enclosed in double quotes): "
        '{broken; expected a docstring entry {"source", "name", "sentences"}: fix or replace the file.')
    assert too_small.returncode == 2 and "Traceback" not in too_small.stderr and in_train < 12
    assert too_small.stderr.strip().splitlines()[-1] == (
        f"make_race_data: error: {small}: too few usable entries: only {in_train} docstring functions in split "
        f"'train'; need at least 12. The corpus has {len(small_entries)} public functions whose docstring starts "
        "\"Return(s) ...\" (about 20% of them go to dev and 20% to test); use a larger corpus.")
    assert not (tmp_path / "bad").exists() and not (tmp_path / "small").exists()
