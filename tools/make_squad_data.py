"""Writes a tiny SQuAD-format file (v1.1 or v2.0) from Python standard-library docstrings.

    python tools/make_squad_data.py --output_file=data/squad_tiny/train-v1.1.json --version=1.1 \\
        --num_questions=400 --seed=1 --split=train
    python tools/make_squad_data.py --output_file=data/squad_tiny/dev-v2.0.json --version=2.0 --split=dev

Nothing comes from SQuAD: the functions of standard-library docstrings, the templates, --kind=people,
--corpus_file and --split are described in docs/squad.md, "The tiny data".
"""

import dataclasses
import random
import re
import zlib

from albert_tf import entry_points, option_flags
from albert_tf.data import sample_corpus
from albert_tf.data.sample_corpus import module_name, read_entries
from albert_tf.storage import atomic, outputs
from albert_tf.storage.options import Command, CorpusFile, OutputFile, option
from albert_tf.tasks.options import RunOptions

MODULES = (
    "_pydecimal.py", "abc.py", "argparse.py", "ast.py", "asyncio/base_events.py", "asyncio/events.py",
    "asyncio/tasks.py", "base64.py", "bisect.py", "bz2.py", "calendar.py", "cmd.py", "code.py", "codecs.py",
    "collections/__init__.py", "colorsys.py", "configparser.py", "contextlib.py", "copy.py", "csv.py",
    "dataclasses.py", "datetime.py", "difflib.py", "dis.py", "doctest.py", "email/header.py",
    "email/message.py", "email/utils.py", "enum.py", "filecmp.py", "fnmatch.py", "fractions.py", "ftplib.py",
    "functools.py", "genericpath.py", "getpass.py", "gettext.py", "glob.py", "gzip.py", "hashlib.py",
    "heapq.py", "hmac.py", "html/__init__.py", "http/client.py", "http/cookies.py", "http/server.py",
    "imaplib.py", "importlib/metadata/__init__.py", "inspect.py", "io.py", "ipaddress.py", "json/encoder.py",
    "linecache.py", "locale.py", "logging/__init__.py", "lzma.py", "mailbox.py", "mimetypes.py", "netrc.py",
    "nntplib.py", "numbers.py", "operator.py", "os.py", "pathlib.py", "pickle.py", "platform.py", "plistlib.py",
    "poplib.py", "posixpath.py", "pprint.py", "profile.py", "pstats.py", "pydoc.py", "queue.py", "quopri.py",
    "random.py", "reprlib.py", "sched.py", "secrets.py", "selectors.py", "shlex.py", "shutil.py", "smtplib.py",
    "socket.py", "sqlite3/__init__.py", "ssl.py", "stat.py", "statistics.py", "string.py", "struct.py",
    "subprocess.py", "sysconfig.py", "tarfile.py", "tempfile.py", "textwrap.py", "threading.py", "timeit.py",
    "tokenize.py", "trace.py", "traceback.py", "tracemalloc.py", "types.py", "typing.py", "unittest/case.py",
    "urllib/parse.py", "urllib/request.py", "uuid.py", "wave.py", "weakref.py", "webbrowser.py",
    "xml/dom/minidom.py", "xml/etree/ElementTree.py", "zipfile.py", "zipimport.py",
)
COUNTS = (1000, 1500, 2048, 4096, 10000, 12500, 65536, 100000, 250000, 1000000)
REVIEWERS = ("José Núñez", "Zoë Müller", "François Dupré", "Chloé Lefèvre", "Björn Ångström", "Renée Côté",
             "Søren Kjær", "Ana Gonçalves", "Łukasz Wójcik", "Mária Horváth", "Jürgen Groß", "Inés Peña")
FIRST_SENTENCE = re.compile(r"^(Returns? )(?P<answer>.+)\.$")
ANSWER_CHARS = re.compile(r"^[A-Za-z0-9 ,'-]+$")
EXTRA_CHARS = 110  # room kept in a context for the synthetic sentences of an entry


@dataclasses.dataclass(kw_only=True)
class SquadDataOptions:
    """make_squad_data's own flags (the rest are the fields it shares: RECORD)."""

    version: str = option("1.1", "SQuAD format: 1.1 (all answerable) or 2.0.", choices=("1.1", "2.0"))
    num_questions: int = option(200, "Questions in the file.")
    max_context_chars: int = option(600, "Longest context in characters (at least 200).")
    split: str = option("all", "Which functions to use: all, or the ~80% train / ~20% dev share (disjoint).",
                        choices=("all", "train", "dev"))
    kind: str = option("functions", "functions: questions about the docstrings' functions; people: about two people "
                                    "per context, mixed with docstring sentences (module doc).",
                       choices=("functions", "people"))


