"""SQuAD data: reading, exact character alignment, windows, labels, feature caching."""

import json
import os
import unicodedata

import numpy as np
import pytest
from conftest import flip_a_bit, listing

from albert_tf.tasks.squad.alignment import (_is_blank, _split_with_offsets, align_offsets, normalize_with_offsets,
                                            tokenize_context)
from albert_tf.tasks.squad.cache import (feature_file_settings, load_or_build_features, read_feature_arrays,
                                        read_feature_file)
from albert_tf.tasks.squad.features import (FIRST_UNIQUE_ID, FeatureSettings, convert_examples_to_features, doc_spans,
                                           features_to_arrays)
from albert_tf.tasks.squad.reading import SquadDataError, SquadExample, read_squad_examples
from albert_tf.data.tokenization import TOKENIZATION_VERSION, SentencePieceTokenizer, preprocess_text

HARD = [
    "Hello  World",
    "  The\tquick\n\nbrown   fox  ",
    "Café über naïve Zürich, São Paulo.",
    "The ﬁx costs $3.50 and 1,000 people; 12,345,678 more.",
    "ＡＢ１２３ full-width ｆｏｏ",
    "He said ``hello'' and \"bye\" and 'ok'.",
    "ΟΔΟΣ Σ İstanbul",
    "a\u200bb \x07c\u00a0d",
    "x ¨ ´y",
    "end.",
]


@pytest.fixture(scope="module")
def tok(spm_model):
    return SentencePieceTokenizer(spm_model)


def _nfkc(text):
    return unicodedata.normalize("NFKC", preprocess_text(text))


# ---------------------------------------------------------------------------------------------- alignment


@pytest.mark.parametrize("lower", [True, False])
def test_normalize_with_offsets_mirrors_preprocess_text(lower):
    for text in HARD:
        normalized, starts, ends = normalize_with_offsets(text, lower)
        assert normalized == preprocess_text(text, lower)
        assert len(starts) == len(ends) == len(normalized)
        assert all(0 <= s < e <= len(text) for s, e in zip(starts, ends))
        assert starts == sorted(starts) and ends == sorted(ends)


def test_piece_spans_round_trip(tok):
    for text in HARD:
        ctx = tokenize_context(text, tok)
        assert ctx.ids.tolist() == tok.encode(text), text
        spans = ctx.spans.tolist()
        assert len(spans) == len(ctx.pieces)
        assert [s for s, _ in spans] == sorted(s for s, _ in spans)
        for k, (piece, (s, e)) in enumerate(zip(ctx.pieces, spans)):
            assert 0 <= s <= e <= len(text)
            bare = piece.lstrip("\u2581")
            original = text[s:e]
            shared = any(spans[j] == [s, e] for j in (k - 1, k + 1) if 0 <= j < len(spans))
            if shared:  # one original character split across pieces (the ligature)
                assert bare in _nfkc(original), (text, piece, original)
            else:
                assert _nfkc(original) == bare, (text, piece, original)
            if not bare:
                assert s == e
        covered = np.zeros(len(text), bool)
        for s, e in spans:
            covered[s:e] = True
        for i, c in enumerate(text):  # every character that survives normalisation is in a piece
            if preprocess_text(c) and not _is_blank(preprocess_text(c)[0]):
                assert covered[i], (text, i, c)


@pytest.mark.parametrize("text,answer", [
    ("Hello  World", "Hello"),
    ("Hello  World", "World"),
    ("The ﬁx costs $3.50 and 1,000 people; 12,345,678 more.", "$3.50"),
    ("The ﬁx costs $3.50 and 1,000 people; 12,345,678 more.", "1,000 people"),
    ("The ﬁx costs $3.50 and 1,000 people; 12,345,678 more.", "12,345,678"),
    ("The ﬁx costs $3.50 and 1,000 people; 12,345,678 more.", "ﬁx"),
    ("Café über naïve Zürich, São Paulo.", "Zürich"),
    ("Café über naïve Zürich, São Paulo.", "São Paulo"),
    ("He said ``hello'' and \"bye\" and 'ok'.", "``hello''"),
    ("ＡＢ１２３ full-width ｆｏｏ", "ＡＢ１２３"),
    ("  The\tquick\n\nbrown   fox  ", "quick\n\nbrown"),
    ("  The\tquick\n\nbrown   fox  ", "fox"),
])
def test_answer_span_round_trips_exactly(tok, text, answer):
    ctx = tokenize_context(text, tok)
    start = text.index(answer)
    first, last = ctx.char_span_to_tokens(start, start + len(answer))
    assert ctx.token_span_to_text(first, last) == answer


