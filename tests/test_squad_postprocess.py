"""albert_tf.tasks.squad.postprocess: n-best spans over all windows of a question, on hand-made logits."""

import json
import math
import re

import numpy as np
import pytest

from albert_tf.tasks.squad import metrics as sm
from albert_tf.tasks.squad import postprocess as sp

# words (whitespace-separated) and their character spans; several spaces, accents, "1,000"
CONTEXT = "In  São   Paulo, the café sold 1,000 crêpes to Zoë   Müller on Monday."
WORDS = [(m.start(), m.end()) for m in re.finditer(r"\S+", CONTEXT)]
#        0:In 1:São 2:Paulo, 3:the 4:café 5:sold 6:1,000 7:crêpes 8:to 9:Zoë 10:Müller 11:on 12:Monday.
QUESTION_LEN = 3  # [CLS] q q q [SEP] -> the context starts at position 5
OFFSET = 1 + QUESTION_LEN + 1


def window(qid, words=range(len(WORDS)), seq_len=24, max_context=None, start=None, end=None):
    """A v1 window over context words `words`: [CLS] 3 question tokens [SEP] words [SEP] pad.
    start/end: {word index: logit} (others -5); max_context: word indexes that may start a span."""
    words = list(words)
    spans = [None] * OFFSET + [WORDS[w] for w in words] + [None] * (seq_len - OFFSET - len(words))
    max_ctx = [False] * seq_len
    for i, w in enumerate(words):
        max_ctx[OFFSET + i] = max_context is None or w in max_context
    start_logits, end_logits = np.full(seq_len, -5.0), np.full(seq_len, -5.0)
    for logits, wanted in ((start_logits, start or {}), (end_logits, end or {})):
        for w, value in wanted.items():
            logits[OFFSET + words.index(w)] = value
    return {"qid": qid, "token_spans": spans, "token_is_max_context": max_ctx,
            "start_logits": start_logits, "end_logits": end_logits}


def test_best_span_keeps_the_exact_characters_of_the_context():
    windows = [window("count", start={6: 4.0}, end={6: 3.0}),
               window("city", start={1: 5.0}, end={2: 5.0}),
               window("who", start={9: 2.0}, end={10: 2.0})]
    contexts = {q: CONTEXT for q in ("count", "city", "who")}
    out = sp.predict_v1(windows, contexts, n_best_size=5, max_answer_length=30)
    # the word "Paulo," ends with the comma, which the span keeps (the context's characters)
    assert out["predictions"] == {"count": "1,000", "city": "São   Paulo,", "who": "Zoë   Müller"}
    for qid, entries in out["nbest"].items():
        assert len(entries) == 5  # every position is valid: n_best_size texts
        assert sum(e["probability"] for e in entries) == pytest.approx(1.0)
        for e in entries:
            assert CONTEXT[e["char_start"]:e["char_end"]] == e["text"]
        scores = [e["start_logit"] + e["end_logit"] for e in entries]
        assert scores == sorted(scores, reverse=True)
        assert len({e["text"] for e in entries}) == len(entries)
    best = out["nbest"]["count"][0]
    assert (best["start_logit"], best["end_logit"]) == (4.0, 3.0)


def test_probabilities_are_the_softmax_of_the_n_best_scores():
    # two candidates only: starts 6 (2.0) and 7 (0.0) with the end 7 (1.0); every other
    # position is -5 but n_best_size 2 keeps the two best starts and ends.
    w = window("q", start={6: 2.0, 7: 0.0}, end={7: 1.0, 12: 0.5})
    entries = sp.nbest_v1([w], {"q": CONTEXT}, n_best_size=2, max_answer_length=30)["q"]
    # pairs: (6,7) 3.0, (6,12) 2.5, (7,7) 1.0, (7,12) 0.5 -> the first two kept
    assert [e["text"] for e in entries] == ["1,000 crêpes", "1,000 crêpes to Zoë   Müller on Monday."]
    p = 1 / (1 + math.exp(-0.5))  # softmax([3.0, 2.5])[0]
    assert [e["probability"] for e in entries] == pytest.approx([p, 1 - p])


