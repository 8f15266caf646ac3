"""SQuAD v1.1 / v2.0 data: the official JSON -> examples -> windowed features -> cached TFRecords.

    examples = read_squad_examples("train-v2.0.json", is_training=True)   # examples.summary: ReadSummary
    features = convert_examples_to_features(examples, tokenizer, is_training=True)
    arrays = features_to_arrays(features)                                 # model inputs and labels
    result = load_or_build_features("train-v2.0.json", "out/train.tfrecord", tokenizer,
                                    FeatureSettings(is_training=True))    # result.rebuilt, result.reason

Character alignment (exact, no LCS). The context is normalised the way `preprocess_text`
does it (whitespace runs collapsed and stripped, `` and '' -> ", NFKD with the characters of
non-zero combining class dropped, lower-cased), but built unit by unit so that every normalised character keeps the
[start, end) of the original characters it came from. SentencePiece then encodes the
normalised string (`return_type="proto"`, or `EncodeAsImmutableProto` on older
sentencepiece), which gives each piece its begin/end byte offsets into that string; the two
maps composed give every piece its span in the ORIGINAL context. Whitespace (and the
control/format characters SentencePiece treats as such, e.g. U+200B) at the edges of a
piece's surface is left out of its span; a piece with nothing else (a bare "▁") gets the
empty span (p, p) at the original offset of the next character. One original character
that normalises to several (the "ﬁ" ligature -> "fi") gives every piece made of it the whole
character, so such neighbours share a span. The piece ids are exactly
`SentencePieceTokenizer.encode(context)`; the release additionally splits pieces like "1,"
into "1" "," (its encode_pieces), which the project's tokenizer does not, so neither does
this module (features must match the tokenization used in pretraining).

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

Caching (the shared machinery of albert_tf.data.feature_cache): `write_feature_file` writes
a TFRecord of tf.train.Examples (int64 unique_ids[1], input_ids, input_mask, segment_ids,
p_mask [T], start_positions, end_positions, is_impossible [1]; the release's names)
and then `<file>.json`, a sidecar recording the settings, tokenizer
(SentencePiece sha256, do_lower_case) and input file (sha256, size, mtime) that made it.
Prediction files also get `<file>.spans.json` with each feature's example mapping, token
spans and max-context flags, so a predict-only run can post-process without re-tokenizing.
`load_or_build_features` reuses a file only when the settings, tokenizer and input content
all match (the release silently reuses stale ones) and says why it rebuilt.
"""

import dataclasses
import difflib
import json
import logging
import os
import unicodedata

import numpy as np

from albert_tf.data import feature_cache
from albert_tf.data.feature_cache import sidecar_path  # noqa: F401 (a public name)
from albert_tf.data.tokenization import is_blank, is_combining, preprocess_text

logger = logging.getLogger("albert_tf")

FEATURE_FORMAT = 2  # bump when the feature layout changes: old caches are rebuilt (2: shared sidecar layout)
FIRST_UNIQUE_ID = 1000000000  # the release's first unique_id
RECORD_FEATURES = ("unique_ids", "input_ids", "input_mask", "segment_ids", "p_mask", "start_positions",
                   "end_positions", "is_impossible")
_PER_POSITION = ("input_ids", "input_mask", "segment_ids", "p_mask")
_MAX_LISTED_IDS = 20


class SquadDataError(ValueError):
    """Bad SQuAD input or feature file; the message names the file, the question id and what to fix."""


# ----------------------------------------------------------------------------------------------------------
# Examples


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question on one context.

    Attributes:
        qas_id: the question id.
        question_text, context_text: as in the file (context_text unnormalised).
        answer_text: the answer used for labels ("" when impossible or none usable).
        answer_start: its character offset in context_text; None when there is none.
        is_impossible: v2 unanswerable question.
        answers: every gold answer, ((text, answer_start), ...), in file order (evaluation).
        plausible_answers: v2 plausible answers of an impossible question, same form.
        title: the article title.
    """

    qas_id: str
    question_text: str
    context_text: str
    answer_text: str
    answer_start: object
    is_impossible: bool
    answers: tuple = ()
    plausible_answers: tuple = ()
    title: str = ""

    @property
    def answer_end(self):
        """One past the answer's last character (None without an answer)."""
        return None if self.answer_start is None else self.answer_start + len(self.answer_text)

    @property
    def gold_texts(self):
        """The gold answer texts for the official evaluator ([""] for an unanswerable question)."""
        texts = [t for t, _ in self.answers]
        return texts or [""]