# --seed is the shared random_seed field under this tool's name
RECORD = Command("make_squad_data", ((OutputFile, None), (SquadDataOptions, ("version", "num_questions")),
                                     (RunOptions, ("random_seed",)),
                                     (SquadDataOptions, ("max_context_chars", "split", "kind")), (CorpusFile, None)))


def define_flags(flag_values):
    option_flags.define_command(flag_values, RECORD)


class TooFewEntriesError(ValueError):
    """The docstring entries are too few for the dataset asked for."""


def return_entry(name, sentences):
    """{"name", "sentences": [first, up to two more], "answer", "answer_offset"} of function `name`
    ("textwrap.dedent") whose docstring `sentences` start "Return(s) <answer of 2 to 12 words>.", else None."""
    match = FIRST_SENTENCE.match(sentences[0]) if sentences else None
    if not match or not ANSWER_CHARS.match(match["answer"]) or not 2 <= len(match["answer"].split()) <= 12:
        return None
    if "  " in sentences[0]:
        return None
    extra = [s for s in sentences[1:3] if len(s) <= 160 and ":" not in s and "\t" not in s and "  " not in s]
    return {"name": name, "sentences": [sentences[0], *extra], "answer": match["answer"],
            "answer_offset": match.start("answer")}


def _sorted_entries(pairs):
    """(name, sentences) pairs -> their return_entry entries, the first of each name, sorted by name."""
    entries = {}
    for name, sentences in pairs:
        if name not in entries:
            entry = return_entry(name, sentences)
            if entry is not None:
                entries[name] = entry
    return [entries[k] for k in sorted(entries)]


def docstring_entries():
    """corpus_docstring_entries of MODULES' entries in the fixed sample corpus."""
    modules = set(MODULES)
    return corpus_docstring_entries(e for e in sample_corpus.iter_entries(min_sentences=1) if e["source"] in modules)


def _is_public(record):
    """Whether no part of a corpus record's name after its module's starts with "_"."""
    name, module = record["name"], module_name(record["source"].replace("\\", "/"))
    inner = name[len(module) + 1:] if name.startswith(module + ".") else name.rsplit(".", 1)[-1]
    return not any(part.startswith("_") for part in inner.split("."))


def corpus_docstring_entries(records):
    """return_entry of each public "function" record ({"source", "name", "kind", "sentences"}: sample_corpus's
    entries), the first of each name, sorted by name."""
    return _sorted_entries((r["name"], r["sentences"]) for r in records
                           if r.get("kind") == "function" and _is_public(r))


def in_split(name, split):
    """Whether function `name` belongs to `split` ("all", "train": ~80%, "dev": ~20%)."""
    if split == "all":
        return True
    is_dev = zlib.crc32(name.encode("utf-8")) % 5 == 0
    return is_dev == (split == "dev")


def _entry_text(entry, rng):
    """One entry's text and the spans (start, text) of its answers: {"return", "count", "reviewer"}."""
    text = f"{entry['name']}(): "
    spans = {"return": (len(text) + entry["answer_offset"], entry["answer"])}
    text += " ".join(entry["sentences"])
    if rng.random() < 0.5:
        count = f"{rng.choice(COUNTS):,}"
        text += " It handles up to "
        spans["count"] = (len(text), count)
        text += f"{count} items per call."
    if rng.random() < 0.5:
        first, last = rng.choice(REVIEWERS).split(" ")
        reviewer = first + " " * rng.choice((1, 1, 2, 3)) + last
        text += " It was reviewed by "
        spans["reviewer"] = (len(text), reviewer)
        text += f"{reviewer}."
    return text, spans


QUESTIONS = {
    "return": "What does {}() return?",
    "count": "How many items does {}() handle per call?",
    "reviewer": "Who reviewed {}()?",
}


def _paragraph(entries, rng, max_context_chars):
    """Packs entries into one context; returns (context, [(name, spans with absolute starts)])."""
    context, described = "", []
    for entry in entries:
        text, spans = _entry_text(entry, rng)
        separator = "" if not context else rng.choice((" ", " ", "  "))
        if context and len(context) + len(separator) + len(text) > max_context_chars:
            break
        context += separator
        described.append((entry["name"], {kind: (len(context) + start, answer)
                                          for kind, (start, answer) in spans.items()}))
        context += text
    return context, described


def _answer(start, text):
    return {"text": text, "answer_start": start}


