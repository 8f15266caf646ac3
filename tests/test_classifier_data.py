"""GLUE readers (standard TSV layouts, clear errors) and metrics."""

import csv
import os

import numpy as np
import pytest
from real_data import real_path

from albert_tf.tasks.classification import metrics
from albert_tf.tasks.classification.pipeline import label_ids
from albert_tf.tasks.classification.data import DataError, get_task, read_examples

# Two rows per task in the GLUE distribution's layout (header, columns), of different labels,
# and what each row reads as: (text_a, text_b, label).
LAYOUTS = {
    "cola": ("train.tsv", None, ["gj04\t1\t\tOur friends won't buy this analysis.", "gj04\t0\t*\tThey drank the pub."],
             [("Our friends won't buy this analysis.", None, "1"), ("They drank the pub.", None, "0")]),
    "sst-2": ("dev.tsv", "sentence\tlabel", ["a gorgeous film\t1", "dull and long\t0"],
              [("a gorgeous film", None, "1"), ("dull and long", None, "0")]),
    "mrpc": ("train.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
             ["1\t1\t2\tHe said it.\tIt was said by him.", "0\t3\t4\tA cat.\tA dog."],
             [("He said it.", "It was said by him.", "1"), ("A cat.", "A dog.", "0")]),
    "sts-b": ("dev.tsv", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
              ["0\tmain\tf\t2012\t1\tnone\tnone\tA plane takes off.\tAn air plane is taking off.\t5.000",
               "1\tmain\tf\t2012\t2\tnone\tnone\tA man eats.\tA woman swims.\t0.400"],
              [("A plane takes off.", "An air plane is taking off.", 5.0), ("A man eats.", "A woman swims.", 0.4)]),
    "qqp": ("train.tsv", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
            ["1\t1\t2\tHow do I learn?\tHow can I learn?\t1", "2\t3\t4\tWhat is AI?\tWho won?\t0"],
            [("How do I learn?", "How can I learn?", "1"), ("What is AI?", "Who won?", "0")]),
    "mnli": ("dev_matched.tsv", "\t".join(["index", "promptID", "pairID", "genre", "s1b", "s2b", "s1p", "s2p",
                                            "sentence1", "sentence2", "label1", "gold_label"]),
             # the label is the last column (gold_label), not label1
             ["0\t1\t1\tfiction\tb\tb\tp\tp\tThe cat sat.\tA cat is sitting.\tneutral\tentailment",
              "1\t2\t2\tfiction\tb\tb\tp\tp\tA dog ran.\tNothing moved.\tcontradiction\tcontradiction"],
             [("The cat sat.", "A cat is sitting.", "entailment"), ("A dog ran.", "Nothing moved.", "contradiction")]),
    "qnli": ("train.tsv", "index\tquestion\tsentence\tlabel",
             ["0\tWho?\tHe did.\tentailment", "1\tWhere?\tIt rained.\tnot_entailment"],
             [("Who?", "He did.", "entailment"), ("Where?", "It rained.", "not_entailment")]),
    "rte": ("dev.tsv", "index\tsentence1\tsentence2\tlabel",
            ["0\tA man runs.\tA man moves.\tentailment", "1\tA cat sleeps.\tA cat runs.\tnot_entailment"],
            [("A man runs.", "A man moves.", "entailment"), ("A cat sleeps.", "A cat runs.", "not_entailment")]),
    "wnli": ("train.tsv", "index\tsentence1\tsentence2\tlabel",
             ["0\tI saw it.\tIt was seen.\t1", "1\tHe left.\tShe stayed.\t0"],
             [("I saw it.", "It was seen.", "1"), ("He left.", "She stayed.", "0")]),
}


def _write(directory, name, header, rows):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in ([header] if header else []) + rows))
    return path


# The release's label lists (classifier_utils.py, each processor's get_labels(): the order of a
# converted classifier's outputs) and the class ids of LAYOUTS' two rows under them, by hand.
RELEASE_LABELS = {
    "cola": (("0", "1"), [1, 0]), "sst-2": (("0", "1"), [1, 0]), "mrpc": (("0", "1"), [1, 0]),
    "sts-b": ((), [5.0, 0.4]), "qqp": (("0", "1"), [1, 0]),
    "mnli": (("contradiction", "entailment", "neutral"), [1, 0]),
    "qnli": (("entailment", "not_entailment"), [0, 1]), "rte": (("entailment", "not_entailment"), [0, 1]),
    "wnli": (("0", "1"), [1, 0]),
}