@dataclasses.dataclass
class ReadSummary:
    """What read_squad_examples read.

    questions: questions in the file; examples: examples returned; impossible: of them, v2
    unanswerable; mismatched_answers: answers whose answer_start does not point at their text
    (training: the question is skipped; prediction: kept, the answer is still a gold text);
    mismatched_ids: the first of those question ids; skipped: questions left out.
    """

    path: str
    version: str
    questions: int = 0
    examples: int = 0
    impossible: int = 0
    mismatched_answers: int = 0
    mismatched_ids: list = dataclasses.field(default_factory=list)
    skipped: int = 0

    def to_dict(self):
        return dataclasses.asdict(self)


class SquadExamples(list):
    """A list of SquadExample with the `summary` (ReadSummary) of the read."""

    summary = None


def _normalize_version(version, path):
    if version is None:
        return None
    v = str(version).lower().lstrip("v")
    if v in ("1", "1.1"):
        return "v1"
    if v in ("2", "2.0"):
        return "v2"
    raise SquadDataError(f"{path}: version {version!r} is not v1.1 or v2.0; pass 'v1', 'v2' or None (from the file).")


def _load_json(path):
    if not os.path.isfile(path):
        raise SquadDataError(f"{path}: no such file.")
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise SquadDataError(f"{path}:{line}: not valid UTF-8 ({e.reason} at byte {e.start}); "
                             "save the file as UTF-8.") from None
    if not text.strip():
        raise SquadDataError(f"{path}: the file is empty.")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SquadDataError(f"{path}:{e.lineno}:{e.colno}: malformed JSON ({e.msg}); "
                             "a SQuAD file is one JSON object {\"version\", \"data\": [...]}.") from None


def _field(obj, name, kind, path, where, qid=None):
    """obj[name], checked to be of `kind`; SquadDataError naming the place otherwise."""
    who = f"question {qid!r} ({where})" if qid is not None else where
    if not isinstance(obj, dict):
        raise SquadDataError(f"{path}: {who} is a {type(obj).__name__}, expected a JSON object.")
    if name not in obj:
        raise SquadDataError(f"{path}: {who} lacks the field {name!r}; add it (SQuAD layout: data[].paragraphs[]"
                             ".{{context, qas[].{{id, question, answers[].{{text, answer_start}}}}}}).")
    value = obj[name]
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise SquadDataError(f"{path}: {who}: field {name!r} is {type(value).__name__} {value!r:.60}, "
                             f"expected {getattr(kind, '__name__', kind)}.")
    return value


def _answers(qa, key, path, where, qid):
    out = []
    for k, a in enumerate(qa.get(key) or []):
        at = f"{where}.{key}[{k}]"
        text = _field(a, "text", str, path, at, qid)
        start = _field(a, "answer_start", int, path, at, qid)
        out.append((text, start))
    if key in qa and not isinstance(qa[key], list):
        raise SquadDataError(f"{path}: question {qid!r} ({where}): field {key!r} is not a list.")
    return out


