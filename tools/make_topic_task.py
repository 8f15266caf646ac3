"""Writes the labelled task shipped with the repo: the topic of a Python docstring sentence.

    python tools/make_topic_task.py --output_dir=notebooks/data/docstring_topics
    python tools/make_topic_task.py --corpus_file=heldout.jsonl --num_classes=4 --per_class=200 \\
        --output_dir=data/heldout_topics

train.tsv and dev.tsv (`sentence<TAB>label`, run_classifier's --task_name=tsv); the classes, the
sentences and --corpus_file: docs/sample_corpus.md, "The topic task". Each file is written when new,
replaced when this tool made it, refused otherwise (exit status 2) before any work.
"""

import dataclasses
import os
import zlib

from albert_tf import entry_points, option_flags
from albert_tf.data import sample_corpus
from albert_tf.data.sample_corpus import package_of, read_entries
from albert_tf.storage import atomic, outputs
from albert_tf.storage.options import Command, CorpusFile, RunDirectory, option

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


@dataclasses.dataclass(kw_only=True)
class TopicTaskOptions:
    """make_topic_task's own flags (the rest are the fields it shares: RECORD)."""

    per_class: int = option(560, "Sentences per class (train + dev).")
    dev_fraction: float = option(0.2, "Share of each class in dev.tsv.")
    num_classes: int = option(4, "With --corpus_file: how many packages (those with the most sentences) are the "
                                 "classes (at least 2).")


# --output_dir: where to write train.tsv and dev.tsv
RECORD = Command("make_topic_task", ((RunDirectory, None), (TopicTaskOptions, ("per_class", "dev_fraction")),
                                     (CorpusFile, None), (TopicTaskOptions, ("num_classes",))),
                 defaults={"output_dir": "notebooks/data/docstring_topics"})


def define_flags(flag_values):
    option_flags.define_command(flag_values, RECORD)


def _in_topic(source, names):
    """Whether an entry's source is one of a topic's modules ("ssl.py") or inside one of its packages ("http")."""
    return any(source == name if name.endswith(".py") else source.startswith(name + "/") for name in names)


def topic_sentences(topic):
    """The distinct sentences (5 to 40 words) of a topic's modules' docstrings in the fixed sample corpus, sorted."""
    sentences = set()
    for entry in sample_corpus.iter_entries(min_sentences=1):
        if _in_topic(entry["source"], TOPICS[topic]):
            sentences.update(" ".join(s.split()) for s in entry["sentences"] if 5 <= len(s.split()) <= 40)
    return sorted(sentences)


def _hash(text):
    return zlib.crc32(text.encode("utf-8"))


def _choose(sentences, label, per_class, dev_fraction):
    """(train rows, dev rows) of one class: `per_class` of its distinct `sentences` chosen by
    a hash of the text, the dev share by another hash."""
    chosen = sorted(sentences, key=lambda s: (_hash(s), s))[:per_class]
    n_dev = int(round(per_class * dev_fraction))
    by_split = sorted(chosen, key=lambda s: (_hash("dev:" + s), s))
    return [(s, label) for s in by_split[n_dev:]], [(s, label) for s in by_split[:n_dev]]


def _interleaved(rows):
    """The classes' rows in a fixed pseudo-random order."""
    return sorted(rows, key=lambda r: _hash(r[0]))


def make_task(per_class=560, dev_fraction=0.2):
    """-> (train rows, dev rows) of (sentence, label); ValueError if a class is too small."""
    seen, train, dev = set(), [], []
    for topic in LABELS:
        sentences = [s for s in topic_sentences(topic) if s not in seen]
        if len(sentences) < per_class:
            raise ValueError(f"topic {topic!r} has {len(sentences)} sentences, fewer than --per_class={per_class}.")
        train_rows, dev_rows = _choose(sentences, topic, per_class, dev_fraction)
        seen.update(s for s, _ in train_rows + dev_rows)
        dev.extend(dev_rows)
        train.extend(train_rows)
    return _interleaved(train), _interleaved(dev)


