"""The release's tokenization on real text, and what it does to SQuAD answers.

(a) A reference written here from google-research/albert's tokenization.py (`preprocess_text`
    and `encode_pieces`), with unicodedata and sentencepiece only, gives the same pieces and
    ids as albert_tf's SentencePieceTokenizer (tokenize, encode, encode_batch) on every text of
    the real dev sets (SQuAD v1.1 contexts, questions and answers; GLUE SST-2, CoLA, RTE,
    STS-B and MRPC sentences; RACE articles, questions and options) with the release's
    30k-clean.model, lower case; and the digit-comma rule fires on a known number of them.
(b) The SQuAD oracle: each feature's gold start and end fed as the logits through the
    project's features and post-processing, scored by the project's metrics (v1.1 and v2.0
    rules; v2.0 also by tests/squad_official.py), on the real dev files; a comma after a
    number is not part of a predicted answer unless the gold answer has it.
"""

import glob
import json
import os
import unicodedata

import numpy as np
import pytest
import sentencepiece as spm
import squad_official
from real_data import SPM_30K, real_path

from albert_tf.tasks.squad import metrics as squad_metrics
from albert_tf.tasks.squad import postprocess
from albert_tf.tasks.squad.alignment import tokenize_context
from albert_tf.tasks.squad.features import convert_examples_to_features
from albert_tf.tasks.squad.reading import read_squad_examples
from albert_tf.data.tokenization import SentencePieceTokenizer

SPIECE_UNDERLINE = "\u2581"
TEXTS_PER_SOURCE = {"squad_contexts": 2067, "squad_questions": 10570, "squad_answers": 34726, "sst2": 872,
                    "cola": 1043, "rte": 2 * 277, "stsb": 2 * 1500, "mrpc": 2 * 408, "race_articles": 1389,
                    "race_questions": 4887, "race_options": 4 * 4887}
# texts whose release pieces differ from SentencePiece's EncodeAsPieces alone (the digit-comma rule fired)
SPLIT_TEXTS = 1262


# ------------------------------------------------------------------------------ the release, restated


def release_preprocess_text(inputs, lower=True):
    """google-research/albert tokenization.py `preprocess_text(inputs, remove_space=True, lower)`."""
    outputs = " ".join(inputs.strip().split())
    outputs = unicodedata.normalize("NFKD", outputs)
    outputs = "".join([c for c in outputs if not unicodedata.combining(c)])
    if lower:
        outputs = outputs.lower()
    return outputs


def release_encode_pieces(sp_model, text, pieces=None, strip_first=True):
    """google-research/albert tokenization.py `encode_pieces(sp_model, text)` (not sampled).

    `pieces`: EncodeAsPieces(text) when already computed. `strip_first=False` is the release
    run under Python 3 literally: there its `piece[0] != SPIECE_UNDERLINE` compares a str with
    the bytes u"▁".encode("utf-8"), so the first re-encoded piece never loses its "▁"; True is
    the evident intent (Python 2, and Hugging Face's AlbertTokenizer).
    """
    new_pieces = []
    for piece in sp_model.EncodeAsPieces(text) if pieces is None else pieces:
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            cur_pieces = sp_model.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
            if strip_first and piece[0] != SPIECE_UNDERLINE and cur_pieces[0][0] == SPIECE_UNDERLINE:
                if len(cur_pieces[0]) == 1:
                    cur_pieces = cur_pieces[1:]
                else:
                    cur_pieces[0] = cur_pieces[0][1:]
            cur_pieces.append(piece[-1])
            new_pieces.extend(cur_pieces)
        else:
            new_pieces.append(piece)
    return new_pieces


# ------------------------------------------------------------------------------ the real texts


def _tsv_columns(path, columns, header):
    """Columns of a GLUE TSV (tab-separated, no quoting; a UTF-8 BOM dropped)."""
    with open(path, encoding="utf-8-sig") as f:
        rows = [line.split("\t") for line in f.read().split("\n") if line]
    return [row[c] for row in rows[1 if header else 0:] for c in columns]