def read_squad_examples(path, is_training, version=None):
    """Reads an official SQuAD v1.1 / v2.0 JSON file.

    Args:
        path: the JSON file.
        is_training: training reads the first answer of each question as its label and
            skips questions whose answer_start does not point at the answer text.
        version: "v1" / "1.1", "v2" / "2.0", or None to take it from the file's "version"
            field (v2 when absent and some question has "is_impossible").

    Returns:
        SquadExamples (a list of SquadExample) with `.summary`, a ReadSummary.

    Raises:
        SquadDataError (a ValueError) naming the file and the question id (and, for malformed
        JSON, the line and column) for: malformed JSON or not UTF-8, a missing or mistyped
        field, duplicate question ids, an empty context, a v2 question in a file read as v1,
        and (training) an answerable question without an answer.
    """
    path = os.fspath(path)
    root = _load_json(path)
    if not isinstance(root, dict) or not isinstance(root.get("data"), list):
        raise SquadDataError(f"{path}: no top-level \"data\" list; this is not a SQuAD file.")
    data = root["data"]
    requested = _normalize_version(version, path)
    file_version = None
    if isinstance(root.get("version"), str):
        try:
            file_version = _normalize_version(root["version"], path)
        except SquadDataError:
            file_version = None
    if requested is None:
        requested = file_version
    if requested is None:
        has_v2 = any("is_impossible" in qa for art in data if isinstance(art, dict)
                     for par in art.get("paragraphs") or [] if isinstance(par, dict)
                     for qa in par.get("qas") or [] if isinstance(qa, dict))
        requested = "v2" if has_v2 else "v1"
    elif file_version and file_version != requested:
        logger.warning("%s: the file says version %s, read as %s.", path, root["version"], requested)
    v2 = requested == "v2"

    summary = ReadSummary(path=path, version=requested)
    examples = SquadExamples()
    seen = {}
    for i, article in enumerate(data):
        where_a = f"data[{i}]"
        paragraphs = _field(article, "paragraphs", list, path, where_a)
        title = article.get("title", "") if isinstance(article.get("title", ""), str) else ""
        for j, paragraph in enumerate(paragraphs):
            where_p = f"{where_a}.paragraphs[{j}]"
            qas = _field(paragraph, "qas", list, path, where_p)
            first_id = next((qa.get("id") for qa in qas if isinstance(qa, dict)), None)
            context = _field(paragraph, "context", str, path, where_p, first_id)
            if not context.strip():
                raise SquadDataError(f"{path}: {where_p} (title {title!r}, first question {first_id!r}) has an "
                                     "empty context; give it its paragraph text or remove it.")
            for k, qa in enumerate(qas):
                where = f"{where_p}.qas[{k}]"
                qid = _field(qa, "id", (str, int), path, where)
                qid = str(qid)
                if qid in seen:
                    raise SquadDataError(f"{path}: question id {qid!r} appears twice ({seen[qid]} and {where}); "
                                         "question ids must be unique.")
                seen[qid] = where
                question = _field(qa, "question", str, path, where, qid)
                impossible = qa.get("is_impossible", False)
                if not isinstance(impossible, bool):
                    raise SquadDataError(f"{path}: question {qid!r} ({where}): is_impossible is "
                                         f"{impossible!r}, expected true or false.")
                if impossible and not v2:
                    raise SquadDataError(f"{path}: question {qid!r} ({where}) is_impossible, but the file is read "
                                         "as SQuAD v1.1; pass version='v2' (SQuAD 2.0 data).")
                if "answers" not in qa and not impossible and is_training:
                    _field(qa, "answers", list, path, where, qid)
                answers = _answers(qa, "answers", path, where, qid)
                plausible = _answers(qa, "plausible_answers", path, where, qid)
                summary.questions += 1

                good = []
                for text, start in answers:
                    if context[start:start + len(text)] == text and text.strip():
                        good.append((text, start))
                    else:
                        summary.mismatched_answers += 1
                        if len(summary.mismatched_ids) < _MAX_LISTED_IDS and qid not in summary.mismatched_ids:
                            summary.mismatched_ids.append(qid)
                        logger.warning("%s: question %r (%s): answer %r does not appear at answer_start %d of the "
                                       "context (found %r)%s.", path, qid, where, text, start,
                                       context[start:start + len(text)],
                                       "; question skipped" if is_training and not impossible else "")
                answer_text, answer_start = "", None
                if impossible:
                    pass
                elif is_training:
                    if not answers:
                        raise SquadDataError(f"{path}: question {qid!r} ({where}) has no answer; add one to "
                                             "\"answers\"" + (" or mark it \"is_impossible\": true." if v2 else "."))
                    if answers[0] not in good:
                        summary.skipped += 1
                        continue
                    answer_text, answer_start = answers[0]
                elif good:
                    answer_text, answer_start = good[0]
                examples.append(SquadExample(
                    qas_id=qid, question_text=question, context_text=context, answer_text=answer_text,
                    answer_start=answer_start, is_impossible=impossible, answers=tuple(answers),
                    plausible_answers=tuple(plausible), title=title))
                summary.impossible += int(impossible)
    if summary.questions == 0:
        raise SquadDataError(f"{path}: no question in the file.")
    summary.examples = len(examples)
    examples.summary = summary
    return examples


# ----------------------------------------------------------------------------------------------------------
# Character-exact alignment


