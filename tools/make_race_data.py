"""Writes tiny RACE-layout multiple-choice data from Python standard-library docstrings.

    python tools/make_race_data.py --output_dir=data/race_tiny --num_articles=6 --seed=1
    python tools/make_race_data.py --output_dir=data/race_tiny --layout=all.txt
    python tools/make_race_data.py --output_dir=data/mc_tiny --layout=jsonl

Nothing comes from RACE: the articles, the questions, the splits and the layouts (--layout) are
described in docs/race.md, "The tiny data". Outputs follow albert_tf.storage.outputs: RACE/ (replaced
as a whole, atomically, so layouts never mix) and the .jsonl files are written when new, replaced when
this tool made them, refused otherwise (exit 2) before any work.
"""

import dataclasses
import json
import os
import random
import re
import zlib

from albert_tf import entry_points, option_flags
from albert_tf.data.sample_corpus import read_entries
from albert_tf.storage import atomic, outputs
from albert_tf.storage.options import Command, CorpusFile, RunDirectory, option
from albert_tf.tasks.options import RunOptions

if __package__:  # imported as tools.make_race_data
    from . import make_squad_data
else:  # `python tools/make_race_data.py`, or imported by a tool run so: tools/ is sys.path[0]
    import make_squad_data

SPLITS = ("train", "dev", "test")
LEVELS = ("middle", "high")
LETTERS = "ABCD"
ENTRIES_PER_ARTICLE = {"middle": 3, "high": 4}
QUESTIONS_PER_ARTICLE = {"middle": {"cloze": 2, "which": 2}, "high": {"cloze": 3, "which": 2}}
LAYOUTS = ("files", "all.txt", "jsonl")
CLOZE_WORD = re.compile(r"^[a-z]{5,}$")


@dataclasses.dataclass(kw_only=True)
class RaceDataOptions:
    """make_race_data's own flags (the rest are the fields it shares: RECORD)."""

    num_articles: int = option(6, "Articles per level in train (dev and test: half, at least 1).")
    layout: str = option("files", "files: one JSON article per file; all.txt: one per line; jsonl: generic JSON "
                                  "lines.", choices=LAYOUTS)


# --output_dir: where to write RACE/ (or the .jsonl files); --seed: the shared random_seed field under this name
RECORD = Command("make_race_data", ((RunDirectory, None), (RaceDataOptions, ("num_articles",)),
                                    (RunOptions, ("random_seed",)), (RaceDataOptions, ("layout",)),
                                    (CorpusFile, None)))


def define_flags(flag_values):
    option_flags.define_command(flag_values, RECORD)


TooFewEntriesError = make_squad_data.TooFewEntriesError  # the docstring entries are too few for the articles
docstring_entries = make_squad_data.docstring_entries  # [{"name", "sentences", "answer", ...}]


def corpus_entries(path):
    """make_squad_data.corpus_docstring_entries of a corpus input's records (ValueError naming a bad line)."""
    return make_squad_data.corpus_docstring_entries(read_entries(path))


def split_of(name):
    """"dev" (~20%: make_squad_data's dev share), "test" (~20%) or "train" by a hash of function `name`."""
    bucket = zlib.crc32(name.encode("utf-8")) % 5
    return "dev" if bucket == 0 else "test" if bucket == 1 else "train"


def _words(text):
    return {w for w in re.findall(r"[a-z]+", text.lower())}


def _entry_text(entry):
    return f"{entry['name']}(): " + " ".join(entry["sentences"])


class _Positions:
    """Answer positions drawn from shuffled decks of A-D: every letter is the answer about equally often."""

    def __init__(self, rng):
        self.rng, self.deck = rng, []

    def draw(self):
        if not self.deck:
            self.deck = list(range(len(LETTERS)))
            self.rng.shuffle(self.deck)
        return self.deck.pop()


def _with_answer(positions, correct, distractors):
    """(options, letter) with the correct option at the next drawn position."""
    position = positions.draw()
    options = list(distractors)
    options.insert(position, correct)
    return options, LETTERS[position]