def test_answer_inside_a_piece_gets_the_smallest_covering_span(tok):
    text = "The ﬁx costs $3.50 and 1,000 people."
    ctx = tokenize_context(text, tok)
    start = text.index("000")
    first, last = ctx.char_span_to_tokens(start, start + 2)  # "00" inside the piece "000"
    assert first == last and ctx.pieces[first] == "000" and ctx.token_span_to_text(first, last) == "000"
    assert ctx.char_span_to_tokens(3, 4) is None  # the space after "The" alone


def test_digit_comma_pieces_are_split_with_their_own_spans(tok):
    """The release's encode_pieces splits "1," (a piece of this model) into "1" and ","; each has its own span."""
    text = "The ﬁx costs $3.50 and 1,000 people."
    assert "1," in tok.sp.EncodeAsPieces(preprocess_text(text))  # what SentencePiece alone gives
    ctx = tokenize_context(text, tok)
    assert ctx.ids.tolist() == tok.encode(text) and list(ctx.pieces) == tok.tokenize(text)
    one = text.index("1,000")
    k = ctx.pieces.index(",")
    assert ctx.pieces[k - 1:k + 2] == ("1", ",", "000")
    assert ctx.spans[k - 1:k + 2].tolist() == [[one, one + 1], [one + 1, one + 2], [one + 2, one + 5]]
    assert ctx.token_span_to_text(*ctx.char_span_to_tokens(one, one + 1)) == "1"  # not "1,"
    # should SentencePiece's surface not spell the piece, every piece of the split keeps the piece's span
    got = _split_with_offsets(tok.sp, "1,", 4, 6, "abc 1;", [False, False, False, True, False, False])
    assert got == [(tok.sp.PieceToId("1"), "1", 4, 6), (tok.sp.PieceToId(","), ",", 4, 6)]


def test_align_offsets_fallback():
    starts, ends = align_offsets("abXd", "abcd", [0, 1, 2, 4], [1, 2, 4, 5])
    assert starts[:2] == [0, 1] and starts[3] == 4 and (starts[2], ends[2]) == (2, 4)


# ---------------------------------------------------------------------------------------------- reading


def _squad(path, paragraphs, version="1.1"):
    data = {"version": version, "data": [{"title": "T", "paragraphs": paragraphs}]}
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    return str(path)


def _qa(qid, question, answers=(), impossible=None, plausible=()):
    qa = {"id": qid, "question": question, "answers": [{"text": t, "answer_start": s} for t, s in answers]}
    if impossible is not None:
        qa["is_impossible"] = impossible
        qa["plausible_answers"] = [{"text": t, "answer_start": s} for t, s in plausible]
    return qa


CONTEXT = ("The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, "
           "a region in France.")


def test_read_v1_and_v2(tmp_path):
    v1 = _squad(tmp_path / "v1.json", [{"context": CONTEXT, "qas": [
        _qa("q1", "Where is Normandy?",
            [("France", CONTEXT.index("France")), ("in France", CONTEXT.index("in France"))]),
        _qa("q2", "Who?", [("The Normans", 0)])]}])
    ex = read_squad_examples(v1, is_training=False)
    assert ex.summary.version == "v1" and ex.summary.questions == 2 and len(ex) == 2
    assert ex[0].gold_texts == ["France", "in France"] and ex[0].answer_text == "France"
    assert ex[0].context_text[ex[0].answer_start:ex[0].answer_end] == "France"
    v2 = _squad(tmp_path / "v2.json", [{"context": CONTEXT, "qas": [
        _qa("a", "Where is Normandy?", [("France", CONTEXT.index("France"))], impossible=False),
        _qa("b", "Where is Paris?", [], impossible=True, plausible=[("France", CONTEXT.index("France"))])]}],
        version="v2.0")
    ex = read_squad_examples(v2, is_training=True)
    assert ex.summary.version == "v2" and ex.summary.impossible == 1
    assert ex[1].is_impossible and ex[1].answer_text == "" and ex[1].answer_start is None
    assert ex[1].gold_texts == [""] and ex[1].plausible_answers == (("France", CONTEXT.index("France")),)
    with pytest.raises(SquadDataError, match=r"v2\.json.*'b'.*version='v2'"):
        read_squad_examples(v2, is_training=True, version="v1")


