"""The built-in sample corpus: real English prose from installed Python docstrings.

One sentence per line, a blank line between documents (one document per docstring), the
format of create_pretraining_data. Sources are the standard library, then the installed
packages (less BACKEND_TEST_PACKAGES), read with `ast` (nothing is imported) in sorted path
order, so the output is byte-identical for a given Python and requirements.txt. Available offline on any
machine with Python 3.11. tools/make_sample_corpus.py writes it; tools/make_topic_task.py
labels its sentences (`docstring_sentences`).

`iter_entries` yields the same documents with where they come from (file, dotted name,
kind); `write_entries` / `read_entries` keep them as JSON lines, one entry a line:

    {"source": "asyncio/tasks.py", "name": "asyncio.tasks.Task.cancel", "kind": "function",
     "sentences": ["Request that this task cancel itself.", "..."]}

the *corpus input* of tools/make_topic_task.py, make_squad_data.py and make_race_data.py
(--corpus_file): e.g. the held-out documents of a corpus.
"""

import ast
import collections
import json
import os
import re
import sysconfig

from albert_tf.storage import atomic

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "lib2to3", "__pycache__", "turtledemo"}


ROOTS = ("stdlib", "purelib")
# Installed only to test the model on Keras' other backends (requirements.txt's jax group,
# requirements-torch.txt) and left out of the corpus, so that it stays what the product's own
# packages make it: the same text, the same SentencePiece model and data, with or without them.
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
        for dirpath, dirnames, filenames in os.walk(root):
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


def iter_entries(roots=ROOTS, packages=None):
    """Yields the docstring documents with at least two prose sentences, with where they
    come from: the documents of `iter_documents`, in its order.

    Args:
        roots: which of sysconfig's directories to read, in order: "stdlib", "purelib"
            (the default: both, as the sample corpus).
        packages: None (every file), or top-level names ("asyncio", "os", "numpy") to
            read only those packages and modules; the order of the rest is unchanged.
    Yields:
        {"source": the file's path relative to its root with "/" separators
        ("asyncio/tasks.py"), "name": the dotted name ("asyncio.tasks" for the module
        docstring, "asyncio.tasks.Task.cancel"; definitions nested in a function are
        named through it: "mod.outer.inner"), "kind": "module" | "class" | "function",
        "sentences": [docstring_sentences of the docstring]}.
    """
    for root, path in _source_files(roots, packages):
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        source = os.path.relpath(path, root).replace(os.sep, "/")
        module = module_name(source)
        for node, qualname in _definitions(tree):
            doc = ast.get_docstring(node)
            if doc:
                sentences = docstring_sentences(doc)
                if len(sentences) >= 2:
                    yield {"source": source, "name": ".".join([module, *qualname]), "kind": _KINDS[type(node)],
                           "sentences": sentences}


def iter_documents():
    """Yields lists of sentences, one per docstring with at least two sentences (the
    sample corpus: `iter_entries`' sentences)."""
    for entry in iter_entries():
        yield entry["sentences"]


_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


def _definitions(tree):
    """(node, qualified name parts) of the module, classes and functions of `tree` in
    `ast.walk`'s breadth-first order, without walking into expressions (which hold no
    definitions): the same nodes in the same order (so the same corpus bytes) in about
    half the time. The module's parts are (); a method's ("Class", "method")."""
    queue = collections.deque([(tree, ())])
    while queue:
        node, parts = queue.popleft()
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            parts = (*parts, node.name)
            yield node, parts
        elif isinstance(node, ast.Module):
            yield node, parts
        queue.extend((child, parts) for child in ast.iter_child_nodes(node) if isinstance(child, _HOLDS_STATEMENTS))


def write_corpus(output_file, size_mb):
    """Writes documents until `size_mb` MB (atomically); returns (documents, sentences, bytes)."""
    limit = int(size_mb * 1_000_000)
    documents = sentences = written = 0
    with atomic.open_file(output_file, "w") as f:
        for doc in iter_documents():
            block = "\n".join(doc) + "\n\n"
            f.write(block)
            written += len(block.encode("utf-8"))
            documents += 1
            sentences += len(doc)
            if written >= limit:
                break
    return documents, sentences, written


ENTRY_KEYS = ("source", "name", "kind", "sentences")


def write_entries(path, entries):
    """Writes docstring entries as JSON lines, one entry per line (atomically).

    Args:
        path: the file to write.
        entries: dicts as `iter_entries` yields (other keys are kept).
    Returns:
        The number of entries written.
    """
    count = 0
    with atomic.open_file(path, "w") as f:
        for entry in entries:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
            count += 1
    return count


def read_entries(path):
    """Reads a file of `write_entries` (blank lines are skipped).

    Args:
        path: a JSON-lines file of entries.
    Returns:
        list of the entries (dicts), in file order.
    Raises:
        ValueError: naming the file and line of a line that is not a JSON object with a
            string "name", a string "source" and a list of at least one string
            "sentences", or the file when it holds no entry.
    """
    entries = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{number}: not a JSON object ({e.msg}).") from None
            problem = _entry_problem(entry)
            if problem:
                raise ValueError(f"{path}:{number}: not a docstring entry: {problem}.")
            entries.append(entry)
    if not entries:
        raise ValueError(f"{path}: no docstring entries (an empty file); write one JSON object per line with "
                         "\"source\", \"name\" and \"sentences\".")
    return entries


def _entry_problem(entry):
    """What is wrong with a parsed JSON line as an entry, or None."""
    if not isinstance(entry, dict):
        kind = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(entry), "null")
        return f"a JSON {kind}, not an object"
    for key in ("name", "source"):
        if not isinstance(entry.get(key), str):
            return f"{key!r} is missing or not a string"
    sentences = entry.get("sentences")
    if not isinstance(sentences, list) or not sentences or not all(isinstance(s, str) for s in sentences):
        return "'sentences' is missing or not a list of at least one string"
    return None
