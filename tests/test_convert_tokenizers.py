"""The tokenizers `--to=hf` and `--to=keras_hub` write, against albert_tf's (the release's
tokenization: albert_tf.data.tokenization) on real text: the release's 30k SentencePiece
model and the cased SQuAD v1.1 dev contexts and questions and GLUE dev sentences
(tests/real_data.py). The tokenizers run as their users run them: tokenizer.json in the
`tokenizers` library (what transformers' AutoTokenizer runs), the preset in keras-hub's
AlbertTokenizer (tensorflow-text underneath).
"""

import csv
import json
import os

import pytest
from convert_helpers import config, randomize
from real_data import SPM_30K, real_path

from albert_tf import AlbertEncoder
from albert_tf.convert import release_spm
from albert_tf.convert.api import write_target
from albert_tf.data.tokenization import SentencePieceTokenizer, is_digit_comma_piece, strip_machine_paths


def squad_texts():
    with open(real_path("squad/dev-v1.1.json"), encoding="utf-8") as f:
        data = json.load(f)["data"]
    paragraphs = [p for article in data for p in article["paragraphs"]]
    return [p["context"] for p in paragraphs] + [q["question"] for p in paragraphs for q in p["qas"]]


def glue_texts():
    texts = []
    for task, columns, header in (("SST-2", (0,), True), ("CoLA", (3,), False), ("RTE", (1, 2), True),
                                  ("STS-B", (7, 8), True), ("MRPC", (3, 4), True)):
        with open(real_path(f"glue/{task}/dev.tsv"), encoding="utf-8-sig", newline="") as f:
            rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
        texts += [row[c] for row in rows[1 if header else 0:] for c in columns]
    return texts


def release_cases(texts, tokenizer):
    """How many texts the release tokenizes otherwise than Hugging Face's ALBERT tokenizers or
    plain SentencePiece: with `` or '', with a digit-comma piece, with capitals."""
    return (sum("``" in t or "''" in t for t in texts),
            sum(any(is_digit_comma_piece(p) for p in tokenizer.sp.EncodeAsPieces(t.lower())) for t in texts),
            sum(t != t.lower() for t in texts))


def test_hf_tokenizer_json_tokenizes_as_the_release_on_real_text():
    from tokenizers import Tokenizer

    from albert_tf.convert.hf_write import tokenizer_json

    spm = real_path(SPM_30K)
    ours = SentencePieceTokenizer(spm)
    with open(spm, "rb") as f:  # the bytes the tool writes from (hf_write.tokenizer_files; keras_hub_write's too)
        pipeline = tokenizer_json(strip_machine_paths(f.read()), ours.special_tokens, True)
    assert pipeline["normalizer"]["type"] == "Precompiled"  # no `` '' Replace: the release has none
    texts = squad_texts() + glue_texts()
    quotes, commas, cased = release_cases(texts, ours)
    assert (len(texts), quotes >= 20, commas >= 500, cased >= 15000) == (18922, True, True, True)
    theirs = [e.ids for e in Tokenizer.from_str(json.dumps(pipeline)).encode_batch(texts)]
    expected = [[ours.cls_id] + ids + [ours.sep_id] for ids in ours.encode_batch(texts)]
    differ = [t for t, a, b in zip(texts, expected, theirs, strict=True) if a != b]
    assert differ == []