def corpus_sentences(entries):
    """{top-level package: its sorted distinct sentences of 5 to 40 words} of docstring entries ({"source",
    "sentences"}); a sentence found under two packages is left out."""
    by_package = {}
    for entry in entries:
        package = package_of(entry["source"])
        for sentence in entry["sentences"]:
            if 5 <= len(sentence.split()) <= 40:
                by_package.setdefault(package, set()).add(" ".join(sentence.split()))
    packages_of = {}
    for package, sentences in by_package.items():
        for sentence in sentences:
            packages_of[sentence] = packages_of.get(sentence, 0) + 1
    found = {package: sorted(s for s in sentences if packages_of[s] == 1) for package, sentences in by_package.items()}
    return {package: sentences for package, sentences in found.items() if sentences}


def make_corpus_task(entries, num_classes=4, per_class=560, dev_fraction=0.2, source="the corpus"):
    """(train rows, dev rows, labels) of the topic task of docstring entries: sentences labelled by their
    package (corpus_sentences), the `num_classes` packages with the most sentences as the classes (ties by
    name), each capped at `per_class` as make_task's; ValueError naming `source` when too few have enough."""
    if num_classes < 2 or per_class < 1 or not 0 < dev_fraction < 1:
        raise ValueError(f"need --num_classes >= 2, --per_class >= 1 and 0 < --dev_fraction < 1 "
                         f"(got {num_classes}, {per_class}, {dev_fraction}).")
    by_package = corpus_sentences(entries)
    ranked = sorted(by_package, key=lambda p: (-len(by_package[p]), p))
    labels = ranked[:num_classes]
    if len(labels) < num_classes or len(by_package[labels[-1]]) < per_class:
        enough = sum(len(by_package[p]) >= per_class for p in ranked)
        counts = ", ".join(f"{p} {len(by_package[p])}" for p in ranked[:num_classes + 2]) or "none"
        largest = len(by_package[labels[-1]]) if len(labels) == num_classes else 0
        hint = (f"lower --per_class to at most {largest}" if largest >= 10 else "use a larger corpus")
        raise ValueError(f"{source}: {enough} of its {len(ranked)} packages have --per_class={per_class} distinct "
                         f"sentences of 5 to 40 words, fewer than --num_classes={num_classes} (the most: {counts}); "
                         f"{hint} or lower --num_classes.")
    train, dev = [], []
    for label in labels:
        train_rows, dev_rows = _choose(by_package[label], label, per_class, dev_fraction)
        train.extend(train_rows)
        dev.extend(dev_rows)
    return _interleaved(train), _interleaved(dev), labels


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


def check_options(f):
    """Every check before any work: the values (ValueError naming the flag) and --output_dir's files."""
    if not 0 < f.dev_fraction < 1 or f.per_class < 10:
        raise ValueError(f"need 0 < --dev_fraction < 1 and --per_class >= 10 (got {f.dev_fraction}, {f.per_class}).")
    if f.num_classes < 2:
        raise ValueError(f"--num_classes must be at least 2, got {f.num_classes}.")
    if not f.corpus_file and f.num_classes != len(LABELS):
        raise ValueError(f"--num_classes={f.num_classes} needs --corpus_file (the built-in task has the "
                         f"{len(LABELS)} topics {', '.join(LABELS)}).")
    outputs.check(task_outputs(f.output_dir))


def run(f):
    check_options(f)  # before any work
    if f.corpus_file:
        train, dev, labels = make_corpus_task(read_entries(f.corpus_file), f.num_classes, f.per_class,
                                              f.dev_fraction, source=f.corpus_file)
    else:
        (train, dev), labels = make_task(f.per_class, f.dev_fraction), LABELS
    write_task(f.output_dir, train, dev)
    labels = ", ".join(labels)
    print(f"wrote {f.output_dir}/train.tsv ({len(train)} rows) and dev.tsv ({len(dev)} rows); labels: {labels}")
    return 0


main, entry = entry_points.command("make_topic_task", define_flags, run)


if __name__ == "__main__":
    entry()
