"""The examples of README.md and docs/*.md run as written (issue 62).

Python snippets: every ```python block (and the code of a shell command's `python -c`) is run
here or listed in NOT_RUN with the reason, and a block that is neither fails
`test_every_python_snippet_is_run_or_listed` (each snippet is known by a line of code only it
holds). A snippet runs with exec in a fresh namespace (a `python -c` in a process of its own),
in a temporary working directory. One that reads what a long command writes (an export of a
pretrained model, a fine-tuned model's export, a LiteRT file) reads a small stand-in instead:
SUBSTITUTES names, for each path the snippet names, the fixture that builds the stand-in
(tests/conftest.py's session fixtures, or one below made from them, each the way the command
makes its output); only the path inside the snippet's string literals is replaced, the rest
of its text runs unchanged.

Shell commands (the code blocks whose lines start with `python`, `make`, ..., and the inline
`python ...` commands of the prose): every flag is one the command defines (its
define_flags), and every path an input flag names (or a Python snippet names) is written by
an earlier command of the same page (its output flags, and what it writes inside them:
DIRECTORY_WRITES), exists in the repository, is one the page's reader brings (USER_INPUTS:
downloads, with the reason), or is written by a command of the page named in FROM_PAGE
(checked too).
"""

import dataclasses
import fnmatch
import glob
import importlib
import os
import re
import shlex
import sys

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PAGES = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))

# --- what the snippets need ---------------------------------------------------------------------------------

# {the start of a line of code only that snippet holds: {the path it names: (fixture, key of the fixture's
# dict, or None: the fixture's value)}}; "repository": the repository's own file (the README's commands run
# from the repository root).
SUBSTITUTES = {
    # README "Export for TF Hub", docs/export.md: export_tfhub's --export_path=export/base
    'preprocess = hub.KerasLayer("export/base/preprocess")': {"export/base": ("tiny_export", "hub")},
    # README "Fine-tuning", docs/fine_tuning.md: run_classifier's --export_dir=runs/mrpc/export (MRPC: a pair task)
    'model = tf.saved_model.load("runs/mrpc/export")': {"runs/mrpc/export": ("classifier_export", None)},
    # README "On-device", docs/litert.md: export_litert's --output=base.tflite (made by export_litert itself)
    'runner = Interpreter(model_path="base.tflite").get_signature_runner("serving_default")':
        {"base.tflite": ("litert_file", None)},
    # README "Using the model"
    'config = AlbertConfig.from_json_file("configs/albert_base.json")':
        {"configs/albert_base.json": ("repository", "configs/albert_base.json")},
    # docs/squad.md "Serving": run_squad_v1's --export_dir=runs/squad1/export
    'qa = tf.saved_model.load("runs/squad1/export")': {"runs/squad1/export": ("qa_export", None)},
    # docs/backends.md: KERAS_BACKEND=jax python -c "...": a pretrained directory (convert's --output)
    "model = AlbertPretrainer.from_pretrained('converted/albert_base')":
        {"converted/albert_base": ("tiny_export", "pretrained")},
    # docs/convert.md "To keras-hub": convert's --to=keras_hub --output=keras_hub/base (made by convert itself)
    'masked_lm = keras_hub.models.AlbertMaskedLM.from_preset("keras_hub/base")':
        {"keras_hub/base": ("keras_hub_preset", None)},
}

NOT_RUN = {
    # docs/fine_tuning.md "A task of your own": command files, each run (a tiny fine-tuning through it, read from
    # the page) by the test named; here they would add their task to the process's tables
    'TASKS["topics"] = glue_task("topics", labels=("concurrency", "networking", "numbers", "text"),':
        "tests/test_run_classifier.py::test_a_task_of_your_own_is_one_file runs it",
    'DATA_SETS["quiz"] = ArticleSet("quiz", directory="QUIZ", levels=("easy", "hard"))':
        "tests/test_run_race.py::test_a_data_set_in_race_layout_is_one_file runs it",
    # docs/convert.md "To Hugging Face"
    'model = AlbertForPreTraining.from_pretrained("hf/base")':
        "needs transformers (and torch), which requirements.txt does not install; benchmarks/hf_publish_check.py "
        "loads such a conversion with transformers itself, and tests/test_convert_publish.py checks the files",
}