def real_texts():
    """{source: [text]} of the real dev sets (SOURCES.md's layouts)."""
    with open(real_path("squad/dev-v1.1.json"), encoding="utf-8") as f:
        paragraphs = [p for a in json.load(f)["data"] for p in a["paragraphs"]]
    race_dir = real_path("race/RACE/dev")
    race = []
    for path in sorted(glob.glob(os.path.join(race_dir, "*", "*.txt"))):
        with open(path, encoding="utf-8") as f:
            race.append(json.load(f))
    glue = {name: real_path(f"glue/{name}/dev.tsv") for name in ("SST-2", "CoLA", "RTE", "STS-B", "MRPC")}
    return {
        "squad_contexts": [p["context"] for p in paragraphs],
        "squad_questions": [q["question"] for p in paragraphs for q in p["qas"]],
        "squad_answers": [a["text"] for p in paragraphs for q in p["qas"] for a in q["answers"]],
        "sst2": _tsv_columns(glue["SST-2"], [0], header=True),
        "cola": _tsv_columns(glue["CoLA"], [3], header=False),
        "rte": _tsv_columns(glue["RTE"], [1, 2], header=True),
        "stsb": _tsv_columns(glue["STS-B"], [7, 8], header=True),
        "mrpc": _tsv_columns(glue["MRPC"], [3, 4], header=True),
        "race_articles": [r["article"] for r in race],
        "race_questions": [q for r in race for q in r["questions"]],
        "race_options": [o for r in race for options in r["options"] for o in options],
    }


@pytest.fixture(scope="module")
def model_file():
    return real_path(SPM_30K)


@pytest.fixture(scope="module")
def tok(model_file):
    return SentencePieceTokenizer(model_file, do_lower_case=True)


def test_the_tokenizer_is_the_releases_on_every_real_text(model_file, tok):
    texts = real_texts()
    assert {k: len(v) for k, v in texts.items()} == TEXTS_PER_SOURCE
    texts = [t for v in texts.values() for t in v]
    sp = spm.SentencePieceProcessor()
    sp.Load(model_file)
    normalized = [release_preprocess_text(t, lower=True) for t in texts]
    plain = sp.Encode(normalized, out_type=str)
    reference = [release_encode_pieces(sp, t, p) for t, p in zip(normalized, plain)]
    reference_ids = [[sp.PieceToId(p) for p in pieces] for pieces in reference]

    split = [k for k, (a, b) in enumerate(zip(reference, plain)) if a != b]
    assert len(split) == SPLIT_TEXTS  # the rule fires: "▁2016," -> "▁2016" ","
    assert all(p == "," or not (p[-1:] == "," and p[-2:-1].isdigit()) for k in split for p in reference[k])
    # under Python 3 the release keeps the "▁" of a re-encoded piece: it makes no difference on these texts
    assert all(release_encode_pieces(sp, normalized[k], plain[k], strip_first=False) == reference[k] for k in split)

    assert [k for k, ids in enumerate(tok.encode_batch(texts)) if ids != reference_ids[k]] == []
    some = sorted(set(split) | set(range(0, len(texts), 20)))  # every text whose pieces were split, and more
    assert [k for k in some if tok.tokenize(texts[k]) != reference[k]] == []
    assert [k for k in some if tok.encode(texts[k]) != reference_ids[k]] == []


# ------------------------------------------------------------------------------ SQuAD oracle


def _features(path, tok):
    examples = read_squad_examples(path, is_training=False)
    return examples, convert_examples_to_features(examples, tok, is_training=False)


def _check_features_are_the_tokenizers(examples, features, tok):
    """The windows' context ids are tokenizer.encode(context)'s; every piece's span spells it."""
    first_question, ids, spans = {}, {}, {}  # per context, from the windows of its first question (all of it)
    for f in features:
        text = examples[f.example_index].context_text
        if first_question.setdefault(text, f.example_index) != f.example_index:
            continue
        n = f.doc_start + f.context_length
        ids[text] = np.resize(ids.get(text, np.zeros(0, np.int64)), n)
        spans[text] = np.resize(spans.get(text, np.zeros((0, 2), np.int64)), (n, 2))
        ids[text][f.doc_start:n] = f.input_ids[f.context_offset:f.context_offset + f.context_length]
        spans[text][f.doc_start:n] = f.context_spans
    for text in first_question:
        assert ids[text].tolist() == tok.encode(text)
        pieces, bounds = tok.tokenize(text), spans[text].tolist()
        for piece, (s, e) in zip(pieces, bounds):
            bare, spelled = piece.replace(SPIECE_UNDERLINE, ""), text[s:e].lower()
            if bare != spelled:  # accents, compatibility forms
                spelled = unicodedata.normalize("NFKC", release_preprocess_text(spelled))
                expanded = len(spelled) > e - s  # a character of several ("½" -> "1⁄2") may be in several pieces
                assert bare == spelled or (expanded and bare in spelled), (piece, text[s:e])


