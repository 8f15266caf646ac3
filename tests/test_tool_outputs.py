"""The tools of tools/ (and param_table) under albert_tf's output rule
(albert_tf.storage.outputs): a user's file or directory at each output flag survives byte
for byte and the tool ends with exit status 2 naming the flag and the path, before any work;
a second run over the tool's own output replaces it (the demo reuses its directory).

Every case runs in this process (the tool's main(argv), as `python tools/NAME.py` would).
"""

import importlib
import json
import os
import types

import pytest
from test_output_rule import _tree, _write  # the same snapshot and user files as the commands' tests
from conftest import run_in_process

from albert_tf.storage import outputs

DIRECTORY = "directory"
FILE = "file"


class Flags(types.SimpleNamespace):
    """Flag values for a tool's run(f) called directly (no absl flag is `present`)."""

    def __contains__(self, name):
        return False


_MODULES = {}


def _module(tool):
    """The tool's module, loaded once per test module (a monkeypatch reaches its run)."""
    if tool == "param_table":
        from albert_tf import param_table

        return param_table
    if tool not in _MODULES:
        _MODULES[tool] = importlib.import_module(f"tools.{tool}")
    return _MODULES[tool]


@pytest.fixture(scope="module")
def race_entries():
    return _module("make_race_data").docstring_entries()


def argv_of(values):
    """The command line of flag values: ["--name=value", ...]."""
    return [f"--{name}={value}" for name, value in values.items()]


def run_tool(tool, **values):
    """`python tools/TOOL.py --flag=value ...` in this process (the tool's main(argv)):
    (exit status, stdout, stderr)."""
    result = run_in_process(_module(tool), argv_of(values))
    return result.returncode, result.stdout, result.stderr


def _metrics(run_dir):
    rows = [{"split": "train", "step": s, "loss": 9.0 - s, "learning_rate": 1e-4 * s} for s in (1, 2, 3)]
    return _write(os.path.join(run_dir, "metrics.jsonl"), "".join(json.dumps(r) + "\n" for r in rows).encode())


def _case(tool, root):
    """(flag values, {output flag: [paths the tool writes there]}) of a valid invocation."""
    out = os.path.join(root, "out")
    if tool == "make_race_data":
        return (dict(output_dir=out, num_articles=2, seed=1, layout="files"),
                {"--output_dir": [os.path.join(out, "RACE")]})
    if tool == "make_race_data-jsonl":
        return (dict(output_dir=out, num_articles=2, seed=1, layout="jsonl"),
                {"--output_dir": [os.path.join(out, f"{s}.jsonl") for s in ("train", "dev", "test")]})
    if tool == "make_squad_data":
        return (dict(output_file=os.path.join(out, "train.json"), version="1.1", num_questions=12, seed=1,
                     max_context_chars=600, split="all", kind="functions"),
                {"--output_file": [os.path.join(out, "train.json")]})
    if tool == "make_topic_task":
        return (dict(output_dir=out, per_class=40, dev_fraction=0.25),
                {"--output_dir": [os.path.join(out, "train.tsv"), os.path.join(out, "dev.tsv")]})
    if tool == "make_sample_corpus":
        return dict(output_file=os.path.join(out, "corpus.txt"), size_mb=1.0), {
            "--output_file": [os.path.join(out, "corpus.txt")]}
    if tool == "train_sentencepiece":
        corpus = _write(os.path.join(root, "in", "corpus.txt"), b"One sentence.\nAnother one.\n")
        return (dict(input_file=corpus, model_prefix=os.path.join(out, "spm"), vocab_size=30, do_lower_case=True,
                     character_coverage=0.99995, model_type="unigram", input_sentence_size=0, num_threads=1,
                     random_seed=1),
                {"--model_prefix": [os.path.join(out, "spm.model"), os.path.join(out, "spm.vocab")]})
    if tool == "plot_metrics":
        run_dir = os.path.join(root, "in", "run")
        _metrics(run_dir)
        return dict(run_dir=run_dir, output=os.path.join(out, "curves.png")), {
            "--output": [os.path.join(out, "curves.png")]}
    if tool == "write_preset_configs":
        return dict(output_dir=out), {"--output_dir": [os.path.join(out, "albert_base.json"),
                                                       os.path.join(out, "albert_tiny.json")]}
    if tool == "param_table":
        return dict(output_dir=out), {"--output_dir": [os.path.join(out, "param_table.csv")]}
    assert tool == "demo"
    return (dict(output_dir=out, vocab_size=100, pretrain_steps=1, finetune_epochs=1, classifier_steps=1),
            {"--output_dir": [out]})


TOOLS = ["make_race_data", "make_race_data-jsonl", "make_squad_data", "make_topic_task", "make_sample_corpus",
         "train_sentencepiece", "plot_metrics", "write_preset_configs", "param_table", "demo"]
CASES = [(tool, what) for tool in TOOLS for what in (DIRECTORY, FILE)]


@pytest.mark.parametrize("tool,what", CASES, ids=[f"{t}-{w}" for t, w in CASES])
def test_a_users_path_at_a_tools_output_is_refused_untouched_before_any_work(tool, what, tmp_path,
                                                                            monkeypatch):
    values, written = _case(tool, str(tmp_path))
    ((flag, paths),) = written.items()
    for path in paths:  # every path the flag writes: the refusal names the first one
        if what == DIRECTORY:
            _write(os.path.join(path, "notes.txt"), b"my notes\x00\xff")
        else:
            _write(path, b"my bytes\x00\xff")
    module = _module(tool.split("-")[0])
    for work in ("make_dataset", "make_people_dataset", "make_task", "write_corpus", "train_sentencepiece",
                 "plot_curves", "build_rows", "_step"):
        if hasattr(module, work):  # any work after the check would fail the test
            monkeypatch.setattr(module, work, lambda *a, **k: pytest.fail("work started before the refusal"))
    before = _tree(tmp_path)
    status, _, err = run_tool(tool.split("-")[0], **values)
    assert status == 2, err
    assert f"{tool.split('-')[0]}: error: {flag}={paths[0]} " in err and "did not make" in err, err
    assert "never overwrites what it did not make" in err and "Traceback" not in err
    assert _tree(tmp_path) == before  # byte for byte, and no marker written


