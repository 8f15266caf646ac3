"""SQuAD reading: an official v1.1 / v2.0 JSON file -> SquadExamples (one per question).

    examples = read_squad_examples("train-v2.0.json", is_training=True)   # examples.summary: ReadSummary

Every problem in the file (malformed JSON or not UTF-8, a missing or mistyped field,
duplicate question ids, an empty context, a v2 question in a file read as v1, a training
question without an answer) raises SquadDataError naming the file and the question id.
"""

import dataclasses
import logging
import os

from albert_tf.storage.json_files import read_json

logger = logging.getLogger("albert_tf")

MAX_LISTED_IDS = 20  # question ids listed in a summary (mismatched, skipped)


class SquadDataError(ValueError):
    """Bad SQuAD input or feature file; the message names the file, the question id and what to fix."""


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
        return [t for t, _ in self.answers] or [""]


class Summary:
    """A step's counts (a dataclass of its own); `to_dict` is their JSON form."""

    def to_dict(self):
        return dataclasses.asdict(self)


class Summarized(list):
    """A list of what a step made, with the `summary` (a Summary) of the step."""

    summary = None


@dataclasses.dataclass
class ReadSummary(Summary):
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


class SquadExamples(Summarized):
    """A list of SquadExample with the `summary` (ReadSummary) of the read."""


def normalize_version(version, path):
    if version is None:
        return None
    v = str(version).lower().lstrip("v")
    if v in ("1", "1.1"):
        return "v1"
    if v in ("2", "2.0"):
        return "v2"
    raise SquadDataError(f"{path}: version {version!r} is not v1.1 or v2.0; pass 'v1', 'v2' or None (from the file).")


SQUAD_FILE = 'a SQuAD file (one JSON object {"version", "data": [...]})'


def load_squad_json(path):
    """The JSON object of SQuAD file `path` (SquadDataError naming the file otherwise)."""
    return read_json(path, SQUAD_FILE, error=SquadDataError)


def _field(obj, name, kind, path, where, qid=None):
    """obj[name], checked to be of `kind`; SquadDataError naming the place otherwise."""
    who = f"question {qid!r} ({where})" if qid is not None else where
    if not isinstance(obj, dict):
        raise SquadDataError(f"{path}: {who} is a {type(obj).__name__}, expected a JSON object.")
    if name not in obj:
        raise SquadDataError(f"{path}: {who} lacks the field {name!r}; add it (SQuAD layout: data[].paragraphs[]"
                             ".{{context, qas[].{{id, question, answers[].{{text, answer_start}}}}}}).")
    value = obj[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
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
        SquadDataError for every problem of the module docstring (malformed JSON: with its
        line and column).
    """
    path = os.fspath(path)
    root = load_squad_json(path)
    if not isinstance(root.get("data"), list):
        raise SquadDataError(f"{path}: no top-level \"data\" list; this is not a SQuAD file.")
    data = root["data"]
    requested = normalize_version(version, path)
    file_version = None
    if isinstance(root.get("version"), str):
        try:
            file_version = normalize_version(root["version"], path)
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
                qid = str(_field(qa, "id", (str, int), path, where))
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
                        if len(summary.mismatched_ids) < MAX_LISTED_IDS and qid not in summary.mismatched_ids:
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

