"""The rules of the official SQuAD v2.0 evaluation script (evaluate-v2.0.py), written here
from its documented behaviour for the tests, apart from albert_tf's code: the tests
score what albert_tf writes with these and compare.

    evaluate(dataset, predictions, na_probs=None, na_prob_thresh=1.0)
        -> {"exact", "f1", "total", "HasAns_*", "NoAns_*"[, "best_exact", "best_exact_thresh",
            "best_f1", "best_f1_thresh" when na_probs is given]}
    best_reachable_f1(dataset, predictions, na_probs) -> (f1, threshold): the best F1 that
        one threshold reaches ("no answer" where na_prob > threshold), by trying every one

Rules: an answer is compared after lower-casing, dropping ASCII punctuation and the words
a/an/the, and collapsing whitespace; gold answers that come out empty are dropped and a
question left without gold answers has the single gold "". Token F1 is 1 when both sides
have no token, 0 when one side has none, else the harmonic mean of precision and recall
of the common tokens (a multiset). A question "has an answer" when its `answers` list is
not empty. With na_probs, a question whose na_prob > na_prob_thresh scores 1 when it has
no answer and 0 otherwise, whatever its prediction. The best threshold: questions sorted by
na_prob (stable: file order among equal values); the running score starts at the number
of questions without an answer with threshold 0.0; each question in turn adds its raw score
when it has an answer, -1 when it has none and its prediction is a non-empty string, 0
otherwise; a strictly larger running score records that question's na_prob as threshold.
"""

import collections
import re
import string

PUNCTUATION = set(string.punctuation)
ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def words(text):
    if not text:
        return []
    kept = "".join(c for c in text.lower() if c not in PUNCTUATION)
    return ARTICLES.sub(" ", kept).split()


def same_text(gold, prediction):
    return float(words(gold) == words(prediction))


def overlap_f1(gold, prediction):
    g, p = words(gold), words(prediction)
    if not g or not p:
        return float(g == p)
    common = sum((collections.Counter(g) & collections.Counter(p)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def questions(dataset):
    """[(qid, [gold texts])] in file order."""
    return [(qa["id"], [a["text"] for a in qa["answers"]])
            for article in dataset["data"] for paragraph in article["paragraphs"] for qa in paragraph["qas"]]


def raw_scores(dataset, predictions):
    exact, f1 = {}, {}
    for qid, golds in questions(dataset):
        golds = [g for g in golds if words(g)] or [""]
        exact[qid] = max(same_text(g, predictions[qid]) for g in golds)
        f1[qid] = max(overlap_f1(g, predictions[qid]) for g in golds)
    return exact, f1


def _mean(scores, qids):
    return {"exact": 100.0 * sum(scores[0][q] for q in qids) / len(qids),
            "f1": 100.0 * sum(scores[1][q] for q in qids) / len(qids), "total": len(qids)}


def _best(predictions, raw, na_probs, has_answer):
    running = best = sum(1 for q in has_answer if not has_answer[q])
    threshold = 0.0
    for qid in sorted(na_probs, key=lambda q: na_probs[q]):
        if has_answer[qid]:
            running += raw[qid]
        elif predictions[qid]:
            running += -1
        if running > best:
            best, threshold = running, na_probs[qid]
    return 100.0 * best / len(raw), threshold


def evaluate(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
    has_answer = {qid: bool(golds) for qid, golds in questions(dataset)}
    exact_raw, f1_raw = raw_scores(dataset, predictions)
    probs = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}
    cut = [{qid: (float(not has_answer[qid]) if probs[qid] > na_prob_thresh else s) for qid, s in raw.items()}
           for raw in (exact_raw, f1_raw)]
    qids = list(has_answer)
    out = _mean(cut, qids)
    for name, wanted in (("HasAns", True), ("NoAns", False)):
        subset = [q for q in qids if has_answer[q] == wanted]
        if subset:
            out.update({f"{name}_{k}": v for k, v in _mean(cut, subset).items()})
    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = _best(predictions, exact_raw, na_probs, has_answer)
        out["best_f1"], out["best_f1_thresh"] = _best(predictions, f1_raw, na_probs, has_answer)
    return out


def best_reachable_f1(dataset, predictions, na_probs):
    """Every threshold that makes a difference (below all na_probs, then each distinct
    na_prob) applied to the predictions ("" where na_prob > threshold), each result scored
    at a plain evaluation; -> (best F1, the lowest threshold giving it; None = below all)."""
    best = None
    for threshold in [None] + sorted(set(na_probs.values())):
        blanked = {q: ("" if threshold is None or na_probs[q] > threshold else p) for q, p in predictions.items()}
        f1 = evaluate(dataset, blanked)["f1"]
        if best is None or f1 > best[0]:
            best = (f1, threshold)
    return best


def sweep_disagrees(dataset, predictions):
    """Questions the best-threshold sweep scores unlike a plain evaluation: without an answer
    but predicted with a non-empty text that normalizes to nothing (the sweep: 0 once
    answered; plain: 1), or with answers that all normalize to nothing (the sweep: 0 when
    not answered; plain: 1 for "")."""
    return [qid for qid, golds in questions(dataset)
            if (not golds and predictions[qid] and not words(predictions[qid]))
            or (golds and not any(words(g) for g in golds))]
