"""SQuAD features: examples -> the release's windows, one SquadFeature per window.

    features = convert_examples_to_features(examples, tokenizer, is_training=True)
    arrays = features_to_arrays(features)                                 # model inputs and labels

Features (release layout): [CLS] question [SEP] context-window [SEP], padded with the model's
pad id to max_seq_length. Per position:
  input_mask    1 for the real positions, 0 for padding.
  segment_ids   0 for [CLS], question and the first [SEP]; 1 for the context and the last
                [SEP]; 0 for padding.
  p_mask        the release's (v1 and v2): 1 where an answer can NOT be, i.e. question
                pieces, both [SEP]s and padding; 0 for the context pieces AND for [CLS]
                (position 0 is the "no answer" target, so it must stay unmasked).
  token_spans   (start, end) character span in the original context of a context piece,
                None elsewhere; example.context_text[start:end] is the piece's text.
  token_is_max_context  the release's _check_is_max_context: of the windows holding a
                piece, the one with the largest min(left, right) + 0.01 * window length
                (the first on a tie); False outside the context.
  start_position / end_position  token indexes of the answer's first and last piece in the
                window (the smallest piece span covering the answer). Impossible questions
                and windows that do not hold the whole answer point at 0 ([CLS]) and have
                is_impossible 1 - in v1 as in v2, as the release does. For prediction
                features they are filled the same way from the first gold answer (informative
                only).
Windows: max_tokens_for_doc = max_seq_length - len(question pieces) - 3; a window starts
where the previous one started + min(its length, doc_stride) until one reaches the end.
The question keeps its first max_query_length pieces.
"""

import dataclasses
import logging

import numpy as np

from albert_tf.tasks.squad.alignment import tokenize_context
from albert_tf.tasks.squad.reading import MAX_LISTED_IDS, Summarized, Summary

logger = logging.getLogger("albert_tf")

FIRST_UNIQUE_ID = 1000000000  # the release's first unique_id


@dataclasses.dataclass(frozen=True)
class FeatureSettings:
    """How features are made (defaults: the release's)."""

    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    is_training: bool = True
    version: object = None  # "v1", "v2" or None: from the file

    def validate(self):
        if self.max_seq_length - self.max_query_length - 3 < 1:
            raise ValueError(f"max_seq_length ({self.max_seq_length}) must exceed max_query_length "
                             f"({self.max_query_length}) + 3 ([CLS], 2 x [SEP]) to leave room for the context.")
        if self.doc_stride < 1:
            raise ValueError(f"doc_stride must be >= 1, got {self.doc_stride}.")
        if self.max_query_length < 1:
            raise ValueError(f"max_query_length must be >= 1, got {self.max_query_length}.")
        return self


@dataclasses.dataclass(eq=False)
class SquadFeature:
    """One window of one example (see the module docstring for the per-position meanings).

    Stored compactly: `input_ids` (int32 [T]); the context occupies positions
    [context_offset, context_offset + context_length) and holds the example's pieces
    doc_start .. doc_start + context_length - 1; `context_spans` (int32 [L, 2]) and
    `context_is_max` (bool [L]) cover those positions (None for features read back from a
    training cache). input_mask, segment_ids, p_mask, token_spans and token_is_max_context
    are derived properties.
    """

    unique_id: int
    example_index: int
    qas_id: str
    doc_span_index: int
    doc_start: int
    input_ids: np.ndarray
    context_offset: int
    context_length: int
    context_spans: object
    context_is_max: object
    start_position: int
    end_position: int
    is_impossible: bool

    @property
    def max_seq_length(self):
        return len(self.input_ids)

    @property
    def sequence_length(self):
        """Real positions: [CLS] question [SEP] context [SEP]."""
        return self.context_offset + self.context_length + 1

    @property
    def input_mask(self):
        m = np.zeros(self.max_seq_length, np.int32)
        m[:self.sequence_length] = 1
        return m

    @property
    def segment_ids(self):
        s = np.zeros(self.max_seq_length, np.int32)
        s[self.context_offset:self.sequence_length] = 1
        return s

    @property
    def p_mask(self):
        p = np.ones(self.max_seq_length, np.int32)
        p[0] = 0
        p[self.context_offset:self.context_offset + self.context_length] = 0
        return p

    def _per_position(self, context_values, fill, convert):
        """Per position: convert(value) of the context piece there, `fill` elsewhere (None
        when context_values is None)."""
        if context_values is None:
            return None
        out = [fill] * self.max_seq_length
        for k, v in enumerate(context_values.tolist()):
            out[self.context_offset + k] = convert(v)
        return out

    @property
    def token_spans(self):
        """Per position: (start, end) in the example's context_text, or None."""
        return self._per_position(self.context_spans, None, tuple)

    @property
    def token_is_max_context(self):
        """Per position: True where this window is the piece's max-context window."""
        return self._per_position(self.context_is_max, False, bool)

    def as_window(self):
        """{"qid", "token_spans", "token_is_max_context"}: the window form of
        albert_tf.tasks.squad.postprocess (add the model's outputs to it)."""
        return {"qid": self.qas_id, "token_spans": self.token_spans,
                "token_is_max_context": self.token_is_max_context}

    def answer_text(self, example, start_index, end_index):
        """The original context text from position start_index to end_index (inclusive), or
        None when either is not a context position or end < start."""
        lo, hi = self.context_offset, self.context_offset + self.context_length
        if not (lo <= start_index < hi and lo <= end_index < hi and start_index <= end_index):
            return None
        return example.context_text[int(self.context_spans[start_index - lo, 0]):
                                    int(self.context_spans[end_index - lo, 1])]