def _tamper(paths):
    """Changes albert_tf's own outputs (their markers stay): a replacement restores them."""
    for path in paths:
        if os.path.isdir(path):
            _write(os.path.join(path, "stray.txt"), b"left over")
        else:
            _write(path, b"changed")


@pytest.mark.parametrize("tool", ["make_race_data", "make_race_data-jsonl", "make_squad_data", "make_topic_task",
                                  "write_preset_configs", "plot_metrics"])
def test_a_second_run_replaces_the_tools_own_output(tool, tmp_path, monkeypatch, race_entries):
    # the standard library read once for every tool that reads it (the rule is under test, not the data)
    if tool.startswith("make_race_data"):
        monkeypatch.setattr(_module("make_race_data"), "docstring_entries", lambda: race_entries)
    if tool == "make_squad_data":
        monkeypatch.setattr(_module("make_squad_data"), "docstring_entries", lambda: race_entries)
    if tool == "make_topic_task":
        monkeypatch.setattr(_module("make_topic_task"), "make_task", lambda *a: ([("A sentence.", "text")] * 3,
                                                                                 [("Another.", "numbers")]))
    values, written = _case(tool, str(tmp_path))
    ((flag, paths),) = written.items()
    status, _, err = run_tool(tool.split("-")[0], **values)
    assert status == 0, err
    first = _tree(tmp_path)
    kind = {"make_race_data": outputs.DATA_DIRECTORY, "write_preset_configs": outputs.CONFIG,
            "plot_metrics": outputs.PLOT}.get(tool, outputs.GENERATED_DATA)
    assert all(outputs.examine(path, kind).status == "own" for path in paths)
    _tamper(paths)
    status, _, err = run_tool(tool.split("-")[0], **values)
    assert status == 0, err
    again = _tree(tmp_path)
    for tree in (first, again):  # a replaced directory has a new marker (its time); the same kind
        for key in [k for k in tree if k.endswith(outputs.MARKER)]:
            tree[key] = json.loads(tree[key])["kind"]
    if tool == "plot_metrics":  # a PNG need not be byte-identical from one drawing to the next
        assert again.keys() == first.keys() and again[os.path.relpath(paths[0], tmp_path)][:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert again == first


def test_make_sample_corpus_and_train_sentencepiece_replace_their_own(tmp_path, monkeypatch):
    from albert_tf.storage import atomic

    corpus_tool, spm_tool = _module("make_sample_corpus"), _module("train_sentencepiece")
    def fake_corpus(path, size_mb, source):
        atomic.write_text(path, "text\n")
        return 1, 1, 1_000_000

    monkeypatch.setattr(corpus_tool, "write_corpus", fake_corpus)

    def fake_spm(files, prefix, options):
        for suffix in (".model", ".vocab"):
            atomic.write_text(prefix + suffix, "model\n")
        return prefix + ".model"

    monkeypatch.setattr(spm_tool, "train_sentencepiece", fake_spm)
    for tool, module, kind in (("make_sample_corpus", corpus_tool, outputs.GENERATED_DATA),
                               ("train_sentencepiece", spm_tool, outputs.SENTENCEPIECE_MODEL)):
        values, written = _case(tool, str(tmp_path))
        ((flag, paths),) = written.items()
        for _ in range(2):  # new, then its own (changed in between): replaced
            result = run_in_process(module, argv_of(values))
            assert result.returncode == 0, result.stderr
            assert all(outputs.examine(p, kind).status == "own" for p in paths)
            assert all(open(p).read() in ("text\n", "model\n") for p in paths)
            _tamper(paths)


def test_the_demo_reuses_its_own_directory(tmp_path, monkeypatch):
    demo = _module("demo")

    class Started(Exception):
        pass

    def first_step(*args):
        raise Started

    monkeypatch.setattr(demo, "_step", first_step)
    out = tmp_path / "demo_output"
    for _ in range(2):  # new, then its own: reused, with what the first run left there
        with pytest.raises(Started):
            demo.run(Flags(output_dir=str(out), vocab_size=100, pretrain_steps=1, finetune_epochs=1,
                           classifier_steps=1))
        assert outputs.examine(str(out), outputs.DEMO).status == "own"
        _write(out / "sample_corpus.txt", b"from the first run")
    assert (out / "sample_corpus.txt").read_bytes() == b"from the first run"


def test_the_shipped_files_a_tool_regenerates_are_its_own():
    """configs/*.json (write_preset_configs) and notebooks/data/docstring_topics/*.tsv
    (make_topic_task) are committed with their markers: running the tools with their
    defaults replaces them (with the same bytes)."""
    from albert_tf.modeling.config import PRESETS

    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    for name in PRESETS:
        assert outputs.examine(os.path.join(root, "configs", f"{name}.json"), outputs.CONFIG).status == "own", name
    for name in ("train.tsv", "dev.tsv"):
        path = os.path.join(root, "notebooks", "data", "docstring_topics", name)
        assert outputs.examine(path, outputs.GENERATED_DATA).status == "own", name