def test_keras_hub_preset_tokenizes_cased_real_text_as_albert_tf(tmp_path):
    import keras_hub

    spm = real_path(SPM_30K)
    ours = SentencePieceTokenizer(spm)
    out, kind, _ = write_target(randomize(AlbertEncoder(config(vocab_size=ours.vocab_size))), "keras_hub",
                                str(tmp_path / "kh"), spm)
    assert kind == "AlbertBackbone"
    texts = squad_texts()[:2067] + glue_texts()  # the contexts and the GLUE sentences
    quotes, commas, cased = release_cases(texts, ours)
    assert (quotes >= 20, commas >= 400, cased >= 7000) == (True, True, True)
    theirs = [[int(i) for i in ids] for ids in keras_hub.models.AlbertTokenizer.from_preset(out)(texts)]
    expected = ours.encode_batch(texts)
    differ = [t for t, a, b in zip(texts, expected, theirs, strict=True) if a != b]
    assert differ == []
    # albert_tf reading the preset back (--from=keras_hub takes its vocabulary.spm) tokenizes alike
    back = SentencePieceTokenizer(os.path.join(out, "assets", "tokenizer", "vocabulary.spm"))
    assert back.encode_batch(texts) == expected
    report = json.load(open(os.path.join(out, release_spm.CHECK_FILE), encoding="utf-8"))
    assert (report["equal"], report["texts"], report["differ"]) == (10, 10, [])
    assert report["digit_comma_pieces_left_out"] == sum(is_digit_comma_piece(ours.id_to_piece(i))
                                                        for i in range(ours.vocab_size))


def test_a_tokenizer_that_differs_is_refused_or_recorded(tmp_path, spm_model, monkeypatch, capsys):
    """The model's own SentencePiece model in the preset (keras-hub then neither lower-cases
    nor strips accents): the tool refuses with exit 2 and writes nothing; with
    --allow_tokenizer_mismatch it writes the preset and records the mismatch."""
    from absl import flags

    from albert_tf import cli
    from albert_tf.convert import __main__ as convert_main

    cfg = config(vocab_size=3000)
    randomize(AlbertEncoder(cfg)).save_pretrained(str(tmp_path / "run"))
    monkeypatch.setattr(release_spm, "release_model", lambda model_bytes, do_lower_case=True: (model_bytes, 0, 0))

    def convert(*extra):
        fv = flags.FlagValues()
        convert_main.define_flags(fv)
        fv(["convert", "--from=albert_tf", f"--input={tmp_path / 'run'}", "--to=keras_hub",
            f"--spm_model_file={spm_model}", f"--output={tmp_path / 'kh'}", *extra])
        return cli.run_entry_point("convert", convert_main.run, fv)

    assert convert() == 2
    err = capsys.readouterr().err
    assert "convert: error: --to=keras_hub: the written tokenizer" in err and "--allow_tokenizer_mismatch" in err
    assert "The Quick Brown Fox" in err and not (tmp_path / "kh").exists()
    assert sorted(os.listdir(tmp_path)) == ["run"]  # no temporary left either

    assert convert("--allow_tokenizer_mismatch") == 0
    assert "tokenizer MISMATCH allowed (--allow_tokenizer_mismatch)" in capsys.readouterr().out
    report = json.load(open(tmp_path / "kh" / release_spm.CHECK_FILE, encoding="utf-8"))
    assert report["mismatch_allowed"] is True and report["equal"] < report["texts"]
    assert "The Quick Brown Fox Jumps Over The Lazy Dog." in [d["text"] for d in report["differ"]]


@pytest.mark.parametrize("lower", [True, False])
def test_release_rules_are_preprocess_text_then_the_models_own(spm_model, lower):
    """The compiled character map gives, for each character, what preprocess_text and the
    model's own normaliser give it (checked by SentencePiece's own normaliser, not by the
    rules)."""
    import sentencepiece as sp

    from albert_tf.data.tokenization import preprocess_text

    with open(spm_model, "rb") as f:
        model_bytes = f.read()
    release, rules, unused = release_spm.release_model(model_bytes, lower)
    theirs = sp.SentencePieceNormalizer(model_proto=release)
    own = sp.SentencePieceNormalizer(model_proto=model_bytes)
    texts = [c for c in "AÉéİıΣςǅＡﬁ½²\u0301\u00a0\u2003\x1c" + "ÀÉÎÕÜ" * lower] + list(release_spm.CHECK_TEXTS)
    for text in texts:
        assert theirs.Normalize(text) == own.Normalize(preprocess_text(text, lower)), repr(text)
    assert rules > 200000 and unused == sum(is_digit_comma_piece(p) for p in _pieces(model_bytes))


def _pieces(model_bytes):
    from albert_tf.data.spm_model_proto import ModelProto

    proto = ModelProto()
    proto.ParseFromString(model_bytes)
    return [p.piece for p in proto.pieces]
