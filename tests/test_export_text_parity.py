"""Every SavedModel that takes raw text (preprocessing, classifier, QA v1/v2, multiple choice)
tokenizes it as the Python training data does, in every script (conftest.MULTISCRIPT, with a
SentencePiece model that has a piece for each of their characters), and answers a batch in
which one example has an empty question, option or context: that example gets the empty
answer or a finite score, and the others what they get when sent alone.

The Python side is the training pipeline itself: SentencePieceTokenizer.encode, the SQuAD
features (squad_data) with the run's post-processing (squad_postprocess), the RACE features
(race_data). The models are tiny and random with a wide initializer, so any token that
differs moves the logits far beyond the tolerances.

With the release's 30k SentencePiece model (tests/real_texts.py): the real dev texts that the
release's digit-comma rule tokenizes otherwise than plain SentencePiece, and a sample of the
others, through every export that takes text and hub.KerasLayer."""

import functools
import types

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops of the loaded SavedModels)
from conftest import MULTISCRIPT
from distributed_helpers import MECHANICS

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.tasks.race.examples import MultipleChoiceExample
from albert_tf.tasks.race.features import MultipleChoiceSettings, convert_example
from albert_tf.tasks.squad.features import convert_examples_to_features, features_to_arrays
from albert_tf.tasks.squad.reading import SquadExample
from albert_tf.tasks.squad import postprocess as post
from albert_tf.data.bucket_widths import bucket_widths
from albert_tf.data.tokenization import SentencePieceTokenizer, preprocess_text

SEQ, STRIDE, QUERY, N_BEST, MAX_ANSWER = 64, 24, 16, 5, 10  # QA; several windows for the longer texts
MC_SEQ, MC_QA = 64, 24
NAMES = list(MULTISCRIPT)
TEXTS = list(MULTISCRIPT.values())


def _build(model, inputs):
    model(inputs, training=False)  # creates the weights before the export lists them
    return model


@pytest.fixture(scope="module")
def exports(multiscript_spm, tmp_path_factory):
    from albert_tf.tasks.classification.export import export_classifier
    from albert_tf.export import savedmodel
    from albert_tf.tasks.race.export import export_multiple_choice
    from albert_tf.export.preprocess_module import PreprocessModule
    from albert_tf.tasks.squad.export import export_question_answering
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice
    from albert_tf.modeling.question_answering import AlbertForQuestionAnswering

    keras.utils.set_random_seed(7)
    base = tmp_path_factory.mktemp("text_parity")
    tok = SentencePieceTokenizer(multiscript_spm)
    config = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=tok.vocab_size, initializer_range=0.5,
                                                         **MECHANICS)
    ones = np.ones((1, 8), "int32")
    flat = {"input_word_ids": ones * 5, "input_mask": ones, "input_type_ids": ones * 0, "p_mask": ones * 0}
    out = types.SimpleNamespace(tok=tok, qa={}, loaded={})
    for version in ("v1", "v2"):
        model = _build(AlbertForQuestionAnswering(config, version=version), flat)
        path = export_question_answering(model, multiscript_spm, str(base / f"qa_{version}"), max_seq_length=SEQ,
                                         doc_stride=STRIDE, max_query_length=QUERY, n_best_size=N_BEST,
                                         max_answer_length=MAX_ANSWER, widths=bucket_widths(SEQ))
        out.qa[version] = model
        out.loaded[f"qa_{version}"] = tf.saved_model.load(path)
    out.mc = _build(AlbertForMultipleChoice(config), {k: v[:, None] for k, v in flat.items()})
    path = export_multiple_choice(out.mc, multiscript_spm, str(base / "mc"), max_seq_length=MC_SEQ,
                                  max_qa_length=MC_QA, widths=bucket_widths(MC_SEQ))
    out.loaded["mc"] = tf.saved_model.load(path)
    encoder_inputs = {k: v for k, v in flat.items() if k != "p_mask"}
    out.classifier = _build(AlbertClassifier(AlbertEncoder(config), num_classes=3), encoder_inputs)
    preprocess = PreprocessModule(multiscript_spm, seq_length=SEQ)
    path = export_classifier(preprocess, out.classifier, str(base / "classifier"), SEQ, labels=("x", "y", "z"),
                             widths=bucket_widths(SEQ))
    out.loaded["classifier"] = tf.saved_model.load(path)
    # the preprocessing model as export_tfhub saves it (its encoder is not needed here)
    savedmodel.save(preprocess, str(base / "preprocess"), preprocess.trace)
    out.loaded["preprocess"] = tf.saved_model.load(str(base / "preprocess"))
    return out