def test_max_answer_length_question_padding_and_max_context_are_respected():
    w = window("q", words=range(8), start={2: 9.0, 4: 1.0}, end={7: 9.0, 5: 0.5}, max_context=set(range(8)) - {0})
    # huge logits on [CLS], question tokens, [SEP] and padding, and on word 0 (not max context)
    for position in (0, 1, 2, 3, 4, OFFSET + 8, 20, 23):
        w["start_logits"][position] = w["end_logits"][position] = 50.0
    w["start_logits"][OFFSET + 0] = 60.0
    # (2, 7) = 18.0 is 6 words long: too long for max_answer_length 4; the allowed pairs are
    # (4, 7) = 1.0 + 9.0 = 10.0 "café sold 1,000 crêpes", then (2, 5) = 9.0 + 0.5 "Paulo, the café sold"
    entries = sp.nbest_v1([w], {"q": CONTEXT}, n_best_size=20, max_answer_length=4)["q"]
    assert [e["text"] for e in entries[:2]] == ["café sold 1,000 crêpes", "Paulo, the café sold"]
    assert [e["start_logit"] + e["end_logit"] for e in entries[:2]] == [10.0, 9.5]
    for e in entries:
        start_word = next(i for i, s in enumerate(WORDS) if s[0] == e["char_start"])
        end_word = next(i for i, s in enumerate(WORDS) if s[1] == e["char_end"])
        assert 1 <= start_word <= end_word <= 7 and end_word - start_word + 1 <= 4
    # with max_answer_length 6 the long span wins
    assert sp.predict_v1([w], {"q": CONTEXT}, max_answer_length=6)["predictions"]["q"] == (
        "Paulo, the café sold 1,000 crêpes")


def test_a_span_seen_in_two_windows_keeps_its_best_entry_as_the_release():
    # windows over words 0-7 and 4-12 share words 4-7; both (by hand) mark 6 as max context
    first = window("q", words=range(0, 8), start={6: 4.0}, end={7: 2.0}, max_context={0, 1, 2, 3, 4, 5, 6})
    second = window("q", words=range(4, 13), start={6: 2.0, 9: 2.5}, end={7: 0.0, 10: 0.0},
                    max_context={6, 7, 8, 9, 10, 11, 12})
    entries = sp.nbest_v1([first, second], {"q": CONTEXT}, n_best_size=3)["q"]
    # one entry per (window, start, end): "1,000 crêpes" 4 + 2 from the first window; the
    # second window's 2 + 0 is the same text and dropped (not averaged in)
    assert entries[0]["text"] == "1,000 crêpes"
    assert (entries[0]["start_logit"], entries[0]["end_logit"]) == (4.0, 2.0)
    assert entries[1]["text"] == "Zoë   Müller" and entries[1]["start_logit"] + entries[1]["end_logit"] == 2.5
    # the release's dict form of token_is_max_context gives the same
    for w in (first, second):
        w["token_is_max_context"] = {i: bool(v) for i, v in enumerate(w["token_is_max_context"]) if v}
    assert sp.nbest_v1([first, second], {"q": CONTEXT}, n_best_size=3)["q"] == entries


def test_no_valid_span_gives_the_release_nonce_and_errors_are_named():
    w = window("q", words=[3], max_context=set())  # its only context token may not start a span
    assert sp.predict_v1([w], {"q": CONTEXT})["nbest"]["q"] == [
        {"text": "empty", "start_logit": 0.0, "end_logit": 0.0, "char_start": None, "char_end": None,
         "probability": 1.0}]
    with pytest.raises(ValueError, match="no window"):
        sp.nbest_v1([w], {"q": CONTEXT, "other": CONTEXT})
    with pytest.raises(ValueError, match="has no context"):
        sp.nbest_v1([w], {"other": CONTEXT})
    w["end_logits"] = w["end_logits"][:-1]
    with pytest.raises(ValueError, match="window 0"):
        sp.nbest_v1([w], {"q": CONTEXT})


