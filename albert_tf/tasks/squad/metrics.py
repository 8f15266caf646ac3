"""SQuAD metrics: our implementation of the rules of the official evaluation scripts
(SQuAD v1.1 `evaluate-v1.1.py`, SQuAD v2.0 `evaluate-v2.0.py`). Pure Python, no TensorFlow.

Questions are a list of dicts, one per question (`questions_from_squad_json` makes it from
an official SQuAD file):

    {"id": "q1", "answers": ["Denver Broncos", "the Broncos"], "is_impossible": False}
    {"id": "q2", "answers": [], "is_impossible": True}       # v2.0: unanswerable

Predictions are `{qid: text}`; in v2.0 the empty string means "no answer". `evaluate_v1`
and `evaluate_v2` score them.

The rules, as the official scripts' (and where they are odd): docs/squad.md#metrics.
"""

import collections
import re
import string

from albert_tf.tasks.squad.reading import load_squad_json

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text):
    """Lower case, ASCII punctuation removed, articles (a/an/the) removed, whitespace collapsed:
    "The  Big, red Dog!" -> "big red dog"."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text):
    """The normalized tokens (list of str) of `text` ([] for "")."""
    return normalize_answer(text).split() if text else []


def exact_match(prediction, gold):
    """1 when `prediction` and `gold` (str) normalize to the same string, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction, gold):
    """Token F1 in [0, 1] of the v2.0 script: 1 when both texts have no tokens, 0 when only one
    has none."""
    pred_tokens, gold_tokens = answer_tokens(prediction), answer_tokens(gold)
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    return _overlap_f1(pred_tokens, gold_tokens)


def token_f1_v1(prediction, gold):
    """Token F1 of the v1.1 script: as `token_f1` but 0 whenever there is no common token
    (so two texts that both normalize to "" score 0)."""
    return _overlap_f1(answer_tokens(prediction), answer_tokens(gold))


def _overlap_f1(pred_tokens, gold_tokens):
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def max_over_gold(metric, prediction, golds):
    """The maximum of metric(prediction, gold) (a number) over `golds`, a non-empty list of str."""
    if not golds:
        raise ValueError("max_over_gold needs at least one gold answer.")
    return max(metric(prediction, gold) for gold in golds)


def read_questions(path):
    """`questions_from_squad_json` of the SQuAD JSON file at `path`."""
    return questions_from_squad_json(load_squad_json(path))


def questions_from_squad_json(dataset):
    """The questions of an official SQuAD file, in file order.

    Args:
        dataset: the parsed JSON, {"version", "data": [{"title", "paragraphs": [{"context",
            "qas": [{"id", "question", "answers": [{"text", "answer_start"}], ...}]}]}]},
            or its "data" list.
    Returns:
        list of {"id": str, "answers": [str, ...], "is_impossible": bool}; `is_impossible` is
        `not answers`, the official v2.0 `make_qid_to_has_ans` rule (the file's own
        "is_impossible" flag is not consulted, as in the official script).
    """
    articles = dataset["data"] if isinstance(dataset, dict) else dataset
    questions = []
    for article in articles:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [a["text"] for a in qa.get("answers", [])]
                questions.append({"id": qa["id"], "answers": answers, "is_impossible": not answers})
    _check_questions(questions)
    return questions


def _check_questions(questions):
    seen = set()
    for q in questions:
        for key in ("id", "answers"):
            if key not in q:
                raise ValueError(f"question {q!r} has no {key!r}.")
        if q["id"] in seen:
            raise ValueError(f"question id {q['id']!r} appears twice.")
        seen.add(q["id"])
        if "is_impossible" in q and bool(q["is_impossible"]) != (not q["answers"]):
            raise ValueError(f"question {q['id']!r}: is_impossible={q['is_impossible']} but it has "
                             f"{len(q['answers'])} answers (unanswerable questions have none).")


def missing_prediction_ids(questions, predictions):
    """The ids of `questions` (module docstring) that `predictions` {qid: str} lacks, in
    question order."""
    return [q["id"] for q in questions if q["id"] not in predictions]


def evaluate_v1(questions, predictions):
    """SQuAD v1.1 exact match and F1 in percent; a missing prediction scores 0.

    Args:
        questions: list of question dicts (module docstring), N of them.
        predictions: {qid: str}.
    Returns:
        {"exact_match": float, "f1": float (both 100 * mean over the N questions),
         "total": N, "missing": number of questions without a prediction}.
    Raises:
        ValueError for a question without gold answers (nothing to score it against): score
        the others and count it apart, as SquadTask.score does.
    """
    _check_questions(questions)
    if not questions:
        raise ValueError("evaluate_v1 needs at least one question.")
    bare = [q["id"] for q in questions if not q["answers"]]
    if bare:
        raise ValueError(f"{len(bare)} of {len(questions)} questions have no gold answer (first: {bare[:3]}); the "
                         "v1.1 rules score a question against its gold answers: pass only those with answers.")
    answered = [q for q in questions if q["id"] in predictions]
    em = sum(max_over_gold(exact_match, predictions[q["id"]], q["answers"]) for q in answered)
    f1 = sum(max_over_gold(token_f1_v1, predictions[q["id"]], q["answers"]) for q in answered)
    total = len(questions)
    return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1 / total, "total": total,
            "missing": total - len(answered)}