# --- what the commands read and write -----------------------------------------------------------------------

# flags whose value is a path the command reads, and flags whose value is a path it writes
INPUT_FLAGS = {"albert_config_file", "spm_model_file", "init_checkpoint", "checkpoint", "albert_hub_module_handle",
               "input_file", "eval_input_file", "data_dir", "input", "flagfile", "vocab_file", "corpus_file"}
INPUT_FLAGS_OF = {"albert_tf.run_squad_v1": {"train_file", "predict_file"},
                  "albert_tf.run_squad_v2": {"train_file", "predict_file"}}
OUTPUT_FLAGS = {"output_dir", "output_file", "export_path", "export_dir", "model_prefix", "output"}
# flags whose value holds paths that are not the command's files (Beam's own options: its temp_location,
# its setup_file) and is not checked as one
NOT_PATH_FLAGS = {"beam_pipeline_options"}

# what a command writes inside the directory of an output flag (first path component, fnmatch patterns);
# a directory not listed here may be named as a whole only
RUN_FILES = ("albert_config.json", "ckpt-*", "checkpoint", "metrics.jsonl", "eval_results.json", "run_info.json",
             "training_curves.png", "train", "eval")
DIRECTORY_WRITES = {
    ("albert_tf.run_pretraining", "output_dir"): RUN_FILES,
    ("albert_tf.export_tfhub", "export_path"): ("encoder", "preprocess", ".albert_tf_output.json"),
    # convert --output, by --to (albert_tf.convert.api.write_target)
    ("albert_tf.convert", "output", "albert_tf"): ("albert_config.json", "*.weights.h5", "*.json"),
    ("albert_tf.convert", "output", "tf1"): ("albert_config.json", "model.ckpt*"),
}

# {page: {path (or a directory ending in "/"): why the reader has it}}: what a page asks its reader to bring
USER_INPUTS = {
    "README.md": {
        "glue_data/MRPC": "GLUE's MRPC in the GLUE TSV layout (download_glue_data.py; docs/fine_tuning.md)",
        "train-v1.1.json": "the official SQuAD v1.1 training file (README: 'the official SQuAD ones')",
        "dev-v1.1.json": "the official SQuAD v1.1 dev file",
        "data": "--data_dir of run_race: data/RACE/, the official RACE download (README: 'Reads data_dir/RACE/')",
    },
    "docs/fine_tuning.md": {"glue_data/MRPC": "GLUE's MRPC, the GLUE TSV layout (download_glue_data.py)"},
    "docs/convert.md": {
        "albert_base/": "the release's albert_base archive unpacked (the page says what it holds)",
        "hf_models/albert-base-v2": "a Hugging Face model directory (config.json, model.safetensors)",
        "my_preset_dir": "a keras-hub AlbertBackbone preset (save_to_preset)",
        "backbone.weights.h5": "a keras-hub AlbertBackbone's weights",
        "c.json": "its config",
    },
    "docs/squad.md": {
        "albert_base/": "the release's albert_base v2 archive unpacked (the page says what it holds)",
        "train-v1.1.json": "the official SQuAD files (the page says so)",
        "dev-v1.1.json": "the official SQuAD files",
        "train-v2.0.json": "the official SQuAD files",
        "dev-v2.0.json": "the official SQuAD files",
    },
    "docs/race.md": {
        "albert_base/": "the release's albert_base v2 archive unpacked (the page says what it holds)",
        "data": "--data_dir: data/RACE/, the official RACE download (the page says so)",
    },
    "docs/pretraining.md": {
        "gs://bucket/": "the multi-worker example's Cloud Storage bucket (every worker reads the same data "
                        "and --output_dir)",
    },
    "docs/pretraining_data.md": {
        "gs://bucket/": "the Dataflow example's Cloud Storage bucket: the text and the SentencePiece model "
                        "copied there (the page says so)",
    },
}

