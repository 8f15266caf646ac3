"""The sample corpus and SentencePiece tools (the demo's first two steps)."""

import ast
import importlib
import json
import os
import re
import sys
import sysconfig

import pytest

from albert_tf.data import sample_corpus
from albert_tf.data.sample_corpus import write_corpus
from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece
from albert_tf.data.tokenization import SentencePieceTokenizer, preprocess_text
from albert_tf.data.vocab import SpecialTokens

from conftest import run_in_process

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _tool(name, *args):
    """`python tools/NAME.py ARGS` in this process (the tool's main(argv))."""
    return run_in_process(importlib.import_module(f"tools.{name}"), args)


def test_sample_corpus_is_prose_deterministic_and_large_enough(sample_corpus, tmp_path):
    again = str(tmp_path / "again.txt")
    documents, sentences, written = write_corpus(again, 1.2)
    assert open(sample_corpus, "rb").read() == open(again, "rb").read()
    assert os.path.getsize(sample_corpus) == written >= 1_200_000
    text = open(sample_corpus, encoding="utf-8").read()
    assert len([d for d in text.split("\n\n") if d.strip()]) == documents > 1000
    lines = [l for l in text.splitlines() if l]
    assert len(lines) == sentences
    assert sum(len(l.split()) >= 3 for l in lines) == len(lines)
    assert ">>>" not in text
    assert os.listdir(tmp_path) == ["again.txt"]  # no temporary left


# The fixed sample corpus (docs/sample_corpus.md): sha256 of the committed entries, and of the
# text the corpus tool writes from them, as CPython 3.11.7's own files gave them when frozen
# (the "installed" reading): the same bytes on every interpreter.
FIXED_SHA256 = "ce26485a2e2ce9a48aced20203baa8eec8592b5c4e35e7ece8ef7973c808f06e"
DEMO_CORPUS = (1_500_159, 4593, 17335, "4471b891adb66a373abbcc30a8e0015cba24ed5a3aeb902713c0c2c4ac1400f3")  # 1.5 MB
TEST_CORPUS = (1_200_158, "7978d4152d16bda2b66066bf20eec08dea2df8906586097e8ff2e129f63f4f2f")  # the suite's 1.2 MB


def _sha256(data):
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_the_fixed_corpus_is_the_committed_file_on_every_interpreter(tmp_path):
    with open(sample_corpus.FIXED_FILE, "rb") as f:
        assert _sha256(f.read()) == FIXED_SHA256
    entries = list(sample_corpus.iter_entries(min_sentences=1))
    assert len(entries) == 9845 and sum(len(e["sentences"]) >= 2 for e in entries) == 4633
    assert sample_corpus.fixed_corpus_bytes() == 1_510_137
    packages = {sample_corpus.package_of(e["source"]) for e in entries}
    assert set(sample_corpus.FIXED_PACKAGES) <= packages and not packages & sample_corpus.BACKEND_TEST_PACKAGES
    # the demo's first step, with no other flag
    out = tmp_path / "corpus.txt"
    result = _tool("make_sample_corpus", f"--output_file={out}")
    size, documents, sentences, digest = DEMO_CORPUS
    assert result.returncode == 0, result.stderr[-1500:]
    assert result.stdout.strip() == f"wrote {out}: {documents} documents, {sentences} sentences, 1.50 MB"
    assert len(out.read_bytes()) == size and _sha256(out.read_bytes()) == digest
    # more than it holds: refused before any work, naming the flag and the way out
    bad = _tool("make_sample_corpus", f"--output_file={tmp_path}/big.txt", "--size_mb=2")
    assert bad.returncode == 2 and not (tmp_path / "big.txt").exists()
    assert bad.stderr.strip().splitlines()[-1] == (
        "make_sample_corpus: error: --size_mb=2: the fixed sample corpus holds 1.51 MB; ask for at most that, "
        "or read this interpreter's docstrings (--source=installed).")
    # its entries, as a corpus input of the task tools
    listed = tmp_path / "entries.jsonl"
    assert _tool("make_sample_corpus", f"--output_file={listed}", "--output_format=entries").returncode == 0
    assert sample_corpus.read_entries(str(listed)) == entries


def test_the_suites_corpus_is_the_fixed_prefix(sample_corpus):
    data = open(sample_corpus, "rb").read()
    assert (len(data), _sha256(data)) == TEST_CORPUS


FROZEN_ON = {"python": "3.11.7", "ipython": "9.18.1", "pillow": "13.0.0", "typing_extensions": "4.16.0",
             "six": "1.17.0", "ipykernel": "7.4.0", "ipython_pygments_lexers": "1.1.1", "nest_asyncio2": "1.7.4"}


