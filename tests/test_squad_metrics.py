"""albert_tf.tasks.squad.metrics: the official SQuAD v1.1 / v2.0 rules on hand-computed cases."""

import pytest

from albert_tf.tasks.squad import metrics as sm


def test_normalize_answer_drops_case_punctuation_articles_and_extra_spaces():
    assert sm.normalize_answer("The  Big, red Dog!") == "big red dog"
    assert sm.normalize_answer("An apple a day") == "apple day"
    # articles only as whole words; "theater" and "another" keep their letters
    assert sm.normalize_answer("the theater, another") == "theater another"
    # punctuation goes before articles: "a.b.c" -> "abc" (not an article)
    assert sm.normalize_answer("A.B.C") == "abc"
    # "1,000" -> "1000"; accents and non-ASCII punctuation stay
    assert sm.normalize_answer("  1,000 Cafés «x» ") == "1000 cafés «x»"
    assert sm.answer_tokens("") == [] and sm.answer_tokens("The") == []


def test_exact_match_and_token_f1_by_hand():
    assert sm.exact_match("the Denver Broncos.", "Denver  broncos") == 1
    assert sm.exact_match("Denver", "Denver Broncos") == 0
    # pred -> [big, red, dog] (3), gold -> [red, dog] (2): 2 common; P = 2/3, R = 1,
    # F1 = 2 * (2/3) / (2/3 + 1) = 0.8
    assert sm.token_f1("the big red dog", "red dog") == pytest.approx(0.8)
    # multiset: pred [red, red, dog], gold [red, dog, cat]: common red x1 + dog x1 = 2;
    # P = R = 2/3 -> F1 = 2/3
    assert sm.token_f1("red red dog", "red dog cat") == pytest.approx(2 / 3)
    assert sm.token_f1("cat", "dog") == 0.0
    # v2.0 rule: empty vs empty = 1, empty vs non-empty = 0 ("the" normalizes to nothing)
    assert sm.token_f1("", "") == 1.0 and sm.token_f1("the", "a") == 1.0
    assert sm.token_f1("", "dog") == 0.0 and sm.token_f1("dog", "") == 0.0
    # v1.1 rule: no common token -> 0, even when both are empty
    assert sm.token_f1_v1("the", "a") == 0.0
    assert sm.token_f1_v1("the big red dog", "red dog") == pytest.approx(0.8)


