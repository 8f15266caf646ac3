"""The built-in sample corpus: real English prose from Python docstrings, fixed in the
repository (`FIXED_FILE`; what it is, how it was made, its sources and licences:
docs/sample_corpus.md). source="installed" reads this interpreter's own docstrings instead.

An entry is one JSON line ({"source", "name", "kind", "sentences"}); a corpus *document* is an
entry with at least DOCUMENT_SENTENCES sentences, written in create_pretraining_data's format.
`write_entries` / `read_entries` keep entries as JSON lines (gzip-compressed for ".gz").
"""

import ast
import collections
import functools
import gzip
import json
import os
import re
import sysconfig

from albert_tf.storage import atomic, files
from albert_tf.storage.json_files import read_json_lines

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "lib2to3", "__pycache__", "turtledemo"}

FIXED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sample_corpus.jsonl.gz")
# The installed packages whose docstrings follow the standard library's in FIXED_FILE
# (docs/sample_corpus.md).
FIXED_PACKAGES = ("ipykernel_launcher", "ipython_pygments_lexers", "nest_asyncio2", "six", "typing_extensions",
                  "IPython", "PIL")
SOURCES = ("fixed", "installed")
DOCUMENT_SENTENCES = 2  # a corpus document: an entry with at least this many sentences

ROOTS = ("stdlib", "purelib")
# Installed only to test Keras' other backends: left out, so the corpus is the same with or without them.
BACKEND_TEST_PACKAGES = frozenset({"functorch", "isympy", "jax", "jaxlib", "jinja2", "mpmath", "networkx", "scipy",
                                   "sympy", "torch", "torchgen"})


def _top_level(name):
    """A file or directory name at a root -> the top-level package it holds ("os.py" -> "os")."""
    return name[:-3] if name.endswith(".py") else name


def _source_files(roots=ROOTS, packages=None):
    """(root, path) of the Python files: the standard library first, then the installed
    packages (pinned by requirements.txt); `packages` (top-level names) keeps only those."""
    paths = sysconfig.get_paths()
    for root_name in roots:
        root = paths[root_name]
        skip = _SKIP_DIRS - {"site-packages"} if root_name == "purelib" else _SKIP_DIRS
        for dirpath, dirnames, filenames in files.walk(root):  # locally os.walk: pruning dirnames works
            dirnames[:] = sorted(d for d in dirnames if d not in skip)
            if root_name == "purelib" and dirpath == root:
                dirnames[:] = [d for d in dirnames if d not in BACKEND_TEST_PACKAGES]
                filenames = [f for f in filenames if _top_level(f) not in BACKEND_TEST_PACKAGES]
            if packages is not None and dirpath == root:
                dirnames[:] = [d for d in dirnames if d in packages]
                filenames = [f for f in filenames if _top_level(f) in packages]
            for name in sorted(filenames):
                if name.endswith(".py"):
                    yield root, os.path.join(dirpath, name)


def _is_prose(paragraph):
    if ">>>" in paragraph or "::" in paragraph or "{" in paragraph:
        return False
    letters = sum(c.isalpha() or c == " " for c in paragraph)
    return len(paragraph) >= 20 and letters / len(paragraph) > 0.85


def docstring_sentences(docstring):
    """A docstring -> its prose sentences (paragraphs of code, tables and lists skipped)."""
    sentences = []
    for paragraph in re.split(r"\n\s*\n", docstring):
        lines = [l.strip() for l in paragraph.strip().splitlines()]
        if not lines or any(l.startswith(("-", "*", "|", "=", "+", "#")) for l in lines):
            continue
        text = " ".join(lines)
        if not _is_prose(text):
            continue
        for sentence in _SENTENCE_END.split(text):
            sentence = sentence.strip()
            if len(sentence.split()) >= 3:
                sentences.append(sentence)
    return sentences