@pytest.mark.parametrize("task_name", sorted(LAYOUTS))
def test_glue_layouts(task_name, tmp_path):
    file_name, header, rows, expected = LAYOUTS[task_name]
    _write(tmp_path, file_name, header, rows)
    split = "train" if file_name == "train.tsv" else "dev"
    task = get_task(task_name.upper())
    examples = read_examples(task, str(tmp_path), split)
    # every row, in order: the text columns and the label of each (two labels where the file has two)
    assert [(e.text_a, e.text_b, e.label) for e in examples] == expected
    # the labels as the model sees them: the release's list, and each row's class id in it
    labels, ids = RELEASE_LABELS[task_name]
    assert tuple(task.labels) == labels
    np.testing.assert_allclose(label_ids(examples, task.labels), ids, rtol=1e-6)


def test_mismatched_mnli_reads_its_own_dev_file(tmp_path):
    _, header, rows, _ = LAYOUTS["mnli"]
    _write(tmp_path, "dev_mismatched.tsv", header, rows)
    assert read_examples(get_task("MisMnli"), str(tmp_path), "dev")[0].label == "entailment"


def test_errors_name_the_file_and_line(tmp_path):
    task = get_task("rte")
    path = _write(tmp_path, "dev.tsv", "index\tsentence1\tsentence2\tlabel",
                  ["0\tA.\tB.\tentailment", "1\tonly three\tcolumns"])
    with pytest.raises(DataError, match=rf"{path}:3: 3 columns, expected 4"):
        read_examples(task, str(tmp_path), "dev")
    _write(tmp_path, "dev.tsv", "index\tsentence1\tsentence2\tlabel", ["0\tA.\tB.\tentailment", "1\tA.\tB.\tmaybe"])
    with pytest.raises(DataError, match=r"dev.tsv:3: label 'maybe' is not one of entailment, not_entailment"):
        read_examples(task, str(tmp_path), "dev")
    _write(tmp_path, "train.tsv", None, [])
    with pytest.raises(DataError, match="train.tsv: the file is empty"):
        read_examples(task, str(tmp_path), "train")
    _write(tmp_path, "train.tsv", "index\tsentence1\tsentence2\tlabel", [])
    with pytest.raises(DataError, match="no example after the header"):
        read_examples(task, str(tmp_path), "train")
    stsb = _write(tmp_path / "stsb", "dev.tsv", LAYOUTS["sts-b"][1],
                  ["0\tmain\tf\t2012\t1\tnone\tnone\tA.\tB.\thigh"])
    with pytest.raises(DataError, match=rf"{stsb}:2: label 'high' is not a number"):
        read_examples(get_task("sts-b"), str(tmp_path / "stsb"), "dev")
    with pytest.raises(ValueError, match="--task_name='glue' is not one of"):
        get_task("glue")


def test_generic_tsv_task(tmp_path):
    path = _write(tmp_path, "train.tsv", "id\tquestion\tanswer\tjudgement",
                  ["7\tWhy?\tBecause.\tgood", "8\tHow?\tSo.\tbad"])
    task = get_task("tsv", labels=["good", "bad"], text_a_column="question", text_b_column="answer",
                    label_column="judgement")
    examples = read_examples(task, str(tmp_path), "train")
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [("Why?", "Because.", "good"), ("How?", "So.", "bad")]
    # no text_b_column (None or ""): single sentences
    for b in (None, ""):
        single = get_task("tsv", labels=["good", "bad"], text_a_column="answer", text_b_column=b,
                          label_column="judgement")
        assert [(e.text_a, e.text_b) for e in read_examples(single, str(tmp_path), "train")] == [
            ("Because.", None), ("So.", None)]
    assert get_task("tsv", labels=["good"]).columns["train"] == ("text_a", None, "label")
    with pytest.raises(DataError) as e:
        read_examples(get_task("tsv", labels=["good"], text_a_column="sentence"), str(tmp_path), "train")
    assert str(e.value) == (f"{path}:1: no column 'sentence' in the header (id, question, answer, judgement); "
                            "check --text_a_column.")


def test_a_text_b_column_missing_from_the_header_is_an_error(tmp_path):
    path = _write(tmp_path, "train.tsv", "sentence\tlabel", ["A cat.\tgood", "A dog.\tbad"])
    task = get_task("tsv", labels=["good", "bad"], text_a_column="sentence", text_b_column="answer")
    with pytest.raises(DataError) as e:
        read_examples(task, str(tmp_path), "train")
    assert str(e.value) == (f"{path}:1: no column 'answer' in the header (sentence, label); check --text_b_column, "
                            "or leave it empty for single sentences.")
    with pytest.raises(DataError) as e:
        read_examples(get_task("tsv", labels=["good"], text_a_column="sentence", label_column="y"), str(tmp_path),
                      "train")
    assert str(e.value) == f"{path}:1: no label column 'y' in the header (sentence, label); check --label_column."


