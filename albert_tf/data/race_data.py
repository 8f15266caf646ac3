"""RACE and generic multiple-choice data: files -> examples -> [N, C, T] features -> cached TFRecords.

    examples = read_race("data", "train")                 # data/RACE/train/{middle,high}/...
    examples.summary.layout                                # "files" or "all.txt"
    settings = MultipleChoiceSettings(max_seq_length=512, max_qa_length=128)
    arrays = examples_to_arrays(examples, tokenizer, settings)   # input_ids [N, C, T], label_ids [N]
    result = load_or_build_features(examples, "out/train.tfrecord", tokenizer, settings)
    result.arrays, result.rebuilt, result.reason

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

Features (the release's race_utils): per option j of a question,
    ending  = tokenize(qa_text(question, option_j))[-max_qa_length:]  (its LAST pieces)
    context = tokenize(article), cut to max_seq_length - 3 - len(ending) pieces if longer
    input_ids   [CLS] context [SEP] ending [SEP], then the model's pad id up to T
    segment_ids 0 for [CLS] context [SEP], 1 for ending [SEP], 0 for padding
    input_mask  1 for the real positions, 0 for padding
where qa_text fills the blank ("_") of a cloze question with the option, or joins
question and option with a space; question and option are preprocess_text'ed first (the
tokenizer's do_lower_case), as the release's RaceProcessor does. label_ids: the answer's
index, -1 for None.

Caching: `load_or_build_features` writes a TFRecord (int64 input_ids, input_mask,
segment_ids [C*T], label_ids [1], is_real_example [1]: the release's names and layout)
and its sidecar through albert_tf.data.feature_cache, recording max_seq_length,
max_qa_length, the number of options, do_lower_case, the SentencePiece sha256 and the
input's content hash (for a RACE split the combined hash of every file read). It reuses
the file only when all of these match and otherwise says why it rebuilt.

Example (runnable; `tokenizer` a SentencePieceTokenizer):
```python
examples = MultipleChoiceExamples([MultipleChoiceExample(
    example_id="a1", question_index=0, context="The cat sat on the mat.",
    question="The cat sat on the _.", options=("mat", "moon"), label=0)])
arrays = examples_to_arrays(examples, tokenizer, MultipleChoiceSettings(max_seq_length=32, max_qa_length=16))
arrays["input_ids"].shape   # (1, 2, 32)
arrays["label_ids"]         # array([0], dtype=int32)
```
"""

import dataclasses
import json
import logging
import os

import numpy as np

from albert_tf.data import feature_cache
from albert_tf.data.tokenization import preprocess_text

logger = logging.getLogger("albert_tf")

SPLITS = ("train", "dev", "test")
LEVELS = ("middle", "high")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MAX_OPTIONS = len(LETTERS)
RACE_KEYS = ("article", "questions", "options", "answers", "id")
FEATURE_FORMAT = 1  # bump when the feature layout changes: old caches are rebuilt
RECORD_FEATURES = ("input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example")
ARRAY_NAMES = ("input_ids", "input_mask", "segment_ids", "label_ids")


class MultipleChoiceDataError(ValueError):
    """Bad multiple-choice input or feature file; the message names the file (and line) and
    what to fix."""


# ----------------------------------------------------------------------------------------------------------
# Examples


@dataclasses.dataclass
class MultipleChoiceExample:
    """One question with its options.

    Attributes:
        example_id: the article id (RACE "id"; JSONL "id", else "<file name>:<line>").
        question_index: the question's index within its article (JSONL: among the lines
            with the same example_id, in file order).
        context: the article, as in the file.
        question: as in the file (a "_" marks a cloze blank).
        options: tuple of str, C of them.
        label: the answer's index into options, or None (no answer: prediction only).
        level: "middle" / "high" (RACE), "" for generic data.
        source: where it was read: "file" (RACE files layout) or "file:line".
    """

    example_id: str
    question_index: int
    context: str
    question: str
    options: tuple
    label: object = None
    level: str = ""
    source: str = ""

    @property
    def num_choices(self):
        return len(self.options)