def raw_scores_v2(questions, predictions):
    """(exact {qid: int}, f1 {qid: float}): the v2.0 script's per-question scores of
    predictions {qid: str, "" = no answer} (one for every question), before any null threshold."""
    missing = missing_prediction_ids(questions, predictions)
    if missing:
        raise ValueError(f"{len(missing)} of {len(questions)} questions have no prediction "
                         f"(first: {missing[:3]}); the v2.0 rules need one per question ('' = no answer).")
    exact, f1 = {}, {}
    for q in questions:
        golds = [a for a in q["answers"] if normalize_answer(a)] or [""]
        prediction = predictions[q["id"]]
        exact[q["id"]] = max_over_gold(exact_match, prediction, golds)
        f1[q["id"]] = max_over_gold(token_f1, prediction, golds)
    return exact, f1


def apply_null_odds_threshold(scores, null_odds, has_answer, null_threshold):
    """Scores {qid: number} after the null threshold: a question with null odds {qid: float}
    > threshold counts as predicted "no answer" (1 when has_answer {qid: bool} says it has
    none, else 0)."""
    return {qid: (float(not has_answer[qid]) if null_odds[qid] > null_threshold else s)
            for qid, s in scores.items()}


def best_null_threshold(predictions, scores, null_odds, has_answer):
    """The official `find_best_thresh` (arguments as best_reachable_threshold): (best score in
    percent of len(scores), threshold), best_reachable_threshold's official_score and
    official_threshold."""
    sweep = best_reachable_threshold(predictions, scores, null_odds, has_answer)
    return sweep["official_score"], sweep["official_threshold"]


def best_reachable_threshold(predictions, scores, null_odds, has_answer):
    """The best total that ONE threshold reaches, beside the official sweep's (the walk:
    docs/squad.md#metrics).

    Args:
        predictions: {qid: str}.
        scores: {qid: number} (exact or F1 before thresholding).
        null_odds: {qid: float}.
        has_answer: {qid: bool}.
    Returns:
        {"score": best reachable total in percent of len(scores),
         "threshold": the null odds of the last question answered there; at the starting
             point 0.0 when every null odds is > 0.0 (the official value), else None
             (a threshold below every null odds is needed),
         "official_score", "official_threshold": the official sweep's best and its threshold,
         "split_odds": the null odds shared by questions that the official best point
             answers only some of (None when the official point is reachable),
         "split_questions": how many questions share them (0 when None)}.
    """
    order = [qid for qid in sorted(null_odds, key=lambda k: null_odds[k]) if qid in scores]
    current = official = reachable = sum(1 for qid in has_answer if not has_answer[qid])
    official_at = reachable_at = None  # index in `order` of the last question answered
    for i, qid in enumerate(order):
        if has_answer[qid]:
            current += scores[qid]
        elif predictions[qid]:
            current -= 1
        if current > official:
            official, official_at = current, i
        run_ends = i + 1 == len(order) or null_odds[order[i + 1]] != null_odds[qid]
        if run_ends and current > reachable:
            reachable, reachable_at = current, i
    if reachable_at is not None:
        threshold = null_odds[order[reachable_at]]
    else:
        threshold = 0.0 if all(null_odds[qid] > 0.0 for qid in order) else None
    split_odds = None
    if reachable < official:
        split_odds = null_odds[order[official_at]]
    return {"score": 100.0 * reachable / len(scores), "threshold": threshold,
            "official_score": 100.0 * official / len(scores),
            "official_threshold": 0.0 if official_at is None else null_odds[order[official_at]],
            "split_odds": split_odds,
            "split_questions": sum(1 for qid in order if null_odds[qid] == split_odds) if split_odds is not None else 0}


def _summary(exact, f1, qids):
    total = len(qids)
    return {"exact": 100.0 * sum(exact[k] for k in qids) / total,
            "f1": 100.0 * sum(f1[k] for k in qids) / total,
            "total": total}


def evaluate_v2(questions, predictions, null_odds=None, null_threshold=1.0):
    """SQuAD v2.0 metrics as the official script (`--na-prob-file`, `--na-prob-thresh`).

    Args:
        questions: list of question dicts (module docstring), N of them.
        predictions: {qid: str} for every question; "" = no answer.
        null_odds: optional {qid: float} for every question, higher = more likely
            unanswerable (null_odds.json); without it every question's odds are 0.0.
        null_threshold: a question whose null odds are > this counts as "no answer"
            (official default 1.0).
    Returns:
        {"exact", "f1" (percent), "total": N,
         "HasAns_exact", "HasAns_f1", "HasAns_total" (when some question has an answer),
         "NoAns_exact", "NoAns_f1", "NoAns_total" (when some question has none),
         "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh" (only with null_odds)}.
    """
    _check_questions(questions)
    if not questions:
        raise ValueError("evaluate_v2 needs at least one question.")
    exact_raw, f1_raw = raw_scores_v2(questions, predictions)
    if null_odds is None:
        odds = {q["id"]: 0.0 for q in questions}
    else:
        lacking = [q["id"] for q in questions if q["id"] not in null_odds]
        if lacking:
            raise ValueError(f"null_odds lacks {len(lacking)} questions (first: {lacking[:3]}).")
        odds = {q["id"]: float(null_odds[q["id"]]) for q in questions}
    has_answer = {q["id"]: bool(q["answers"]) for q in questions}
    exact = apply_null_odds_threshold(exact_raw, odds, has_answer, null_threshold)
    f1 = apply_null_odds_threshold(f1_raw, odds, has_answer, null_threshold)
    qids = [q["id"] for q in questions]
    result = _summary(exact, f1, qids)
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        subset = [k for k in qids if has_answer[k] == wanted]
        if subset:
            result.update({f"{prefix}_{key}": value for key, value in _summary(exact, f1, subset).items()})
    if null_odds is not None:
        result["best_exact"], result["best_exact_thresh"] = best_null_threshold(predictions, exact_raw, odds,
                                                                                has_answer)
        result["best_f1"], result["best_f1_thresh"] = best_null_threshold(predictions, f1_raw, odds, has_answer)
    return result