# {page: {path: the page whose commands write it}}: a page that continues another (checked: that page writes it)
FROM_PAGE = {
    "docs/pretraining.md": {"data/train.tfrecord-*": "docs/pretraining_data.md"},
    "docs/export.md": {"runs/base": "docs/pretraining.md", "data/spm.model": "docs/pretraining_data.md"},
    "docs/fine_tuning.md": {"export/base": "docs/export.md"},
    "docs/backends.md": {"converted/albert_base": "docs/convert.md"},
    "docs/convert.md": {"runs/base": "docs/pretraining.md", "data/spm.model": "docs/pretraining_data.md"},
    "docs/litert.md": {"runs/base": "docs/pretraining.md", "data/spm.model": "docs/pretraining_data.md"},
}

# the repository's own files an example may name (not whatever a checkout holds beside them: data/, runs/, ...)
REPOSITORY_DIRS = ("albert_tf", "benchmarks", "configs", "docs", "notebooks", "tests", "tools")
PLACEHOLDER = re.compile(r"^(PATH|DIR|NAME|\.\.\.)$|[{}]")
PATH_SUFFIXES = (".json", ".model", ".tflite", ".h5", ".txt", ".tsv", ".jsonl", ".flags", ".tfrecord", ".csv")
PROGRAMS = ("python", "make", "bash", "pip", ".venv/bin/python")
COMMAND_LINE = re.compile(r"^(\w+=('[^']*'|\"[^\"]*\"|\S*)\s+)*(" + "|".join(map(re.escape, PROGRAMS)) + r")\s")


# --- reading the pages --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Block:
    page: str
    line: int  # of the first line inside the fence
    lang: str  # the fence's; "python -c" for the code of a shell command's `python -c`
    text: str
    env: dict = None  # a `python -c` command's environment variables


@dataclasses.dataclass
class Command:
    page: str
    line: int
    program: str  # "albert_tf.run_classifier", "tools/make_squad_data.py", "make", "python -c", ...
    flags: list  # [(name, value or None, optional)]
    positional: list
    env: dict = None
    code: str = None  # python -c CODE


