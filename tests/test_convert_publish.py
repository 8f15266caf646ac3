"""albert_tf -> Hugging Face and keras-hub (`--to=hf`, `--to=keras_hub`).

Hugging Face: transformers is not installed here (benchmarks/hf_publish_check.py runs the
same conversions against real transformers in the peers venv); the written safetensors are
checked against the suite's NumPy transcription of transformers' ALBERT
(convert_helpers.hf_albert_forward plus the heads below), which shares no code with
albert_tf. keras-hub is installed: its own from_preset loads the preset and computes.
"""

import json
import os

import numpy as np
import pytest
from convert_helpers import _layer_norm, config, convert_cli, gelu_new, hf_outputs, inputs, randomize

from albert_tf import AlbertEncoder, AlbertPretrainer
from albert_tf.convert.api import load_source, write_target
from albert_tf.convert.hf_write import HfLayoutError
from albert_tf.convert.keras_hub_write import KerasHubLayoutError
from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice
from albert_tf.modeling.question_answering import AlbertForQuestionAnswering

VOCAB = 3000  # the suite's SentencePiece model (conftest.spm_model)


def cfg_of(**changes):
    return config(vocab_size=VOCAB, **changes)


def written(model, tmp_path, target, spm_model, name="out"):
    """(output, what the target holds, paths left behind) of write_target into tmp_path / name."""
    return write_target(model, target, str(tmp_path / name), spm_model)


def assert_close(ours, theirs, what, atol=1e-4):
    ours, theirs = np.asarray(ours, "float64"), np.asarray(theirs, "float64")
    assert ours.shape == theirs.shape, what
    assert np.abs(theirs).max() > 100 * atol, f"{what}: values too small for the tolerance"
    np.testing.assert_allclose(ours, theirs, atol=atol, rtol=0, err_msg=what)


def assert_same_weights(a, b, skip=()):
    for va, vb in zip(a.weights, b.weights, strict=True):
        assert va.path == vb.path
        if not va.path.startswith(skip):
            np.testing.assert_array_equal(np.asarray(va), np.asarray(vb), err_msg=va.path)


@pytest.mark.parametrize("layout", [dict(), dict(num_hidden_groups=2, inner_group_num=2)])
def test_pretrainer_to_hf_computes_as_transformers_and_converts_back_bit_for_bit(tmp_path, spm_model, layout):
    cfg = cfg_of(**layout)
    model = randomize(AlbertPretrainer(cfg), seed=3)
    out, kind, left_behind = written(model, tmp_path, "hf", spm_model)
    assert (kind, left_behind) == ("AlbertForPreTraining", [])
    x = inputs(cfg)
    positions = np.array([[1, 4], [2, 7]], "int32")
    ours = model({**x, "masked_lm_positions": positions}, training=False)
    ours_encoder = model.encoder(x, training=False)
    theirs, state, c = hf_outputs(out, x)
    real = x["input_mask"].astype(bool)
    assert_close(np.asarray(ours_encoder["sequence_output"])[real], theirs["sequence_output"][real], "sequence")
    assert_close(ours_encoder["pooled_output"], theirs["pooled_output"], "pooled")
    gathered = np.take_along_axis(theirs["mlm_logits"], positions[..., None], axis=1)
    assert_close(ours["mlm_logits"], gathered, "mlm_logits")
    assert_close(ours["sop_logits"], theirs["sop_logits"], "sop_logits", atol=1e-5)

    # transformers' names: the encoder under albert., the heads at the top, no tied decoder
    assert "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight" in state
    assert "sop_classifier.classifier.weight" in state and "predictions.bias" in state
    assert not any(k.startswith("predictions.decoder") for k in state)
    groups, inner = cfg.num_hidden_groups, cfg.inner_group_num
    assert {int(k.split(".")[3]) for k in state if ".albert_layer_groups." in k} == set(range(groups))
    assert {int(k.split(".")[5]) for k in state if ".albert_layers." in k} == set(range(inner))
    assert state["albert.encoder.embedding_hidden_mapping_in.weight"].shape == (cfg.hidden_size, cfg.embedding_size)
    assert c["hidden_act"] == "gelu_new" and c["layer_norm_eps"] == 1e-12 and c["model_type"] == "albert"
    assert (c["num_hidden_groups"], c["inner_group_num"], c["vocab_size"]) == (groups, inner, VOCAB)

    back = load_source("hf", out)
    assert isinstance(back, AlbertPretrainer) and back.config == cfg
    assert_same_weights(model, back)