def test_the_freeze_recipe_gives_the_committed_file_where_it_was_made(tmp_path):
    """docs/sample_corpus.md's command, on the interpreter and packages it was made with,
    writes FIXED_FILE byte for byte (elsewhere the installed files differ: the point of it)."""
    import importlib.metadata
    import platform

    here = {"python": platform.python_version()}
    for name in FROZEN_ON.keys() - {"python"}:
        try:
            here[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            here[name] = None
    if here != FROZEN_ON:
        pytest.skip(f"the fixed corpus was made on {FROZEN_ON}; this environment has {here}")
    out = tmp_path / "sample_corpus.jsonl.gz"
    result = _tool("make_sample_corpus", "--source=installed", "--output_format=entries",
                   f"--output_file={out}")
    assert result.returncode == 0, result.stderr[-1500:]
    assert _sha256(out.read_bytes()) == FIXED_SHA256


def test_the_backend_test_packages_stay_out_of_the_corpus():
    """jax, torch and their dependencies are installed only for tests/test_backends.py: reading
    them would change the corpus (and every SentencePiece model, data set and learning test made
    from it) with the test environment. jax and torch are installed here (so the check means
    something), and the walk yields no file of any of them."""
    import sysconfig

    purelib = sysconfig.get_paths()["purelib"]
    installed = {sample_corpus._top_level(n) for n in os.listdir(purelib)} & sample_corpus.BACKEND_TEST_PACKAGES
    from test_backends import TORCH_BELOW

    # the suite's environment has them (requirements*.txt; torch below requirements-torch.txt's marker)
    expected = {"jax", "torch"} if sys.version_info[:2] < TORCH_BELOW else {"jax"}
    assert expected <= installed
    tops = {os.path.relpath(path, root).split(os.sep)[0] for root, path in sample_corpus._source_files(("purelib",))}
    assert not {sample_corpus._top_level(t) for t in tops} & sample_corpus.BACKEND_TEST_PACKAGES


def _first_documents(corpus, size_mb):
    """What write_corpus(path, size_mb) writes, read off a larger corpus it wrote (the
    session's 1.2 MB one): its documents up to the first that reaches size_mb MB ->
    (bytes, documents, sentences)."""
    text = open(corpus, encoding="utf-8").read()
    assert text.endswith("\n\n")
    out, documents, sentences = b"", 0, 0
    for doc in text[:-2].split("\n\n"):
        out += (doc + "\n\n").encode("utf-8")
        documents += 1
        sentences += len(doc.split("\n"))
        if len(out) >= size_mb * 1_000_000:
            return out, documents, sentences
    raise AssertionError(f"{corpus} holds less than {size_mb} MB")


def test_sample_corpus_tool(tmp_path, sample_corpus):
    out = tmp_path / "c.txt"
    result = _tool("make_sample_corpus", f"--output_file={out}", "--size_mb=1")
    assert result.returncode == 0, result.stderr[-1500:]
    # the library's corpus (write_corpus at 1.2 MB, the session's) cut where 1 MB stops it
    expected, documents, sentences = _first_documents(sample_corpus, 1)
    assert len(expected) < os.path.getsize(sample_corpus)
    assert result.stdout.strip() == \
        f"wrote {out}: {documents} documents, {sentences} sentences, {len(expected) / 1e6:.2f} MB"
    assert out.read_bytes() == expected
    bad = _tool("make_sample_corpus", f"--output_file={tmp_path}/small.txt", "--size_mb=0.5")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == "make_sample_corpus: error: --size_mb must be at least 1, got 0.5."
    assert not (tmp_path / "small.txt").exists()


# ------------------------------------------------------------ the corpus before iter_entries, frozen

_OLD_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "lib2to3", "__pycache__", "turtledemo"}


def _old_source_files(roots=("stdlib", "purelib"), keep=None):
    """sample_corpus._source_files as it was before iter_entries (with `keep`: only the
    files under these top-level names of each root, for speed)."""
    paths = sysconfig.get_paths()
    for name in roots:
        root, skip = paths[name], _OLD_SKIP_DIRS - ({"site-packages"} if name == "purelib" else set())
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in skip)
            for filename in sorted(filenames):
                path = os.path.join(dirpath, filename)
                top = os.path.relpath(path, root).split(os.sep)[0]
                if filename.endswith(".py") and (keep is None or re.sub(r"\.py$", "", top) in keep):
                    yield path


def _old_documents(**kwargs):
    """sample_corpus.iter_documents as it was (ast.walk's order)."""
    for path in _old_source_files(**kwargs):
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    sentences = sample_corpus.docstring_sentences(doc)
                    if len(sentences) >= 2:
                        yield sentences