def fenced_blocks(page):
    """The page's fenced code blocks (an indented fence too, its indent removed)."""
    lines = open(os.path.join(ROOT, page), encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        opening = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if opening:
            indent, lang, start, body = opening.group(1), opening.group(2), i + 2, []
            i += 1
            while not re.match(r"^\s*```\s*$", lines[i]):
                body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
                i += 1
            blocks.append(Block(page, start, lang, "\n".join(body)))
        i += 1
    return blocks


def is_command_block(block):
    return block.lang in ("", "bash", "sh") and bool(COMMAND_LINE.match(re.sub(r"\\\n", " ", block.text).lstrip()))


def _logical_lines(text, first_line):
    """(line, tokens) of each command in a shell block: continuation lines joined, a quoted
    argument over several lines kept whole, comments dropped."""
    pending, start, line = "", first_line, first_line
    for raw in text.split("\n"):
        if not pending:
            start = line
        pending = f"{pending}\n{raw}" if pending else raw
        line += 1
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        try:
            tokens = shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the argument goes on
            continue
        pending = ""
        if tokens:
            yield start, tokens


def parse_command(page, line, tokens):
    env, code = {}, None
    while tokens and re.match(r"^\w+=", tokens[0]):
        name, _, value = tokens[0].partition("=")
        env[name], tokens = value, tokens[1:]
    program, args = tokens[0], tokens[1:]
    if program in ("python", ".venv/bin/python"):
        if args[0] == "-m":
            program, args = args[1], args[2:]
        elif args[0] == "-c":
            program, code, args = "python -c", args[1], args[2:]
        else:
            program, args = args[0], args[1:]
    flags, positional = [], []
    for arg in args:
        optional = arg.startswith("[") and arg.endswith("]")
        arg = arg.strip("[]")
        if arg.startswith("--"):
            name, _, value = arg[2:].partition("=")
            flags.append((name, value if "=" in arg else None, optional))
        else:
            positional.append(arg)
    return Command(page, line, program, flags, positional, env, code)


def page_commands(page):
    """The page's commands in order: its shell blocks' and the inline `python ...` of its prose."""
    commands = []
    for block in fenced_blocks(page):
        if is_command_block(block):
            commands += [parse_command(page, line, tokens) for line, tokens in _logical_lines(block.text, block.line)]
    return commands


def inline_commands(page):
    text = open(os.path.join(ROOT, page), encoding="utf-8").read()
    text = re.sub(r"^\s*```.*?^\s*```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S | re.M)
    found = []
    for match in re.finditer(r"`([^`]+)`", text):
        code = " ".join(match.group(1).split())
        if re.match(r"^(python|\.venv/bin/python) ", code):
            found.append(parse_command(page, text.count("\n", 0, match.start()) + 1, shlex.split(code)))
    return found


def page_snippets(page):
    """The page's Python: its ```python blocks and the code of its `python -c` commands, in order."""
    blocks = [block for block in fenced_blocks(page) if block.lang == "python"]
    blocks += [Block(page, c.line, "python -c", c.code, c.env) for c in page_commands(page) if c.code is not None]
    return sorted(blocks, key=lambda block: block.line)


def python_snippets():
    return [block for page in PAGES for block in page_snippets(page)]


def _marker_of(block):
    """The SUBSTITUTES or NOT_RUN key that begins a line of the snippet (None: none; a list: several)."""
    lines = [line.strip() for line in block.text.split("\n")]
    keys = [key for key in [*SUBSTITUTES, *NOT_RUN] if any(line.startswith(key) for line in lines)]
    return keys[0] if len(keys) == 1 else (keys or None)


def _is_run(block):
    key = _marker_of(block)
    return isinstance(key, str) and key in SUBSTITUTES


# --- the inventory ------------------------------------------------------------------------------------------


def test_every_python_snippet_is_run_or_listed():
    snippets = python_snippets()
    assert snippets, "no ```python block found: the parser no longer reads the pages"
    problems, used = [], set()
    for block in snippets:
        key = _marker_of(block)
        if not isinstance(key, str):
            problems.append(f"{block.page}:{block.line}: " + (
                "a snippet neither run (SUBSTITUTES) nor listed as not run (NOT_RUN): add it to one"
                if key is None else f"matches several entries {key}"))
        else:
            used.add(key)
    problems += [f"no snippet holds the line {key!r} any more: remove or update its entry"
                 for key in [*SUBSTITUTES, *NOT_RUN] if key not in used]
    for page in PAGES:
        for block in fenced_blocks(page):
            if block.lang not in ("", "python", "bash", "sh"):
                problems.append(f"{page}:{block.line}: fence language {block.lang!r}: this test reads python, "
                                "bash/sh and untagged blocks")
            if block.lang != "python" and re.match(r"^(import|from) \w", block.text.lstrip()):
                problems.append(f"{page}:{block.line}: Python without ```python: tag it, so that it runs here")
    assert not problems, "\n".join(problems)


# --- running the snippets -----------------------------------------------------------------------------------


def _substituted(block, stand_ins):
    """The snippet's text with each named path replaced inside its string literals."""
    text = block.text
    for path, stand_in in stand_ins.items():
        pattern = re.compile(r"([\"'])" + re.escape(path) + r"(?=[\"'/])")
        text, count = pattern.subn(lambda m: m.group(1) + stand_in.replace("\\", "/"), text)
        assert count, f"{block.page}:{block.line} names no {path!r} (SUBSTITUTES is stale)"
    return text


@pytest.mark.parametrize("block", [pytest.param(b, marks=[pytest.mark.real_process] if b.env is not None else [])
                                   for b in python_snippets() if _is_run(b)],
                         ids=lambda b: f"{b.page}:{b.line}")
def test_snippet_runs_as_written(block, request, tmp_path, monkeypatch):
    """A ```python block runs in this process; a shell command's `python -c` in a process of
    its own, with the command's environment variables (KERAS_BACKEND=jax: chosen at start-up)."""
    stand_ins = {}
    for path, (fixture, key) in SUBSTITUTES[_marker_of(block)].items():
        if fixture == "repository":
            stand_ins[path] = os.path.join(ROOT, key)
        else:
            value = request.getfixturevalue(fixture)
            stand_ins[path] = value[key] if key else value
    text = _substituted(block, stand_ins)
    if block.env is not None:
        import subprocess

        path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)  # this checkout's albert_tf
        env = dict(os.environ, **block.env, PYTHONPATH=path)
        if env.get("KERAS_BACKEND") == "jax":  # the JAX worker's XLA flags: jaxlib 0.12 stops on TensorFlow's
            from test_backends import XLA_FLAGS

            env["XLA_FLAGS"] = XLA_FLAGS
        result = subprocess.run([sys.executable, "-c", text], env=env, cwd=str(tmp_path), capture_output=True,
                                text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        return
    code = compile(text, f"{block.page}:{block.line}", "exec")
    monkeypatch.chdir(tmp_path)
    exec(code, {"__name__": "__doc_snippet__"})


@pytest.fixture(scope="module")
def classifier_export(spm_model, tmp_path_factory):
    """A tiny random pair classifier (2 labels, as MRPC), exported as run_classifier --export_dir does."""
    import keras
    import numpy as np

    from albert_tf import AlbertConfig, AlbertEncoder
    from albert_tf.data.bucket_widths import bucket_widths
    from albert_tf.tasks.classification.export import export_classifier
    from albert_tf.export.preprocess_module import PreprocessModule
    from albert_tf.modeling.classifier import AlbertClassifier

    keras.utils.set_random_seed(3)
    config = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000)
    classifier = AlbertClassifier(AlbertEncoder(config), num_classes=2)
    ones = np.ones((1, 8), "int32")
    classifier({"input_word_ids": ones * 5, "input_mask": ones, "input_type_ids": ones * 0}, training=False)
    seq = 32
    return export_classifier(PreprocessModule(spm_model, seq_length=seq), classifier,
                             str(tmp_path_factory.mktemp("doc_classifier") / "export"), seq, labels=("0", "1"),
                             pair=True, task_name="mrpc", widths=bucket_widths(seq))


@pytest.fixture(scope="module")
def qa_export(spm_model, tmp_path_factory):
    """A tiny random SQuAD v1 model, exported as run_squad_v1 --export_dir does."""
    import keras
    import numpy as np

    from albert_tf import AlbertConfig
    from albert_tf.data.bucket_widths import bucket_widths
    from albert_tf.tasks.squad.export import export_question_answering
    from albert_tf.modeling.question_answering import AlbertForQuestionAnswering

    keras.utils.set_random_seed(3)
    model = AlbertForQuestionAnswering(AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000), version="v1")
    ones = np.ones((1, 8), "int32")
    model({"input_word_ids": ones * 5, "input_mask": ones, "input_type_ids": ones * 0, "p_mask": ones * 0},
          training=False)
    seq = 64
    return export_question_answering(model, spm_model, str(tmp_path_factory.mktemp("doc_qa") / "export"),
                                     max_seq_length=seq, doc_stride=24, max_query_length=16, n_best_size=5,
                                     max_answer_length=10, widths=bucket_widths(seq))


