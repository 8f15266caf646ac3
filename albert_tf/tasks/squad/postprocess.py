"""SQuAD post-processing: the model's outputs on every window of a question -> its n-best
answer texts, predictions.json, nbest_predictions.json and (v2.0) null_odds.json. NumPy only.
Where these rules differ from the release's, and why: docs/squad.md#post-processing-against-the-release

A question's context is cut into windows (features); each window is a dict:

    common keys
      "qid":                  the question id (str)
      "token_spans":          list [T]: for each position of the window the character span
                              (start, end), end exclusive, of its token in the original
                              context, or None for [CLS], question, [SEP] and padding tokens
      "token_is_max_context": bool [T] (or the release's {position: bool} dict): whether this
                              window is the token's max-context window (release
                              `_check_is_max_context`); only such positions may start a span
    v1.1 head (SquadV1Head: one logit per position)
      "start_logits", "end_logits":  float [T]
    v2.0 head (XLNet style, SquadV2Head at inference; k1 = start_n_top, k2 = end_n_top)
      "start_top_index" int [k1], "start_top_log_probs" float [k1]
      "end_top_index" int [k1*k2] or [k1, k2] (the ends of start i at [i*k2, (i+1)*k2)),
      "end_top_log_probs" float, same shape
      "cls_logits":           float (higher = more likely unanswerable)

and `contexts` maps each qid to its context string (albert_tf.tasks.squad.features makes
windows of this form). A span (start s, end e) is a candidate when both are context tokens,
s is a max-context position, e >= s and e - s + 1 <= max_answer_length tokens; its text is
`context[span(s).start:span(e).end]`, whitespace stripped, its score start + end score. The
rules of candidates, n-best, null odds and thresholds: docs/squad.md (link above). Flow:

    out = predict_v2(windows, contexts)                      # predictions: best span texts
    metrics = squad_metrics.evaluate_v2(questions, out["predictions"], out["null_odds"])
    final, info = best_f1_predictions(questions, out["predictions"], out["null_odds"])
"""


import numpy as np

from albert_tf.tasks.squad import metrics as squad_metrics
from albert_tf.storage import atomic, files

BEST_F1_FILE = "predictions_best_f1_thresh.json"
# the keys of predict_v1 / predict_v2's result and the files they are written to (question order)
PREDICTION_FILES = (("predictions", "predictions.json"), ("nbest", "nbest_predictions.json"),
                    ("null_odds", "null_odds.json"))


def _positions(window, index):
    """(token_spans, in_context bool [T], may_start bool [T]) of a window."""
    spans = window["token_spans"]
    length = len(spans)
    in_context = np.array([s is not None for s in spans], dtype=bool)
    flags = window["token_is_max_context"]
    if isinstance(flags, dict):
        max_context = np.array([bool(flags.get(p, False)) for p in range(length)], dtype=bool)
    else:
        max_context = np.asarray(flags, dtype=bool).reshape(-1)
        if max_context.shape[0] != length:
            raise ValueError(f"window {index} (qid {window['qid']!r}): token_is_max_context has "
                             f"{max_context.shape[0]} positions, token_spans {length}.")
    return spans, in_context, in_context & max_context


def _top_positions(logits, allowed, k):
    """The k allowed positions with the highest logits, best first (ties: lower position)."""
    positions = np.flatnonzero(allowed)
    order = np.argsort(-logits[positions], kind="stable")
    return positions[order[:k]]


def candidates_v1(window, n_best_size=20, max_answer_length=30, index=0):
    """The candidate spans of one v1.1 window (module docstring; `index`: its number, for
    error messages) from its n_best_size best starts and ends, at most max_answer_length
    tokens: list of (char_start, char_end, start_score, end_score), best start first."""
    spans, in_context, may_start = _positions(window, index)
    start_logits = np.asarray(window["start_logits"], np.float64).reshape(-1)
    end_logits = np.asarray(window["end_logits"], np.float64).reshape(-1)
    if start_logits.shape[0] != len(spans) or end_logits.shape[0] != len(spans):
        raise ValueError(f"window {index} (qid {window['qid']!r}): start/end logits have "
                         f"{start_logits.shape[0]}/{end_logits.shape[0]} positions, token_spans {len(spans)}.")
    found = []
    ends = _top_positions(end_logits, in_context, n_best_size)  # the same for every start
    for s in _top_positions(start_logits, may_start, n_best_size):
        for e in ends:
            if e < s or e - s + 1 > max_answer_length:
                continue
            found.append((spans[s][0], spans[e][1], float(start_logits[s]), float(end_logits[e])))
    return found