def test_mismatched_answer_start_is_skipped_and_counted(tmp_path):
    path = _squad(tmp_path / "bad_start.json", [{"context": CONTEXT, "qas": [
        _qa("ok", "Who?", [("The Normans", 0)]),
        _qa("off", "Where?", [("France", 3)])]}])
    train = read_squad_examples(path, is_training=True)
    assert [e.qas_id for e in train] == ["ok"]
    assert train.summary.mismatched_answers == 1 and train.summary.skipped == 1
    assert train.summary.mismatched_ids == ["off"]
    dev = read_squad_examples(path, is_training=False)  # kept for evaluation, no label
    assert [e.qas_id for e in dev] == ["ok", "off"] and dev[1].answer_start is None
    assert dev.summary.mismatched_answers == 1 and dev.summary.skipped == 0


@pytest.mark.parametrize("content,pattern", [
    ('{"data": [{"paragraphs": [}]}', r"bad\.json:1:\d+: not valid JSON"),
    ({"data": [{"paragraphs": [{"context": CONTEXT, "qas": [{"id": "q7", "answers": []}]}]}]},
     r"bad\.json: question 'q7' .* lacks the field 'question'"),
    ({"data": [{"paragraphs": [{"context": CONTEXT, "qas": [{"id": "q8", "question": "x"}]}]}]},
     r"bad\.json: question 'q8' .* lacks the field 'answers'"),
    ({"data": [{"paragraphs": [{"context": CONTEXT, "qas": [
        _qa("dup", "x", [("The", 0)])]}, {"context": CONTEXT, "qas": [_qa("dup", "y", [("The", 0)])]}]}]},
     r"bad\.json: question id 'dup' appears twice"),
    ({"data": [{"paragraphs": [{"context": "  \n ", "qas": [_qa("q9", "x", [])]}]}]},
     r"bad\.json: .*'q9'.* empty context"),
    ({"data": [{"paragraphs": [{"context": CONTEXT, "qas": [_qa("q10", "x", [])]}]}]},
     r"bad\.json: question 'q10' .* has no answer"),
    ({"data": [{"paragraphs": [{"context": CONTEXT, "qas": [
        {"id": "q11", "question": "x", "answers": [{"text": "The", "answer_start": "0"}]}]}]}]},
     r"bad\.json: question 'q11' .*answer_start"),
    ({"version": "1.1"}, r"bad\.json: no top-level \"data\""),
])
def test_bad_input_errors_name_file_and_id(tmp_path, content, pattern):
    path = tmp_path / "bad.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    with pytest.raises(SquadDataError, match=pattern):
        read_squad_examples(str(path), is_training=True)


# ---------------------------------------------------------------------------------------------- features


def _example(context, question, answer=None, impossible=False, qid="q"):
    start = context.index(answer) if answer else None
    return SquadExample(qid, question, context, answer or "", start, impossible,
                           ((answer, start),) if answer else ())