@dataclasses.dataclass
class MultipleChoiceSummary:
    """What a reader read.

    Attributes:
        source: one line saying what was read and in which layout (also logged).
        layout: "files" (one JSON article per file), "all.txt" (one per line), "mixed"
            (levels differ; see levels) or "jsonl" (generic).
        directory: the RACE split directory (data_dir/RACE/<split>) or the JSONL file.
        split: "train" / "dev" / "test" ("" for JSONL).
        levels: {level: {"layout", "path" (the level directory), "articles", "questions"}}
            for the levels read ({} for JSONL).
        articles, questions: totals (JSONL: distinct example ids, lines).
        num_choices: options per question (C).
        unlabeled: questions without an answer.
        paths: the files read, in reading order (what the feature cache hashes).
        ignored: .txt files left unread beside an all.txt.
    """

    source: str
    layout: str
    directory: str
    split: str = ""
    levels: dict = dataclasses.field(default_factory=dict)
    articles: int = 0
    questions: int = 0
    num_choices: int = 0
    unlabeled: int = 0
    paths: list = dataclasses.field(default_factory=list)
    ignored: list = dataclasses.field(default_factory=list)

    def describe(self):
        """The one-line description (`source`)."""
        return self.source

    def to_dict(self, with_paths=True):
        out = dataclasses.asdict(self)
        if not with_paths:
            out["paths"] = len(self.paths)
            out["ignored"] = len(self.ignored)
        return out


class MultipleChoiceExamples(list):
    """A list of MultipleChoiceExample with the `summary` (MultipleChoiceSummary) of the read."""

    summary = None


def qa_text(question, option):
    """The release's question-option text, on already preprocessed strings: a question
    with a blank has every "_" replaced by the option; any other question is followed by
    a space and the option.

        qa_text("the cat sat on the _ .", "mat")  # "the cat sat on the mat ."
        qa_text("where did the cat sit?", "mat")  # "where did the cat sit? mat"
    """
    if "_" in question:
        return question.replace("_", option)
    return question + " " + option


def _decode(path, data, line=None):
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = line or data.count(b"\n", 0, e.start) + 1
        where = f"{path}:{line}"
        raise MultipleChoiceDataError(f"{where}: not valid UTF-8 ({e.reason} at byte {e.start}); save the file "
                                      "as UTF-8.") from None


def _json(text, where, what):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise MultipleChoiceDataError(f"{where}: not JSON ({e.msg} at column {e.colno}); {what}.") from None


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


_RACE_WHAT = ('a RACE article is one JSON object {"article": str, "questions": [str], '
              '"options": [[str, ...]], "answers": ["A".."D"], "id": str}')


def _race_article(obj, source, level, counter):
    """One RACE article (a parsed JSON object read at `source`, file or file:line) -> its examples."""
    where = source
    if not isinstance(obj, dict):
        raise MultipleChoiceDataError(f"{where}: a JSON {type(obj).__name__}, not an article object; {_RACE_WHAT}.")
    for key in RACE_KEYS:
        if key not in obj:
            raise MultipleChoiceDataError(f"{where}: missing key {key!r}; {_RACE_WHAT}.")
    article = _require(obj, "article", str, where, _RACE_WHAT)
    questions = _require(obj, "questions", list, where, _RACE_WHAT)
    options = _require(obj, "options", list, where, _RACE_WHAT)
    answers = _require(obj, "answers", list, where, _RACE_WHAT)
    article_id = str(_require(obj, "id", (str, int), where, _RACE_WHAT))
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