def v2_window(qid, starts, ends, cls_logit, words=range(len(WORDS)), seq_len=24, max_context=None):
    """starts: [(word or raw position str, log-prob)] k1; ends: [[(word, log-prob)] * k2] per start."""
    base = window(qid, words, seq_len, max_context)
    words = list(words)

    def position(w):
        return int(w[1:]) if isinstance(w, str) else OFFSET + words.index(w)

    return {"qid": qid, "token_spans": base["token_spans"],
            "token_is_max_context": base["token_is_max_context"],
            "start_top_index": np.array([position(w) for w, _ in starts], np.int32),
            "start_top_log_probs": np.array([lp for _, lp in starts], np.float32),
            "end_top_index": np.array([[position(w) for w, _ in row] for row in ends], np.int32).reshape(-1),
            "end_top_log_probs": np.array([[lp for _, lp in row] for row in ends], np.float32).reshape(-1),
            "cls_logits": np.float32(cls_logit)}


def test_v2_candidates_null_odds_and_threshold():
    # q1: start 6 (-0.1) with ends 7 (-0.2) / 6 (-1.0); start "p0" ([CLS]) is dropped; start 9 with end 8 (< start)
    q1 = v2_window("q1", starts=[(6, -0.1), ("p0", -0.5), (9, -2.0)],
                   ends=[[(7, -0.2), (6, -1.0)], [(6, -0.1), (7, -0.1)], [(8, -0.1), ("p23", -0.1)]], cls_logit=-3.0)
    # q2 has two windows: null odds = min(2.0, 0.5); its best span is "Monday." from the second one
    q2a = v2_window("q2", starts=[(1, -1.0)], ends=[[(1, -1.0)]], cls_logit=2.0, words=range(0, 7))
    q2b = v2_window("q2", starts=[(12, -0.5)], ends=[[(12, -0.5)]], cls_logit=0.5, words=range(6, 13))
    # q3: nothing valid (ends before the start) -> the release's "" with -1e6 scores
    q3 = v2_window("q3", starts=[(5, -0.1)], ends=[[(4, -0.1)]], cls_logit=4.0)
    contexts = {"q1": CONTEXT, "q2": CONTEXT, "q3": CONTEXT}
    out = sp.predict_v2([q1, q2a, q2b, q3], contexts, n_best_size=20, max_answer_length=30)
    assert out["predictions"] == {"q1": "1,000 crêpes", "q2": "Monday.", "q3": ""}
    assert out["null_odds"] == {"q1": -3.0, "q2": 0.5, "q3": 4.0}
    nbest = out["nbest"]["q1"]
    assert [e["text"] for e in nbest] == ["1,000 crêpes", "1,000"]
    assert nbest[0]["start_log_prob"] == pytest.approx(-0.1) and nbest[0]["end_log_prob"] == pytest.approx(-0.2)
    assert sum(e["probability"] for e in nbest) == pytest.approx(1.0)
    assert out["nbest"]["q3"][0]["start_log_prob"] == -1e6
    # the threshold: "" where null odds > threshold (0.5 is not > 0.5)
    assert sp.apply_null_threshold(out["predictions"], out["null_odds"], 0.5) == {
        "q1": "1,000 crêpes", "q2": "Monday.", "q3": ""}
    assert sp.predict_v2([q1, q2a, q2b, q3], contexts, null_threshold=0.0)["predictions"] == {
        "q1": "1,000 crêpes", "q2": "", "q3": ""}
    assert sp.no_answer_share(out["null_odds"]) == {"questions": 3, "no_answer": 2, "share": 2 / 3,
                                                   "threshold": 0.0}
    assert sp.no_answer_share({})["share"] == 0.0
    # [k1, k2] shaped ends work as the flat [k1*k2] ones
    q1_square = dict(q1, end_top_index=q1["end_top_index"].reshape(3, 2),
                     end_top_log_probs=q1["end_top_log_probs"].reshape(3, 2))
    assert sp.nbest_v2([q1_square], {"q1": CONTEXT})["q1"] == nbest


