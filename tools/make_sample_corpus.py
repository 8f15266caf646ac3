"""Writes the built-in sample corpus: real English prose from installed Python docstrings.

    python tools/make_sample_corpus.py --output_file=data/sample_corpus.txt [--size_mb=1.5]

One sentence per line, a blank line between documents (one document per docstring),
the format of create_pretraining_data. Sources are the standard library, then the
installed packages, read with `ast` (nothing is imported) in sorted path order, so the
output is byte-identical for a given Python and requirements.txt.
Available offline on any machine with Python 3.11.
"""

import ast
import os
import re
import sys
import sysconfig

from absl import app, flags


def define_flags():
    """Defines this tool's flags (only when run as a script, so it can be imported)."""
    flags.DEFINE_string("output_file", "data/sample_corpus.txt", "Where to write the corpus.")
    flags.DEFINE_float("size_mb", 1.5, "Stop after this many megabytes of text (at least 1).")


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
            tree = ast.parse(open(path, encoding="utf-8").read(), path)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    sentences = docstring_sentences(doc)
                    if len(sentences) >= 2:
                        yield sentences


def write_corpus(output_file, size_mb):
    """Writes documents until `size_mb` MB; returns (documents, sentences, bytes)."""
    limit = int(size_mb * 1_000_000)
    os.makedirs(os.path.dirname(os.path.abspath(output_file)), exist_ok=True)
    tmp = f"{output_file}.tmp-{os.getpid()}"
    documents = sentences = written = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for doc in iter_documents():
            block = "\n".join(doc) + "\n\n"
            f.write(block)
            written += len(block.encode("utf-8"))
            documents += 1
            sentences += len(doc)
            if written >= limit:
                break
    os.replace(tmp, output_file)
    return documents, sentences, written


def main(argv):
    del argv
    size_mb = flags.FLAGS.size_mb
    if size_mb < 1:
        print("error: --size_mb must be at least 1", file=sys.stderr)
        return 2
    documents, sentences, written = write_corpus(flags.FLAGS.output_file, size_mb)
    print(f"wrote {flags.FLAGS.output_file}: {documents} documents, {sentences} sentences, {written / 1e6:.2f} MB")
    if written < 1_000_000:
        print("error: the installed Python files gave less than 1 MB of prose", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    define_flags()
    app.run(main)