def normalize_with_offsets(text, lower=True):
    """`preprocess_text(text, lower)` and, per normalised character, the [start, end) of the
    original characters it came from.

    Returns:
        (normalized, starts, ends): the string and two int lists of len(normalized).
    """
    # 1. whitespace runs -> one space, ends stripped (" ".join(text.strip().split()))
    chars, starts, ends = [], [], []
    space = None
    for i, c in enumerate(text):
        if c.isspace():
            space = (space[0], i + 1) if space else (i, i + 1)
            continue
        if space is not None and chars:
            chars.append(" ")
            starts.append(space[0])
            ends.append(space[1])
        space = None
        chars.append(c)
        starts.append(i)
        ends.append(i + 1)
    # 2. `` -> "  then  '' -> "  (two passes, as str.replace does them)
    for pair in ("``", "''"):
        if pair not in "".join(chars):
            continue
        out_c, out_s, out_e = [], [], []
        k = 0
        while k < len(chars):
            if k + 1 < len(chars) and chars[k] + chars[k + 1] == pair:
                out_c.append('"')
                out_s.append(starts[k])
                out_e.append(ends[k + 1])
                k += 2
            else:
                out_c.append(chars[k])
                out_s.append(starts[k])
                out_e.append(ends[k])
                k += 1
        chars, starts, ends = out_c, out_s, out_e
    # 3. NFKD, characters of non-zero combining class dropped (character by character:
    #    canonical reordering only moves those, which are all dropped, so this equals the
    #    whole-string form)
    if not all(c < "\x80" for c in chars):
        out_c, out_s, out_e = [], [], []
        for c, s, e in zip(chars, starts, ends):
            if c < "\x80":
                out_c.append(c)
                out_s.append(s)
                out_e.append(e)
                continue
            for d in unicodedata.normalize("NFKD", c):
                if not is_combining(d):
                    out_c.append(d)
                    out_s.append(s)
                    out_e.append(e)
        chars, starts, ends = out_c, out_s, out_e
    normalized = "".join(chars)
    # 4. lower case: the whole string (context-dependent rules such as the final sigma), per
    #    character only when some character lower-cases to several
    if lower:
        low = normalized.lower()
        if len(low) != len(normalized):
            out_s, out_e = [], []
            for c, s, e in zip(chars, starts, ends):
                n = len(c.lower())
                out_s.extend([s] * n)
                out_e.extend([e] * n)
            starts, ends = out_s, out_e
        normalized = low
    return normalized, starts, ends