def module_name(relative_path):
    """"asyncio/tasks.py" -> "asyncio.tasks"; a package's "json/__init__.py" -> "json"."""
    name = relative_path[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


_KINDS = {ast.Module: "module", ast.ClassDef: "class", ast.FunctionDef: "function", ast.AsyncFunctionDef: "function"}


def installed_entries(roots=ROOTS, packages=None, min_sentences=DOCUMENT_SENTENCES):
    """Yields the docstring entries of this interpreter's installed files (source="installed").

    Args:
        roots: sysconfig's directories to read, in order: "stdlib", "purelib".
        packages: None (every file), or the top-level names ("asyncio", "os") to read.
        min_sentences: keep docstrings with at least this many prose sentences.
    Yields:
        {"source": "asyncio/tasks.py", "name": the dotted name ("asyncio.tasks.Task.cancel";
        nested in a function: "mod.outer.inner"), "kind": "module" | "class" | "function",
        "sentences": docstring_sentences}, files in sorted path order, definitions breadth first.
    """
    for root, path in _source_files(roots, packages):
        try:
            tree = ast.parse(files.read_text(path), path)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        source = os.path.relpath(path, root).replace(os.sep, "/")
        module = module_name(source)
        for node, qualname in _definitions(tree):
            doc = ast.get_docstring(node)
            if doc:
                sentences = docstring_sentences(doc)
                if len(sentences) >= min_sentences:
                    yield {"source": source, "name": ".".join([module, *qualname]), "kind": _KINDS[type(node)],
                           "sentences": sentences}


def fixed_source_entries():
    """Yields what FIXED_FILE holds, read from this interpreter's files: the standard
    library, then FIXED_PACKAGES, every docstring with a prose sentence."""
    yield from installed_entries(("stdlib",), min_sentences=1)
    yield from installed_entries(("purelib",), set(FIXED_PACKAGES), min_sentences=1)


@functools.lru_cache(maxsize=1)
def _fixed():
    return tuple(read_entries(FIXED_FILE))


def package_of(source):
    """An entry's source -> its top-level package: "asyncio/tasks.py" -> "asyncio", "os.py" -> "os"."""
    return _top_level(source.replace("\\", "/").split("/")[0])


def iter_entries(source="fixed", packages=None, min_sentences=DOCUMENT_SENTENCES):
    """Yields docstring entries: by default the corpus documents of the fixed sample corpus.

    Args:
        source: "fixed" (FIXED_FILE) or "installed" (`installed_entries`); else ValueError.
        packages: None (all), or the top-level names ("asyncio", "os") whose entries to keep.
        min_sentences: keep entries with at least this many sentences (1: every entry).
    Yields:
        {"source", "name", "kind", "sentences"} (installed_entries' form), in corpus order.
    """
    if source == "installed":
        yield from installed_entries(packages=packages, min_sentences=min_sentences)
        return
    if source != "fixed":
        raise ValueError(f"unknown corpus source {source!r}; use one of {', '.join(SOURCES)}.")
    for entry in _fixed():
        if len(entry["sentences"]) >= min_sentences and (packages is None or package_of(entry["source"]) in packages):
            yield dict(entry)


def iter_documents(source="fixed"):
    """Yields the sample corpus's documents: lists of sentences (`iter_entries`' sentences)."""
    for entry in iter_entries(source):
        yield entry["sentences"]


_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


def _definitions(tree):
    """(node, qualified name parts) of the module, classes and functions of `tree` in
    `ast.walk`'s breadth-first order, without walking into expressions (they hold no
    definitions). The module's parts are (); a method's ("Class", "method")."""
    queue = collections.deque([(tree, ())])
    while queue:
        node, parts = queue.popleft()
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            parts = (*parts, node.name)
            yield node, parts
        elif isinstance(node, ast.Module):
            yield node, parts
        queue.extend((child, parts) for child in ast.iter_child_nodes(node) if isinstance(child, _HOLDS_STATEMENTS))


def _block(sentences):
    return "\n".join(sentences) + "\n\n"


def fixed_corpus_bytes():
    """The size in bytes of the whole fixed sample corpus (every document)."""
    return sum(len(_block(doc).encode("utf-8")) for doc in iter_documents())


def check_size(size_mb, source="fixed"):
    """Raises ValueError when the fixed corpus holds less than `size_mb` MB (an installed
    source is as large as it is)."""
    if source == "fixed" and fixed_corpus_bytes() < int(size_mb * 1_000_000):
        raise ValueError(f"--size_mb={size_mb:g}: the fixed sample corpus holds {fixed_corpus_bytes() / 1e6:.2f} MB; "
                         "ask for at most that, or read this interpreter's docstrings (--source=installed).")


def write_corpus(output_file, size_mb, source="fixed"):
    """Writes the first documents of the corpus whose bytes reach `size_mb` * 1e6 (or every
    document of an installed source that has fewer) to `output_file`, atomically. Returns
    (documents, sentences, bytes written); ValueError, nothing written, when a fixed corpus
    holds less."""
    check_size(size_mb, source)
    limit = int(size_mb * 1_000_000)
    documents = sentences = written = 0
    with atomic.open_file(output_file, "w") as f:
        for doc in iter_documents(source):
            block = _block(doc)
            f.write(block)
            written += len(block.encode("utf-8"))
            documents += 1
            sentences += len(doc)
            if written >= limit:
                break
    return documents, sentences, written


def write_entries(path, entries):
    """Writes docstring entries (dicts as `iter_entries` yields) as JSON lines, atomically;
    a path ending in ".gz" is gzip-compressed with no time stamp. Returns how many."""
    lines = [json.dumps(entry, ensure_ascii=False) + "\n" for entry in entries]
    data = "".join(lines).encode("utf-8")
    atomic.write_bytes(path, gzip.compress(data, compresslevel=9, mtime=0) if path.endswith(".gz") else data)
    return len(lines)


def read_entries(path):
    """The entries (dicts, in file order) of a file of `write_entries`; ValueError naming
    the file and line of a line that is not an entry (string "name" and "source", a list of
    at least one string "sentences"), or the file when it holds none."""
    entries = []
    for number, entry in read_json_lines(path, 'a docstring entry {"source", "name", "sentences"}'):
        problem = _entry_problem(entry)
        if problem:
            raise ValueError(f"{path}:{number}: not a docstring entry: {problem}.")
        entries.append(entry)
    if not entries:
        raise ValueError(f"{path}: no docstring entries (an empty file); write one JSON object per line with "
                         "\"source\", \"name\" and \"sentences\".")
    return entries


def _entry_problem(entry):
    """What is wrong with a parsed JSON object as an entry, or None."""
    for key in ("name", "source"):
        if not isinstance(entry.get(key), str):
            return f"{key!r} is missing or not a string"
    sentences = entry.get("sentences")
    if not isinstance(sentences, list) or not sentences or not all(isinstance(s, str) for s in sentences):
        return "'sentences' is missing or not a list of at least one string"
    return None
