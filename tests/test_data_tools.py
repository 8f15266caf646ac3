"""The small tools (plot_metrics, make_topic_task, write_preset_configs): one CLI style
(`name: error: ...`, exit status 2, no traceback) and atomic output."""

import collections
import importlib
import json
import os
import struct

import pytest
from conftest import run_in_process
from tools import make_topic_task

from albert_tf.data import sample_corpus

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _tool(name, *args):
    """`python tools/NAME.py ARGS` in this process (the tool's main(argv))."""
    return run_in_process(importlib.import_module(f"tools.{name}"), args)


def _last_error_line(result):
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    return result.stderr.strip().splitlines()[-1]


def test_plot_metrics_draws_a_png_and_names_broken_lines(tmp_path):
    rows = [{"split": "train", "step": s, "loss": 9.0 - s, "masked_lm_loss": 8.0 - s, "sentence_order_loss": 0.7,
             "masked_lm_accuracy": 0.1 * s, "sentence_order_accuracy": 0.5, "learning_rate": 1e-4 * s}
            for s in (1, 2, 3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = _tool("plot_metrics", f"--run_dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-1500:]
    png = tmp_path / "curves.png"
    assert result.stdout.strip() == f"wrote {png} (3 logged records)"
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # 5 metrics and the learning rate: 6 panels of 4.6 x 3.4 inches in 3 columns, at 100 dpi
    assert struct.unpack(">II", data[16:24]) == (1380, 680)
    # no temporary left; the plot's marker (albert_tf.storage.outputs) lets a second run replace it
    assert sorted(os.listdir(tmp_path)) == [".curves.png.albert_tf_output.json", "curves.png", "metrics.jsonl"]

    (tmp_path / "metrics.jsonl").write_text(json.dumps(rows[0]) + "\n{broken\n")
    broken = _tool("plot_metrics", f"--run_dir={tmp_path}", f"--output={tmp_path}/other.png")
    assert broken.returncode == 2
    assert _last_error_line(broken) == (f"plot_metrics: error: {tmp_path}/metrics.jsonl:2:2: not valid JSON "
                                        "(Expecting property name enclosed in double quotes): {broken; expected a "
                                        "metrics.jsonl record: fix or replace the file.")
    assert not (tmp_path / "other.png").exists() and not (tmp_path / ".other.png.albert_tf_output.json").exists()
    missing = _tool("plot_metrics")
    assert missing.returncode == 2 and _last_error_line(missing) == "plot_metrics: error: --run_dir is required."


def test_make_topic_task_writes_balanced_tsv_files(tmp_path):
    out = tmp_path / "topics"
    result = _tool("make_topic_task", f"--output_dir={out}", "--per_class=40", "--dev_fraction=0.25")
    assert result.returncode == 0, result.stderr[-1500:]
    assert result.stdout.strip() == (f"wrote {out}/train.tsv (120 rows) and dev.tsv (40 rows); "
                                     "labels: networking, numbers, text, concurrency")
    assert sorted(os.listdir(out)) == [".dev.tsv.albert_tf_output.json", ".train.tsv.albert_tf_output.json",
                                       "dev.tsv", "train.tsv"]  # each with its marker (albert_tf.storage.outputs)
    splits = {}
    for split in ("train", "dev"):
        lines = (out / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
        assert lines[0] == "sentence\tlabel"
        splits[split] = [tuple(line.split("\t")) for line in lines[1:]]
    assert collections.Counter(label for _, label in splits["train"]) == {
        "networking": 30, "numbers": 30, "text": 30, "concurrency": 30}
    assert collections.Counter(label for _, label in splits["dev"]) == {
        "networking": 10, "numbers": 10, "text": 10, "concurrency": 10}
    assert not {s for s, _ in splits["train"]} & {s for s, _ in splits["dev"]}
    bad = _tool("make_topic_task", f"--output_dir={tmp_path}/bad", "--per_class=5")
    assert bad.returncode == 2
    assert _last_error_line(bad) == ("make_topic_task: error: need 0 < --dev_fraction < 1 and --per_class >= 10 "
                                     "(got 0.2, 5).")
    assert not (tmp_path / "bad").exists()


TOPIC_PACKAGES = {"email", "logging", "json", "os", "textwrap"}


@pytest.fixture(scope="module")
def topic_corpus(tmp_path_factory):
    """A corpus input of real docstrings: five standard-library packages' entries (JSON lines)."""
    path = tmp_path_factory.mktemp("topic_corpus") / "heldout.jsonl"
    sample_corpus.write_entries(str(path), sample_corpus.iter_entries(packages=TOPIC_PACKAGES))
    return path


def _expected_topics(path):
    """{package: its distinct 5-40-word sentences} computed from the JSON lines directly:
    a sentence of two packages belongs to neither."""
    found = collections.defaultdict(set)
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        package = record["source"].split("/")[0]
        package = package[:-3] if package.endswith(".py") else package
        found[package].update(" ".join(s.split()) for s in record["sentences"] if 5 <= len(s.split()) <= 40)
    owners = collections.Counter(s for sentences in found.values() for s in sentences)
    return {p: {s for s in sentences if owners[s] == 1} for p, sentences in found.items()}


def _split_rows(directory):
    rows = {}
    for split in ("train", "dev"):
        lines = (directory / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
        assert lines[0] == "sentence\tlabel"
        rows[split] = [tuple(line.split("\t")) for line in lines[1:]]
    return rows["train"], rows["dev"]


def test_make_topic_task_from_a_corpus_input(topic_corpus, tmp_path):
    tool = make_topic_task
    expected = _expected_topics(topic_corpus)
    ranked = sorted(expected, key=lambda p: (-len(expected[p]), p))
    assert set(ranked) == TOPIC_PACKAGES and len(expected[ranked[3]]) >= 40 > len(expected[ranked[4]])
    entries = sample_corpus.read_entries(str(topic_corpus))
    train, dev, labels = tool.make_corpus_task(entries, num_classes=3, per_class=40, dev_fraction=0.25)
    assert labels == ranked[:3]
    assert collections.Counter(label for _, label in train) == {label: 30 for label in labels}
    assert collections.Counter(label for _, label in dev) == {label: 10 for label in labels}
    assert not {s for s, _ in train} & {s for s, _ in dev}
    assert all(sentence in expected[label] for sentence, label in train + dev)
    assert tool.make_corpus_task(entries, num_classes=3, per_class=40, dev_fraction=0.25) == (train, dev, labels)
    fourth = len(expected[ranked[3]])
    with pytest.raises(ValueError, match=rf"^the corpus: 3 of its 5 packages have --per_class={fourth + 1} .* "
                                         rf"lower --per_class to at most {fourth} or lower --num_classes\.$"):
        tool.make_corpus_task(entries, num_classes=4, per_class=fourth + 1)

    bad = tmp_path / "bad.jsonl"
    lines = topic_corpus.read_text(encoding="utf-8").splitlines()
    bad.write_text("\n".join([lines[0], lines[1], '{"source": "a.py", "sentences": ["One two three."]}']) + "\n",
                   encoding="utf-8")
    out = tmp_path / "topics"
    ok, bad_line, too_small, no_corpus = [run_in_process(tool, args) for args in [
        [f"--output_dir={out}", f"--corpus_file={topic_corpus}", "--num_classes=4", "--per_class=40",
         "--dev_fraction=0.25"],
        [f"--output_dir={tmp_path}/bad", f"--corpus_file={bad}"],
        [f"--output_dir={tmp_path}/small", f"--corpus_file={topic_corpus}", "--per_class=500"],
        [f"--output_dir={tmp_path}/plain", "--num_classes=3"],
    ]]
    assert ok.returncode == 0, ok.stderr[-1500:]
    assert ok.stdout.strip() == (f"wrote {out}/train.tsv (120 rows) and dev.tsv (40 rows); "
                                 f"labels: {', '.join(ranked[:4])}")
    train, dev = _split_rows(out)
    assert collections.Counter(label for _, label in train) == {label: 30 for label in ranked[:4]}
    assert collections.Counter(label for _, label in dev) == {label: 10 for label in ranked[:4]}
    assert not {s for s, _ in train} & {s for s, _ in dev}
    assert all(sentence in expected[label] for sentence, label in train + dev)
    assert bad_line.returncode == 2 and _last_error_line(bad_line) == (
        f"make_topic_task: error: {bad}:3: not a docstring entry: 'name' is missing or not a string.")
    counts = ", ".join(f"{p} {len(expected[p])}" for p in ranked)
    assert too_small.returncode == 2 and _last_error_line(too_small) == (
        f"make_topic_task: error: {topic_corpus}: {sum(len(expected[p]) >= 500 for p in ranked)} of its 5 packages "
        f"have --per_class=500 distinct sentences of 5 to 40 words, fewer than --num_classes=4 (the most: {counts}); "
        f"lower --per_class to at most {len(expected[ranked[3]])} or lower --num_classes.")
    assert no_corpus.returncode == 2 and _last_error_line(no_corpus) == (
        "make_topic_task: error: --num_classes=3 needs --corpus_file (the built-in task has the 4 topics "
        "networking, numbers, text, concurrency).")
    assert not any((tmp_path / name).exists() for name in ("bad", "small", "plain"))


def test_write_preset_configs_matches_the_shipped_configs(tmp_path):
    result = _tool("write_preset_configs", f"--output_dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-1500:]
    names = sorted(n for n in os.listdir(tmp_path) if not n.startswith("."))  # not the markers
    assert sorted(os.listdir(tmp_path)) == sorted([*names, *(f".{n}.albert_tf_output.json" for n in names)])
    assert result.stdout.splitlines() == [f"wrote {tmp_path}/{n}" for n in names]
    assert "albert_base.json" in names and "albert_tiny.json" in names
    for name in names:
        assert (tmp_path / name).read_bytes() == open(os.path.join(ROOT, "configs", name), "rb").read(), name