def test_qa_and_multiple_choice_to_hf(tmp_path, spm_model):
    cfg = cfg_of(num_hidden_groups=2)
    x = inputs(cfg)
    real = x["input_mask"].astype(bool)

    qa = randomize(AlbertForQuestionAnswering(cfg, version="v1"), seed=4)
    out, kind, left_behind = written(qa, tmp_path, "hf", spm_model, "qa")
    assert kind == "AlbertForQuestionAnswering"
    assert left_behind == ["pooler/bias", "pooler/kernel"]  # transformers' QA model has no pooler
    theirs, state, _ = hf_outputs(out, x)
    assert not any("pooler" in k for k in state)
    ours = qa(x, training=False)
    for name in ("start_logits", "end_logits"):
        assert_close(np.asarray(ours[name])[real], theirs[name][real], name, atol=1e-5)
    back = load_source("hf", out)
    assert_same_weights(qa, back, skip=("pooler/",))
    assert not np.asarray(back.encoder(x)["pooled_output"]).any()  # read back without a pooler: zeros

    mc = randomize(AlbertForMultipleChoice(cfg), seed=6)
    out, kind, left_behind = written(mc, tmp_path, "hf", spm_model, "mc")
    assert (kind, left_behind) == ("AlbertForMultipleChoice", [])
    theirs, _, _ = hf_outputs(out, x)
    ours = mc({k: v[None] for k, v in x.items()}, training=False)  # one example, the rows as its options
    assert_close(np.asarray(ours["logits"])[0], theirs["logits"], "multiple-choice logits", atol=1e-5)
    assert_same_weights(mc, load_source("hf", out))

    # SQuAD v2: transformers has no place for the release's v2 head (end conditioned on the
    # start, answerability): the encoder is written as AlbertModel, the head listed as left behind
    v2 = randomize(AlbertForQuestionAnswering(cfg, version="v2"), seed=5)
    out, kind, left_behind = written(v2, tmp_path, "hf", spm_model, "qa_v2")
    head = sorted(v.path for v in v2.weights if v.path.startswith("squad_v2/"))
    assert kind == "AlbertModel" and left_behind == head and len(head) >= 8
    theirs, state, _ = hf_outputs(out, x)
    assert json.load(open(os.path.join(out, "config.json")))["architectures"] == ["AlbertModel"]
    assert not any("squad" in k or "qa_outputs" in k for k in state)
    assert_close(np.asarray(v2.encoder(x)["sequence_output"])[real], theirs["sequence_output"][real], "v2 encoder")
    back = load_source("hf", out)
    assert isinstance(back, AlbertEncoder)
    assert_same_weights(v2.encoder, back)

    encoder = randomize(AlbertEncoder(cfg), seed=8)
    out, kind, _ = written(encoder, tmp_path, "hf", spm_model, "encoder")
    theirs, state, _ = hf_outputs(out, x)
    assert kind == "AlbertModel" and "embeddings.word_embeddings.weight" in state  # no albert. prefix
    assert_close(encoder(x)["pooled_output"], theirs["pooled_output"], "AlbertModel pooled")
    assert_same_weights(encoder, load_source("hf", out))