@pytest.fixture(scope="module")
def litert_file(tiny_export, tmp_path_factory):
    """The README's export_litert command on the tiny pretrained model: its --output=base.tflite."""
    from albert_tf import export_litert
    from conftest import run_in_process

    output = str(tmp_path_factory.mktemp("doc_litert") / "base.tflite")
    result = run_in_process(export_litert, [f"--init_checkpoint={tiny_export['pretrained']}",
                                                f"--spm_model_file={tiny_export['spm']}", f"--output={output}",
                                                "--quantization=dynamic_int8"])
    assert result.returncode == 0, result.stderr
    return output


@pytest.fixture(scope="module")
def keras_hub_preset(tiny_export, tmp_path_factory):
    """docs/convert.md's --to=keras_hub command on the tiny pretrained model: its --output."""
    from albert_tf.convert.__main__ import main
    from conftest import run_in_process

    output = str(tmp_path_factory.mktemp("doc_keras_hub") / "base")
    result = run_in_process(main, ["--from=albert_tf", "--to=keras_hub", f"--input={tiny_export['pretrained']}",
                                  f"--spm_model_file={tiny_export['spm']}", f"--output={output}"])
    assert result.returncode == 0, result.stderr
    return output


# --- the commands' flags ------------------------------------------------------------------------------------