def test_feature_layout_and_answer_labels(tok):
    ex = _example(CONTEXT, "What is Normandy a region of?", "a region in France")
    (f,) = convert_examples_to_features([ex], tok, max_seq_length=64, doc_stride=32, max_query_length=16,
                                           is_training=True)
    q = tok.encode(ex.question_text)
    off = len(q) + 2
    ctx = tokenize_context(CONTEXT, tok)
    n = len(ctx.ids)
    ids = f.input_ids.tolist()
    assert ids[0] == tok.cls_id and ids[1:off - 1] == q and ids[off - 1] == tok.sep_id
    assert ids[off:off + n] == ctx.ids.tolist() and ids[off + n] == tok.sep_id
    assert set(ids[off + n + 1:]) == {tok.pad_id}
    assert f.context_offset == off and f.context_length == n
    assert f.input_mask.tolist() == [1] * (off + n + 1) + [0] * (64 - off - n - 1)
    assert f.segment_ids.tolist() == [0] * off + [1] * (n + 1) + [0] * (64 - off - n - 1)
    assert f.p_mask.tolist() == [0] + [1] * (off - 1) + [0] * n + [1] * (64 - off - n)
    spans = f.token_spans
    assert spans[:off] == [None] * off and spans[off + n:] == [None] * (64 - off - n)
    assert not f.is_impossible and off <= f.start_position <= f.end_position < off + n
    assert f.answer_text(ex, f.start_position, f.end_position) == "a region in France"
    assert CONTEXT[spans[f.start_position][0]:spans[f.end_position][1]] == "a region in France"
    assert f.answer_text(ex, 0, f.end_position) is None
    window = f.as_window()
    assert window["qid"] == "q" and window["token_spans"] == spans and len(window["token_is_max_context"]) == 64
    arrays = features_to_arrays([f, f])
    assert arrays["input_ids"].shape == (2, 64) and arrays["input_ids"].dtype == np.int32
    assert arrays["start_positions"].tolist() == [f.start_position] * 2 and arrays["is_impossible"].tolist() == [0, 0]