def test_hf_tokenizer_files_and_config(tmp_path, spm_model):
    import sentencepiece as spm

    from albert_tf.data.tokenization import SentencePieceTokenizer

    cfg = cfg_of()
    out, _, _ = written(randomize(AlbertEncoder(cfg)), tmp_path, "hf", spm_model)
    theirs, ours = spm.SentencePieceProcessor(), SentencePieceTokenizer(spm_model)
    theirs.Load(os.path.join(out, "spiece.model"))
    assert [theirs.IdToPiece(i) for i in range(VOCAB)] == [ours.id_to_piece(i) for i in range(VOCAB)]
    text = "ALBERT: a lite BERT, for self-supervised learning of language representations."
    assert theirs.EncodeAsIds(text.lower()) == ours.encode(text)
    with open(os.path.join(out, "spiece.model"), "rb") as f:
        assert os.path.dirname(spm_model).encode() not in f.read()  # no machine paths
    tokenizer = json.load(open(os.path.join(out, "tokenizer_config.json")))
    assert tokenizer["tokenizer_class"] == "AlbertTokenizer" and tokenizer["do_lower_case"] is True
    pieces = {tokenizer[k]: getattr(ours, i) for k, i in (("cls_token", "cls_id"), ("sep_token", "sep_id"),
                                                          ("pad_token", "pad_id"), ("unk_token", "unk_id"),
                                                          ("mask_token", "mask_id"))}
    assert {p: theirs.PieceToId(p) for p in pieces} == pieces
    assert tokenizer["model_input_names"] == ["input_ids", "token_type_ids", "attention_mask"]
    c = json.load(open(os.path.join(out, "config.json")))
    assert (c["pad_token_id"], c["bos_token_id"], c["eos_token_id"]) == (ours.pad_id, ours.cls_id, ours.sep_id)

    # tokenizer.json: SentencePiece's pieces and scores in one Unigram model; only the control
    # pieces are added tokens (transformers' own conversion cuts the user-defined pieces, e.g.
    # "(", out of the text first and so segments differently: benchmarks/hf_publish_check.py)
    pipeline = json.load(open(os.path.join(out, "tokenizer.json"), encoding="utf-8"))
    assert pipeline["model"]["type"] == "Unigram" and pipeline["model"]["unk_id"] == ours.unk_id
    assert [p for p, _ in pipeline["model"]["vocab"]] == [theirs.IdToPiece(i) for i in range(VOCAB)]
    # ... but each digit-comma piece ("2016,": the release splits it) scores below every other
    from albert_tf.convert.hf_write import DIGIT_COMMA_PENALTY
    from albert_tf.data.tokenization import is_digit_comma_piece

    scores = [theirs.GetScore(i) for i in range(VOCAB)]
    comma = [is_digit_comma_piece(theirs.IdToPiece(i)) for i in range(VOCAB)]
    assert 0 < sum(comma) < 20
    expected = [min(scores) - DIGIT_COMMA_PENALTY if c else s for s, c in zip(scores, comma)]
    assert [s for _, s in pipeline["model"]["vocab"]] == pytest.approx(expected)
    assert sorted(t["content"] for t in pipeline["added_tokens"]) == sorted(pieces)
    added = {t["content"] for t in pipeline["added_tokens"]}
    assert theirs.IdToPiece(theirs.PieceToId("(")) == "(" and "(" not in added
    assert pipeline["normalizer"]["type"] == "Precompiled"  # the release's preprocess_text and the model's own
    check = json.load(open(os.path.join(out, "tokenizer_check.json"), encoding="utf-8"))
    assert (check["equal"], check["texts"], check["digit_comma_pieces_left_out"]) == (10, 10, sum(comma))
    cls_sep = pipeline["post_processor"]["special_tokens"]
    assert (cls_sep["[CLS]"]["ids"], cls_sep["[SEP]"]["ids"]) == ([ours.cls_id], [ours.sep_id])


def test_layouts_targets_cannot_hold_are_refused_with_every_reason(tmp_path, spm_model):
    unshared = randomize(AlbertEncoder(cfg_of(sharing="none", embedding_size=32)))
    with pytest.raises(HfLayoutError) as e:
        write_target(unshared, "hf", str(tmp_path / "hf"), spm_model)
    assert "sharing='none'" in str(e.value) and "embedding_size = hidden_size = 32" in str(e.value)
    with pytest.raises(KerasHubLayoutError, match="sharing='none'"):
        write_target(unshared, "keras_hub", str(tmp_path / "kh"), spm_model)
    # the release's int(i / L * G) puts some layers of L = G = 22 in their neighbour's group
    # (float rounding); transformers and keras-hub apply group i to layer i
    rounded = AlbertEncoder(cfg_of(num_hidden_layers=22, num_hidden_groups=22))
    for target, error in (("hf", HfLayoutError), ("keras_hub", KerasHubLayoutError)):
        with pytest.raises(error, match="num_hidden_layers=22 with num_hidden_groups=22") as e:
            write_target(rounded, target, str(tmp_path / target), spm_model)
        assert "the groups [0, 1, 2," in str(e.value)
    with pytest.raises(ValueError, match="--spm_model_file"):
        write_target(randomize(AlbertEncoder(cfg_of())), "hf", str(tmp_path / "hf"), None)
    assert not os.listdir(tmp_path)  # nothing written