def _defined_flags(program):
    """The flag names the program defines (its define_flags into a fresh FlagValues)."""
    from absl import flags

    if program.startswith("tools/"):  # the package tools
        module = importlib.import_module(program[: -len(".py")].replace("/", "."))
    elif program.startswith("benchmarks/"):  # benchmarks/ is on sys.path (pytest.ini), as when one runs
        module = importlib.import_module(os.path.basename(program)[: -len(".py")])
    else:
        module = importlib.import_module(program + (".__main__" if program == "albert_tf.convert" else ""))
    values = flags.FlagValues()
    module.define_flags(values)
    return set(values)


def _all_commands():
    return [c for page in PAGES for c in page_commands(page) + inline_commands(page)]


def test_every_flag_of_every_command_exists():
    commands = _all_commands()
    assert any(c.program == "albert_tf.run_classifier" for c in commands), "the parser found no command"
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        targets = set(re.findall(r"^([\w-]+):", f.read(), flags=re.M))
    problems, defined = [], {}
    for c in commands:
        where = f"{c.page}:{c.line} {c.program}"
        if c.program == "make":
            problems += [f"{where}: no Makefile target {t!r}" for t in c.positional if t not in targets]
            continue
        if c.program in ("bash", "pip", "python -c", "pytest"):
            continue  # bash SCRIPT (its file is checked below), pip, python -c, pytest: no flags of ours
        if c.positional:
            problems.append(f"{where}: positional arguments {c.positional}")
        if c.program not in defined:
            defined[c.program] = _defined_flags(c.program)
        for name, _, _ in c.flags:
            known = defined[c.program]
            if name != "flagfile" and name not in known and not (name.startswith("no") and name[2:] in known):
                problems.append(f"{where}: --{name} is not one of its flags")
    for c in commands:
        if c.program == "bash" and not os.path.isfile(os.path.join(ROOT, c.positional[0])):
            problems.append(f"{c.page}:{c.line}: bash {c.positional[0]}: no such file")
    assert not problems, "\n".join(problems)


# --- the paths the examples name ----------------------------------------------------------------------------


@dataclasses.dataclass
class Written:
    path: str  # a file, a directory, or a glob's name
    inside: tuple = None  # a directory's contents that may be named (fnmatch of the first component); None: none


def _writes(c):
    """What command `c` writes: [Written]."""
    from albert_tf.data.writer import output_paths

    values = {name: value for name, value, _ in c.flags}
    written = []
    for name, value, _ in c.flags:
        if name not in OUTPUT_FLAGS or value is None or PLACEHOLDER.search(value):
            continue
        if c.program.endswith("create_pretraining_data.py") and name == "output_file":
            shards = int(values.get("num_output_shards", 1))
            written += [Written(p) for p in output_paths(value, shards)]
        elif name == "model_prefix":
            written += [Written(value + suffix) for suffix in (".model", ".vocab")]
        elif c.program == "albert_tf.export_litert" and name == "output":
            stem = value[: -len(".tflite")]
            written += [Written(p) for p in (value, stem + ".spm.model", stem + ".json")]
        elif c.program == "albert_tf.convert":
            written.append(Written(value, DIRECTORY_WRITES.get((c.program, name, values.get("to", "albert_tf")))))
        else:
            written.append(Written(value, DIRECTORY_WRITES.get((c.program, name))))
    return written