def candidates_v2(window, max_answer_length=30, index=0):
    """The candidate spans of one window of the XLNet-style v2.0 head (module docstring;
    `index`: its number, for error messages), at most max_answer_length tokens: list of
    (char_start, char_end, start_log_prob, end_log_prob) in the head's order."""
    spans, in_context, may_start = _positions(window, index)
    length = len(spans)
    start_index = np.asarray(window["start_top_index"]).reshape(-1)
    start_log_probs = np.asarray(window["start_top_log_probs"], np.float64).reshape(-1)
    k1 = start_index.shape[0]
    end_index = np.asarray(window["end_top_index"]).reshape(k1, -1)
    end_log_probs = np.asarray(window["end_top_log_probs"], np.float64).reshape(k1, -1)
    if start_log_probs.shape[0] != k1 or end_log_probs.shape != end_index.shape:
        raise ValueError(f"window {index} (qid {window['qid']!r}): top index and log-prob shapes differ.")
    found = []
    for i in range(k1):
        s = int(start_index[i])
        if not 0 <= s < length or not may_start[s]:
            continue
        for j in range(end_index.shape[1]):
            e = int(end_index[i, j])
            if not 0 <= e < length or not in_context[e] or e < s or e - s + 1 > max_answer_length:
                continue
            found.append((spans[s][0], spans[e][1], float(start_log_probs[i]), float(end_log_probs[i, j])))
    return found


def _question_order(windows, contexts):
    """The qids of `windows` in order of first appearance; every one needs a context and
    every context a window."""
    for i, window in enumerate(windows):
        if window["qid"] not in contexts:
            raise ValueError(f"window {i}: qid {window['qid']!r} has no context.")
    order = dict.fromkeys(window["qid"] for window in windows)
    lacking = [qid for qid in contexts if qid not in order]
    if lacking:
        raise ValueError(f"{len(lacking)} questions have no window (first: {lacking[:3]}).")
    return list(order)


def softmax(scores):
    """list of float [N] -> its softmax, list of float [N] ([] for [])."""
    if not len(scores):
        return []
    x = np.asarray(scores, np.float64)
    e = np.exp(x - x.max())
    return [float(p) for p in e / e.sum()]


def _strip_span(context, start, end):
    """Narrows [start, end) so that context[start:end] has no surrounding whitespace."""
    while start < end and context[start].isspace():
        start += 1
    while end > start and context[end - 1].isspace():
        end -= 1
    return start, end


def nbest_from_candidates(candidates, context, n_best_size=20, score_names=("start_logit", "end_logit"),
                          fallback_text="empty", fallback_score=0.0):
    """One question's n-best list from the candidates of all its windows.

    Args:
        candidates: list of (char_start, char_end, start_score, end_score), windows in order.
        context: the question's context string.
        n_best_size: length of the list at most.
        score_names: the names of the start and end scores in the entries.
        fallback_text, fallback_score: the single entry when there is no candidate.
    Returns:
        list of {"text", "probability", <start name>, <end name>, "char_start", "char_end"},
        best score first, each text once (its best candidate's scores);
        context[char_start:char_end] == text (None offsets for the fallback).
    """
    start_name, end_name = score_names
    ranked = [(start, end, (char_start, char_end)) for char_start, char_end, start, end in candidates
              if 0 <= char_start < char_end <= len(context)]
    ranked.sort(key=lambda x: x[0] + x[1], reverse=True)  # stable: ties keep window order
    entries, seen = [], set()
    for start_score, end_score, (char_start, char_end) in ranked:
        if len(entries) >= n_best_size:
            break
        char_start, char_end = _strip_span(context, char_start, char_end)
        text = context[char_start:char_end]
        if not text or text in seen:
            continue
        seen.add(text)
        entries.append({"text": text, start_name: start_score, end_name: end_score,
                        "char_start": char_start, "char_end": char_end})
    if not entries:
        entries.append({"text": fallback_text, start_name: fallback_score, end_name: fallback_score,
                        "char_start": None, "char_end": None})
    for entry, p in zip(entries, softmax([e[start_name] + e[end_name] for e in entries])):
        entry["probability"] = p
    return entries