def align_offsets(target, source, starts, ends):
    """Offsets for `target` from those of a nearly equal `source` (difflib on characters):
    matched characters take their partner's span, unmatched ones the span between their
    matched neighbours. A fallback for a normalisation that differs from the one mirrored."""
    n = len(target)
    t_starts, t_ends = [None] * n, [None] * n
    matcher = difflib.SequenceMatcher(None, source, target, autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        for k in range(size):
            t_starts[b + k], t_ends[b + k] = starts[a + k], ends[a + k]
    total = ends[-1] if ends else 0
    prev_end = starts[0] if starts else 0
    for k in range(n):  # forward: unmatched start after the previous match
        if t_starts[k] is None:
            t_starts[k] = prev_end
        else:
            prev_end = t_ends[k]
    next_start = total
    for k in range(n - 1, -1, -1):  # backward: unmatched end before the next match
        if t_ends[k] is None:
            t_ends[k] = max(next_start, t_starts[k])
        else:
            next_start = t_starts[k]
    return t_starts, t_ends


def _encode_with_offsets(sp, text):
    """SentencePiece pieces of `text` with their [begin, end) CHARACTER offsets in `text`."""
    try:
        proto = sp.Encode(text, return_type="proto")
    except TypeError:  # sentencepiece < 0.2.1
        proto = sp.EncodeAsImmutableProto(text)
    pieces = proto.pieces
    if text.isascii():
        return [(p.id, p.piece, p.begin, p.end) for p in pieces]
    byte_pos = np.cumsum([0] + [len(c.encode("utf-8")) for c in text])
    out = []
    for p in pieces:
        b = int(np.searchsorted(byte_pos, p.begin, side="left"))
        e = int(np.searchsorted(byte_pos, p.end, side="left"))
        out.append((p.id, p.piece, b, e))
    return out


def _is_blank(c):
    """Characters SentencePiece treats as whitespace or removes: left out of piece spans
    (tokenization.is_blank: isspace or category Cc, Cf, Zs, Zl, Zp)."""
    return is_blank(c)


@dataclasses.dataclass(frozen=True, eq=False)
class ContextTokens:
    """A context's pieces and their spans in the original text.

    text: the original context; normalized: preprocess_text(text); ids: int32 [P] (exactly
    tokenizer.encode(text)); pieces: the pieces as SentencePiece produced them (unknown
    pieces keep their text); spans: int32 [P, 2], [start, end) in `text` (empty for a bare
    "▁" piece).
    """

    text: str
    normalized: str
    ids: np.ndarray
    pieces: tuple
    spans: np.ndarray

    def char_span_to_tokens(self, start, end):
        """(first, last) pieces of the smallest run of pieces covering characters [start, end)
        of the text; None when no piece covers any of them."""
        s, e = self.spans[:, 0], self.spans[:, 1]
        hit = np.nonzero((e > s) & (s < end) & (e > start))[0]
        if not len(hit):
            return None
        return int(hit[0]), int(hit[-1])

    def token_span_to_text(self, first, last):
        """The original text from piece `first` to piece `last` (inclusive)."""
        return self.text[int(self.spans[first, 0]):int(self.spans[last, 1])]


def tokenize_context(text, tokenizer):
    """A context -> ContextTokens (pieces of the normalised text, spans in the original)."""
    lower = tokenizer.do_lower_case
    normalized, starts, ends = normalize_with_offsets(text, lower)
    expected = preprocess_text(text, lower)
    if normalized != expected:  # never seen; keeps the spans sensible if preprocess_text changes
        logger.warning("squad_data: normalisation mirror differs from preprocess_text; aligning by difflib.")
        starts, ends = align_offsets(expected, normalized, starts, ends)
        normalized = expected
    encoded = _encode_with_offsets(tokenizer.sp, normalized)
    n = len(normalized)
    blank = [_is_blank(c) for c in normalized]
    next_solid = [n] * (n + 1)  # next non-blank character at or after k
    for k in range(n - 1, -1, -1):
        next_solid[k] = k if not blank[k] else next_solid[k + 1]
    tail = ends[max((k for k in range(n) if not blank[k]), default=0)] if n else 0
    ids, pieces, spans = [], [], []
    for piece_id, piece, b, e in encoded:
        while b < e and blank[b]:
            b += 1
        while e > b and blank[e - 1]:
            e -= 1
        if b < e:
            span = (starts[b], ends[e - 1])
        else:
            k = next_solid[min(e, n)]
            anchor = starts[k] if k < n else tail
            span = (anchor, anchor)
        ids.append(piece_id)
        pieces.append(piece)
        spans.append(span)
    return ContextTokens(text=text, normalized=normalized, ids=np.asarray(ids, np.int32), pieces=tuple(pieces),
                         spans=np.asarray(spans, np.int32).reshape(-1, 2))


# ----------------------------------------------------------------------------------------------------------
# Features


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

    @property
    def token_spans(self):
        """Per position: (start, end) in the example's context_text, or None."""
        if self.context_spans is None:
            return None
        out = [None] * self.max_seq_length
        for k, (s, e) in enumerate(self.context_spans.tolist()):
            out[self.context_offset + k] = (s, e)
        return out

    @property
    def token_is_max_context(self):
        """Per position: True where this window is the piece's max-context window."""
        if self.context_is_max is None:
            return None
        out = [False] * self.max_seq_length
        for k, v in enumerate(self.context_is_max.tolist()):
            out[self.context_offset + k] = bool(v)
        return out

    def as_window(self):
        """{"qid", "token_spans", "token_is_max_context"}: the window form of
        albert_tf.data.squad_postprocess (add the model's outputs to it)."""
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
class ConvertSummary:
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

    def to_dict(self):
        return dataclasses.asdict(self)


class SquadFeatures(list):
    """A list of SquadFeature with the `summary` (ConvertSummary) of the conversion."""

    summary = None


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
                logger.warning("squad_data: question %r: no piece covers the answer %r.", example.qas_id,
                               example.answer_text)
                if is_training:
                    summary.skipped += 1
                    if len(summary.skipped_ids) < _MAX_LISTED_IDS:
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
            if tok_span is not None and tok_span[0] >= start and tok_span[1] <= start + length - 1:
                start_position, end_position = tok_span[0] - start + offset, tok_span[1] - start + offset
                impossible = False
            else:
                start_position = end_position = 0
                impossible = True
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


# ----------------------------------------------------------------------------------------------------------
# Feature files (the shared machinery of albert_tf.data.feature_cache)


def _record_shapes(settings):
    T = int(settings["max_seq_length"])
    return {name: (T,) if name in _PER_POSITION else () for name in RECORD_FEATURES}


SQUAD_FEATURES = feature_cache.FeatureKind(
    name="albert_tf squad features", format=FEATURE_FORMAT, shapes=_record_shapes,
    dtypes={"unique_ids": np.int64}, error=SquadDataError)
SPANS_SUFFIX = ".spans.json"


def spans_path(feature_file):
    return os.fspath(feature_file) + SPANS_SUFFIX


def feature_file_settings(settings, tokenizer, input_file):
    """The record of what makes a feature file: settings, tokenizer, input file."""
    settings.validate()
    input_file = os.fspath(input_file)
    if not os.path.isfile(input_file):
        raise SquadDataError(f"{input_file}: no such file.")
    return {
        "format": FEATURE_FORMAT,
        "max_seq_length": settings.max_seq_length,
        "doc_stride": settings.doc_stride,
        "max_query_length": settings.max_query_length,
        "is_training": bool(settings.is_training),
        "version": _normalize_version(settings.version, input_file),
        **feature_cache.tokenizer_record(tokenizer),
        **feature_cache.input_record(input_file, SquadDataError),
    }


def write_feature_file(features, path, settings, extra=None):
    """Writes features (an iterable of SquadFeature) to the TFRecord `path`; for prediction
    settings (settings["is_training"] false) also `<path>.spans.json`; then the sidecar
    `<path>.json` (feature_cache.write_feature_file: atomic, sidecar last). Returns the
    sidecar dict.

    Args:
        settings: feature_file_settings(...) (any JSON-able dict with "max_seq_length").
        extra: more JSON-able entries for the sidecar (e.g. summaries), or a function
            returning them, called once the features are written.
    """
    keep_spans = not settings.get("is_training", True)
    columns = {k: [] for k in ("unique_ids", "example_index", "qas_id", "doc_span_index", "doc_start",
                               "context_spans", "context_is_max")}
    encoder = feature_cache.RecordEncoder(RECORD_FEATURES)

    def records():
        for f in features:
            yield encoder.encode_int64({
                "unique_ids": [int(f.unique_id)], "input_ids": f.input_ids, "input_mask": f.input_mask,
                "segment_ids": f.segment_ids, "p_mask": f.p_mask, "start_positions": [int(f.start_position)],
                "end_positions": [int(f.end_position)], "is_impossible": [int(f.is_impossible)]})
            if keep_spans:
                columns["unique_ids"].append(int(f.unique_id))
                columns["example_index"].append(int(f.example_index))
                columns["qas_id"].append(f.qas_id)
                columns["doc_span_index"].append(int(f.doc_span_index))
                columns["doc_start"].append(int(f.doc_start))
                columns["context_spans"].append(f.context_spans.reshape(-1).tolist())
                columns["context_is_max"].append("".join("1" if v else "0" for v in f.context_is_max))

    def companions():
        if not keep_spans:
            return {}
        return {SPANS_SUFFIX: json.dumps(columns, separators=(",", ":")) + "\n"}

    return feature_cache.write_feature_file(records(), path, SQUAD_FEATURES, settings, extra=extra,
                                            companions=companions)


def read_sidecar(path):
    """The sidecar dict of feature file `path`, or None when it is missing or unreadable."""
    return feature_cache.read_sidecar(path, SQUAD_FEATURES)


def check_feature_file(path, settings):
    """(reusable, reason): whether feature file `path` was made with `settings`
    (feature_file_settings) and is complete; reason says what differs."""
    return feature_cache.check_feature_file(path, settings, SQUAD_FEATURES)


def read_feature_arrays(path):
    """A feature TFRecord -> {name: numpy array} (features_to_arrays' layout). Uses TensorFlow."""
    return feature_cache.read_feature_arrays(path, SQUAD_FEATURES)


def read_feature_file(path, settings=None):
    """Feature file `path` -> SquadFeatures. With `settings` (feature_file_settings), raises
    SquadDataError when the file was made otherwise. Prediction files come back whole
    (token spans, max-context flags, example mapping from `<path>.spans.json`); training
    files without those (context_spans / context_is_max None, example_index -1, qas_id "")."""
    path = os.fspath(path)
    if settings is not None:
        ok, reason = check_feature_file(path, settings)
        if not ok:
            raise SquadDataError(f"{path}: stale or incomplete feature file: {reason}.")
    sidecar = read_sidecar(path)
    arrays = read_feature_arrays(path)
    meta = None
    if SPANS_SUFFIX in (sidecar.get("companions") or {}):
        with open(spans_path(path), encoding="utf-8") as f:
            meta = json.load(f)
    out = SquadFeatures()
    for k in range(len(arrays["input_ids"])):
        seg, pm = arrays["segment_ids"][k], arrays["p_mask"][k]
        context = np.nonzero((seg == 1) & (pm == 0))[0]
        offset, length = int(context[0]), len(context)
        spans = is_max = None
        example_index, qas_id, span_index, doc_start = -1, "", -1, -1
        if meta is not None:
            if meta["unique_ids"][k] != int(arrays["unique_ids"][k]):
                raise SquadDataError(f"{spans_path(path)}: feature {k} has unique_id {meta['unique_ids'][k]}, "
                                     f"the records {int(arrays['unique_ids'][k])}; rebuild the features.")
            spans = np.asarray(meta["context_spans"][k], np.int32).reshape(-1, 2)
            is_max = np.frombuffer(meta["context_is_max"][k].encode(), np.uint8) == ord("1")
            example_index, qas_id = meta["example_index"][k], meta["qas_id"][k]
            span_index, doc_start = meta["doc_span_index"][k], meta["doc_start"][k]
        out.append(SquadFeature(
            unique_id=int(arrays["unique_ids"][k]), example_index=example_index, qas_id=qas_id,
            doc_span_index=span_index, doc_start=doc_start, input_ids=arrays["input_ids"][k].copy(),
            context_offset=offset, context_length=length, context_spans=spans, context_is_max=is_max,
            start_position=int(arrays["start_positions"][k]), end_position=int(arrays["end_positions"][k]),
            is_impossible=bool(arrays["is_impossible"][k])))
    return out


@dataclasses.dataclass
class FeatureCacheResult:
    """load_or_build_features' answer.

    examples: the SquadExamples (always read; cheap); features: SquadFeatures or None (see
    return_features); num_features; rebuilt: whether the file was (re)written; reason: why
    (or "reused: ..."); read_summary, convert_summary: dicts (convert_summary from the
    sidecar when reused)."""

    examples: list
    features: object
    num_features: int
    rebuilt: bool
    reason: str
    feature_file: str
    read_summary: dict
    convert_summary: dict


def load_or_build_features(input_file, feature_file, tokenizer, settings, return_features=None):
    """The features of SQuAD file `input_file` under `settings`, from `feature_file` when it
    was made from the same settings, tokenizer and input content, else built and written
    (feature_cache.load_or_build).

    Args:
        input_file: the SQuAD JSON.
        feature_file: the TFRecord cache (with sidecars `<feature_file>.json` and, for
            prediction, `<feature_file>.spans.json`).
        tokenizer: SentencePieceTokenizer.
        settings: FeatureSettings.
        return_features: keep / read the features in memory; default: for prediction only
            (training reads the TFRecord through tf.data).
    """
    settings.validate()
    feature_file = os.fspath(feature_file)
    if return_features is None:
        return_features = not settings.is_training
    record = feature_file_settings(settings, tokenizer, input_file)
    examples = read_squad_examples(input_file, settings.is_training, settings.version)
    summary = ConvertSummary()

    def build():
        stream = iter_features(examples, tokenizer, settings.max_seq_length, settings.doc_stride,
                               settings.max_query_length, settings.is_training, summary=summary)
        features = None
        if return_features:
            features = SquadFeatures(stream)
            features.summary = summary
            stream = features
        write_feature_file(stream, feature_file, record,
                           extra=lambda: {"read_summary": examples.summary.to_dict(),
                                          "convert_summary": summary.to_dict()})
        return features

    outcome = feature_cache.load_or_build(feature_file, record, SQUAD_FEATURES, build)
    if outcome.rebuilt:
        features, convert_summary = outcome.built, summary.to_dict()
    else:
        features = read_feature_file(feature_file) if return_features else None
        convert_summary = outcome.sidecar.get("convert_summary") or {}
    return FeatureCacheResult(examples, features, outcome.sidecar["num_features"], outcome.rebuilt, outcome.reason,
                              feature_file, examples.summary.to_dict(), convert_summary)