def test_non_utf8_tsv_names_the_file_and_line(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_bytes(b"index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tentailment\n1\tCaf\xe9.\tB.\tentailment\n")
    with pytest.raises(DataError) as e:
        read_examples(get_task("rte"), str(tmp_path), "dev")
    assert str(e.value) == (f"{path}:3: not valid UTF-8 (invalid continuation byte at byte 6 of the line); "
                            "save the file as UTF-8.")
    # the same file in UTF-8 reads
    path.write_bytes(b"index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tentailment\n1\tCaf\xc3\xa9.\tB.\tentailment\n")
    assert read_examples(get_task("rte"), str(tmp_path), "dev")[1].text_a == "Caf\u00e9."


def test_metrics_hand_computed():
    predictions = np.array([1, 1, 0, 0, 1, 0, 1, 1])
    labels = np.array([1, 0, 0, 1, 1, 0, 1, 0])
    # tp 3, fp 2, tn 2, fn 1
    assert metrics.accuracy(predictions, labels) == pytest.approx(5 / 8)
    assert metrics.f1(predictions, labels) == pytest.approx(2 * 3 / (2 * 3 + 2 + 1))
    assert metrics.matthews_corrcoef(predictions, labels) == pytest.approx((3 * 2 - 2 * 1) / np.sqrt(5 * 4 * 4 * 3))
    x, y = [1.0, 2.0, 2.0, 3.0], [1.0, 3.0, 2.0, 4.0]
    assert metrics.pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])
    # ranks with ties: x -> 1, 2.5, 2.5, 4; y -> 1, 3, 2, 4
    assert metrics.spearman(x, y) == pytest.approx(np.corrcoef([1, 2.5, 2.5, 4], [1, 3, 2, 4])[0, 1])
    assert metrics.compute(("accuracy", "f1"), predictions, labels) == {
        "accuracy": pytest.approx(0.625), "f1": pytest.approx(6 / 9)}


# The real GLUE files (../shared/data/real/glue, SOURCES.md): directory, published row counts
# (dev, train), the layout as published (header or not; text_a, text_b, label columns) and
# the label set; read here with csv, apart from albert_tf's reader.
REAL_GLUE = {
    "sst-2": ("SST-2", (872, 67349), True, (0, None, 1), {"0", "1"}),
    "cola": ("CoLA", (1043, 8551), False, (3, None, 1), {"0", "1"}),
    "rte": ("RTE", (277, 2490), True, (1, 2, 3), {"entailment", "not_entailment"}),
    "sts-b": ("STS-B", (1500, 5749), True, (7, 8, 9), None),
    "mrpc": ("MRPC", (408, 3668), True, (3, 4, 0), {"0", "1"}),
}


def _raw_glue_rows(path, header):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return rows[1:] if header else rows


@pytest.mark.parametrize("task_name", sorted(REAL_GLUE))
def test_real_glue_files_read_as_published(task_name):
    """Each real GLUE dev and train file through read_examples: the published row count, the
    task's label set (STS-B: scores from 0 to 5), and the first, middle and last rows equal to
    the raw file's columns."""
    directory, counts, header, (a, b, y), label_set = REAL_GLUE[task_name]
    task = get_task(task_name)
    for split, count in zip(("dev", "train"), counts):
        path = real_path(f"glue/{directory}/{split}.tsv")
        examples = read_examples(task, os.path.dirname(path), split)
        raw = _raw_glue_rows(path, header)
        assert len(examples) == len(raw) == count
        if label_set is None:
            scores = [e.label for e in examples]
            assert all(isinstance(v, float) and 0.0 <= v <= 5.0 for v in scores)
            assert min(scores) == 0.0 and max(scores) == 5.0
        else:
            assert {e.label for e in examples} == label_set
        for i in (0, count // 2, count - 1):
            row, example = raw[i], examples[i]
            assert example.text_a == row[a] and example.text_b == (None if b is None else row[b])
            assert example.label == (float(row[y]) if label_set is None else row[y]), (split, i)
    if task_name == "cola":  # no header, and the dev file's last line has no newline: still read
        with open(real_path("glue/CoLA/dev.tsv"), "rb") as f:
            assert not f.read().endswith(b"\n")
    if task_name == "mrpc":  # the header starts with a UTF-8 byte order mark
        with open(real_path("glue/MRPC/dev.tsv"), "rb") as f:
            assert f.read(3) == b"\xef\xbb\xbf"