def _cloze_questions(chosen, article, vocabulary, rng, positions, count):
    sentences = [s for e in chosen for s in e["sentences"] if "_" not in s]
    candidates = []
    for sentence in sentences:
        tokens = sentence.split(" ")
        words = [w for w in tokens if CLOZE_WORD.match(w) and tokens.count(w) == 1]
        if words:
            candidates.append((sentence, tokens, words))
    rng.shuffle(candidates)
    present = _words(article)
    pool = sorted(vocabulary - present)
    if candidates[:count] and len(pool) < 3:
        raise TooFewEntriesError(f"only {len(pool)} words of 5+ letters outside an article for cloze options; "
                                 "need at least 3.")
    made = []
    for sentence, tokens, words in candidates[:count]:
        word = rng.choice(words)
        question = " ".join("_" if t == word else t for t in tokens)
        options, letter = _with_answer(positions, word, rng.sample(pool, 3))
        made.append((question, options, letter))
    return made


def _which_questions(chosen, others, rng, positions, count):
    made = []
    asked = list(chosen)
    rng.shuffle(asked)
    for entry in asked[:count]:
        pool = [e for e in chosen if e is not entry] + rng.sample(others, min(len(others), 12))
        seen, distractors = {entry["name"]}, []
        for e in pool:
            # not another function that returns the asked words (or more after them)
            if e["name"] not in seen and not e["answer"].lower().startswith(entry["answer"].lower()):
                distractors.append(e["name"])
                seen.add(e["name"])
            if len(distractors) == 3:
                break
        if len(distractors) < 3:
            raise TooFewEntriesError(f"too few functions with another answer than {entry['name']}.")
        options, letter = _with_answer(positions, entry["name"], distractors)
        made.append((f"Which function returns {entry['answer']}?", options, letter))
    return made


def make_articles(split, level, num_articles, seed, entries=None, stream=None):
    """`num_articles` RACE articles {"article", "questions", "options", "answers", "id"} of one split (split_of)
    and level from `entries` (docstring_entries() when None); `stream`: the split's shuffled entries, shared by
    its levels."""
    entries = docstring_entries() if entries is None else entries
    pool = [e for e in entries if split_of(e["name"]) == split]
    if len(pool) < 12:
        raise TooFewEntriesError(f"only {len(pool)} docstring functions in split {split!r}; need at least 12.")
    rng = random.Random(f"race-{seed}-{split}-{level}")
    stream = stream if stream is not None else []
    vocabulary = {w for e in entries for s in e["sentences"] for w in s.split(" ") if CLOZE_WORD.match(w)}
    positions = _Positions(rng)
    articles = []
    for n in range(1, num_articles + 1):
        size = ENTRIES_PER_ARTICLE[level]
        if len(stream) < size:
            refill = list(pool)
            rng.shuffle(refill)
            stream.extend(refill)
        chosen = list({e["name"]: e for e in stream[:size]}.values())
        del stream[:size]
        article = " ".join(_entry_text(e) for e in chosen)
        names = {e["name"] for e in chosen}
        others = [e for e in pool if e["name"] not in names]
        counts = QUESTIONS_PER_ARTICLE[level]
        made = (_cloze_questions(chosen, article, vocabulary, rng, positions, counts["cloze"])
                + _which_questions(chosen, others, rng, positions, counts["which"]))
        rng.shuffle(made)
        articles.append({"article": article, "questions": [q for q, _, _ in made],
                         "options": [o for _, o, _ in made], "answers": [a for _, _, a in made],
                         "id": f"{level}{n}.txt"})
    return articles


