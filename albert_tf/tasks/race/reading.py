"""Multiple-choice reading: RACE in both layouts and generic JSON lines -> MultipleChoiceExamples.

    examples = read_race("data", "train")                 # data/RACE/train/{middle,high}/...
    examples.summary.layout                                # "files" or "all.txt"

Input (N questions, C options each, T = max_seq_length):

- RACE, the official layout: `data_dir/RACE/<split>/<level>/*.txt`, split train / dev /
  test, level middle / high, one JSON article per file: {"article": str, "questions":
  [str], "options": [[str, ...]], "answers": ["A".."D"], "id": str}. Files are read in
  natural order (2.txt before 10.txt).
- RACE, the release's form: `data_dir/RACE/<split>/<level>/all.txt`, one such JSON
  article per line. Where a level directory holds all.txt, only all.txt is read (its
  other .txt files are listed in summary.ignored and a warning says so).
  `data_dir` may also be the RACE directory itself. `examples.summary` says which layout
  was found, per level: the directory, articles and questions.
- Generic JSON lines (`read_multiple_choice_jsonl`): one question per line, {"context":
  str, "question": str, "options": [str, ...] (2 or more, the same count on every line),
  "answer": index (0-based int) or letter ("A", "B", ...), optional; "id": optional}.
  Without an answer (absent or null) the label is None (prediction only).

Every problem in the input (not JSON, a missing or mistyped key, options / answers
counts that disagree, an answer outside the options, a question with another number of
options than the rest, an empty directory) raises MultipleChoiceDataError (a ValueError)
naming the file, for all.txt and JSONL also the line, and what to fix.
"""

import dataclasses
import logging
import os

from albert_tf.tasks.race.examples import (MultipleChoiceDataError, MultipleChoiceExample, MultipleChoiceExamples,
                                          MultipleChoiceSummary)
from albert_tf.storage.json_files import read_json, read_json_lines
from albert_tf.storage import files

logger = logging.getLogger("albert_tf")

SPLITS = ("train", "dev", "test")
LEVELS = ("middle", "high")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MAX_OPTIONS = len(LETTERS)
RACE_KEYS = {"article": str, "questions": list, "options": list, "answers": list, "id": (str, int)}  # and types


def _natural_key(name):
    stem = os.path.splitext(name)[0]
    return (0, int(stem), name) if stem.isdigit() else (1, 0, name)


def _require(obj, key, kind, where, what):
    if key not in obj:
        raise MultipleChoiceDataError(f"{where}: missing key {key!r}; {what}.")
    value = obj[key]
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise MultipleChoiceDataError(f"{where}: key {key!r} is {type(value).__name__} {value!r:.60}, "
                                      f"expected {names}.")
    return value


def _options(value, where, what):
    if not isinstance(value, list) or not all(isinstance(o, str) for o in value):
        raise MultipleChoiceDataError(f"{where}: options {value!r:.80} are not a list of strings; {what}.")
    if not 2 <= len(value) <= MAX_OPTIONS:
        raise MultipleChoiceDataError(f"{where}: {len(value)} options; a question needs 2 to {MAX_OPTIONS}.")
    return tuple(value)


def _letters(n):
    return f"{LETTERS[0]}-{LETTERS[n - 1]}"


def _answer_letter(answer, num_options, where):
    if not isinstance(answer, str) or len(answer) != 1 or answer not in LETTERS:
        raise MultipleChoiceDataError(f"{where}: answer {answer!r} is not a letter {_letters(num_options)}; "
                                      "write the answer as the capital letter of its option.")
    label = LETTERS.index(answer)
    if label >= num_options:
        raise MultipleChoiceDataError(f"{where}: answer {answer!r} is outside the options (the question has "
                                      f"{num_options}: {_letters(num_options)}); fix the answer or add the option.")
    return label


class _ChoiceCount:
    """Checks that every question has the same number of options as the first one."""

    def __init__(self):
        self.count = None
        self.first = None

    def check(self, n, where):
        if self.count is None:
            self.count, self.first = n, where
        elif n != self.count:
            raise MultipleChoiceDataError(f"{where}: {n} options, but {self.first} has {self.count}; every question "
                                          "must have the same number of options (features are [N, C, T]).")


RACE_ARTICLE = 'a RACE article (one JSON object {"article", "questions", "options", "answers", "id"})'
MULTIPLE_CHOICE_LINE = 'a multiple-choice question (one JSON object {"context", "question", "options", "answer"})'
_RACE_WHAT = ('a RACE article is one JSON object {"article": str, "questions": [str], '
              '"options": [[str, ...]], "answers": ["A".."D"], "id": str}')


