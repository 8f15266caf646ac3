"""The release's digit-comma rule in the graph (albert_tf.export.release_tokenizer, through the
preprocessing model and the QA export's context pieces) on the cases real text rarely shows:
digits beyond ASCII (Python's str.isdigit), a digit-comma piece that does not start with "▁",
an unknown piece ending in a digit and a comma. Python's SentencePieceTokenizer is the
reference; the real dev texts: tests/test_export_text_parity.py."""

import io

import pytest
import tensorflow as tf
from real_data import SPM_30K, real_path

from albert_tf.data.tokenization import SentencePieceTokenizer, preprocess_text
from albert_tf.tasks.squad.aligned_tokens import context_pieces
from albert_tf.export.preprocess_module import PreprocessModule

SPECIAL = dict(pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"])


def _train(path, lines, vocab_size, **options):
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size,
                                   character_coverage=1.0, minloglevel=2, **SPECIAL, **options)
    path.write_bytes(model.getvalue())
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two small models: "pieces" has the pieces "12," and "٣," (Arabic-Indic three, a user
    symbol), neither starting with "▁"; "no_comma" has no "," (and no digits), so "7," and
    "٣," are unknown pieces."""
    base = tmp_path_factory.mktemp("release_rule")
    lines = ["the total was abc12, then abc12, and x٣, or ٣, with 1990, 1991, 2000, 7, 12, 3, 2, 5, 6",
             "prices rose 12, 13, 14 percent; the abc12, series and the ٣, ٣٣, numbers q12, r12,"] * 30
    plain = ["the total was then and or with in prices rose percent series numbers a b c d e"] * 30
    return {"pieces": _train(base / "pieces.model", lines, 50, user_defined_symbols=["٣,"]),
            "no_comma": _train(base / "no_comma.model", plain, 30)}


def _graph(model_file):
    module = PreprocessModule(model_file)
    pieces = tf.function(lambda text: context_pieces(text, module._tokenizer, True), autograph=False)
    return module, pieces


CASES = {
    # text: (plain SentencePiece's pieces, the release's pieces)
    "pieces": {
        "abc12, x": (["▁a", "b", "c", "12,", "▁", "x"], ["▁a", "b", "c", "1", "2", ",", "▁", "x"]),
        "q12, r12,": (["▁", "q", "12,", "▁r", "12,"], ["▁", "q", "1", "2", ",", "▁r", "1", "2", ","]),
        "x٣, y": (["▁", "x", "٣,", "▁", "y"], ["▁", "x", "٣", ",", "▁", "y"]),
        "٣, 7": (["▁", "٣,", "▁", "7"], ["▁", "٣", ",", "▁", "7"]),
    },
    "no_comma": {
        "the ٣, the 7,": (["▁the", "▁", "٣,", "▁the", "▁", "7,"], ["▁the", "▁", "٣", ",", "▁the", "▁", "7", ","]),
        "a7,b": (["▁", "a", "7,", "b"], ["▁", "a", "7", ",", "b"]),
        "٣,٣,": (["▁", "٣,٣,"], ["▁", "٣,٣", ","]),
    },
}


@pytest.mark.parametrize("name", list(CASES))
def test_digits_beyond_ascii_and_pieces_without_word_start(models, name):
    tok = SentencePieceTokenizer(models[name])
    module, pieces = _graph(models[name])
    texts = list(CASES[name])
    for text, (plain, release) in CASES[name].items():
        assert tok.sp.EncodeAsPieces(preprocess_text(text)) == plain, text  # the case is the one meant
        assert tok.tokenize(text) == release, text
    expected = [tok.encode(t) for t in texts]
    assert module.tokenize(tf.constant(texts)).to_list() == expected
    for text, ids in zip(texts, expected):
        got, starts, ends = (t.numpy().tolist() for t in pieces(tf.constant(text)))
        assert got == ids, text
        release = CASES[name][text][1]
        # every solid piece spans its own characters (the text is already normalised)
        assert [text[s:e] for s, e in zip(starts, ends)] == [p.lstrip("▁") for p in release], text


def test_spans_of_split_pieces_in_the_original_text(models):
    """Spans of the parts of split pieces, in text that normalisation changes around them."""
    module, pieces = _graph(models["pieces"])
    text = "  ABC12,\tX٣,  y "
    ids, starts, ends = (t.numpy().tolist() for t in pieces(tf.constant(text)))
    assert ids == SentencePieceTokenizer(models["pieces"]).encode(text)
    # ▁a b c 1 2 , ▁ x ٣ , ▁ y
    assert list(zip(starts, ends)) == [(2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8), (9, 9), (9, 10), (10, 11),
                                       (11, 12), (14, 14), (14, 15)]


def test_superscript_and_arabic_indic_digits_with_the_release_model():
    """With the release's 30k model: NFKD makes "²," the digit-comma piece "▁2,", which the
    rule splits; "٣" is unknown, and its comma a piece of its own."""
    model = real_path(SPM_30K)
    tok = SentencePieceTokenizer(model)
    module, pieces = _graph(model)
    texts = ["x²,", "² , ²,", "on february 7, 2016, at", "x ٣, y ٣٣,", "²,٣,"]
    assert preprocess_text("²,") == "2,"
    assert tok.tokenize("on february 7, 2016, at") == ["▁on", "▁february", "▁7", ",", "▁2016", ",", "▁at"]
    assert tok.tokenize("x²,") == ["▁x", "2", ","]
    expected = [tok.encode(t) for t in texts]
    assert module.tokenize(tf.constant(texts)).to_list() == expected
    ids, starts, ends = (t.numpy().tolist() for t in pieces(tf.constant("on february 7, 2016, at")))
    assert ids == expected[2]
    assert list(zip(starts, ends)) == [(0, 2), (3, 11), (12, 13), (13, 14), (15, 19), (19, 20), (21, 23)]
