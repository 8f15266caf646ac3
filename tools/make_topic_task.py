"""Writes the labelled task shipped with the repo: the topic of a Python docstring sentence.

    python tools/make_topic_task.py --output_dir=notebooks/data/docstring_topics

Four balanced classes of real English sentences from the docstrings of the Python 3.11
standard library (read with `ast`, nothing imported), labelled by the modules they
document:

    networking   http, urllib, email, smtplib, ftplib, imaplib, poplib, socket, ssl, ...
    numbers      decimal, fractions, statistics, random, numbers, datetime, calendar, ...
    text         re, string, textwrap, difflib, codecs, html, gettext, json, csv, ...
    concurrency  asyncio, concurrent, multiprocessing, threading, queue, subprocess, ...

Output: `train.tsv` and `dev.tsv` with the header `sentence<TAB>label`, the layout of
`run_classifier --task_name=tsv --text_a_column=sentence`. Sentences are deduplicated,
each class is capped at --per_class sentences (chosen by a hash of the text, so the
output does not depend on file order), and the dev split is chosen by the same hash, so
no sentence is in both files. Available offline on any machine with Python 3.11.

Each file is written when new, replaced when this tool made it (its marker
`.<name>.albert_tf_output.json`, committed beside the shipped files), and refused
otherwise (exit status 2) before any work (albert_tf.storage.outputs).
"""

import ast
import os
import sysconfig
import zlib

from absl import flags

from albert_tf import cli
from albert_tf.data.sample_corpus import docstring_sentences
from albert_tf.storage import atomic, outputs

TOPICS = {
    "networking": ("http", "urllib", "email", "smtplib.py", "ftplib.py", "imaplib.py", "poplib.py", "socket.py",
                   "ssl.py", "xmlrpc", "socketserver.py", "mailbox.py", "nntplib.py", "wsgiref", "ipaddress.py"),
    "numbers": ("decimal.py", "_pydecimal.py", "fractions.py", "statistics.py", "random.py", "numbers.py",
                "datetime.py", "calendar.py", "colorsys.py"),
    "text": ("re", "string.py", "textwrap.py", "difflib.py", "codecs.py", "html", "gettext.py", "json", "csv.py",
             "locale.py", "stringprep.py", "shlex.py", "tokenize.py"),
    "concurrency": ("asyncio", "concurrent", "multiprocessing", "threading.py", "queue.py", "subprocess.py",
                    "sched.py", "selectors.py"),
}
LABELS = tuple(TOPICS)


def define_flags():
    flags.DEFINE_string("output_dir", "notebooks/data/docstring_topics", "Where to write train.tsv and dev.tsv.")
    flags.DEFINE_integer("per_class", 560, "Sentences per class (train + dev).")
    flags.DEFINE_float("dev_fraction", 0.2, "Share of each class in dev.tsv.")


def _files(stdlib, name):
    path = os.path.join(stdlib, name)
    if name.endswith(".py"):
        return [path] if os.path.isfile(path) else []
    found = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("test") and d != "__pycache__")
        found.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
    return found


def topic_sentences(topic, stdlib=None):
    """The distinct docstring sentences (5 to 40 words) of a topic's modules, sorted."""
    stdlib = stdlib or sysconfig.get_paths()["stdlib"]
    sentences = set()
    for name in TOPICS[topic]:
        for path in _files(stdlib, name):
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node)
                    for sentence in docstring_sentences(doc) if doc else ():
                        if 5 <= len(sentence.split()) <= 40:
                            sentences.add(" ".join(sentence.split()))
    return sorted(sentences)


def _hash(text):
    return zlib.crc32(text.encode("utf-8"))


def make_task(per_class=560, dev_fraction=0.2):
    """-> (train rows, dev rows) of (sentence, label); ValueError if a class is too small."""
    seen, train, dev = set(), [], []
    for topic in LABELS:
        sentences = [s for s in topic_sentences(topic) if s not in seen]
        if len(sentences) < per_class:
            raise ValueError(f"topic {topic!r} has {len(sentences)} sentences, fewer than --per_class={per_class}.")
        chosen = sorted(sentences, key=lambda s: (_hash(s), s))[:per_class]
        seen.update(chosen)
        n_dev = int(round(per_class * dev_fraction))
        by_split = sorted(chosen, key=lambda s: (_hash("dev:" + s), s))
        dev.extend((s, topic) for s in by_split[:n_dev])
        train.extend((s, topic) for s in by_split[n_dev:])
    # interleave the classes in a fixed pseudo-random order
    return sorted(train, key=lambda r: _hash(r[0])), sorted(dev, key=lambda r: _hash(r[0]))


def tsv_text(rows):
    """(sentence, label) rows -> the TSV text with its header."""
    return "sentence\tlabel\n" + "".join(f"{sentence}\t{label}\n" for sentence, label in rows)


def task_outputs(output_dir, flag="--output_dir"):
    """The outputs.Output items of output_dir/train.tsv and dev.tsv."""
    return [outputs.Output(flag, os.path.join(output_dir, name), outputs.GENERATED_DATA)
            for name in ("train.tsv", "dev.tsv")]


def write_task(output_dir, train, dev, flag="--output_dir"):
    """Writes output_dir/train.tsv and dev.tsv, each atomically, under the output rule
    (outputs.OutputRefused for a file this tool did not make); returns their paths."""
    items = task_outputs(output_dir, flag)
    outputs.check(items)
    for item, rows in zip(items, (train, dev)):
        with outputs.replacing_file(item.path, item.kind, flag):
            atomic.write_text(item.path, tsv_text(rows))
    return tuple(item.path for item in items)


def run(f):
    output_dir, per_class, dev_fraction = f.output_dir, f.per_class, f.dev_fraction
    if not 0 < dev_fraction < 1 or per_class < 10:
        raise ValueError(f"need 0 < --dev_fraction < 1 and --per_class >= 10 (got {dev_fraction}, {per_class}).")
    outputs.check(task_outputs(output_dir))  # before any work
    train, dev = make_task(per_class, dev_fraction)
    write_task(output_dir, train, dev)
    print(f"wrote {output_dir}/train.tsv ({len(train)} rows) and dev.tsv ({len(dev)} rows); "
          f"labels: {', '.join(LABELS)}")
    return 0


def entry():
    cli.main("make_topic_task", define_flags, run)


if __name__ == "__main__":
    entry()