def test_v2_flow_with_the_evaluator_reaches_best_f1(tmp_path):
    # five questions, one window each; the best-threshold rewrite scores best_f1 exactly
    specs = {"a": (6, 6, -2.0, ["1,000"]), "b": (1, 2, 0.3, []), "c": (9, 10, 0.7, ["Zoë Müller"]),
             "d": (12, 12, 1.5, []), "e": (4, 4, 2.5, ["crêpes"])}
    windows = [v2_window(q, [(s, -0.1)], [[(e, -0.1)]], odds) for q, (s, e, odds, _) in specs.items()]
    questions = [{"id": q, "answers": golds} for q, (_, _, _, golds) in specs.items()]
    out = sp.predict_v2(windows, {q: CONTEXT for q in specs})
    metrics = sm.evaluate_v2(questions, out["predictions"], out["null_odds"])
    info = sp.write_best_f1_predictions(str(tmp_path), questions, out["predictions"], out["null_odds"])
    final = json.loads((tmp_path / sp.BEST_F1_FILE).read_text(encoding="utf-8"))
    # sweep: start 2 (b, d unanswerable); a +1 -> 3 (best, -2.0); b -1 -> 2; c +1 -> 3; d -1 -> 2; e +0 -> 2
    assert metrics["best_f1_thresh"] == -2.0 and metrics["best_f1"] == 60.0
    assert final == {"a": "1,000", "b": "", "c": "", "d": "", "e": ""}
    assert info == {"best_f1_reachable": 60.0, "best_f1_reachable_thresh": -2.0}
    assert sm.evaluate_v2(questions, final)["f1"] == metrics["best_f1"]


def _squad_v2(rows):
    """rows: (qid, gold answers, prediction, null odds) -> (SQuAD v2 dataset, predictions, null odds)."""
    qas = [{"id": q, "question": "?", "answers": [{"text": g, "answer_start": 0} for g in golds],
            "is_impossible": not golds} for q, golds, _, _ in rows]
    dataset = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]}
    return dataset, {q: p for q, _, p, _ in rows}, {q: o for q, _, _, o in rows}


# (qid, gold answers, prediction, null odds); F1 values are sums of halves, so sums are exact
THRESHOLD_CASES = {
    # the official sweep never improves on its start (no question answered) and reports 0.0;
    # null odds are negative, so 0.0 would answer all three
    "negative_start": [("n1", [], "p q", -3.0), ("n2", [], "c", -2.0), ("h", ["x"], "y", -1.0)],
    # the same with null odds exactly 0.0 (0.0 is not > 0.0: answered)
    "zero_start": [("n1", [], "zz", 0.0), ("h", ["x"], "y", 0.7)],
    "positive_start": [("n1", [], "zz", 0.5), ("h", ["x"], "y", 0.7)],
    # best at a negative threshold, no ties; c scores F1 0.5 ("red cat" vs "red dog")
    "negative_best": [("a", ["Paris"], "Paris", -2.0), ("b", [], "zz", -1.0), ("c", ["red dog"], "red cat", 0.5),
                      ("d", [], "w", 1.5)],
    # a and b share 0.5: the sweep's best (3 of 4) is after a, before b; threshold 1.0 reaches 3 of 4 again
    "tie_reached_later": [("a", ["Paris"], "Paris", 0.5), ("b", [], "zz", 0.5), ("e", ["red dog"], "red dog", 1.0),
                          ("d", [], "w", 2.0)],
    # the same, but no threshold reaches 3 of 4: the best reachable is 2.5 of 4 at 0.8
    "tie_unreachable": [("a", ["Paris"], "Paris", 0.5), ("b", [], "zz", 0.5), ("c", ["red dog"], "red cat", 0.8),
                        ("d", [], "w", 2.0)],
}