@dataclasses.dataclass
class ConvertSummary(Summary):
    """examples: converted; features: made; answerable / impossible: features by label;
    skipped: training examples whose answer no piece covers (e.g. only characters that
    normalisation drops); skipped_ids: the first of them; truncated_questions: questions cut
    to max_query_length."""

    examples: int = 0
    features: int = 0
    answerable: int = 0
    impossible: int = 0
    skipped: int = 0
    skipped_ids: list = dataclasses.field(default_factory=list)
    truncated_questions: int = 0


class SquadFeatures(Summarized):
    """A list of SquadFeature with the `summary` (ConvertSummary) of the conversion."""


def doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
    """The release's windows: [(start, length), ...] over num_tokens context pieces."""
    spans, start = [], 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


def max_context_flags(spans, num_tokens):
    """Per window, a bool array [length]: the window is the piece's max-context one (the
    release's _check_is_max_context, first window on a tie)."""
    starts = np.array([s for s, _ in spans], np.int64)[:, None]
    lengths = np.array([n for _, n in spans], np.int64)[:, None]
    pos = np.arange(num_tokens)[None, :]
    left, right = pos - starts, starts + lengths - 1 - pos
    score = np.where((left >= 0) & (right >= 0), np.minimum(left, right) + 0.01 * lengths, -np.inf)
    best = np.argmax(score, axis=0)
    return [best[s:s + n] == k for k, (s, n) in enumerate(spans)]


def iter_features(examples, tokenizer, max_seq_length=384, doc_stride=128, max_query_length=64, is_training=True,
                  first_unique_id=FIRST_UNIQUE_ID, summary=None):
    """Yields the SquadFeatures of `examples` (convert_examples_to_features without the list);
    fills `summary` (a ConvertSummary) when given."""
    FeatureSettings(max_seq_length, doc_stride, max_query_length, is_training).validate()
    summary = summary if summary is not None else ConvertSummary()
    cls_id, sep_id, pad_id = tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id
    unique_id = first_unique_id
    cached_text, context = None, None
    for example_index, example in enumerate(examples):
        if example.context_text is not cached_text and example.context_text != cached_text:
            context = tokenize_context(example.context_text, tokenizer)
            cached_text = example.context_text
        query = tokenizer.encode(example.question_text)
        if len(query) > max_query_length:
            query = query[:max_query_length]
            summary.truncated_questions += 1
        tok_span = None
        if not example.is_impossible and example.answer_start is not None:
            tok_span = context.char_span_to_tokens(example.answer_start, example.answer_end)
            if tok_span is None:
                logger.warning("squad features: question %r: no piece covers the answer %r.", example.qas_id,
                               example.answer_text)
                if is_training:
                    summary.skipped += 1
                    if len(summary.skipped_ids) < MAX_LISTED_IDS:
                        summary.skipped_ids.append(example.qas_id)
                    continue
        summary.examples += 1
        n = len(context.ids)
        offset = len(query) + 2
        spans = doc_spans(n, max_seq_length - len(query) - 3, doc_stride)
        flags = max_context_flags(spans, n)
        for span_index, (start, length) in enumerate(spans):
            ids = np.full(max_seq_length, pad_id, np.int32)
            ids[0] = cls_id
            ids[1:offset - 1] = query
            ids[offset - 1] = sep_id
            ids[offset:offset + length] = context.ids[start:start + length]
            ids[offset + length] = sep_id
            impossible = tok_span is None or not (tok_span[0] >= start and tok_span[1] <= start + length - 1)
            start_position, end_position = (0, 0) if impossible else (tok_span[0] - start + offset,
                                                                      tok_span[1] - start + offset)
            summary.features += 1
            summary.impossible += int(impossible)
            summary.answerable += int(not impossible)
            yield SquadFeature(
                unique_id=unique_id, example_index=example_index, qas_id=example.qas_id,
                doc_span_index=span_index, doc_start=start, input_ids=ids, context_offset=offset,
                context_length=length, context_spans=context.spans[start:start + length].copy(),
                context_is_max=flags[span_index], start_position=start_position, end_position=end_position,
                is_impossible=impossible)
            unique_id += 1


def convert_examples_to_features(examples, tokenizer, max_seq_length=384, doc_stride=128, max_query_length=64,
                                 is_training=True, first_unique_id=FIRST_UNIQUE_ID):
    """Examples -> SquadFeatures (a list of SquadFeature with `.summary`, a ConvertSummary).

    Args:
        examples: SquadExamples (read_squad_examples).
        tokenizer: a SentencePieceTokenizer (its pad/cls/sep ids and do_lower_case).
        max_seq_length, doc_stride, max_query_length: the release's meanings.
        is_training: training drops examples whose answer no piece covers (counted).
        first_unique_id: unique_id of the first feature; the next ones count up.
    """
    out = SquadFeatures()
    out.summary = ConvertSummary()
    out.extend(iter_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training,
                             first_unique_id, out.summary))
    return out


def features_to_arrays(features):
    """SquadFeatures -> {name: int32 array}: unique_ids [N], input_ids, input_mask,
    segment_ids, p_mask [N, T], start_positions, end_positions, is_impossible [N]."""
    features = list(features)
    if not features:
        raise ValueError("features_to_arrays: no features.")
    return {
        "unique_ids": np.array([f.unique_id for f in features], np.int64),
        "input_ids": np.stack([f.input_ids for f in features]).astype(np.int32),
        "input_mask": np.stack([f.input_mask for f in features]),
        "segment_ids": np.stack([f.segment_ids for f in features]),
        "p_mask": np.stack([f.p_mask for f in features]),
        "start_positions": np.array([f.start_position for f in features], np.int32),
        "end_positions": np.array([f.end_position for f in features], np.int32),
        "is_impossible": np.array([int(f.is_impossible) for f in features], np.int32),
    }