def _race_article(obj, source, level, counter):
    """One RACE article (a parsed JSON object read at `source`, file or file:line) -> its examples."""
    where = source
    for key in RACE_KEYS:
        if key not in obj:
            raise MultipleChoiceDataError(f"{where}: missing key {key!r}; {_RACE_WHAT}.")
    article, questions, options, answers, article_id = (_require(obj, key, kind, where, _RACE_WHAT)
                                                        for key, kind in RACE_KEYS.items())
    article_id = str(article_id)
    where = f"{where} (id {article_id!r})"
    if not article.strip():
        raise MultipleChoiceDataError(f"{where}: empty article; give it its text or remove it.")
    if not questions:
        raise MultipleChoiceDataError(f"{where}: no question; an article needs at least one.")
    if not len(questions) == len(options) == len(answers):
        raise MultipleChoiceDataError(f"{where}: {len(questions)} questions, {len(options)} option lists and "
                                      f"{len(answers)} answers; they must agree (one option list and one answer "
                                      "per question).")
    out = []
    for i, (question, opts, answer) in enumerate(zip(questions, options, answers)):
        at = f"{where} question {i}"
        if not isinstance(question, str):
            raise MultipleChoiceDataError(f"{at}: the question is {type(question).__name__}, expected a string.")
        opts = _options(opts, at, _RACE_WHAT)
        counter.check(len(opts), at)
        label = _answer_letter(answer, len(opts), at)
        out.append(MultipleChoiceExample(example_id=article_id, question_index=i, context=article, question=question,
                                         options=opts, label=label, level=level, source=source))
    return out


@dataclasses.dataclass(frozen=True)
class ArticleSet:
    """A multiple-choice data set in RACE's layout: `data_dir/<directory>/<split>/<level>/`
    holding one JSON article per *.txt, or all.txt (module docstring); its --task_name is
    `name` (run_race reads the sets of `DATA_SETS`)."""

    name: str
    directory: str
    levels: tuple


RACE = ArticleSet("race", "RACE", LEVELS)
DATA_SETS = {RACE.name: RACE}


def _root(data_set, data_dir, split):
    data_dir, name = os.fspath(data_dir), data_set.directory
    for root in (files.join(data_dir, name), data_dir):
        if files.isdir(files.join(root, split)):
            return root
    raise MultipleChoiceDataError(
        f"{data_dir}: no {name}/{split} directory; expected {files.join(data_dir, name, split)}/"
        f"{{{','.join(data_set.levels)}}}/*.txt (the official RACE layout, one JSON article per file) or "
        ".../all.txt (one JSON article per line).")


def read_race(data_dir, split, high_only=False, middle_only=False):
    """Reads one RACE split (module docstring: both layouts).

    Args:
        data_dir: the directory holding RACE/ (or the RACE directory itself).
        split: "train", "dev" or "test".
        high_only, middle_only: read only that level (at most one of them).
    Returns:
        MultipleChoiceExamples (articles in order, questions in article order) with
        `.summary`, a MultipleChoiceSummary (layout, per-level counts, files read).
    Raises:
        MultipleChoiceDataError (module docstring).
    """
    if high_only and middle_only:
        raise MultipleChoiceDataError("high_only and middle_only exclude each other; set at most one.")
    levels = ("high",) if high_only else ("middle",) if middle_only else LEVELS
    return read_articles(RACE, data_dir, split, levels)