def _nbest(windows, contexts, candidates, n_best_size, **fallback):
    """{qid: n-best list} of the `candidates(window, index)` of every question's windows."""
    order = _question_order(windows, contexts)
    found = {qid: [] for qid in order}
    for i, window in enumerate(windows):
        found[window["qid"]].extend(candidates(window, i))
    return {qid: nbest_from_candidates(found[qid], contexts[qid], n_best_size, **fallback) for qid in order}


def nbest_v1(windows, contexts, n_best_size=20, max_answer_length=30):
    """The n-best answers of every question from a v1.1 head.

    Args:
        windows: list of v1 window dicts (module docstring), any order, all questions mixed.
        contexts: {qid: context string}; every qid needs at least one window.
        n_best_size: candidates per window (starts and ends) and entries per question.
        max_answer_length: longest span in tokens.
    Returns:
        {qid: nbest_from_candidates' list, scores "start_logit" and "end_logit"} in order of
        first appearance in `windows`.
    """
    return _nbest(windows, contexts, lambda window, i: candidates_v1(window, n_best_size, max_answer_length, i),
                  n_best_size)


def nbest_v2(windows, contexts, n_best_size=20, max_answer_length=30):
    """The n-best answers of every question from the XLNet-style v2.0 head: as nbest_v1
    (n_best_size: entries per question), scores "start_log_prob" and "end_log_prob";
    without candidates the single entry {"text": ""} with log-probs -1e6."""
    return _nbest(windows, contexts, lambda window, i: candidates_v2(window, max_answer_length, i), n_best_size,
                  score_names=("start_log_prob", "end_log_prob"), fallback_text="", fallback_score=-1e6)


def null_odds_v2(windows):
    """{qid: float}: each question's null score, the minimum "cls_logits" (scalar) over its v2
    windows (release)."""
    odds = {}
    for window in windows:
        value = float(np.asarray(window["cls_logits"]).reshape(()))
        odds[window["qid"]] = min(odds.get(window["qid"], value), value)
    return odds


def predictions_from_nbest(nbest):
    """{qid: [entry, ...]} -> {qid: the first entry's text}."""
    return {qid: entries[0]["text"] for qid, entries in nbest.items()}


def apply_null_threshold(predictions, null_odds, threshold):
    """predictions {qid: str} with "" where null_odds {qid: float} are > threshold (the
    evaluator's rule)."""
    return {qid: ("" if null_odds[qid] > threshold else text) for qid, text in predictions.items()}