def test_write_corpus_bytes_are_those_of_the_old_traversal(tmp_path):
    """iter_documents through iter_entries: the corpus file is byte-identical."""
    documents, sentences, written = write_corpus(str(tmp_path / "new.txt"), 0.3, "installed")
    old = b""
    for doc in _old_documents():
        old += ("\n".join(doc) + "\n\n").encode("utf-8")
        if len(old) >= 300_000:
            break
    assert (tmp_path / "new.txt").read_bytes() == old and written == len(old)
    # and further on, in the installed packages (purelib), file by file
    kept = {"absl", "filelock"}
    purelib = [e["sentences"] for e in sample_corpus.installed_entries(("purelib",), kept)]
    assert len(purelib) > 50 and purelib == list(_old_documents(roots=("purelib",), keep=kept))


def _definition(tree, parts):
    """The node named by `parts` (class and function names) in a module's tree, searched
    through every statement block (a definition may sit in an `if`)."""
    node = tree
    for part in parts:
        node = next(n for n in ast.walk(node) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                    and n.name == part)
    return node


def test_iter_entries_name_their_documents():
    packages = {"json", "os", "asyncio"}
    entries = list(sample_corpus.installed_entries(("stdlib",), packages))
    assert [e["sentences"] for e in entries] == list(_old_documents(roots=("stdlib",), keep=packages))
    stdlib = sysconfig.get_paths()["stdlib"]
    by_name = {e["name"]: e for e in entries}
    assert by_name["os"]["source"] == "os.py" and by_name["os"]["kind"] == "module"
    assert by_name["json"]["source"] == "json/__init__.py" and by_name["json"]["kind"] == "module"
    assert by_name["json.encoder.JSONEncoder"]["kind"] == "class"
    assert by_name["asyncio.tasks.Task.cancel"] == {
        "source": "asyncio/tasks.py", "name": "asyncio.tasks.Task.cancel", "kind": "function",
        "sentences": by_name["asyncio.tasks.Task.cancel"]["sentences"]}
    trees = {}
    for e in entries:
        assert set(e) == {"source", "name", "kind", "sentences"}
        source = e["source"]
        assert "\\" not in source and source.split("/")[0].removesuffix(".py") in packages
        module = source[:-3].replace("/", ".").removesuffix(".__init__")
        assert e["name"] == module or e["name"].startswith(module + ".")
        if source not in trees:
            with open(os.path.join(stdlib, source), encoding="utf-8") as f:
                trees[source] = ast.parse(f.read())
        parts = e["name"][len(module) + 1:].split(".") if e["name"] != module else []
        node = _definition(trees[source], parts)
        assert e["kind"] == {ast.Module: "module", ast.ClassDef: "class"}.get(type(node), "function")
        assert e["sentences"] == sample_corpus.docstring_sentences(ast.get_docstring(node))


def test_entries_round_trip_and_bad_lines_are_named(tmp_path):
    entries = list(sample_corpus.installed_entries(("stdlib",), {"textwrap"}))
    path = tmp_path / "entries.jsonl"
    assert sample_corpus.write_entries(str(path), entries) == len(entries) > 3
    assert os.listdir(tmp_path) == ["entries.jsonl"]  # no temporary left
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(entries) and json.loads(lines[0]) == entries[0]
    assert sample_corpus.read_entries(str(path)) == entries
    path.write_text(lines[0] + "\n\n" + lines[1] + "\n", encoding="utf-8")  # blank lines are skipped
    assert sample_corpus.read_entries(str(path)) == entries[:2]
    good = json.dumps({"source": "a.py", "name": "a.f", "sentences": ["One.", "Two."]})
    ENTRY = 'expected a docstring entry {"source", "name", "sentences"}: fix or replace the file.'  # storage/json_files
    for line, problem in (
            ("{broken", ":2: not valid JSON (Expecting property name enclosed in double quotes): {broken; "
                        f"{ENTRY}"),
            ('["a.py"]', f": a JSON array, not an object; {ENTRY}"),
            ('{"source": "a.py", "sentences": ["One."]}',
             ": not a docstring entry: 'name' is missing or not a string."),
            ('{"name": "a.f", "source": 3, "sentences": ["One."]}',
             ": not a docstring entry: 'source' is missing or not a string."),
            ('{"name": "a.f", "source": "a.py", "sentences": []}',
             ": not a docstring entry: 'sentences' is missing or not a list of at least one string."),
            ('{"name": "a.f", "source": "a.py", "sentences": ["One.", 2]}',
             ": not a docstring entry: 'sentences' is missing or not a list of at least one string.")):
        path.write_text(good + "\n" + line + "\n", encoding="utf-8")
        with pytest.raises(ValueError) as error:
            sample_corpus.read_entries(str(path))
        assert str(error.value) == f"{path}:2{problem}"
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{path}: no docstring entries (an empty file)")):
        sample_corpus.read_entries(str(path))


