"""The sample corpus and SentencePiece tools (the demo's first two steps)."""

import os
import subprocess
import sys

import pytest

from albert_tf.data.tokenization import SentencePieceTokenizer, preprocess_text

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import make_sample_corpus  # noqa: E402
import train_sentencepiece  # noqa: E402


def test_sample_corpus_is_prose_deterministic_and_large_enough(sample_corpus, tmp_path):
    again = str(tmp_path / "again.txt")
    make_sample_corpus.write_corpus(again, 1.2)
    assert open(sample_corpus, "rb").read() == open(again, "rb").read()
    assert os.path.getsize(sample_corpus) >= 1_200_000
    text = open(sample_corpus, encoding="utf-8").read()
    documents = [d for d in text.split("\n\n") if d.strip()]
    assert len(documents) > 1000
    lines = [l for l in text.splitlines() if l]
    assert sum(len(l.split()) >= 3 for l in lines) == len(lines)
    assert ">>>" not in text


def test_spm_model_follows_the_release_recipe(spm_model):
    tok = SentencePieceTokenizer(spm_model)
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    assert tok.vocab_size == 3000
    for symbol in ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"):
        assert tok.sp.PieceToId(symbol) != tok.unk_id, symbol
    pieces = tok.tokenize("The Café returns a VALUE.")
    assert pieces[0] == "\u2581the" and all(p == p.lower() for p in pieces)
    assert tok.is_word_start(tok.sp.PieceToId("\u2581the"))


def test_preprocess_text_strips_accents_and_lowercases():
    assert preprocess_text("  Crème   Brûlée ``x'' ") == 'creme brulee "x"'
    assert preprocess_text("Crème", lower=False) == "Creme"


def test_spm_tool_errors_are_clear(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    cases = [
        ([f"--input_file={tmp_path}/nothing*.txt"], "matches no file"),
        ([f"--input_file={tmp_path}"], "is a directory"),
        ([f"--input_file={empty}"], "hold no text"),
    ]
    for args, message in cases:
        result = subprocess.run(
            [sys.executable, os.path.join(ROOT, "tools", "train_sentencepiece.py"), *args,
             f"--model_prefix={tmp_path}/m"], capture_output=True, text=True)
        assert result.returncode == 2, result.stderr
        assert message in result.stderr
        assert "Traceback" not in result.stderr
    assert not list(tmp_path.glob("m.*"))


def test_tokenizer_rejects_models_without_special_pieces(tmp_path, sample_corpus):
    import sentencepiece as spm

    spm.SentencePieceTrainer.Train(input=sample_corpus, model_prefix=str(tmp_path / "plain"),
                                   vocab_size=500, minloglevel=2)
    with pytest.raises(ValueError, match=r"lacks the pieces \[CLS\], \[SEP\], \[MASK\]"):
        SentencePieceTokenizer(tmp_path / "plain.model")
    with pytest.raises(ValueError, match="does not exist"):
        SentencePieceTokenizer(tmp_path / "missing.model")
