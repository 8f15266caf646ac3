"""One text normalisation (the release's: NFKD, characters of non-zero combining class
dropped, lower-cased): Python's preprocess_text and its in-graph twin (the preprocessing,
QA, multiple-choice and classifier SavedModels) give the same text for every code point and
the same SentencePiece ids and spans for text in every script. The exports themselves:
tests/test_export_text_parity.py."""

import functools
import itertools
import unicodedata

import pytest
import tensorflow as tf
from conftest import MULTISCRIPT
from tools import make_unicode_tables

from albert_tf.tasks.squad import alignment as sd
from albert_tf.data.tokenization import SentencePieceTokenizer, is_combining, preprocess_text
from albert_tf.tasks.squad.aligned_tokens import context_pieces, normalize_with_offsets
from albert_tf.export.preprocess_module import normalize
from albert_tf.export.release_tokenizer import ReleaseTokenizer

# every code point UTF-8 can carry (not the surrogates)
CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]


def test_unicode_tables_are_made_from_this_pythons_unicodedata():
    """The tables albert_tf reads are those of this Python's Unicode version (each supported
    Python has its file: albert_tf/data/unicode_tables.py), as the tool makes them here."""
    from albert_tf.data import unicode_tables

    tool = make_unicode_tables
    with open(tool.TARGET, encoding="utf-8") as f:
        assert f.read() == tool.generate(), "stale: run python tools/make_unicode_tables.py"
    assert unicode_tables.UNICODE_VERSION == unicodedata.unidata_version
    assert unicode_tables.PATH == tool.TARGET
    # the dropped set is the release's test itself, whatever the tool does
    dropped = [c for c in CODE_POINTS if is_combining(chr(c))]
    assert dropped == [c for c in CODE_POINTS if unicodedata.combining(chr(c)) != 0]
    assert 0x0301 in dropped and 0x0941 not in dropped and 0x302E in dropped  # accent; vowel sign u; tone mark


@functools.lru_cache(maxsize=1)
def _texts(template):
    """The template around every code point: (str list, UTF-8 string tensor), made once per
    template (the two "{}" cases share them)."""
    texts = [template.format(chr(c)) for c in CODE_POINTS]
    return texts, tf.constant([t.encode("utf-8") for t in texts])


@pytest.mark.parametrize("lower,template", [
    (True, "{}"),
    (False, "{}"),
    (True, "\u0391\u03a3{}"),  # capital sigma before it: final unless the character is cased
    (True, "\u0391\u03a3{}\u0392"),  # ... or skipped as case-ignorable before a cased letter
    (True, "\u0391{}\u03a3"),  # after it: final when it is cased or skipped
])
def test_graph_normalisation_is_preprocess_text_on_every_code_point(lower, template):
    texts, strings = _texts(template)
    got = normalize(strings, lower).numpy()
    # Python's text of every code point, compared as UTF-8 bytes (a list equality in C);
    # only a difference lists the code points one by one
    expected = [t.encode("utf-8") for t in map(preprocess_text, texts, itertools.repeat(lower))]
    assert len(got) == len(expected) == len(CODE_POINTS)
    if got.tolist() != expected:
        wrong = [f"U+{c:04X} {unicodedata.name(chr(c), '?')}" for c, g, e in zip(CODE_POINTS, got, expected)
                 if g != e]
        raise AssertionError(f"{len(wrong)} code points normalise differently, e.g. {wrong[:12]}")


def test_aligned_normalisation_has_pythons_text_and_spans_on_every_code_point():
    """The QA export's character-by-character normalisation (aligned_tokens) gives
    squad_data's text and original-character spans, for every code point between two
    letters (one string)."""
    text = "x" + "x".join(chr(c) for c in CODE_POINTS) + "x"
    chars, starts, ends = tf.function(normalize_with_offsets)(tf.constant(text))
    normalized, py_starts, py_ends = sd.normalize_with_offsets(text, True)
    assert tf.strings.reduce_join(chars).numpy().decode("utf-8") == normalized == preprocess_text(text)
    assert starts.numpy().tolist() == py_starts
    assert ends.numpy().tolist() == py_ends


@pytest.mark.parametrize("lower", [True, False])
def test_every_script_gets_pythons_ids_and_spans_in_the_graph(multiscript_spm, lower):
    tok = SentencePieceTokenizer(multiscript_spm, do_lower_case=lower)
    with open(multiscript_spm, "rb") as f:
        graph_tok = ReleaseTokenizer(f.read())
    texts = list(MULTISCRIPT.values())
    ids = graph_tok.tokenize(normalize(tf.constant(texts), lower)).to_list()
    pieces = tf.function(lambda text: context_pieces(text, graph_tok, lower))
    for name, text, graph_ids in zip(MULTISCRIPT, texts, ids):
        expected = tok.encode(text)
        if lower:  # the model was trained on lower-cased text: every character is a piece
            assert tok.unk_id not in expected, name
        assert graph_ids == expected, name
        aligned, starts, ends = (t.numpy().tolist() for t in pieces(tf.constant(text)))
        python = sd.tokenize_context(text, tok)
        assert aligned == python.ids.tolist() == expected, name
        assert list(zip(starts, ends)) == [tuple(s) for s in python.spans.tolist()], name


def test_quote_pairs_stay_as_in_the_release():
    """The release's preprocess_text keeps `` and '' (XLNet's and Hugging Face's map them to ");
    so do the graph's normalisations, with each character its own span."""
    text = "He said ``hi'' and Ｉｔ＇＇ｓ '''."
    expected = "he said ``hi'' and it''s '''."
    assert preprocess_text(text) == expected
    assert normalize(tf.constant([text])).numpy()[0].decode("utf-8") == expected
    chars, starts, ends = normalize_with_offsets(tf.constant(text))
    assert tf.strings.reduce_join(chars).numpy().decode("utf-8") == expected
    assert starts.numpy().tolist() == list(range(len(text)))
    assert ends.numpy().tolist() == list(range(1, len(text) + 1))