def _release_is_max_context(doc_spans, cur, position):
    """The release's rule, transcribed for comparison."""
    best_score, best = None, None
    for k, (start, length) in enumerate(doc_spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best = score, k
    return cur == best


def test_windows_max_context_and_labels(tok):
    words = [f"word{i % 7} number {i}," for i in range(60)]
    context = " ".join(words) + " The answer is Normandy in France."
    ex = _example(context, "Where?", "Normandy in France")
    T, stride = 48, 16
    feats = convert_examples_to_features([ex], tok, max_seq_length=T, doc_stride=stride, max_query_length=8,
                                            is_training=True)
    ctx = tokenize_context(context, tok)
    n, q = len(ctx.ids), len(tok.encode("Where?"))
    max_doc = T - q - 3
    expected_windows = 1 + -(-(n - max_doc) // stride)
    assert len(feats) == expected_windows > 3
    windows = [(f.doc_start, f.context_length) for f in feats]
    assert windows == doc_spans(n, max_doc, stride)
    owners = np.zeros(n, int)
    for k, f in enumerate(feats):
        assert f.doc_start == k * stride and f.doc_span_index == k and f.context_offset == q + 2
        assert f.input_ids[q + 2:q + 2 + f.context_length].tolist() == \
            ctx.ids[f.doc_start:f.doc_start + f.context_length].tolist()
        assert [list(s) for s in f.token_spans if s is not None] == \
            ctx.spans[f.doc_start:f.doc_start + f.context_length].tolist()
        flags = f.token_is_max_context
        for i in range(f.context_length):
            assert flags[q + 2 + i] == _release_is_max_context(windows, k, f.doc_start + i)
            owners[f.doc_start + i] += flags[q + 2 + i]
        assert not any(flags[:q + 2]) and not any(flags[q + 2 + f.context_length:])
    assert owners.tolist() == [1] * n  # each context piece is max-context in exactly one window
    first, last = ctx.char_span_to_tokens(ex.answer_start, ex.answer_end)
    with_answer = [f for f in feats if f.doc_start <= first and last < f.doc_start + f.context_length]
    assert with_answer and len(with_answer) < len(feats)
    for f in feats:
        if f in with_answer:
            assert not f.is_impossible and f.answer_text(ex, f.start_position, f.end_position) == "Normandy in France"
        else:  # a training window without the whole answer points at [CLS]
            assert f.is_impossible and f.start_position == f.end_position == 0
    assert feats.summary.features == len(feats) and feats.summary.answerable == len(with_answer)
    assert [f.unique_id for f in feats] == list(range(FIRST_UNIQUE_ID, FIRST_UNIQUE_ID + len(feats)))


def test_max_query_length_and_impossible(tok):
    question = "what is the name of the region that the normans gave their name to in the tenth century " * 3
    ex = _example(CONTEXT, question, impossible=True)
    (f,) = convert_examples_to_features([ex], tok, max_seq_length=128, doc_stride=32, max_query_length=10,
                                           is_training=True)
    assert f.input_ids[1:11].tolist() == tok.encode(question)[:10] and f.input_ids[11] == tok.sep_id
    assert f.context_offset == 12
    assert f.is_impossible and f.start_position == f.end_position == 0 and f.p_mask[0] == 0
    (g,) = convert_examples_to_features([ex], tok, max_seq_length=128, max_query_length=10, is_training=False)
    assert g.is_impossible and g.token_spans[12] is not None
    with pytest.raises(ValueError, match="max_query_length"):
        convert_examples_to_features([ex], tok, max_seq_length=12, max_query_length=10)


# ---------------------------------------------------------------------------------------------- caching


def test_feature_files_are_tfrecords_of_examples_written_atomically(tmp_path):
    """write_feature_file: a standard TFRecord of tf.train.Examples (any TFRecord reader
    gets the values back, negative ones too) under its name only when complete; a
    failure midway leaves the previous records, no temporary, and no sidecar vouching
    for them (so the next run rebuilds)."""
    import tensorflow as tf

    from albert_tf.data import feature_cache

    kind = feature_cache.FeatureKind("test features", 1, shapes=lambda s: {"ids": (2, 3), "label": ()})
    encoder = feature_cache.RecordEncoder(("ids", "label"))
    rows = [(np.arange(6).reshape(2, 3) + 10 * i, [i - 1]) for i in range(3)]
    path = str(tmp_path / "f.tfrecord")
    sidecar = feature_cache.write_feature_file((encoder.encode_int64({"ids": ids, "label": label})
                                                for ids, label in rows), path, kind, {"n": 3})
    assert sidecar["num_features"] == 3 and sidecar["record_bytes"] == os.path.getsize(path)
    examples = [tf.train.Example.FromString(r) for r in tf.data.TFRecordDataset(path).as_numpy_iterator()]
    assert [list(e.features.feature["ids"].int64_list.value) for e in examples] == \
        [list(range(10 * i, 10 * i + 6)) for i in range(3)]
    assert [list(e.features.feature["label"].int64_list.value) for e in examples] == [[-1], [0], [1]]
    arrays = feature_cache.read_feature_arrays(path, kind)
    assert arrays["ids"].shape == (3, 2, 3) and arrays["label"].tolist() == [-1, 0, 1]

    before = open(path, "rb").read()

    def failing():
        yield encoder.encode_int64({"ids": np.zeros(6), "label": [7]})
        raise RuntimeError("the builder failed")

    with pytest.raises(RuntimeError, match="the builder failed"):
        feature_cache.write_feature_file(failing(), path, kind, {"n": 4})
    assert open(path, "rb").read() == before and listing(tmp_path) == ["f.tfrecord"]


def test_feature_cache_rebuilt_when_settings_or_input_change(tmp_path, tok):
    long_context = " ".join(f"sentence {i} is about the normans." for i in range(40)) + " " + CONTEXT
    path = _squad(tmp_path / "train.json", [
        {"context": long_context, "qas": [_qa("a", "Where is Normandy?", [("France", long_context.index("France"))],
                                               impossible=False),
                                           _qa("b", "Why?", [], impossible=True)]},
        {"context": CONTEXT, "qas": [_qa("c", "Who?", [("The Normans", 0)], impossible=False)]}], version="v2.0")
    out = tmp_path / "cache"
    feature_file = str(out / "train.tfrecord")
    settings = FeatureSettings(max_seq_length=64, doc_stride=24, max_query_length=12, is_training=True)
    first = load_or_build_features(path, feature_file, tok, settings, return_features=True)
    assert first.rebuilt and "does not exist" in first.reason and first.num_features == len(first.features) > 3
    assert listing(out) == ["train.tfrecord", "train.tfrecord.json"]  # no temporaries left behind
    sidecar = json.loads((out / "train.tfrecord.json").read_text())
    assert sidecar["settings"]["doc_stride"] == 24 and sidecar["convert_summary"]["features"] == first.num_features
    assert sidecar["settings"]["input_sha256"] and sidecar["settings"]["spm_model_sha256"]

    again = load_or_build_features(path, feature_file, tok, settings, return_features=True)
    assert not again.rebuilt and again.reason.startswith("reused")
    a, b = features_to_arrays(first.features), features_to_arrays(again.features)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert again.features[0].token_spans is None  # training caches keep no spans

    assert sidecar["settings"]["tokenization"] == TOKENIZATION_VERSION == 2
    for old_version in ({}, {"tokenization": 1}):  # a cache of the tokenizer before the release's encode_pieces
        stale = dict(sidecar, settings={k: v for k, v in sidecar["settings"].items() if k != "tokenization"})
        stale["settings"].update(old_version)
        (out / "train.tfrecord.json").write_text(json.dumps(stale))
        rebuilt = load_or_build_features(path, feature_file, tok, settings)
        assert rebuilt.rebuilt and rebuilt.reason == "the tokenization changed (version 1 -> 2: the release's " \
                                                     "encode_pieces)"
        assert json.loads((out / "train.tfrecord.json").read_text())["settings"]["tokenization"] == 2

    os.utime(path, (1, 1))  # mtime only: content unchanged -> reused
    touched = load_or_build_features(path, feature_file, tok, settings)
    assert not touched.rebuilt and "mtime" in touched.reason and touched.features is None

    other = FeatureSettings(max_seq_length=64, doc_stride=16, max_query_length=12, is_training=True)
    changed = load_or_build_features(path, feature_file, tok, other)
    assert changed.rebuilt and "doc_stride 24 -> 16" in changed.reason

    data = json.loads(open(path, encoding="utf-8").read())
    data["data"][0]["paragraphs"][1]["qas"][0]["question"] = "Who were they?"
    (tmp_path / "train.json").write_text(json.dumps(data), encoding="utf-8")
    edited = load_or_build_features(path, feature_file, tok, other)
    assert edited.rebuilt and "content changed" in edited.reason
    with pytest.raises(SquadDataError, match="stale"):
        read_feature_file(feature_file, feature_file_settings(settings, tok, path))
    assert listing(out) == ["train.tfrecord", "train.tfrecord.json"]
    flip_a_bit(out / "train.tfrecord")  # TensorFlow's CRC check refuses the file
    with pytest.raises(SquadDataError, match="unreadable feature file"):
        read_feature_arrays(feature_file)


def test_prediction_cache_keeps_spans(tmp_path, tok):
    path = _squad(tmp_path / "dev.json", [{"context": CONTEXT * 3, "qas": [
        _qa("d1", "Where is Normandy?", [("France", CONTEXT.index("France"))]),
        _qa("d2", "Who?", [("The Normans", 0)])]}])
    feature_file = str(tmp_path / "dev.tfrecord")
    settings = FeatureSettings(max_seq_length=48, doc_stride=16, max_query_length=12, is_training=False)
    built = load_or_build_features(path, feature_file, tok, settings)
    assert built.rebuilt and len(built.features) > 2
    assert listing(tmp_path) == ["dev.json", "dev.tfrecord", "dev.tfrecord.json", "dev.tfrecord.spans.json"]
    cached = load_or_build_features(path, feature_file, tok, settings)
    assert not cached.rebuilt and [e.qas_id for e in cached.examples] == ["d1", "d2"]
    assert len(cached.features) == len(built.features)
    for x, y in zip(built.features, cached.features):
        assert (x.unique_id, x.example_index, x.qas_id, x.doc_span_index, x.doc_start) == \
               (y.unique_id, y.example_index, y.qas_id, y.doc_span_index, y.doc_start)
        assert x.token_spans == y.token_spans and x.token_is_max_context == y.token_is_max_context
        assert np.array_equal(x.input_ids, y.input_ids) and np.array_equal(x.p_mask, y.p_mask)
        assert (x.start_position, x.end_position, x.is_impossible) == \
               (y.start_position, y.end_position, y.is_impossible)