def _race_root(data_dir, split):
    data_dir = os.fspath(data_dir)
    for root in (os.path.join(data_dir, "RACE"), data_dir):
        if os.path.isdir(os.path.join(root, split)):
            return root
    raise MultipleChoiceDataError(
        f"{data_dir}: no RACE/{split} directory; expected {os.path.join(data_dir, 'RACE', split)}/{{middle,high}}/"
        "*.txt (the official RACE layout, one JSON article per file) or .../all.txt (one JSON article per line).")


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
        MultipleChoiceDataError (a ValueError) naming the file (and line) and what to fix.
    """
    if split not in SPLITS:
        raise MultipleChoiceDataError(f"RACE split {split!r} is not one of {', '.join(SPLITS)}.")
    if high_only and middle_only:
        raise MultipleChoiceDataError("high_only and middle_only exclude each other; set at most one.")
    levels = ("high",) if high_only else ("middle",) if middle_only else LEVELS
    root = _race_root(data_dir, split)
    directory = os.path.join(root, split)
    examples = MultipleChoiceExamples()
    summary = MultipleChoiceSummary(source="", layout="", directory=directory, split=split)
    counter = _ChoiceCount()
    for level in levels:
        level_dir = os.path.join(directory, level)
        if not os.path.isdir(level_dir):
            raise MultipleChoiceDataError(
                f"{level_dir}: no such directory; the RACE layout has {directory}/{{middle,high}}/"
                + ("" if high_only or middle_only else " (pass high_only or middle_only to read one level)") + ".")
        names = sorted((n for n in os.listdir(level_dir) if n.endswith(".txt") and not n.startswith(".")
                        and os.path.isfile(os.path.join(level_dir, n))), key=_natural_key)
        if not names:
            raise MultipleChoiceDataError(f"{level_dir}: empty, no .txt article file; put the RACE articles there "
                                          "(one JSON article per <n>.txt, or one per line of all.txt).")
        level_examples, articles = [], 0
        if "all.txt" in names:
            layout = "all.txt"
            path = os.path.join(level_dir, "all.txt")
            ignored = [os.path.join(level_dir, n) for n in names if n != "all.txt"]
            if ignored:
                logger.warning("%s: reading all.txt only; %d other .txt file(s) beside it are ignored.", level_dir,
                               len(ignored))
                summary.ignored.extend(ignored)
            with open(path, "rb") as f:
                raw_lines = f.read().split(b"\n")
            for number, raw in enumerate(raw_lines, 1):
                line = _decode(path, raw, number)
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                obj = _json(line, where, "all.txt holds one JSON article per line")
                level_examples += _race_article(obj, where, level, counter)
                articles += 1
            summary.paths.append(path)
        else:
            layout = "files"
            for name in names:
                path = os.path.join(level_dir, name)
                with open(path, "rb") as f:
                    text = _decode(path, f.read())
                obj = _json(text, path, "a RACE article file holds one JSON article")
                level_examples += _race_article(obj, path, level, counter)
                articles += 1
                summary.paths.append(path)
        if not level_examples:
            raise MultipleChoiceDataError(f"{level_dir}: no article in {layout}; put the RACE articles there.")
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
    summary.source = f"RACE {split} at {directory} ({described}): {per_level}"
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
        MultipleChoiceDataError naming the file and line: not JSON, a missing or mistyped
        key, fewer than 2 options, another option count than the first line's, an answer
        outside the options; also an empty file.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise MultipleChoiceDataError(f"{path}: no such file.")
    with open(path, "rb") as f:
        raw_lines = f.read().split(b"\n")
    examples = MultipleChoiceExamples()
    counter = _ChoiceCount()
    per_id = {}
    for number, raw in enumerate(raw_lines, 1):
        line = _decode(path, raw, number)
        if not line.strip():
            continue
        where = f"{path}:{number}"
        obj = _json(line, where, _JSONL_WHAT)
        if not isinstance(obj, dict):
            raise MultipleChoiceDataError(f"{where}: a JSON {type(obj).__name__}; {_JSONL_WHAT}.")
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
            example_id = f"{os.path.basename(path)}:{number}"
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


# ----------------------------------------------------------------------------------------------------------
# Features


@dataclasses.dataclass(frozen=True)
class MultipleChoiceSettings:
    """How features are made (defaults: the release's run_race flags).

    max_seq_length: T, positions per (question, option) sequence.
    max_qa_length: pieces kept of the question-option text (its last ones).
    """

    max_seq_length: int = 512
    max_qa_length: int = 128

    def validate(self):
        for name in ("max_seq_length", "max_qa_length"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
                raise ValueError(f"{name} must be an integer, got {value!r}.")
        if self.max_qa_length < 1:
            raise ValueError(f"max_qa_length must be >= 1, got {self.max_qa_length}.")
        if self.max_seq_length - self.max_qa_length - 3 < 1:
            raise ValueError(f"max_seq_length ({self.max_seq_length}) must exceed max_qa_length "
                             f"({self.max_qa_length}) + 3 ([CLS], 2 x [SEP]) to leave room for the article.")
        return self


def _encode(tokenizer, text):
    return tokenizer.encode(preprocess_text(text, tokenizer.do_lower_case))


def _qa_ids(example, tokenizer, max_qa_length):
    lower = tokenizer.do_lower_case
    question = preprocess_text(example.question, lower)
    return [_encode(tokenizer, qa_text(question, preprocess_text(o, lower)))[-max_qa_length:]
            for o in example.options]


def _fill(context_ids, endings, tokenizer, T):
    C = len(endings)
    ids = np.full((C, T), tokenizer.pad_id, np.int32)
    mask = np.zeros((C, T), np.int32)
    segments = np.zeros((C, T), np.int32)
    for j, ending in enumerate(endings):
        context = context_ids[:T - 3 - len(ending)]
        n = len(context)
        ids[j, 0] = tokenizer.cls_id
        ids[j, 1:1 + n] = context
        ids[j, 1 + n] = tokenizer.sep_id
        ids[j, 2 + n:2 + n + len(ending)] = ending
        end = 3 + n + len(ending)
        ids[j, end - 1] = tokenizer.sep_id
        mask[j, :end] = 1
        segments[j, 2 + n:end] = 1
    return ids, mask, segments


def convert_example(example, tokenizer, settings):
    """One question -> {"input_ids", "input_mask", "segment_ids"}: int32 [C, T] (module
    docstring for the layout; C = len(example.options), T = settings.max_seq_length).

    Args:
        example: MultipleChoiceExample.
        tokenizer: SentencePieceTokenizer (its pad / cls / sep ids and do_lower_case).
        settings: MultipleChoiceSettings.
    """
    settings.validate()
    ids, mask, segments = _fill(_encode(tokenizer, example.context),
                                _qa_ids(example, tokenizer, settings.max_qa_length), tokenizer,
                                settings.max_seq_length)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def examples_to_arrays(examples, tokenizer, settings):
    """Examples -> {"input_ids", "input_mask", "segment_ids": int32 [N, C, T], "label_ids":
    int32 [N] (the answer's index, -1 without one)}.

    The article of consecutive questions on the same text is tokenized once.

    Raises:
        MultipleChoiceDataError when there is no example or the option counts differ.
    """
    settings.validate()
    examples = list(examples)
    if not examples:
        raise MultipleChoiceDataError("examples_to_arrays: no examples.")
    N, C, T = len(examples), examples[0].num_choices, settings.max_seq_length
    out = {name: np.zeros((N, C, T), np.int32) for name in ("input_ids", "input_mask", "segment_ids")}
    labels = np.full(N, -1, np.int32)
    cached_text, context_ids = None, None
    for i, example in enumerate(examples):
        if example.num_choices != C:
            raise MultipleChoiceDataError(
                f"{example.source or example.example_id}: {example.num_choices} options, but "
                f"{examples[0].source or examples[0].example_id} has {C}; every question must have the same number.")
        if example.context is not cached_text and example.context != cached_text:
            context_ids, cached_text = _encode(tokenizer, example.context), example.context
        ids, mask, segments = _fill(context_ids, _qa_ids(example, tokenizer, settings.max_qa_length), tokenizer, T)
        out["input_ids"][i], out["input_mask"][i], out["segment_ids"][i] = ids, mask, segments
        if example.label is not None:
            labels[i] = example.label
    out["label_ids"] = labels
    return out


# ----------------------------------------------------------------------------------------------------------
# Feature files


def _record_shapes(settings):
    C, T = int(settings["num_choices"]), int(settings["max_seq_length"])
    return {"input_ids": (C, T), "input_mask": (C, T), "segment_ids": (C, T), "label_ids": (), "is_real_example": ()}


MULTIPLE_CHOICE_FEATURES = feature_cache.FeatureKind(
    name="albert_tf multiple-choice features", format=FEATURE_FORMAT, shapes=_record_shapes,
    error=MultipleChoiceDataError)


def feature_file_settings(settings, tokenizer, input_paths, num_choices):
    """The record of what makes a feature file (compared by feature_cache.check_feature_file):
    max_seq_length, max_qa_length, num_choices, the tokenizer and the input's content."""
    settings.validate()
    return {
        "format": FEATURE_FORMAT,
        "max_seq_length": int(settings.max_seq_length),
        "max_qa_length": int(settings.max_qa_length),
        "num_choices": int(num_choices),
        **feature_cache.tokenizer_record(tokenizer),
        **feature_cache.input_record(input_paths, MultipleChoiceDataError),
    }


def write_feature_file(arrays, path, settings, extra=None):
    """examples_to_arrays' arrays -> the TFRecord `path` (+ sidecar), atomically. Returns
    the sidecar dict."""
    encoder = feature_cache.RecordEncoder(RECORD_FEATURES)
    N = len(arrays["label_ids"])

    def records():
        for i in range(N):
            yield encoder.encode_int64({
                "input_ids": arrays["input_ids"][i].reshape(-1), "input_mask": arrays["input_mask"][i].reshape(-1),
                "segment_ids": arrays["segment_ids"][i].reshape(-1), "label_ids": [int(arrays["label_ids"][i])],
                "is_real_example": [1]})

    return feature_cache.write_feature_file(records(), path, MULTIPLE_CHOICE_FEATURES, settings, extra=extra)


def read_feature_arrays(path):
    """A feature file -> {"input_ids", "input_mask", "segment_ids": int32 [N, C, T],
    "label_ids": int32 [N]} (examples_to_arrays' layout). Uses TensorFlow."""
    return feature_cache.read_feature_arrays(path, MULTIPLE_CHOICE_FEATURES, names=ARRAY_NAMES)


@dataclasses.dataclass
class MultipleChoiceFeatures:
    """load_or_build_features' answer.

    Attributes:
        arrays: examples_to_arrays' dict (input_ids, input_mask, segment_ids [N, C, T],
            label_ids [N], -1 where unlabeled).
        num_features: N.
        feature_file: the TFRecord.
        rebuilt: whether it was (re)written now.
        reason: why it was rebuilt, or "reused: ...".
        source: the description of the input.
        sidecar: the feature file's sidecar dict (settings, counts).
    """

    arrays: dict
    num_features: int
    feature_file: str
    rebuilt: bool
    reason: str
    source: str
    sidecar: dict


def load_or_build_features(examples, feature_file, tokenizer, settings, source_description=None, input_paths=None):
    """The features of `examples`, from `feature_file` when it was made with the same
    settings, tokenizer and input content (feature_cache), else built and written.

    Args:
        examples: MultipleChoiceExamples from read_race / read_multiple_choice_jsonl (their
            `.summary` names the input), or any list of MultipleChoiceExample with
            `input_paths` given.
        feature_file: the TFRecord cache (sidecar `<feature_file>.json`).
        tokenizer: SentencePieceTokenizer.
        settings: MultipleChoiceSettings.
        source_description: a line saying what the input is (kept in the sidecar);
            default examples.summary.source.
        input_paths: the file(s) the examples came from, hashed to notice a changed input
            (several files: one combined hash); default examples.summary.paths (every
            file the reader read).

    Returns:
        MultipleChoiceFeatures (.arrays, .num_features, .feature_file, .rebuilt, .reason,
        .source, .sidecar).

    Example:
    ```python
    examples = read_race("data", "dev")
    features = load_or_build_features(examples, "out/dev.tfrecord", tokenizer, MultipleChoiceSettings())
    features.arrays["input_ids"].shape   # (N, 4, 512)
    ```
    """
    settings.validate()
    feature_file = os.fspath(feature_file)
    summary = getattr(examples, "summary", None)
    if source_description is None:
        source_description = summary.source if summary is not None else ""
    if input_paths is None:
        if summary is None:
            raise ValueError("load_or_build_features: pass input_paths (the examples carry no summary).")
        input_paths = summary.paths
    if not len(examples):
        raise MultipleChoiceDataError(f"{source_description or feature_file}: no examples to make features of.")
    record = feature_file_settings(settings, tokenizer, input_paths, examples[0].num_choices)

    def stale(sidecar):
        if sidecar.get("num_features") != len(examples):
            return f"{sidecar.get('num_features')} features in the file, {len(examples)} examples given"
        return None

    def build():
        arrays = examples_to_arrays(examples, tokenizer, settings)
        extra = {"source": source_description}
        if summary is not None:
            extra["read_summary"] = summary.to_dict(with_paths=False)
        write_feature_file(arrays, feature_file, record, extra=extra)
        return arrays

    outcome = feature_cache.load_or_build(feature_file, record, MULTIPLE_CHOICE_FEATURES, build, also_stale=stale)
    arrays = outcome.built if outcome.rebuilt else read_feature_arrays(feature_file)
    return MultipleChoiceFeatures(arrays, outcome.sidecar["num_features"], feature_file, outcome.rebuilt,
                                  outcome.reason, source_description, outcome.sidecar)