def test_pretrainer_to_keras_hub_loads_and_computes_in_keras_hub(tmp_path, spm_model):
    import keras_hub

    cfg = cfg_of(num_hidden_groups=2, inner_group_num=2)
    model = randomize(AlbertPretrainer(cfg), seed=9)
    out, kind, left_behind = written(model, tmp_path, "keras_hub", spm_model)
    assert kind == "AlbertMaskedLM"
    assert left_behind == ["seq_relationship/output_bias", "seq_relationship/output_weights"]

    backbone = keras_hub.models.AlbertBackbone.from_preset(out)
    masked_lm = keras_hub.models.AlbertMaskedLM.from_preset(out)
    tokenizer = keras_hub.models.AlbertTokenizer.from_preset(out)
    x = inputs(cfg)
    theirs_in = {"token_ids": x["input_word_ids"], "segment_ids": x["input_type_ids"], "padding_mask": x["input_mask"]}
    theirs = backbone(theirs_in)
    ours = model.encoder(x, training=False)
    real = x["input_mask"].astype(bool)
    assert_close(np.asarray(ours["sequence_output"])[real], np.asarray(theirs["sequence_output"])[real], "sequence")
    assert_close(ours["pooled_output"], theirs["pooled_output"], "pooled")

    # the masked-LM head: keras-hub normalises with epsilon 1e-5, the release 1e-12
    positions = np.array([[1, 4], [2, 7]], "int32")
    theirs_mlm = np.asarray(masked_lm({**theirs_in, "mask_positions": positions}), "float64")
    ours_mlm = np.asarray(model({**x, "masked_lm_positions": positions}, training=False)["mlm_logits"], "float64")
    weights = {v.path: np.asarray(v, "float64") for v in model.weights}
    seq = np.take_along_axis(np.asarray(ours["sequence_output"], "float64"), positions[..., None], axis=1)
    h = gelu_new(seq @ weights["predictions/transform/kernel"] + weights["predictions/transform/bias"])

    def head(eps):
        normed = _layer_norm(h, weights["predictions/transform_LayerNorm/gamma"],
                             weights["predictions/transform_LayerNorm/beta"], eps)
        return normed @ weights["embeddings/word_embeddings"].T + weights["predictions/output_bias"]

    assert_close(theirs_mlm, head(1e-5), "keras-hub's head = the NumPy head at epsilon 1e-5")
    assert_close(ours_mlm, head(1e-12), "albert_tf's head = the NumPy head at epsilon 1e-12")
    assert np.abs(theirs_mlm - ours_mlm).max() > 1e-6  # the epsilon difference is there, not hidden

    text = "albert: a lite bert, for self-supervised learning of language representations."
    from albert_tf.data.tokenization import SentencePieceTokenizer

    assert [int(i) for i in tokenizer(text)] == SentencePieceTokenizer(spm_model).encode(text)

    head_weights = {v.path: np.asarray(v) for v in masked_lm.masked_lm_head.weights}
    np.testing.assert_array_equal(head_weights["mlm_head/output_bias"],
                                  weights["predictions/output_bias"].astype("float32"))
    np.testing.assert_array_equal(head_weights["mlm_head/intermediate_dense/kernel"],
                                  weights["predictions/transform/kernel"].astype("float32"))

    # read back: the backbone and the masked-LM head bit for bit; the sentence-order head,
    # which keras-hub does not hold, is named as not in the source
    back = load_source("keras_hub", out)
    assert isinstance(back, AlbertPretrainer)
    assert back.not_in_source == ["seq_relationship/output_bias", "seq_relationship/output_weights"]
    assert_same_weights(model, back, skip=("seq_relationship/",))
    mlm_back = back({**x, "masked_lm_positions": positions}, training=False)["mlm_logits"]
    np.testing.assert_array_equal(np.asarray(mlm_back, "float64"), ours_mlm)