def read_articles(data_set, data_dir, split, levels=None):
    """Reads one split of an ArticleSet (read_race's answer and errors), of `levels` (default:
    all of the set's)."""
    title = data_set.directory
    if split not in SPLITS:
        raise MultipleChoiceDataError(f"{title} split {split!r} is not one of {', '.join(SPLITS)}.")
    levels = levels or data_set.levels
    # RACE read whole: where a level is missing, read_race can read the other alone
    hint = " (pass high_only or middle_only to read one level)" if data_set is RACE and levels == LEVELS else ""
    root = _root(data_set, data_dir, split)
    directory = files.join(root, split)
    examples = MultipleChoiceExamples()
    summary = MultipleChoiceSummary(source="", layout="", directory=directory, split=split)
    counter = _ChoiceCount()
    for level in levels:
        level_dir = files.join(directory, level)
        if not files.isdir(level_dir):
            raise MultipleChoiceDataError(
                f"{level_dir}: no such directory; the {title} layout has {directory}/{{{','.join(data_set.levels)}}}/"
                f"{hint}.")
        names = sorted((n for n in files.listdir(level_dir) if n.endswith(".txt") and not n.startswith(".")
                        and files.isfile(files.join(level_dir, n))), key=_natural_key)
        if not names:
            raise MultipleChoiceDataError(f"{level_dir}: empty, no .txt article file; put the {title} articles there "
                                          "(one JSON article per <n>.txt, or one per line of all.txt).")
        if "all.txt" in names:
            layout, path = "all.txt", files.join(level_dir, "all.txt")
            ignored = [files.join(level_dir, n) for n in names if n != "all.txt"]
            if ignored:
                logger.warning("%s: reading all.txt only; %d other .txt file(s) beside it are ignored.", level_dir,
                               len(ignored))
                summary.ignored.extend(ignored)
            paths = [path]
            read = ((f"{path}:{number}", obj)
                    for number, obj in read_json_lines(path, RACE_ARTICLE, error=MultipleChoiceDataError))
        else:
            layout, paths = "files", [files.join(level_dir, name) for name in names]
            read = ((path, read_json(path, RACE_ARTICLE, error=MultipleChoiceDataError)) for path in paths)
        level_examples, articles = [], 0
        for source, obj in read:
            level_examples += _race_article(obj, source, level, counter)
            articles += 1
        summary.paths.extend(paths)
        if not level_examples:
            raise MultipleChoiceDataError(f"{level_dir}: no article in {layout}; put the {title} articles there.")
        summary.levels[level] = {"layout": layout, "path": level_dir, "articles": articles,
                                 "questions": len(level_examples)}
        summary.articles += articles
        examples.extend(level_examples)
    layouts = {v["layout"] for v in summary.levels.values()}
    summary.layout = layouts.pop() if len(layouts) == 1 else "mixed"
    summary.questions = len(examples)
    summary.num_choices = counter.count
    per_level = ", ".join(f"{lv} {v['articles']} articles / {v['questions']} questions ({v['layout']})"
                          for lv, v in summary.levels.items())
    described = {"files": "files layout, one JSON article per file", "all.txt": "all.txt layout, one JSON "
                 "article per line", "mixed": "mixed layouts"}[summary.layout]
    summary.source = f"{title} {split} at {directory} ({described}): {per_level}"
    examples.summary = summary
    logger.info("%s", summary.source)
    return examples


_JSONL_WHAT = ('a multiple-choice line is one JSON object {"context": str, "question": str, "options": [str, ...], '
               '"answer": index or letter (optional), "id": optional}')


def _jsonl_answer(value, num_options, where):
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < num_options:
            raise MultipleChoiceDataError(f"{where}: answer index {value} is outside the options (0-{num_options - 1}"
                                          f"); fix the answer or add the option.")
        return value
    if isinstance(value, str):
        return _answer_letter(value, num_options, where)
    raise MultipleChoiceDataError(f"{where}: answer {value!r:.60} is neither an index (0-{num_options - 1}) nor a "
                                  f"letter ({_letters(num_options)}); leave it out (or null) for prediction.")


def read_multiple_choice_jsonl(path):
    """Reads generic multiple-choice JSON lines (module docstring).

    Args:
        path: the .jsonl file (blank lines are skipped).
    Returns:
        MultipleChoiceExamples with `.summary` (layout "jsonl", level "" on every example).
    Raises:
        MultipleChoiceDataError (module docstring), also for an empty file.
    """
    path = os.fspath(path)
    examples = MultipleChoiceExamples()
    counter = _ChoiceCount()
    per_id = {}
    for number, obj in read_json_lines(path, MULTIPLE_CHOICE_LINE, error=MultipleChoiceDataError):
        where = f"{path}:{number}"
        context = _require(obj, "context", str, where, _JSONL_WHAT)
        question = _require(obj, "question", str, where, _JSONL_WHAT)
        if "options" not in obj:
            raise MultipleChoiceDataError(f"{where}: missing key 'options'; {_JSONL_WHAT}.")
        options = _options(obj["options"], where, _JSONL_WHAT)
        counter.check(len(options), where)
        label = _jsonl_answer(obj.get("answer"), len(options), where)
        if not context.strip():
            raise MultipleChoiceDataError(f"{where}: empty context; give the passage the question is about.")
        example_id = obj.get("id")
        if example_id is None:
            example_id = f"{files.basename(path)}:{number}"
        elif not isinstance(example_id, (str, int)) or isinstance(example_id, bool):
            raise MultipleChoiceDataError(f"{where}: id {example_id!r:.60} is not a string or integer.")
        example_id = str(example_id)
        index = per_id.get(example_id, 0)
        per_id[example_id] = index + 1
        examples.append(MultipleChoiceExample(example_id=example_id, question_index=index, context=context,
                                              question=question, options=options, label=label, level="",
                                              source=where))
    if not examples:
        raise MultipleChoiceDataError(f"{path}: no question in the file; {_JSONL_WHAT}.")
    unlabeled = sum(e.label is None for e in examples)
    summary = MultipleChoiceSummary(
        source=f"multiple-choice JSONL {path}: {len(examples)} questions on {len(per_id)} contexts, "
               f"{counter.count} options each" + (f", {unlabeled} without answer" if unlabeled else ""),
        layout="jsonl", directory=path, articles=len(per_id), questions=len(examples), num_choices=counter.count,
        unlabeled=unlabeled, paths=[path])
    examples.summary = summary
    logger.info("%s", summary.source)
    return examples