def articles_per_level(split, num_articles):
    return num_articles if split == "train" else max(1, num_articles // 2)


def make_dataset(num_articles, seed, entries=None):
    """{split: {level: [article, ...]}} for every split and level."""
    if num_articles < 1:
        raise ValueError(f"--num_articles must be >= 1, got {num_articles}.")
    entries = docstring_entries() if entries is None else entries
    out = {}
    for split in SPLITS:
        stream = []
        out[split] = {level: make_articles(split, level, articles_per_level(split, num_articles), seed, entries,
                                           stream) for level in LEVELS}
    return out


def jsonl_lines(articles):
    """RACE articles -> generic multiple-choice JSON lines (one per question)."""
    lines = []
    for a in articles:
        for question, options, answer in zip(a["questions"], a["options"], a["answers"]):
            lines.append(json.dumps({"id": a["id"], "context": a["article"], "question": question,
                                     "options": options, "answer": answer}, ensure_ascii=False))
    return lines


def race_outputs(output_dir, layout, flag="--output_dir"):
    """The outputs.Output items that make_race writes under `output_dir` for `layout`."""
    output_dir = os.fspath(output_dir)
    if layout == "jsonl":
        return [outputs.Output(flag, os.path.join(output_dir, f"{split}.jsonl"), outputs.GENERATED_DATA)
                for split in SPLITS]
    return [outputs.Output(flag, os.path.join(output_dir, "RACE"), outputs.DATA_DIRECTORY)]


def make_race(output_dir, num_articles=6, seed=12345, layout="files", entries=None, flag="--output_dir"):
    """Writes the data in `layout` under `output_dir` (its outputs new or its own: outputs.OutputRefused naming
    `flag`, before any work); the same arguments give the same files. Returns {"layout", "paths": [files
    written], "counts": {split: {level: {"articles", "questions"}}}}."""
    if layout not in LAYOUTS:
        raise ValueError(f"--layout must be one of {', '.join(LAYOUTS)}, got {layout!r}.")
    output_dir = os.fspath(output_dir)
    outputs.check(race_outputs(output_dir, layout, flag))
    dataset = make_dataset(num_articles, seed, entries)
    counts = {split: {level: {"articles": len(arts), "questions": sum(len(a["questions"]) for a in arts)}
                      for level, arts in levels.items()} for split, levels in dataset.items()}
    paths = []
    if layout == "jsonl":
        for split, levels in dataset.items():
            path = os.path.join(output_dir, f"{split}.jsonl")
            with outputs.replacing_file(path, outputs.GENERATED_DATA, flag):
                atomic.write_text(path, "\n".join(jsonl_lines([a for lv in LEVELS for a in levels[lv]])) + "\n")
            paths.append(path)
        return {"layout": layout, "paths": paths, "counts": counts}
    race_dir = os.path.join(output_dir, "RACE")
    with outputs.replacing_dir(race_dir, outputs.DATA_DIRECTORY, flag) as tmp:
        for split, levels in dataset.items():
            for level, articles in levels.items():
                directory = os.path.join(tmp, split, level)
                os.makedirs(directory)
                final = os.path.join(race_dir, split, level)
                if layout == "all.txt":
                    lines = [json.dumps(a, ensure_ascii=False) for a in articles]
                    atomic.write_text(os.path.join(directory, "all.txt"), "\n".join(lines) + "\n")
                    paths.append(os.path.join(final, "all.txt"))
                else:
                    for n, article in enumerate(articles, 1):
                        atomic.write_text(os.path.join(directory, f"{n}.txt"), json.dumps(article, ensure_ascii=False))
                        paths.append(os.path.join(final, f"{n}.txt"))
    return {"layout": layout, "paths": paths, "counts": counts}


def check_options(f):
    """Every check before any work (without --corpus_file, make_race checks the outputs itself)."""
    if not f.output_dir:
        raise ValueError("--output_dir is required.")
    if f.corpus_file:
        outputs.check(race_outputs(f.output_dir, f.layout))


def run(f):
    check_options(f)  # before any work
    corpus_file = f.corpus_file
    if corpus_file:
        entries = corpus_entries(corpus_file)
        try:
            result = make_race(f.output_dir, f.num_articles, f.seed, f.layout, entries=entries)
        except TooFewEntriesError as e:
            raise ValueError(f"{corpus_file}: too few usable entries: {e} The corpus has {len(entries)} public "
                             "functions whose docstring starts \"Return(s) ...\" (about 20% of them go to dev and "
                             "20% to test); use a larger corpus.") from None
    else:
        result = make_race(f.output_dir, f.num_articles, f.seed, f.layout)
    articles = sum(c["articles"] for levels in result["counts"].values() for c in levels.values())
    per_split = ", ".join(f"{split} {sum(c['questions'] for c in levels.values())}"
                          for split, levels in result["counts"].items())
    where = os.path.join(f.output_dir, "RACE") if f.layout != "jsonl" else f.output_dir
    print(f"wrote {where} ({f.layout}): {articles} articles; questions: {per_split}")
    return 0


main, entry = entry_points.command("make_race_data", define_flags, run)


if __name__ == "__main__":
    entry()