# --- Python references (the training pipeline) ----------------------------------------------------------


def _qa_reference(exports, version, question, context):
    """The run's answer for one question: squad_data features, the model, squad_postprocess."""
    example = SquadExample(qas_id="q", question_text=question, context_text=context, answer_text="",
                              answer_start=None, is_impossible=False)
    features = convert_examples_to_features([example], exports.tok, max_seq_length=SEQ, doc_stride=STRIDE,
                                               max_query_length=QUERY, is_training=False)
    arrays = features_to_arrays(features)
    inputs = {"input_word_ids": arrays["input_ids"], "input_mask": arrays["input_mask"],
              "input_type_ids": arrays["segment_ids"], "p_mask": arrays["p_mask"]}
    outputs = {k: np.asarray(v) for k, v in exports.qa[version](inputs, training=False).items()}
    windows = [dict(f.as_window(), **{k: v[i] for k, v in outputs.items()}) for i, f in enumerate(features)]
    nbest = (post.nbest_v1(windows, {"q": context}, N_BEST, MAX_ANSWER) if version == "v1"
             else post.nbest_v2(windows, {"q": context}, N_BEST, MAX_ANSWER))["q"]
    best = nbest[0]
    scores = ("start_logit", "end_logit") if version == "v1" else ("start_log_prob", "end_log_prob")
    result = {"answer": best["text"], "start": best["char_start"], "end": best["char_end"],
              "score": best[scores[0]] + best[scores[1]], "windows": len(features)}
    if version == "v2":
        result["no_answer_score"] = post.null_odds_v2(windows)["q"]
    return result


def _mc_reference(exports, article, question, options):
    example = MultipleChoiceExample(example_id="a", question_index=0, context=article, question=question,
                                              options=tuple(options))
    arrays = convert_example(example, exports.tok, MultipleChoiceSettings(MC_SEQ, MC_QA))
    inputs = {"input_word_ids": arrays["input_ids"][None], "input_mask": arrays["input_mask"][None],
              "input_type_ids": arrays["segment_ids"][None]}
    return np.asarray(exports.mc(inputs, training=False)["logits"])[0]


def _classifier_reference(exports, text):
    ids = [exports.tok.cls_id] + exports.tok.encode(text)[:SEQ - 2] + [exports.tok.sep_id]
    inputs = {"input_word_ids": np.array([ids], "int32"), "input_mask": np.ones((1, len(ids)), "int32"),
              "input_type_ids": np.zeros((1, len(ids)), "int32")}
    return np.asarray(exports.classifier(inputs, training=False))[0]


def _rows(out):
    """A batch of outputs -> one dict of Python values per example."""
    n = len(next(iter(out.values())))
    return [{k: (v[i].numpy().decode("utf-8") if v.dtype == tf.string else v[i].numpy().tolist())
             for k, v in out.items()} for i in range(n)]


# --- every script -----------------------------------------------------------------------------------------


