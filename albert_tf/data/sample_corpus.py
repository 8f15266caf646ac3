"""The built-in sample corpus: real English prose from installed Python docstrings.

One sentence per line, a blank line between documents (one document per docstring), the
format of create_pretraining_data. Sources are the standard library, then the installed
packages, read with `ast` (nothing is imported) in sorted path order, so the output is
byte-identical for a given Python and requirements.txt. Available offline on any
machine with Python 3.11. tools/make_sample_corpus.py writes it; tools/make_topic_task.py
labels its sentences (`docstring_sentences`).
"""

import ast
import collections
import os
import re
import sysconfig

from albert_tf.storage import atomic

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "lib2to3", "__pycache__", "turtledemo"}


def _source_files():
    """The standard library first, then the installed packages (pinned by requirements.txt)."""
    paths = sysconfig.get_paths()
    for root, skip in ((paths["stdlib"], _SKIP_DIRS), (paths["purelib"], _SKIP_DIRS - {"site-packages"})):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in skip)
            for name in sorted(filenames):
                if name.endswith(".py"):
                    yield os.path.join(dirpath, name)


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


def iter_documents():
    """Yields lists of sentences, one per docstring with at least two sentences."""
    for path in _source_files():
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in _definitions(tree):
            doc = ast.get_docstring(node)
            if doc:
                sentences = docstring_sentences(doc)
                if len(sentences) >= 2:
                    yield sentences


_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


def _definitions(tree):
    """The module, classes and functions of `tree` in `ast.walk`'s breadth-first order,
    without walking into expressions (which hold no definitions): the same nodes in the same
    order (so the same corpus bytes) in about half the time."""
    queue = collections.deque([tree])
    while queue:
        node = queue.popleft()
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        queue.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, _HOLDS_STATEMENTS))


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
