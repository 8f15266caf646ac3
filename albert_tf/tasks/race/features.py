"""Multiple-choice features: examples -> int32 [N, C, T] arrays, the release's race_utils layout.

    settings = MultipleChoiceSettings(max_seq_length=512, max_qa_length=128)
    arrays = examples_to_arrays(examples, tokenizer, settings)   # input_ids [N, C, T], label_ids [N]

Features (the release's race_utils): per option j of a question,
    ending  = tokenize(qa_text(question, option_j))[-max_qa_length:]  (its LAST pieces)
    context = tokenize(article), cut to max_seq_length - 3 - len(ending) pieces if longer
    input_ids   [CLS] context [SEP] ending [SEP], then the model's pad id up to T
    segment_ids 0 for [CLS] context [SEP], 1 for ending [SEP], 0 for padding
    input_mask  1 for the real positions, 0 for padding
where qa_text fills the blank ("_") of a cloze question with the option, or joins
question and option with a space; question and option are preprocess_text'ed first (the
tokenizer's do_lower_case), as the release's RaceProcessor does. tokenize is
SentencePieceTokenizer.encode: the release's preprocess_text and encode_pieces (a comma
after a digit is a piece of its own). label_ids: the answer's index, -1 for None.
"""

import dataclasses

import numpy as np

from albert_tf.tasks.race.examples import MultipleChoiceDataError
from albert_tf.data.tokenization import preprocess_text


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


def convert_example(example, tokenizer, settings):
    """One question (a MultipleChoiceExample) -> {"input_ids", "input_mask", "segment_ids"}:
    int32 [C, T], examples_to_arrays' rows of it alone."""
    arrays = examples_to_arrays([example], tokenizer, settings)
    return {name: arrays[name][0] for name in ("input_ids", "input_mask", "segment_ids")}


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
    out["input_ids"][:] = tokenizer.pad_id
    labels = np.full(N, -1, np.int32)
    cached_text, context_ids = None, None
    for i, example in enumerate(examples):
        if example.num_choices != C:
            raise MultipleChoiceDataError(
                f"{example.source or example.example_id}: {example.num_choices} options, but "
                f"{examples[0].source or examples[0].example_id} has {C}; every question must have the same number.")
        if example.context is not cached_text and example.context != cached_text:
            context_ids, cached_text = _encode(tokenizer, example.context), example.context
        ids, mask, segments = out["input_ids"][i], out["input_mask"][i], out["segment_ids"][i]  # [C, T] each
        for j, ending in enumerate(_qa_ids(example, tokenizer, settings.max_qa_length)):
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
        if example.label is not None:
            labels[i] = example.label
    out["label_ids"] = labels
    return out