def test_preprocessing_and_classifier_exports_give_the_training_ids(exports):
    expected = [exports.tok.encode(t) for t in TEXTS]
    assert all(exports.tok.unk_id not in ids for ids in expected)  # every character is a piece of its own
    for name in ("preprocess", "classifier"):
        tokenize = (exports.loaded[name] if name == "preprocess" else exports.loaded[name].preprocess).tokenize
        got = tokenize(tf.constant(TEXTS)).to_list()
        wrong = [n for n, g, e in zip(NAMES, got, expected) if g != e]
        assert not wrong, f"{name} export tokenizes these scripts differently: {wrong}"
    logits = exports.loaded["classifier"](tf.constant(TEXTS))["logits"].numpy()
    reference = np.stack([_classifier_reference(exports, t) for t in TEXTS])
    np.testing.assert_allclose(logits, reference, atol=1e-4, rtol=0)
    assert np.ptp(reference, axis=0).min() > 0.01  # the texts' logits differ far beyond the tolerance


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_qa_export_answers_as_the_run_in_every_script(exports, version):
    questions = TEXTS[1:] + TEXTS[:1]  # each context asked in another script
    got = _rows(exports.loaded[f"qa_{version}"](tf.constant(questions), tf.constant(TEXTS)))
    references = [_qa_reference(exports, version, q, c) for q, c in zip(questions, TEXTS)]
    assert max(r["windows"] for r in references) > 1  # long texts take several windows
    wrong = []
    for name, g, r in zip(NAMES, got, references):
        same = (g["answer"], g["start"], g["end"]) == (r["answer"], r["start"], r["end"])
        same = same and abs(g["score"] - r["score"]) <= 1e-4
        if version == "v2":
            same = same and abs(g["no_answer_score"] - r["no_answer_score"]) <= 1e-4
        if not same:
            wrong.append((name, g, {k: v for k, v in r.items() if k != "windows"}))
    assert not wrong, wrong
    assert len({r["score"] for r in references}) == len(references)  # the scores tell the texts apart


def test_multiple_choice_export_scores_as_the_run_in_every_script(exports):
    article = " ".join(TEXTS)
    questions = [TEXTS[i] + " _ ?" if i % 2 else TEXTS[i] for i in range(len(TEXTS))]
    options = [[TEXTS[(i + 1) % len(TEXTS)], TEXTS[(i + 5) % len(TEXTS)]] for i in range(len(TEXTS))]
    articles = [article if i % 3 else TEXTS[i] for i in range(len(TEXTS))]
    logits = exports.loaded["mc"](article=tf.constant(articles), question=tf.constant(questions),
                                  options=tf.constant(options))["logits"].numpy()
    reference = np.stack([_mc_reference(exports, a, q, o) for a, q, o in zip(articles, questions, options)])
    wrong = [n for n, g, r in zip(NAMES, logits, reference) if np.abs(g - r).max() > 1e-4]
    assert not wrong, f"the multiple-choice export scores these scripts differently: {wrong}"
    assert np.ptp(reference[:, 0]) > 0.01  # the examples' logits differ far beyond the tolerance


# --- empty inputs in a batch ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_qa_export_answers_an_empty_question_or_context_and_the_rest_of_the_batch_alike(exports, version):
    qa = exports.loaded[f"qa_{version}"]
    questions = [TEXTS[0], "", TEXTS[2], "", "   ", TEXTS[5]]
    contexts = [TEXTS[1], TEXTS[3], "", "", TEXTS[4], TEXTS[6]]
    batch = _rows(qa(tf.constant(questions), tf.constant(contexts)))
    for i in (1, 2, 3, 4):  # no question or no context: no answer
        row = batch[i]
        assert (row["answer"], row["start"], row["end"], row["score"]) == ("", -1, -1, -1e6), (i, row)
        if version == "v2":
            assert np.isfinite(row["no_answer_score"]), (i, row)
    for i in (0, 5):
        alone = _rows(qa(tf.constant([questions[i]]), tf.constant([contexts[i]])))[0]
        assert batch[i] == alone, i
        reference = _qa_reference(exports, version, questions[i], contexts[i])
        assert (alone["answer"], alone["start"], alone["end"]) == (reference["answer"], reference["start"],
                                                                    reference["end"]), i
        assert alone["answer"] != ""


def test_multiple_choice_export_scores_empty_options_questions_and_articles(exports):
    mc = exports.loaded["mc"]
    articles = [TEXTS[0], TEXTS[1], "", TEXTS[3], ""]
    questions = [TEXTS[4], TEXTS[5], TEXTS[6], "", ""]
    options = [[TEXTS[7], TEXTS[8]], ["", TEXTS[9]], [TEXTS[10], TEXTS[11]], [TEXTS[12], ""], ["", ""]]
    batch = mc(article=tf.constant(articles), question=tf.constant(questions), options=tf.constant(options))
    logits, probabilities = batch["logits"].numpy(), batch["probabilities"].numpy()
    assert np.isfinite(logits).all()
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)
    for i, (a, q, o) in enumerate(zip(articles, questions, options)):
        # what training would feed the model for it
        np.testing.assert_allclose(logits[i], _mc_reference(exports, a, q, o), atol=1e-4, rtol=0, err_msg=str(i))
        alone = mc(article=tf.constant([a]), question=tf.constant([q]), options=tf.constant([o]))
        np.testing.assert_allclose(logits[i], alone["logits"].numpy()[0], atol=1e-5, rtol=0, err_msg=str(i))
        top = np.sort(logits[i])
        if top[-1] - top[-2] > 1e-4:  # not a tie (two empty options are one input twice)
            assert batch["choice"].numpy()[i] == alone["choice"].numpy()[0]
    assert np.ptp(logits[:, 0]) > 0.01  # the examples' logits differ far beyond the tolerances