def test_spm_model_follows_the_release_recipe(spm_model):
    from albert_tf.data.spm_model_proto import ModelProto

    tok = SentencePieceTokenizer(spm_model)
    # the recipe's ids (pad_id=0, unk_id=1, control symbols in order), read from the model
    assert SpecialTokens.from_sentencepiece(spm_model) == SpecialTokens(
        pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4, first_ordinary_id=5, vocab_size=3000)
    assert tok.vocab_size == 3000
    for symbol in ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"):
        assert tok.sp.PieceToId(symbol) != tok.unk_id, symbol
    pieces = tok.tokenize("The Café returns a VALUE.")
    assert pieces[0] == "\u2581the" and all(p == p.lower() for p in pieces)
    assert tok.is_word_start(tok.sp.PieceToId("\u2581the"))
    proto = ModelProto()
    proto.ParseFromString(open(spm_model, "rb").read())
    assert list(proto.trainer_spec.input) == [] and proto.trainer_spec.model_prefix == ""  # no machine paths


def test_spm_tool_writes_the_libraries_model(sample_corpus, spm_model, tmp_path):
    result = _tool("train_sentencepiece", f"--input_file={sample_corpus}", f"--model_prefix={tmp_path}/tool",
                   "--vocab_size=3000", "--num_threads=1")
    assert result.returncode == 0, result.stderr[-1500:]
    assert result.stdout.strip() == f"wrote {tmp_path}/tool.model (3000 pieces)"
    assert open(f"{tmp_path}/tool.model", "rb").read() == open(spm_model, "rb").read()
    assert sorted(os.listdir(tmp_path)) == [".tool.model.albert_tf_output.json", ".tool.vocab.albert_tf_output.json",
                                            "tool.model", "tool.vocab"]  # scratch files removed; the markers
    assert open(f"{tmp_path}/tool.vocab", encoding="utf-8").readline() == "<pad>\t0\n"


def test_preprocess_text_strips_accents_and_lowercases():
    # `` and '' stay as they are: the release's preprocess_text does not map them to " (XLNet's does)
    assert preprocess_text("  Crème   Brûlée ``x'' ") == "creme brulee ``x''"
    assert preprocess_text("Crème", lower=False) == "Creme"


def test_spm_tool_errors_are_clear(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    cases = [
        ([f"--input_file={tmp_path}/nothing*.txt"], f"--input_file: '{tmp_path}/nothing*.txt' matches no file."),
        ([f"--input_file={tmp_path}"], f"--input_file: '{tmp_path}' is a directory; name the files in it "
                                       f"(e.g. {tmp_path}/*)."),
        ([f"--input_file={empty}"], f"--input_file: {empty} hold no text."),
        ([], "--input_file and --model_prefix are required."),
    ]
    for args, message in cases:
        result = _tool("train_sentencepiece", *args, f"--model_prefix={tmp_path}/m")
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip().splitlines()[-1] == f"train_sentencepiece: error: {message}"
    assert sorted(os.listdir(tmp_path)) == ["empty.txt"]
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("a b c\n")
    with pytest.raises(ValueError, match="SentencePiece training failed: .* lower --vocab_size"):
        train_sentencepiece([str(tiny)], str(tmp_path / "tiny"), SentencePieceOptions(vocab_size=5000))
    assert sorted(os.listdir(tmp_path)) == ["empty.txt", "tiny.txt"]


def test_tokenizer_rejects_models_without_special_pieces(tmp_path, sample_corpus):
    import sentencepiece as spm

    excerpt = tmp_path / "excerpt.txt"  # a fifth of the corpus: plenty for 500 pieces, a fifth of the time
    with open(sample_corpus, encoding="utf-8") as f:
        excerpt.write_text(f.read(240_000), encoding="utf-8")
    spm.SentencePieceTrainer.Train(input=str(excerpt), model_prefix=str(tmp_path / "plain"),
                                   vocab_size=500, minloglevel=2)
    path = str(tmp_path / "plain.model")
    with pytest.raises(ValueError) as e:
        SentencePieceTokenizer(path)
    assert str(e.value) == (f"spm_model_file {path!r} lacks the pieces <pad>, [CLS], [SEP], [MASK]; train it with "
                            "tools/train_sentencepiece.py (pad <pad>, unk <unk>, control symbols [CLS],[SEP],[MASK]).")
    with pytest.raises(ValueError) as e:
        SentencePieceTokenizer(tmp_path / "missing.model")
    assert str(e.value) == f"spm_model_file {str(tmp_path / 'missing.model')!r} does not exist or is not a file."