@pytest.mark.parametrize("case", sorted(THRESHOLD_CASES))
def test_best_f1_file_scores_best_f1_under_the_official_rules(case, tmp_path):
    """predictions_best_f1_thresh.json, scored by the official v2.0 rules written apart from
    our code (tests/squad_official.py) at a plain evaluation, gives the official best_f1
    wherever one threshold reaches it, else the best any threshold reaches, with a note."""
    import squad_official as so

    dataset, predictions, odds = _squad_v2(THRESHOLD_CASES[case])
    official = so.evaluate(dataset, predictions, odds)
    questions = sm.questions_from_squad_json(dataset)
    ours = sm.evaluate_v2(questions, predictions, odds)
    assert {k: ours[k] for k in official} == official
    info = sp.write_best_f1_predictions(str(tmp_path), questions, predictions, odds)
    written = json.loads((tmp_path / sp.BEST_F1_FILE).read_text(encoding="utf-8"))
    threshold = info["best_f1_reachable_thresh"]
    assert written == {q: ("" if odds[q] > threshold else p) for q, p in predictions.items()}
    plain = so.evaluate(dataset, written)["f1"]
    best_reachable, _ = so.best_reachable_f1(dataset, predictions, odds)
    assert info["best_f1_reachable"] == plain == best_reachable
    expected = {"negative_start": (200 / 3, True), "zero_start": (50.0, True), "positive_start": (50.0, False),
                "negative_best": (75.0, False), "tie_reached_later": (75.0, True), "tie_unreachable": (62.5, True)}
    value, noted = expected[case]
    assert plain == value and ("best_f1_note" in info) == noted, info
    if case == "tie_unreachable":
        assert official["best_f1"] == 75.0 and official["best_f1_thresh"] == 0.5 and threshold == 0.8
        assert "2 questions with null odds 0.5" in info["best_f1_note"]
    else:
        assert plain == official["best_f1"]
    if case in ("negative_start", "zero_start"):
        assert official["best_f1_thresh"] == 0.0 and set(written.values()) == {""}
        assert threshold < min(odds.values()) and np.float32(threshold) < np.float32(min(odds.values()))
    if case == "tie_reached_later":
        assert (official["best_f1_thresh"], threshold) == (0.5, 1.0)


def test_best_f1_file_notes_texts_the_official_sweep_scores_unlike_a_plain_evaluation(tmp_path):
    # "," normalizes to nothing: a plain evaluation scores it 1 on a question without answer,
    # the official sweep -1 (a non-empty prediction); no ties, yet the file scores above best_f1
    import squad_official as so

    dataset, predictions, odds = _squad_v2([("n", [], ",", -1.0), ("h1", ["x"], "x", 0.0), ("h2", ["y"], "y", 1.0)])
    official = so.evaluate(dataset, predictions, odds)
    info = sp.write_best_f1_predictions(str(tmp_path), sm.questions_from_squad_json(dataset), predictions, odds)
    written = json.loads((tmp_path / sp.BEST_F1_FILE).read_text(encoding="utf-8"))
    assert (official["best_f1"], official["best_f1_thresh"]) == (200 / 3, 1.0)
    assert written == predictions and so.evaluate(dataset, written)["f1"] == info["best_f1_reachable"] == 100.0
    assert "1 questions (first: ['n'])" in info["best_f1_note"]


def test_prediction_files_are_written_atomically(tmp_path):
    w = v2_window("q", [(9, -0.1)], [[(10, -0.2)]], cls_logit=-1.5)
    out = sp.predict_v2([w], {"q": CONTEXT})
    paths = sp.write_prediction_files(str(tmp_path / "eval"), out)
    assert sorted(p.rsplit("/", 1)[1] for p in paths) == ["nbest_predictions.json", "null_odds.json",
                                                          "predictions.json"]
    assert sorted(p.name for p in (tmp_path / "eval").iterdir()) == ["nbest_predictions.json", "null_odds.json",
                                                                     "predictions.json"]
    assert json.loads((tmp_path / "eval" / "predictions.json").read_text()) == {"q": "Zoë   Müller"}
    assert json.loads((tmp_path / "eval" / "null_odds.json").read_text()) == {"q": -1.5}
    nbest = json.loads((tmp_path / "eval" / "nbest_predictions.json").read_text())
    assert nbest["q"][0]["text"] == "Zoë   Müller" and nbest["q"][0]["probability"] == 1.0
    v1 = sp.predict_v1([window("q", start={6: 1.0}, end={6: 1.0})], {"q": CONTEXT})
    assert len(sp.write_prediction_files(str(tmp_path / "v1"), v1)) == 2
