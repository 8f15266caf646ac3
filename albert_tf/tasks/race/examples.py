"""Multiple-choice examples: what the readers (albert_tf.tasks.race.reading) return and the
error every module of albert_tf.tasks.race raises.

    examples = MultipleChoiceExamples([MultipleChoiceExample(
        example_id="a1", question_index=0, context="The cat sat on the mat.",
        question="The cat sat on the _.", options=("mat", "moon"), label=0)])
    examples_to_arrays(examples, tokenizer, MultipleChoiceSettings(max_seq_length=32, max_qa_length=16))
    # {"input_ids": int32 [1, 2, 32], ..., "label_ids": array([0], dtype=int32)}  (race.features)
"""

import dataclasses


class MultipleChoiceDataError(ValueError):
    """Bad multiple-choice input or feature file; the message names the file (and line) and
    what to fix."""


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

    def to_dict(self):
        """The JSON form, the file lists as their counts."""
        return dict(dataclasses.asdict(self), paths=len(self.paths), ignored=len(self.ignored))


class MultipleChoiceExamples(list):
    """A list of MultipleChoiceExample with the `summary` (MultipleChoiceSummary) of the read."""

    summary = None