def _questions(described, others, rng, version, per_paragraph):
    """The (question, answers, plausible) of one paragraph; `others`: names not in it."""
    answerable = [(name, kind, span) for name, spans in described for kind, span in spans.items()]
    rng.shuffle(answerable)
    made = [(QUESTIONS[kind].format(name), [_answer(*span)], None) for name, kind, span in answerable]
    if version == "2.0":
        impossible = []
        for kind in QUESTIONS:
            having = [spans[kind] for _, spans in described if kind in spans]
            if not having:
                continue
            lacking = [name for name, spans in described if kind not in spans]
            stranger = rng.choice(others)
            impossible.append((QUESTIONS[kind].format(stranger), [], [_answer(*rng.choice(having))]))
            if lacking:
                impossible.append((QUESTIONS[kind].format(rng.choice(lacking)), [], [_answer(*rng.choice(having))]))
        rng.shuffle(impossible)
        n_impossible = max(1, per_paragraph // 3)
        made = made[: per_paragraph - n_impossible] + impossible[:n_impossible]
        rng.shuffle(made)
    return made[:per_paragraph]


def _check_arguments(version, num_questions, max_context_chars):
    if version not in ("1.1", "2.0"):
        raise ValueError(f"--version must be 1.1 or 2.0, got {version!r}.")
    if num_questions < 1 or max_context_chars < 200:
        raise ValueError(f"need --num_questions >= 1 and --max_context_chars >= 200 "
                         f"(got {num_questions}, {max_context_chars}).")


def _article(title, context, made, seed, index, version):
    """One article of one paragraph from its (question, answers, plausible) list."""
    qas = []
    for j, (question, answers, plausible) in enumerate(made):
        qa = {"id": f"s{seed}-p{index:05d}-q{j}", "question": question, "answers": answers}
        if version == "2.0":
            qa["is_impossible"] = not answers
            if plausible:
                qa["plausible_answers"] = plausible
        qas.append(qa)
    return {"title": title, "paragraphs": [{"context": context, "qas": qas}]}


def _checked(version, articles):
    dataset = {"version": "1.1" if version == "1.1" else "v2.0", "data": articles}
    check_dataset(dataset)
    return dataset


def make_dataset(version, num_questions, seed, max_context_chars, split="all", entries=None):
    """The SQuAD-format dict of `num_questions` questions (version "1.1" or "2.0"; the same arguments give
    the same dataset) about `entries` (docstring_entries() when None) of `split` (in_split)."""
    _check_arguments(version, num_questions, max_context_chars)
    entries = docstring_entries() if entries is None else entries
    pool = [e for e in entries if in_split(e["name"], split)
            and len(e["name"]) + 3 + len(" ".join(e["sentences"])) + EXTRA_CHARS <= max_context_chars]
    if len(pool) < 8:
        raise TooFewEntriesError(f"only {len(pool)} docstring entries fit --max_context_chars={max_context_chars} "
                         f"and --split={split}; need at least 8.")
    rng = random.Random(seed)
    order, articles, total = [], [], 0
    while total < num_questions:
        if len(order) < 5:
            refill = list(pool)
            rng.shuffle(refill)
            order.extend(refill)
        size = rng.randint(2, 5)
        chosen = list({e["name"]: e for e in order[:size]}.values())  # a refill may repeat a name
        order = order[size:]
        context, described = _paragraph(chosen, rng, max_context_chars)
        names = {name for name, _ in described}
        others = [e["name"] for e in pool if e["name"] not in names and e["name"] not in context]
        per_paragraph = min(rng.randint(2, 4), num_questions - total)
        made = _questions(described, others, rng, version, per_paragraph)
        articles.append(_article(described[0][0].rsplit(".", 1)[0], context, made, seed, len(articles), version))
        total += len(made)
    return _checked(version, articles)


PEOPLE_FACTS = {  # kind: (fact template, question template, values)
    "city": ("{} was born in {}.", "Where was {} born?",
             ("Lisbon", "Oslo", "Kraków", "Zürich", "Montréal", "São Paulo", "Reykjavík", "Málaga", "Brno",
              "Tallinn", "Ghent", "Porto", "Bergen", "Lyon")),
    "year": ("{} joined the project in {}.", "When did {} join the project?",
             tuple(str(y) for y in range(1991, 2025))),
    "module": ("{} maintains the {} module.", "Which module does {} maintain?",
               tuple(m[:-3].replace("/", ".").replace(".__init__", "") for m in MODULES[:60])),
    "language": ("At home {} speaks {}.", "What language does {} speak at home?",
                 ("Portuguese", "Norwegian", "Polish", "German", "French", "Icelandic", "Spanish", "Czech",
                  "Estonian", "Dutch", "Hungarian", "Danish", "Swedish", "Catalan")),
}


def _people(split):
    firsts = sorted({r.split(" ")[0] for r in REVIEWERS})
    lasts = sorted({r.split(" ")[1] for r in REVIEWERS})
    return [f"{a} {b}" for a in firsts for b in lasts if in_split(f"{a} {b}", split)]


def make_people_dataset(version, num_questions, seed, max_context_chars, split="all", entries=None):
    """The --kind=people dataset (module doc); arguments as make_dataset's."""
    _check_arguments(version, num_questions, max_context_chars)
    entries = docstring_entries() if entries is None else entries
    filler = [s for e in entries if in_split(e["name"], split) for s in e["sentences"] if len(s) <= 120]
    if len(filler) < 3:
        raise TooFewEntriesError(f"only {len(filler)} docstring sentences of at most 120 characters in "
                                 f"--split={split}; need at least 3.")
    people, rng = _people(split), random.Random(seed)
    articles, total = [], 0
    while total < num_questions:
        pair = rng.sample(people, 3)  # two described, a third for v2.0's unanswerable questions
        kinds = sorted(PEOPLE_FACTS)
        values = {kind: rng.sample(PEOPLE_FACTS[kind][2], 2) for kind in kinds}  # the two differ
        facts = [(name, kind, values[kind][i]) for i, name in enumerate(pair[:2]) for kind in kinds]
        rng.shuffle(facts)
        pieces = [(PEOPLE_FACTS[kind][0].format(name, value), (name, kind, value)) for name, kind, value in facts]
        pieces += [(sentence, None) for sentence in rng.sample(filler, 3)]
        rng.shuffle(pieces)
        context, spans = "", {}
        for text, fact in pieces:
            if len(context) + 1 + len(text) > max_context_chars and fact is None:
                continue
            context += (" " if context else "") + text
            if fact is not None:
                name, kind, value = fact
                before, between, _ = PEOPLE_FACTS[kind][0].split("{}")
                start = len(context) - len(text) + len(before) + len(name) + len(between)
                spans[(name, kind)] = (start, value)
        asked = rng.sample(sorted(spans), min(len(spans), rng.randint(2, 4), num_questions - total))
        made = [(PEOPLE_FACTS[kind][1].format(name), [_answer(*spans[(name, kind)])], None) for name, kind in asked]
        if version == "2.0" and len(made) > 1:
            kind = rng.choice(kinds)
            made[-1] = (PEOPLE_FACTS[kind][1].format(pair[2]), [], [_answer(*spans[(rng.choice(pair[:2]), kind)])])
        articles.append(_article(" and ".join(pair[:2]), context, made, seed, len(articles), version))
        total += len(made)
    return _checked(version, articles)


def check_dataset(dataset):
    """(paragraphs, questions, unanswerable) of a SQuAD-format dict; ValueError unless every answer indexes
    its text in its context, ids are unique and v1.1 questions all have an answer."""
    seen, paragraphs, unanswerable = set(), 0, 0
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            paragraphs += 1
            context = paragraph["context"]
            for qa in paragraph["qas"]:
                if qa["id"] in seen:
                    raise ValueError(f"question id {qa['id']!r} appears twice.")
                seen.add(qa["id"])
                if not qa["answers"]:
                    unanswerable += 1
                    if dataset["version"] == "1.1" or not qa.get("is_impossible"):
                        raise ValueError(f"question {qa['id']!r} has no answer.")
                for answer in qa["answers"] + qa.get("plausible_answers", []):
                    start, text = answer["answer_start"], answer["text"]
                    if not text or context[start:start + len(text)] != text:
                        raise ValueError(f"question {qa['id']!r}: {text!r} is not at {start} of its context.")
    return paragraphs, len(seen), unanswerable


def check_options(f):
    """Every check that needs no data, before any work (the values': _check_arguments)."""
    if not f.output_file:
        raise ValueError("--output_file is required.")
    outputs.check([outputs.Output("--output_file", f.output_file, outputs.GENERATED_DATA)])


def run(f):
    check_options(f)  # before any work
    make = make_people_dataset if f.kind == "people" else make_dataset
    arguments = (f.version, f.num_questions, f.seed, f.max_context_chars, f.split)
    if f.corpus_file:
        records = read_entries(f.corpus_file)
        entries = corpus_docstring_entries(records)
        try:
            dataset = make(*arguments, entries=entries)
        except TooFewEntriesError as e:
            raise ValueError(f"{f.corpus_file}: too few usable entries: {e} Of its {len(records)} entries, "
                             f"{len(entries)} are public functions whose docstring starts \"Return(s) ...\"; use "
                             f"a larger corpus (or --split=all, a larger --max_context_chars).") from None
    else:
        dataset = make(*arguments)
    paragraphs, questions, unanswerable = check_dataset(dataset)
    with outputs.replacing_file(f.output_file, outputs.GENERATED_DATA, "--output_file"):
        atomic.write_json(f.output_file, dataset, indent=None, sort_keys=False)
    print(f"wrote {f.output_file}: SQuAD {f.version}, {paragraphs} paragraphs, {questions} questions "
          f"({unanswerable} unanswerable)")
    return 0


main, entry = entry_points.command("make_squad_data", define_flags, run)


if __name__ == "__main__":
    entry()