# --- real text with the release's 30k model (the digit-comma rule) --------------------------------------------

REAL_SEQ = 128  # the preprocessing model's default


@pytest.fixture(scope="module")
def real_exports(tmp_path_factory):
    """The preprocessing, classifier, QA (v1) and multiple-choice exports made with the release's
    30k SentencePiece model (tiny random models), and the real dev texts the release's
    digit-comma rule changes (tests/real_texts.py)."""
    from real_texts import release_rule_texts

    from albert_tf.export import savedmodel
    from albert_tf.tasks.classification.export import export_classifier
    from albert_tf.tasks.race.export import export_multiple_choice
    from albert_tf.export.preprocess_module import PreprocessModule
    from albert_tf.tasks.squad.export import export_question_answering
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice
    from albert_tf.modeling.question_answering import AlbertForQuestionAnswering

    real = release_rule_texts()
    keras.utils.set_random_seed(11)
    base = tmp_path_factory.mktemp("real_text_parity")
    config = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=real.tok.vocab_size, initializer_range=0.5,
                                                         **MECHANICS)
    ones = np.ones((1, 8), "int32")
    flat = {"input_word_ids": ones * 5, "input_mask": ones, "input_type_ids": ones * 0, "p_mask": ones * 0}
    # Python's ids of each text, computed once (every export is compared with them)
    out = types.SimpleNamespace(tok=real.tok, real=real, loaded={}, paths={},
                                encode=functools.lru_cache(maxsize=None)(real.tok.encode))
    qa = _build(AlbertForQuestionAnswering(config, version="v1"), flat)
    out.loaded["qa"] = tf.saved_model.load(export_question_answering(
        qa, real.model, str(base / "qa"), max_seq_length=SEQ, doc_stride=STRIDE, max_query_length=QUERY,
        n_best_size=N_BEST, max_answer_length=MAX_ANSWER))
    out.mc = _build(AlbertForMultipleChoice(config), {k: v[:, None] for k, v in flat.items()})
    out.loaded["mc"] = tf.saved_model.load(export_multiple_choice(out.mc, real.model, str(base / "mc"),
                                                                  max_seq_length=MC_SEQ, max_qa_length=MC_QA))
    encoder_inputs = {k: v for k, v in flat.items() if k != "p_mask"}
    out.classifier = _build(AlbertClassifier(AlbertEncoder(config), num_classes=3), encoder_inputs)
    preprocess = PreprocessModule(real.model, seq_length=REAL_SEQ)
    out.loaded["classifier"] = tf.saved_model.load(export_classifier(
        preprocess, out.classifier, str(base / "classifier"), SEQ, labels=("x", "y", "z")))
    out.paths["preprocess"] = str(base / "preprocess")
    savedmodel.save(preprocess, out.paths["preprocess"], preprocess.trace)
    out.loaded["preprocess"] = tf.saved_model.load(out.paths["preprocess"])
    return out


def _release_packing(tok, texts, seq_length, encode=None):
    """The Python side of the preprocessing model's root call: [CLS] ids [SEP], cut and padded
    (`encode`: tok.encode, or a cache of it)."""
    encode = encode or tok.encode
    ids = np.full((len(texts), seq_length), tok.pad_id, "int32")
    mask = np.zeros((len(texts), seq_length), "int32")
    for row, text in enumerate(texts):
        pieces = [tok.cls_id] + encode(text)[:seq_length - 2] + [tok.sep_id]
        ids[row, :len(pieces)] = pieces
        mask[row, :len(pieces)] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