def _is_written(path, written):
    """Whether `path` (a file, directory or glob) is what one of `written` names or holds."""
    for w in written:
        if path == w.path or fnmatch.fnmatchcase(w.path, path):
            return True
        if path.startswith(w.path.rstrip("/") + "/") and w.inside is not None:
            first = path[len(w.path.rstrip("/")) + 1:].split("/")[0]
            if any(fnmatch.fnmatchcase(first, pattern) for pattern in w.inside):
                return True
    return False


def _read_paths(c):
    """The paths command `c` reads: [(flag, path)]."""
    inputs = INPUT_FLAGS | INPUT_FLAGS_OF.get(c.program, set())
    read = []
    for name, value, _ in c.flags:
        if value is None or PLACEHOLDER.search(value):
            continue
        if name in inputs:
            read.append((f"--{name}", value))
        elif name not in OUTPUT_FLAGS | NOT_PATH_FLAGS and ("/" in value or value.endswith(PATH_SUFFIXES)):
            read.append((f"--{name} (not in INPUT_FLAGS or OUTPUT_FLAGS: classify it)", None))
    return read


def _snippet_paths(block):
    """The string literals of a Python snippet that name files or directories."""
    import ast

    found = []
    for node in ast.walk(ast.parse(block.text)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and " " not in node.value:
            if "/" in node.value or node.value.endswith(PATH_SUFFIXES):
                found.append(node.value)
    return found


def _page_writes(page):
    return [w for c in page_commands(page) for w in _writes(c)]


def _in_repository(path):
    return path.split("/")[0] in REPOSITORY_DIRS and bool(glob.glob(os.path.join(ROOT, path)))


def _named_elsewhere(page, path):
    """The USER_INPUTS or FROM_PAGE entry that says where the page's reader gets `path`, or None."""
    for brought in USER_INPUTS.get(page, {}):
        if path == brought.rstrip("/") or (brought.endswith("/") and path.startswith(brought)):
            return ("USER_INPUTS", brought)
    for key, other in FROM_PAGE.get(page, {}).items():
        if path == key or path.startswith(key + "/"):
            assert _is_written(path, _page_writes(other)), f"{page}: FROM_PAGE says {other} writes {path}; it does not"
            return ("FROM_PAGE", key)
    return None


def test_every_path_an_example_reads_is_written_before_or_brought():
    """The file-path flags of each command, and the paths each Python snippet names, are
    written by an earlier command of the page, are the repository's, or are named in
    USER_INPUTS / FROM_PAGE."""
    problems, used = [], set()
    for page in PAGES:
        written = []
        items = [(c.line, c) for c in page_commands(page)]
        items += [(b.line, b) for b in page_snippets(page)]
        for line, item in sorted(items, key=lambda pair: pair[0]):
            if isinstance(item, Block):
                reads = [("a string", p) for p in _snippet_paths(item)]
            else:
                reads = _read_paths(item)
            for flag, path in reads:
                if path is None:
                    problems.append(f"{page}:{line}: {flag}")
                    continue
                if _is_written(path, written) or _in_repository(path):
                    continue
                entry = _named_elsewhere(page, path)
                if entry is None:
                    problems.append(f"{page}:{line}: {flag} {path}: no earlier command of the page writes it and "
                                    "it is not the repository's (or list it in USER_INPUTS / FROM_PAGE, with why)")
                else:
                    used.add((page, *entry))
            if isinstance(item, Command):
                written += _writes(item)
    for table, entries in (("USER_INPUTS", USER_INPUTS), ("FROM_PAGE", FROM_PAGE)):
        problems += [f"{table}[{page!r}][{key!r}]: no example of the page reads it any more: remove it"
                     for page in entries for key in entries[page] if (page, table, key) not in used]
    assert not problems, "\n".join(problems)