def test_squad_v1_oracle_through_the_features_and_post_processing(tok):
    path = real_path("squad/dev-v1.1.json")
    examples, features = _features(path, tok)
    _check_features_are_the_tokenizers(examples, features, tok)
    windows = []
    for f in features:
        start, end = np.zeros(f.max_seq_length), np.zeros(f.max_seq_length)
        if not f.is_impossible:  # the window holds the first gold answer
            start[f.start_position] = end[f.end_position] = 10.0
        windows.append(dict(f.as_window(), start_logits=start, end_logits=end))
    predictions = postprocess.predict_v1(windows, {e.qas_id: e.context_text for e in examples})["predictions"]
    result = squad_metrics.evaluate_v1(squad_metrics.read_questions(path), predictions)
    assert result["total"] == 10570 and result["missing"] == 0
    assert round(result["exact_match"], 3) >= 99.650 and round(result["f1"], 3) >= 99.705, result
    first_gold = {e.qas_id: e.answers[0][0] for e in examples}
    trailing = [q for q, text in predictions.items() if text.endswith(",") and not first_gold[q].endswith(",")]
    assert trailing == []  # the tokenizer before the release's digit-comma rule gave 223 ("February 7, 2016,")
    assert predictions["56be8e613aeaaa14008c90d2"] == "February 7, 2016"


def test_squad_v2_oracle_through_the_features_and_post_processing(tok):
    path = real_path("squad/dev-v2.0.explorer-derived.json")
    examples, features = _features(path, tok)
    windows = []
    for f in features:
        windows.append(dict(f.as_window(), start_top_index=[f.start_position], start_top_log_probs=[0.0],
                            end_top_index=[[f.end_position]], end_top_log_probs=[[0.0]],
                            cls_logits=10.0 if f.is_impossible else -10.0))
    out = postprocess.predict_v2(windows, {e.qas_id: e.context_text for e in examples}, null_threshold=0.0)
    result = squad_metrics.evaluate_v2(squad_metrics.read_questions(path), out["predictions"], out["null_odds"],
                                       null_threshold=0.0)
    assert result["total"] == 11873 and result["NoAns_exact"] == 100.0
    assert round(result["exact"], 3) >= 99.874 and round(result["f1"], 3) >= 99.889, result
    with open(path, encoding="utf-8") as f:
        official = squad_official.evaluate(json.load(f), out["predictions"], out["null_odds"], na_prob_thresh=0.0)
    assert (official["exact"], official["f1"]) == (result["exact"], result["f1"])


def test_an_answer_before_a_comma_after_a_number_has_no_comma(tok):
    context = "Super Bowl 50 was played on February 7, 2016, at Levi's Stadium in Santa Clara."
    answer = "February 7, 2016"
    start = context.index(answer)
    assert "\u25812016," in tok.sp.EncodeAsPieces(release_preprocess_text(context))  # SentencePiece alone
    ctx = tokenize_context(context, tok)
    first, last = ctx.char_span_to_tokens(start, start + len(answer))
    assert ctx.pieces[last] == "\u25812016" and ctx.pieces[last + 1] == ","
    assert ctx.token_span_to_text(first, last) == answer
    assert ctx.token_span_to_text(last + 1, last + 1) == "," and ctx.spans[last + 1].tolist() == [
        start + len(answer), start + len(answer) + 1]

    from albert_tf.tasks.squad.reading import SquadExample
    example = SquadExample("q", "When was Super Bowl 50 played?", context, answer, start, False, ((answer, start),))
    (f,) = convert_examples_to_features([example], tok, max_seq_length=64, max_query_length=16,
                                       is_training=False)
    assert f.answer_text(example, f.start_position, f.end_position) == answer
    start_logits, end_logits = np.zeros(64), np.zeros(64)
    start_logits[f.start_position] = end_logits[f.end_position] = 10.0
    window = dict(f.as_window(), start_logits=start_logits, end_logits=end_logits)
    assert postprocess.predict_v1([window], {"q": context})["predictions"] == {"q": answer}


def test_split_digit_comma_is_the_releases_on_every_path(model_file):
    """albert_tf's split of one digit-comma piece against the restated release, on pieces with and
    without "▁" (the real texts only have pieces with it), digits of other scripts (str.isdigit)."""
    from albert_tf.data.tokenization import apply_digit_comma, is_digit_comma_piece, split_digit_comma

    sp = spm.SentencePieceProcessor()
    sp.Load(model_file)
    pieces = ["\u25812016,", "2016,", "\u25817,", "7,", "x1,", "ab12,", "\u0663,", "\u00b2,", "\u25811\u0663,"]
    for piece in pieces:
        assert is_digit_comma_piece(piece)
        assert split_digit_comma(sp, piece) == release_encode_pieces(sp, "", [piece]), piece
    for piece in ["1", ",", "\u2581,", "a,", "1,a", "\u2581"]:
        assert not is_digit_comma_piece(piece) and release_encode_pieces(sp, "", [piece]) == [piece]
    assert apply_digit_comma(sp, ["\u2581on"] + pieces) == release_encode_pieces(sp, "", ["\u2581on"] + pieces)
    assert split_digit_comma(sp, "2016,") == ["2016", ","]  # the first piece loses its "▁"