def _wrong_ids(tokenize, items, encode, chunk=256):
    """(source, text) pairs whose ids from `tokenize` (strings [B] -> ragged) are not Python's
    (`encode`: SentencePieceTokenizer.encode, or a cache of it)."""
    texts = [t for _, t in items]
    got = [ids for start in range(0, len(texts), chunk)
           for ids in tokenize(tf.constant(texts[start:start + chunk])).to_list()]
    return [(source, text[:80]) for (source, text), ids in zip(items, got) if ids != encode(text)]


def test_real_text_the_release_rule_changes_is_tokenized_as_the_release_by_every_export(real_exports):
    """Every real dev text whose release tokenization differs from plain SentencePiece (and a
    sample of the others): the preprocessing export's `.tokenize` and root call, the
    classifier's preprocessing and logits, the QA and multiple-choice exports' `.tokenize`
    give Python's SentencePieceTokenizer ids."""
    real, tok, encode = real_exports.real, real_exports.tok, real_exports.encode
    assert len(real.split) > 800 and len(real.others) >= 290 and len(real.ties) <= 2, (len(real.split), real.ties)
    # the chosen texts are the ones the rule changes: plain SentencePiece gives other ids
    assert all(tok.sp.EncodeAsIds(preprocess_text(t)) != encode(t) for _, t in real.split)
    items = real.split + real.others
    loaded = real_exports.loaded
    for name in ("preprocess", "classifier", "qa", "mc"):
        tokenize = (loaded[name].preprocess if name == "classifier" else loaded[name]).tokenize
        wrong = _wrong_ids(tokenize, items, encode)
        assert not wrong, f"the {name} export tokenizes {len(wrong)} of {len(items)} real texts otherwise: {wrong[:3]}"
    texts = [t for _, t in items]
    packed = real_exports.loaded["preprocess"](tf.constant(texts))
    expected = _release_packing(tok, texts, REAL_SEQ, encode)
    for key, value in expected.items():
        np.testing.assert_array_equal(packed[key].numpy(), value, err_msg=key)
    # two segments: [CLS] A [SEP] B [SEP], trimmed round-robin (A gets the odd piece)
    first, second = texts[0::2][:len(texts) // 2], texts[1::2]
    pre = real_exports.loaded["preprocess"]
    pairs = pre.bert_pack_inputs([pre.tokenize(tf.constant(first)), pre.tokenize(tf.constant(second))],
                                 seq_length=tf.constant(REAL_SEQ))
    for row, (a, b) in enumerate(zip(first, second)):
        a, b = encode(a), encode(b)
        room = REAL_SEQ - 3
        n_a = min(len(a), max((room + 1) // 2, room - len(b)))
        ids = [tok.cls_id] + a[:n_a] + [tok.sep_id] + b[:room - n_a] + [tok.sep_id]
        ids += [tok.pad_id] * (REAL_SEQ - len(ids))
        assert pairs["input_word_ids"].numpy()[row].tolist() == ids, row
        assert pairs["input_type_ids"].numpy()[row].tolist().count(1) == len(b[:room - n_a]) + 1, row
    # texts the rule changes within the classifier's SEQ - 2 pieces
    changed = [t for _, t in real.split if encode(t)[:SEQ - 2] != tok.sp.EncodeAsIds(preprocess_text(t))[:SEQ - 2]]
    sample = changed[::max(1, len(changed) // 12)][:12]
    logits = real_exports.loaded["classifier"](tf.constant(sample))["logits"].numpy()
    reference = np.stack([_classifier_reference(real_exports, t) for t in sample])
    np.testing.assert_allclose(logits, reference, atol=1e-4, rtol=0)
    assert np.ptp(reference, axis=0).min() > 0.01  # the texts' logits differ far beyond the tolerance


def test_real_text_through_hub_keras_layer_is_the_release_packing(real_exports):
    import tensorflow_hub as hub

    real = real_exports.real
    sentences = [t for source, t in real.split + real.others if source in ("STS-B", "MRPC", "RTE", "CoLA", "SST-2")]
    assert len(sentences) > 100
    layer = hub.KerasLayer(real_exports.paths["preprocess"])
    outputs = layer(tf.constant(sentences))
    expected = _release_packing(real_exports.tok, sentences, REAL_SEQ, real_exports.encode)
    assert sorted(outputs) == sorted(expected)
    for key, value in expected.items():
        np.testing.assert_array_equal(outputs[key].numpy(), value, err_msg=key)


def test_real_contexts_get_the_release_pieces_and_their_spans_from_the_qa_export(real_exports):
    """The QA export's context pieces (what its answers are mapped back through) on the real
    SQuAD contexts: Python's ids and the spans of the Python alignment
    (squad.alignment.tokenize_context); where that alignment has plain SentencePiece's pieces,
    a piece the release splits gives its comma the comma's span and its other parts the rest
    of its span, one after the other, and every other piece keeps its span."""
    from albert_tf.tasks.squad.alignment import tokenize_context
    from albert_tf.data.tokenization import is_digit_comma_piece, split_digit_comma

    tok, qa = real_exports.tok, real_exports.loaded["qa"]
    contexts = [t for source, t in real_exports.real.split + real_exports.real.others if source == "squad_context"]
    assert len(contexts) > 400
    compared = 0
    for text in contexts:
        out = qa.context_tokens(tf.constant(text))
        ids, starts, ends = (out[k].numpy().tolist() for k in ("ids", "start", "end"))
        assert ids == real_exports.encode(text), text
        assert all(0 <= s <= e <= len(text) for s, e in zip(starts, ends)), text
        assert starts == sorted(starts), text
        python = tokenize_context(text, tok)  # its ids: plain SentencePiece's, or the release's
        python_spans = [tuple(s) for s in python.spans.tolist()]
        if python.ids.tolist() == ids:
            assert list(zip(starts, ends)) == python_spans, text
            compared += 1
            continue
        plain = tok.sp.EncodeAsPieces(preprocess_text(text))
        assert python.ids.tolist() == [tok.sp.PieceToId(p) for p in plain]
        k = 0
        for piece, (start, end) in zip(plain, python_spans):
            parts = split_digit_comma(tok.sp, piece) if is_digit_comma_piece(piece) else [piece]
            spans = list(zip(starts[k:k + len(parts)], ends[k:k + len(parts)]))
            if len(parts) == 1:
                assert spans == [(start, end)], (text, piece)
            else:  # the comma is the comma; the parts before it tile the rest of the piece's span
                assert spans[-1] == (end - 1, end) and text[end - 1] == ",", (text, piece, spans)
                assert spans[0][0] == start and spans[-2][1] == end - 1, (text, piece, spans, start, end)
                assert all(spans[j][1] == spans[j + 1][0] for j in range(len(spans) - 1)), (text, piece, spans)
                assert "".join(preprocess_text(text[s:e]) for s, e in spans[:-1]) == piece[:-1].lstrip("▁")
            k += len(parts)
        assert k == len(ids)
        compared += 1
    assert compared == len(contexts)


def test_real_race_questions_score_as_the_run_through_the_multiple_choice_export(real_exports):
    """RACE dev questions whose article the rule changes: the export's logits are what the
    RACE features (race_data, SentencePieceTokenizer.encode) give the model."""
    import glob
    import json
    import os

    from real_data import real_path

    tok = real_exports.tok
    split = {t for source, t in real_exports.real.split if source == "race_article"}
    examples = []
    for path in sorted(glob.glob(os.path.join(real_path("race/RACE/dev"), "*", "*.txt"))):
        with open(path, encoding="utf-8") as f:
            example = json.load(f)
        article = example["article"]
        if article in split and real_exports.encode(article)[:24] != tok.sp.EncodeAsIds(preprocess_text(article))[:24]:
            examples.append((article, example["questions"][0], example["options"][0]))  # changed in the window
        if len(examples) == 6:
            break
    articles, questions, options = (list(x) for x in zip(*examples))
    logits = real_exports.loaded["mc"](article=tf.constant(articles), question=tf.constant(questions),
                                       options=tf.constant(options))["logits"].numpy()
    reference = np.stack([_mc_reference(real_exports, a, q, o) for a, q, o in examples])
    np.testing.assert_allclose(logits, reference, atol=1e-4, rtol=0)
    assert np.ptp(reference[:, 0]) > 0.01