def best_f1_predictions(questions, predictions, null_odds):
    """predictions_best_f1_thresh.json: `predictions` with "" where the null odds are > the
    threshold of the best F1 that one threshold reaches, and how that compares with the
    official best_f1 / best_f1_thresh (squad_metrics.evaluate_v2's).

    Args:
        questions: squad_metrics question dicts (with their gold answers).
        predictions: {qid: text} for every question (predict_v2's, no threshold).
        null_odds: {qid: float} for every question.
    Returns:
        (thresholded {qid: text},
         {"best_f1_reachable": F1 of the thresholded predictions at a plain evaluation
              (squad_metrics.evaluate_v2 without null odds),
          "best_f1_reachable_thresh": the threshold applied; when the best point answers no
              question and some null odds are <= 0.0, the largest float32 below the lowest,
          "best_f1_note": why the file or its threshold differ from best_f1 / best_f1_thresh
              (only when they do)}).
    """
    _, f1 = squad_metrics.raw_scores_v2(questions, predictions)
    odds = {q["id"]: float(null_odds[q["id"]]) for q in questions}  # question order, as evaluate_v2
    has_answer = {q["id"]: bool(q["answers"]) for q in questions}
    sweep = squad_metrics.best_reachable_threshold(predictions, f1, odds, has_answer)
    threshold, notes = sweep["threshold"], []
    if threshold is None:
        lowest = min(odds.values())
        threshold = float(np.nextafter(np.float32(lowest), np.float32(-np.inf)))
        if not threshold < lowest:
            raise AssertionError(f"no float32 below the null odds {lowest!r}")
    if sweep["split_odds"] is not None:
        notes.append(f"the official best point (best_f1 {sweep['official_score']!r} at threshold "
                     f"{sweep['official_threshold']!r}) answers only some of the {sweep['split_questions']} questions "
                     f"with null odds {sweep['split_odds']!r}, which no threshold does: the file is the best point "
                     f"one threshold reaches")
    elif sweep["threshold"] is None and sweep["official_threshold"] == 0.0:
        notes.append(f"best_f1 is the official sweep's starting point (no question answered), which it reports as "
                     f"threshold 0.0; null odds go down to {min(odds.values())!r}, so 0.0 would answer some: the file "
                     f"answers none (threshold {threshold!r})")
    elif threshold != sweep["official_threshold"]:
        notes.append(f"best_f1_thresh {sweep['official_threshold']!r} answers only some of the questions that share "
                     f"those null odds; threshold {threshold!r} reaches the same best_f1")
    final = apply_null_threshold(predictions, null_odds, threshold)
    _, final_f1 = squad_metrics.raw_scores_v2(questions, final)
    # the official sweep counts an answered question without gold answer 0 whenever its
    # prediction is not "", even when the prediction normalizes to nothing (",")
    differ = [qid for qid in odds
              if final_f1[qid] != ((f1[qid] if has_answer[qid] else float(not predictions[qid]))
                                   if odds[qid] <= threshold else float(not has_answer[qid]))]
    if differ:
        notes.append(f"{len(differ)} questions (first: {differ[:3]}) score differently in the official sweep and in "
                     "a plain evaluation (a text that normalizes to nothing, such as ',': the sweep counts an "
                     "unanswerable question answered with it 0, a plain evaluation 1)")
    info = {"best_f1_reachable": squad_metrics.evaluate_v2(questions, final)["f1"],
            "best_f1_reachable_thresh": threshold}
    if notes:
        info["best_f1_note"] = "; ".join(notes)
    return final, info


def write_best_f1_predictions(output_dir, questions, predictions, null_odds):
    """Writes best_f1_predictions' file as output_dir/predictions_best_f1_thresh.json; returns
    its info dict."""
    final, info = best_f1_predictions(questions, predictions, null_odds)
    atomic.write_json(files.join(output_dir, BEST_F1_FILE), final, sort_keys=False)
    return info


def predict_v1(windows, contexts, n_best_size=20, max_answer_length=30):
    """v1.1 post-processing (arguments as nbest_v1): {"predictions": {qid: text}, "nbest":
    {qid: [entry, ...]}}."""
    nbest = nbest_v1(windows, contexts, n_best_size, max_answer_length)
    return {"predictions": predictions_from_nbest(nbest), "nbest": nbest}


def predict_v2(windows, contexts, n_best_size=20, max_answer_length=30, null_threshold=None):
    """v2.0 post-processing (arguments as nbest_v2): {"predictions": {qid: text}, "nbest":
    {qid: [entry, ...]}, "null_odds": {qid: float}}; null_threshold None (the release's first
    pass: every question gets its best span text) or a float (apply_null_threshold)."""
    nbest = nbest_v2(windows, contexts, n_best_size, max_answer_length)
    null_odds = null_odds_v2(windows)
    predictions = predictions_from_nbest(nbest)
    if null_threshold is not None:
        predictions = apply_null_threshold(predictions, null_odds, null_threshold)
    return {"predictions": predictions, "nbest": nbest, "null_odds": null_odds}


def no_answer_share(null_odds, threshold=0.0):
    """How many questions the v2.0 head calls unanswerable, null odds {qid: float} > threshold
    (0.0: more likely unanswerable than not): {"questions": N, "no_answer": count, "share":
    count / N (0.0 when N = 0), "threshold": threshold}."""
    count = sum(1 for value in null_odds.values() if value > threshold)
    total = len(null_odds)
    return {"questions": total, "no_answer": count, "share": count / total if total else 0.0,
            "threshold": float(threshold)}


def write_prediction_files(output_dir, result):
    """Writes `result` (predict_v1 / predict_v2's) into output_dir (created when missing):
    predictions.json, nbest_predictions.json and, when it has null_odds, null_odds.json.
    Returns the paths written."""
    return [atomic.write_json(files.join(output_dir, name), result[key], sort_keys=False)
            for key, name in PREDICTION_FILES if key in result]
