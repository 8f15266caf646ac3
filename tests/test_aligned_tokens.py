"""The in-graph context tokenization of the QA SavedModel (albert_tf.tasks.squad.aligned_tokens)
gives exactly the ids and character spans of the Python alignment
(albert_tf.tasks.squad.alignment.tokenize_context) on hard strings."""

import pytest
import tensorflow as tf
from test_squad_data import HARD

from albert_tf.tasks.squad.alignment import normalize_with_offsets as python_normalize_with_offsets
from albert_tf.tasks.squad.alignment import tokenize_context
from albert_tf.data.tokenization import SentencePieceTokenizer, preprocess_text
from albert_tf.tasks.squad.aligned_tokens import context_pieces, normalize_with_offsets
from albert_tf.export.preprocess_module import normalize
from albert_tf.export.release_tokenizer import ReleaseTokenizer

MORE = [
    "a ``` b '''' c `` ''",  # odd runs of quote marks
    "x\u000by  \u3000 z\u2028w",  # vertical tab, ideographic space, line separator
    "",
    "   ",
    "日本語のテキスト",
    "Ǆ ß ﬀ ½ ² ℃ Ⅻ",  # compatibility forms that NFKD expands
    "\u200b",
    "trailing \u200b",
    "e\u0301 decomposed",  # a combining mark of its own
    "ΟΔΟΣ ΚΑΛΟΣ.",  # final sigma, no character lower-cases to several
]


@pytest.mark.parametrize("lower", [True, False])
def test_ids_and_spans_equal_the_python_alignment(spm_model, lower):
    tok = SentencePieceTokenizer(spm_model, do_lower_case=lower)
    with open(spm_model, "rb") as f:
        graph_tok = ReleaseTokenizer(f.read())
    pieces = tf.function(lambda text: context_pieces(text, graph_tok, lower))
    for text in HARD + MORE:
        ids, starts, ends = (t.numpy().tolist() for t in pieces(tf.constant(text)))
        assert ids == tok.encode(text), text  # the release's tokenization
        expected = tokenize_context(text, tok)
        assert ids == expected.ids.tolist(), text
        assert list(zip(starts, ends)) == [tuple(s) for s in expected.spans.tolist()], text


@pytest.mark.parametrize("lower", [True, False])
def test_normalized_characters_and_spans_are_pythons(lower):
    """The characters are preprocess_text's (and the preprocessing model's normalize), each
    with the original span squad_data gives it."""
    for text in HARD + MORE:
        chars, starts, ends = normalize_with_offsets(tf.constant(text), lower)
        joined = tf.strings.reduce_join(chars).numpy().decode("utf-8")
        assert joined == preprocess_text(text, lower), text
        assert normalize(tf.constant(text), lower).numpy().decode("utf-8") == joined, text
        normalized, py_starts, py_ends = python_normalize_with_offsets(text, lower)
        assert (starts.numpy().tolist(), ends.numpy().tolist()) == (py_starts, py_ends), text
