"""export_litert: LiteRT files of the encoder and of each fine-tuned head, run in the
maintained runtime (ai_edge_litert's interpreter) and compared with the Keras model."""

import json
import time

import numpy as np
import pytest
from convert_helpers import config, randomize

from albert_tf import AlbertEncoder, AlbertPretrainer
from albert_tf.export.litert_model import litert_bytes, litert_files, run_litert, serving_spec
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice
from albert_tf.modeling.question_answering import AlbertForQuestionAnswering

VOCAB = 3000


def batch(length, rows=2, choices=None, seed=0):
    """int32 inputs [rows, length] (or [rows, choices, length]); the last row padded after
    half its length."""
    rng = np.random.default_rng(seed)
    shape = (rows, length) if choices is None else (rows, choices, length)
    ids = rng.integers(5, VOCAB, shape).astype("int32")
    mask = np.ones(shape, "int32")
    mask[-1, ..., length // 2:] = 0
    types = np.zeros(shape, "int32")
    types[..., length // 3:] = 1
    return {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": types * mask}


def keras_outputs(model, x):
    _, _, names, fn = serving_spec(model)
    out = fn(x["input_word_ids"], x["input_mask"], x["input_type_ids"])
    return {n: np.asarray(out[n]) for n in names}


def real_positions(name, x):
    """The entries compared: every one, but only real tokens of per-token outputs."""
    if name in ("sequence_output", "start_logits", "end_logits"):
        return x["input_mask"].astype(bool)
    return Ellipsis


@pytest.fixture(scope="module")
def models():
    cfg = config(vocab_size=VOCAB, num_hidden_layers=2, num_hidden_groups=2)  # two layers, a group each
    models = {
        "encoder": randomize(AlbertPretrainer(cfg), seed=1),
        "classifier": randomize(AlbertClassifier(AlbertEncoder(cfg, name="encoder"), 3), seed=2),
        "squad_v1": randomize(AlbertForQuestionAnswering(cfg, version="v1"), seed=3),
        "multiple_choice": randomize(AlbertForMultipleChoice(cfg), seed=4),
        "squad_v2": randomize(AlbertForQuestionAnswering(cfg, version="v2"), seed=6),
    }
    for v in models["multiple_choice"].weights + models["squad_v2"].weights:  # logits of order 1, as a
        if v.path.endswith(("output_weights", "answer_class_dense_1/kernel")):  # trained head's, not 0.05
            v.assign(np.asarray(v) * 20)
    return models


@pytest.fixture(scope="module")
def converted():
    """{model name: {quantization: LiteRT file}}: the files the per-model test converted, for
    the tests after it to use again (each converts what is not there)."""
    return {}


@pytest.mark.parametrize("name", ["encoder", "classifier", "squad_v1", "multiple_choice", "squad_v2"])
def test_float32_and_float16_files_compute_the_keras_outputs_at_any_length(models, converted, name):
    model = models[name]
    # one trace, freeze and save of the model for all its files (litert_files)
    files = converted[name] = litert_files(model, ("none", "float16") + (("dynamic_int8",) if name == "encoder"
                                                                         else ()))
    choices = 4 if name == "multiple_choice" else None
    for length in (16, 40):  # one file, any length up to max_position_embeddings
        x = batch(length, choices=choices, seed=length)
        ours = keras_outputs(model, x)
        for quantization, atol in (("none", 1e-4), ("float16", 1e-2)):
            theirs = run_litert(files[quantization], x)
            assert set(theirs) == set(ours), quantization
            for key, value in ours.items():
                if key.endswith("_index"):  # the v2 beam: the same candidates at float32; float16 may
                    if quantization == "none":  # reorder near-ties, its sorted scores are compared below
                        np.testing.assert_array_equal(theirs[key], value, err_msg=f"{key} at length {length}")
                        assert len(np.unique(value)) > 1
                    continue
                keep = real_positions(key, x)
                assert np.abs(value[keep]).max() > 10 * atol, (key, "values too small for the tolerance")
                np.testing.assert_allclose(theirs[key][keep], value[keep], atol=atol, rtol=0,
                                           err_msg=f"{name} {quantization} {key} at length {length}")
    if name == "encoder":
        int8 = files["dynamic_int8"]
        # (a tiny model: its many small tensors stay float32; albert_base: benchmarks/litert_bench.py)
        assert len(int8) < 0.5 * len(files["none"]) and len(files["float16"]) < 0.65 * len(files["none"])
        x = batch(16)
        theirs, ours = run_litert(int8, x)["pooled_output"], keras_outputs(model, x)["pooled_output"]
        assert np.corrcoef(theirs.ravel(), ours.ravel())[0, 1] > 0.95  # quantized, still the same function


def test_the_file_computes_the_keras_outputs_on_albert_tfs_ids_of_digit_comma_texts(models, converted, spm_model):
    """The app feeds the file albert_tf's ids (the release's tokenization, digit-comma rule
    included, as the JSON states it); on those ids the file gives the Keras model's logits."""
    from albert_tf.data.tokenization import SentencePieceTokenizer, preprocess_text
    from albert_tf.export.litert_model import TOKENIZATION_EXAMPLE, tokenization_record

    tokenizer = SentencePieceTokenizer(spm_model)
    texts = [TOKENIZATION_EXAMPLE, "In 1850, 1851, or 1852, the town had 3,456 people; by 2010, 12,000."]
    ids = [[tokenizer.cls_id] + tokenizer.encode(t) + [tokenizer.sep_id] for t in texts]
    plain = [[tokenizer.cls_id] + tokenizer.sp.EncodeAsIds(preprocess_text(t)) + [tokenizer.sep_id] for t in texts]
    assert ids != plain  # the digit-comma rule made ids SentencePiece alone does not give
    record = tokenization_record(spm_model, "x.spm.model")
    assert record["example"]["ids"] == ids[0][1:-1] and record["example"]["text"] == texts[0]
    assert "str.isdigit()" in record["digit_comma_rule"] and record["do_lower_case"] is True
    assert [s.split(" (")[0] for s in record["normalization"][:4]] == [
        "collapse whitespace: ' '.join(text.strip().split())", "Unicode NFKD",
        "drop every character of non-zero canonical combining class", "lower-case"]
    length = max(map(len, ids))
    x = {"input_word_ids": np.array([i + [tokenizer.pad_id] * (length - len(i)) for i in ids], "int32"),
         "input_mask": np.array([[1] * len(i) + [0] * (length - len(i)) for i in ids], "int32")}
    x["input_type_ids"] = np.zeros_like(x["input_mask"])
    model = models["classifier"]
    file = converted["classifier"]["none"] if "classifier" in converted else litert_bytes(model, "none")
    ours, theirs = keras_outputs(model, x)["logits"], run_litert(file, x)["logits"]
    assert np.abs(ours).max() > 1e-3
    np.testing.assert_allclose(theirs, ours, atol=1e-4, rtol=0)


def test_the_flag_offers_the_quantizations_the_converter_knows():
    from albert_tf import export_litert
    from albert_tf.export import litert_model

    assert export_litert.QUANTIZATIONS == litert_model.QUANTIZATIONS


def test_export_litert_cli_writes_the_file_its_tokenizer_and_json(tmp_path, spm_model):
    import sentencepiece as spm
    from conftest import run_in_process

    from albert_tf import export_litert
    from albert_tf.storage import outputs

    cfg = config(vocab_size=VOCAB, num_hidden_layers=2)  # two layers: the command's point is not the depth
    randomize(AlbertPretrainer(cfg), seed=5).save_pretrained(str(tmp_path / "pretrained"))
    AlbertForQuestionAnswering(cfg, version="v2").save_pretrained(str(tmp_path / "squad_v2"))
    (tmp_path / "mine.tflite").write_bytes(b"a user's file")
    common = [f"--spm_model_file={spm_model}", "--max_seq_length=64"]
    cases = [[f"--init_checkpoint={tmp_path / 'pretrained'}", f"--output={tmp_path / 'out' / 'enc.tflite'}",
              "--quantization=dynamic_int8", *common],
             [f"--init_checkpoint={tmp_path / 'pretrained'}", f"--output={tmp_path / 'bad.tflite'}",
              "--quantization=int4", *common],
             [f"--init_checkpoint={tmp_path / 'pretrained'}", f"--output={tmp_path / 'enc.bin'}", *common],
             [f"--init_checkpoint={tmp_path / 'pretrained'}", f"--output={tmp_path / 'mine.tflite'}", *common],
             [f"--init_checkpoint={tmp_path / 'squad_v2'}", f"--output={tmp_path / 'v2.tflite'}", *common],
             [f"--init_checkpoint={tmp_path / 'pretrained'}", f"--output={tmp_path / 'long.tflite'}",
              f"--spm_model_file={spm_model}", "--max_seq_length=100000"],
             [f"--init_checkpoint={tmp_path / 'pretrained'}", f"--output={tmp_path / 'out' / 'enc.tflite'}",
              "--quantization=dynamic_int8", *common]]  # again, over its own earlier three files
    (tmp_path / "out").mkdir()
    started = time.time()
    ok, bad_quantization, not_tflite, users_file, v2, too_long, again = [
        run_in_process(export_litert, args) for args in cases]
    assert ok.returncode == 0, ok.stderr[-3000:]
    difference = float(ok.stdout.split("largest difference ")[1].split()[0])
    assert 0 < difference < 0.5  # int8 weights: close to the Keras model, not equal
    info = json.load(open(tmp_path / "out" / "enc.json"))
    assert info["kind"] == "encoder" and info["quantization"] == "dynamic_int8" and info["max_seq_length"] == 64
    assert sorted(info["inputs"]) == ["input_mask", "input_type_ids", "input_word_ids"]
    assert info["outputs"] == ["pooled_output", "sequence_output"] and info["raw_string_input"] is False
    # what made it (the last case wrote it again with the same flags): no --dtype_policy, no policy recorded
    from made_by import check_made_by

    check_made_by(info["made_by"], "export_litert", {
        "init_checkpoint": str(tmp_path / "pretrained"), "output": str(tmp_path / "out" / "enc.tflite"),
        "quantization": "dynamic_int8", "spm_model_file": spm_model, "max_seq_length": 64, "do_lower_case": True},
        since=started)
    # how text becomes the ids, as albert_tf does it (the release's), with a test vector
    from albert_tf.data.tokenization import SentencePieceTokenizer

    tokens = info["tokenization"]
    assert tokens["sentencepiece_model"] == "enc.spm.model" and tokens["do_lower_case"] is True
    assert "Unicode NFKD" in tokens["normalization"] and "str.isdigit()" in tokens["digit_comma_rule"]
    assert tokens["example"]["ids"] == SentencePieceTokenizer(spm_model).encode(tokens["example"]["text"])
    theirs, ours = spm.SentencePieceProcessor(), spm.SentencePieceProcessor()
    theirs.Load(str(tmp_path / "out" / "enc.spm.model"))
    ours.Load(spm_model)
    assert [theirs.IdToPiece(i) for i in range(VOCAB)] == [ours.IdToPiece(i) for i in range(VOCAB)]
    assert outputs.read_marker(str(tmp_path / "out" / "enc.tflite"), outputs.LITERT_MODEL) is not None
    x = batch(12, rows=1)
    result = run_litert((tmp_path / "out" / "enc.tflite").read_bytes(), x)
    assert result["sequence_output"].shape == (1, 12, cfg.hidden_size)

    assert bad_quantization.returncode == 2 and "--quantization" in bad_quantization.stderr
    assert not_tflite.returncode == 2 and "--output must name a .tflite file" in not_tflite.stderr
    assert users_file.returncode == 2 and "--output" in users_file.stderr
    assert (tmp_path / "mine.tflite").read_bytes() == b"a user's file"
    assert v2.returncode == 0, v2.stderr[-3000:]
    assert "end_top_index, start_top_index the same" in v2.stdout
    v2_info = json.load(open(tmp_path / "v2.json"))
    assert v2_info["kind"] == "squad_v2" and v2_info["outputs"] == [
        "cls_logits", "end_top_index", "end_top_log_probs", "start_top_index", "start_top_log_probs"]
    assert too_long.returncode == 2 and "max_position_embeddings" in too_long.stderr
    assert again.returncode == 0 and f"wrote {tmp_path / 'out' / 'enc.tflite'}" in again.stdout, again.stderr[-3000:]
    for result in (bad_quantization, not_tflite, users_file, too_long):
        assert "Traceback" not in result.stderr