def test_max_over_gold_answers():
    golds = ["Broncos", "the Denver Broncos"]
    assert sm.max_over_gold(sm.exact_match, "Denver Broncos", golds) == 1
    # vs "Denver Broncos": 1 common of 2 and 2 -> P = R = 1/2 -> F1 1/2;
    # vs "Broncos": P = 1/2, R = 1 -> F1 2/3; max = 2/3
    assert sm.max_over_gold(sm.token_f1, "Broncos team", ["Denver Broncos", "Broncos"]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        sm.max_over_gold(sm.token_f1, "x", [])


def test_evaluate_v1_counts_missing_predictions_as_zero():
    questions = [{"id": "q1", "answers": ["Denver Broncos", "Broncos"]},
                 {"id": "q2", "answers": ["red dog"]},
                 {"id": "q3", "answers": ["Paris"]}]
    predictions = {"q1": "the Broncos", "q2": "the big red dog", "extra": "ignored"}
    # q1: EM 1 (matches "Broncos"), F1 1; q2: EM 0, F1 0.8; q3 missing: 0, 0
    # EM = 100 * 1 / 3, F1 = 100 * 1.8 / 3 = 60
    result = sm.evaluate_v1(questions, predictions)
    assert result == pytest.approx({"exact_match": 100 / 3, "f1": 60.0, "total": 3, "missing": 1})
    assert sm.missing_prediction_ids(questions, predictions) == ["q3"]
    # a question without gold answers has nothing to be scored against: named, not a bare max() error
    with pytest.raises(ValueError, match=r"1 of 4 questions have no gold answer \(first: \['q4'\]\)"):
        sm.evaluate_v1(questions + [{"id": "q4", "answers": []}], dict(predictions, q4="Paris"))


def test_questions_from_squad_json_reads_every_qa():
    dataset = {"version": "v2.0", "data": [
        {"title": "t", "paragraphs": [
            {"context": "c", "qas": [{"id": "a", "question": "?", "answers": [{"text": "x", "answer_start": 0}]},
                                     {"id": "b", "question": "?", "answers": [], "is_impossible": True,
                                      "plausible_answers": [{"text": "c", "answer_start": 0}]}]}]},
        {"title": "u", "paragraphs": [{"context": "d", "qas": [
            {"id": "c", "question": "?", "answers": [{"text": "y", "answer_start": 0},
                                                     {"text": "z", "answer_start": 0}]}]}]}]}
    assert sm.questions_from_squad_json(dataset) == [
        {"id": "a", "answers": ["x"], "is_impossible": False},
        {"id": "b", "answers": [], "is_impossible": True},
        {"id": "c", "answers": ["y", "z"], "is_impossible": False}]
    assert sm.questions_from_squad_json(dataset["data"]) == sm.questions_from_squad_json(dataset)
    dataset["data"][1]["paragraphs"][0]["qas"][0]["id"] = "a"
    with pytest.raises(ValueError, match="appears twice"):
        sm.questions_from_squad_json(dataset)
    with pytest.raises(ValueError, match="is_impossible"):
        sm.evaluate_v1([{"id": "x", "answers": ["y"], "is_impossible": True}], {"x": "y"})


def test_evaluate_v2_without_null_odds():
    questions = [{"id": "a1", "answers": ["red dog"], "is_impossible": False},
                 {"id": "a2", "answers": ["Paris"], "is_impossible": False},
                 {"id": "n1", "answers": [], "is_impossible": True},
                 {"id": "n2", "answers": [], "is_impossible": True}]
    predictions = {"a1": "the big red dog", "a2": "", "n1": "", "n2": "London"}
    # a1: EM 0, F1 0.8; a2: "" vs "Paris" -> 0, 0; n1: "" vs "" -> 1, 1; n2: "London" vs "" -> 0, 0
    assert sm.evaluate_v2(questions, predictions) == pytest.approx({
        "exact": 25.0, "f1": 45.0, "total": 4,
        "HasAns_exact": 0.0, "HasAns_f1": 40.0, "HasAns_total": 2,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2})
    only_answerable = sm.evaluate_v2(questions[:2], predictions)
    assert "NoAns_total" not in only_answerable and "best_f1" not in only_answerable
    # a gold answer that normalizes to "" is dropped: the question's only gold is ""
    assert sm.evaluate_v2([{"id": "x", "answers": ["The"]}], {"x": ""})["exact"] == 100.0
    with pytest.raises(ValueError, match="no prediction"):
        sm.evaluate_v2(questions, {"a1": ""})
    with pytest.raises(ValueError, match="null_odds lacks"):
        sm.evaluate_v2(questions, predictions, null_odds={"a1": 0.0})


def _threshold_case():
    questions = [{"id": "a", "answers": ["Paris"]},
                 {"id": "b", "answers": []},
                 {"id": "c", "answers": ["red dog"]},
                 {"id": "c2", "answers": ["1,000"]},
                 {"id": "e", "answers": ["big red bar"]},
                 {"id": "d", "answers": []}]
    predictions = {"a": "Paris", "b": "zzz", "c": "red dog", "c2": "1000", "e": "big red bar car", "d": "w"}
    null_odds = {"a": -1.0, "b": 0.2, "c": 0.4, "c2": 0.6, "e": 1.8, "d": 2.0}
    return questions, predictions, null_odds


def test_evaluate_v2_finds_the_best_null_threshold():
    questions, predictions, null_odds = _threshold_case()
    # raw EM: a 1, b 0, c 1, c2 1, e 0, d 0; raw F1 the same except e: [big, red, bar, car] vs
    # [big, red, bar] -> P 3/4, R 1 -> F1 6/7.
    # Sweep (find_best_thresh), start = 2 unanswerable questions, threshold 0.0:
    #   EM: a +1 -> 3 (best, -1.0); b -1 -> 2; c +1 -> 3; c2 +1 -> 4 (best, 0.6); e +0 -> 4; d -1 -> 3
    #   F1: ... c2 -> 4 (best, 0.6); e + 6/7 -> 4 6/7 (best, 1.8); d -1 -> 3 6/7
    # At null_threshold 1.0: e (1.8) and d (2.0) count as "no answer": e -> 0, d -> 1;
    # EM = F1 = (1 + 0 + 1 + 1 + 0 + 1) / 6.
    result = sm.evaluate_v2(questions, predictions, null_odds=null_odds)
    assert result == pytest.approx({
        "exact": 400 / 6, "f1": 400 / 6, "total": 6,
        "HasAns_exact": 75.0, "HasAns_f1": 75.0, "HasAns_total": 4,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2,
        "best_exact": 400 / 6, "best_exact_thresh": 0.6,
        "best_f1": 100 * (4 + 6 / 7) / 6, "best_f1_thresh": 1.8})
    # at 1.9 only d is "no answer": F1 = (1 + 0 + 1 + 1 + 6/7 + 1) / 6
    assert sm.evaluate_v2(questions, predictions, null_odds, null_threshold=1.9)["f1"] == pytest.approx(
        100 * (4 + 6 / 7) / 6)


def test_best_threshold_stays_at_zero_when_every_answer_is_wrong():
    # two unanswerable questions with non-empty predictions, one answerable answered wrong:
    # start 2 (all "no answer"); every step lowers or keeps the total -> 100 * 2 / 3 at 0.0
    predictions = {"n1": "a b", "n2": "c", "h": "y"}
    score, threshold = sm.best_null_threshold(predictions, {"n1": 0, "n2": 0, "h": 0},
                                              {"n1": -3.0, "n2": -2.0, "h": -1.0},
                                              {"n1": False, "n2": False, "h": True})
    assert (score, threshold) == (pytest.approx(200 / 3), 0.0)