def test_convert_cli_to_hf_prints_the_read_back_line_and_refuses_bad_flags(tmp_path, spm_model):
    cfg = cfg_of()
    model = randomize(AlbertPretrainer(cfg), seed=2)
    model.save_pretrained(str(tmp_path / "run"))
    common = ["--from=albert_tf", f"--input={tmp_path / 'run'}"]
    cases = [common + ["--to=hf", f"--spm_model_file={spm_model}", f"--output={tmp_path / 'hf'}"],
             common + ["--to=hf", f"--output={tmp_path / 'no_spm'}"],
             common + ["--to=onnx", f"--output={tmp_path / 'onnx'}"],
             common + ["--to=hf", f"--spm_model_file={spm_model}", f"--output={tmp_path / 'run'}"],
             common + ["--to=keras_hub", f"--spm_model_file={spm_model}", f"--output={tmp_path / 'kh'}"],
             ["--from=keras_hub", f"--input={tmp_path / 'kh'}", "--to=albert_tf", f"--output={tmp_path / 'kh_back'}"]]
    before = sorted(os.listdir(tmp_path / "run"))
    ok, no_spm, unknown, onto_input, to_kh, from_kh = [convert_cli(*args) for args in cases]
    assert ok.returncode == 0, ok.stderr[-3000:]
    lines = ok.stdout.split("read back from")
    assert len(lines) == 2 and "written as AlbertForPreTraining; every weight kept" in lines[0]
    first = lines[0].split("pooled_output[:5]")[1].split("\n")[0]
    again = lines[1].split("pooled_output[:5]")[1].split("\n")[0]
    assert first == again and "[+0.000000, +0.000000" not in first
    assert no_spm.returncode == 2 and "--spm_model_file" in no_spm.stderr and not (tmp_path / "no_spm").exists()
    assert unknown.returncode == 2 and "--to" in unknown.stderr and "onnx" in unknown.stderr
    assert onto_input.returncode == 2 and "--output" in onto_input.stderr
    assert sorted(os.listdir(tmp_path / "run")) == before  # the input untouched
    assert not (tmp_path / "onnx").exists()
    # albert_tf -> keras_hub -> albert_tf: a pretrainer again, its sentence-order head named as
    # not in keras-hub's preset, every other weight as written
    assert to_kh.returncode == 0 and from_kh.returncode == 0, to_kh.stderr[-2000:] + from_kh.stderr[-2000:]
    assert "written as AlbertMaskedLM; left behind (no place in keras_hub): seq_relationship/" in to_kh.stdout
    assert "as AlbertPretrainer" in from_kh.stdout
    assert ("not in the source (initial values written): seq_relationship/output_bias, "
            "seq_relationship/output_weights") in from_kh.stdout
    again = AlbertPretrainer.from_pretrained(str(tmp_path / "kh_back"))
    assert_same_weights(model, again, skip=("seq_relationship/",))


def test_a_classifier_keeps_its_labels_through_hf_and_keras_hub(tmp_path, spm_model):
    from albert_tf.modeling.classifier import AlbertClassifier

    cfg = cfg_of()
    model = randomize(AlbertClassifier(AlbertEncoder(cfg, name="encoder"), 3), seed=12)
    model.run_labels = ["contradiction", "entailment", "neutral"]
    out, kind, _ = written(model, tmp_path, "hf", spm_model)
    x = inputs(cfg)
    theirs, state, c = hf_outputs(out, x)
    assert kind == "AlbertForSequenceClassification" and state["classifier.weight"].shape == (3, cfg.hidden_size)
    assert c["id2label"] == {"0": "contradiction", "1": "entailment", "2": "neutral"} and c["num_labels"] == 3
    assert c["problem_type"] == "single_label_classification"
    assert_close(model(x, training=False), theirs["logits"], "classifier logits", atol=1e-5)
    back = load_source("hf", out)
    assert back.run_labels == model.run_labels
    assert_same_weights(model, back)
    with pytest.raises(ValueError, match="a classifier converts to hf or keras_hub"):
        write_target(model, "albert_tf", str(tmp_path / "a"), spm_model)
    preset, kind, _ = written(model, tmp_path, "keras_hub", spm_model, "kh")
    assert kind == "AlbertTextClassifier"
    assert json.load(open(os.path.join(preset, "labels.json"))) == {"labels": model.run_labels}
    back = load_source("keras_hub", preset)  # albert_tf -> keras_hub -> albert_tf, head and labels too
    assert type(back).__name__ == "AlbertClassifier" and back.run_labels == model.run_labels
    assert_same_weights(model, back)

