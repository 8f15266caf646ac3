"""Special token ids come from the SentencePiece model and the data summary, never from
constants: a real model whose ids all differ from the release's (<unk> 0, [MASK] 1,
[SEP] 2, [CLS] 3, <pad> 6 instead of <pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4) gives
TFRecords and dynamic masks with its own ids.

For end-to-end tests elsewhere (data -> pretraining -> fine-tuning):

    from test_data_special_ids import UNUSUAL_TOKENS, make_data_with_unusual_ids
    data = make_data_with_unusual_ids(sample_corpus, str(tmp_path))
    data["spm_model"], data["files"], data["summary"]      # DataSummary
"""

import json
import os
import shutil

import numpy as np
import pytest

from albert_tf.data.instances import InstanceOptions
from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece
from albert_tf.data.summary import MaskingSettings, file_sha256, read_data_summary
from albert_tf.data.tokenization import SentencePieceTokenizer
from albert_tf.data.vocab import SpecialTokens
from albert_tf.data.writer import WriterOptions, output_paths, write_pretraining_data
from test_create_pretraining_data import read_records

UNUSUAL_LAYOUT = {"pad_id": 6, "unk_id": 0, "control_symbols": ("[MASK]", "[SEP]", "[CLS]")}
# SentencePiece puts the control symbols in the free ids in order, then the user symbols.
UNUSUAL_TOKENS = SpecialTokens(pad_id=6, unk_id=0, cls_id=3, sep_id=2, mask_id=1, first_ordinary_id=7,
                               vocab_size=3000)
RELEASE_TOKENS = SpecialTokens(pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4, first_ordinary_id=5,
                               vocab_size=3000)


def train_unusual_spm_model(corpus, model_prefix, vocab_size=3000):
    """A real SentencePiece model of `corpus` (the release's recipe otherwise) with the
    ids of UNUSUAL_TOKENS. Returns the .model path."""
    return train_sentencepiece([corpus], model_prefix,
                               SentencePieceOptions(vocab_size=vocab_size, num_threads=1, **UNUSUAL_LAYOUT))


def make_data_with_unusual_ids(corpus, directory, max_seq_length=128, max_predictions_per_seq=20, dupe_factor=1,
                               num_output_shards=2):
    """Trains `train_unusual_spm_model` on `corpus` into `directory` and writes pretraining
    TFRecords with it (`directory/train.tfrecord-0000i-of-0000N` and their summary).

    Returns {"spm_model": path, "files": [TFRecord paths], "summary": DataSummary}."""
    spm_model = train_unusual_spm_model(corpus, os.path.join(directory, "unusual"))
    output = os.path.join(directory, "train.tfrecord")
    files = output_paths(output, num_output_shards)
    options = WriterOptions(InstanceOptions(max_seq_length=max_seq_length,
                                            max_predictions_per_seq=max_predictions_per_seq),
                            dupe_factor=dupe_factor)
    write_pretraining_data([corpus], files, spm_model, options, progress_stream=None,
                           summary_file=os.path.join(directory, "summary_train.tfrecord.json"))
    return {"spm_model": spm_model, "files": files, "summary": read_data_summary(files)}


@pytest.fixture(scope="module")
def unusual(sample_corpus, tmp_path_factory):
    return make_data_with_unusual_ids(sample_corpus, str(tmp_path_factory.mktemp("unusual_ids")))


def test_ids_are_read_from_the_model_by_piece_name(unusual, spm_model):
    tokens = SpecialTokens.from_sentencepiece(unusual["spm_model"])
    assert tokens == UNUSUAL_TOKENS
    assert all(getattr(tokens, f) != getattr(RELEASE_TOKENS, f) for f in ("pad_id", "unk_id", "cls_id", "sep_id",
                                                                           "mask_id", "first_ordinary_id"))
    tok = SentencePieceTokenizer(unusual["spm_model"])
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (6, 0, 3, 2, 1)
    assert [tok.id_to_piece(i) for i in (6, 0, 3, 2, 1)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert SpecialTokens.from_sentencepiece(spm_model) == RELEASE_TOKENS  # the release's recipe


def test_records_hold_the_models_ids(unusual):
    data = read_records(unusual["files"])
    ids, mask = data["input_ids"], data["input_mask"]
    n = mask.sum(1)
    rows = np.arange(len(ids))
    assert len(ids) > 1000
    assert np.all(ids[:, 0] == 3)  # [CLS]
    assert np.all(ids[rows, n - 1] == 2)  # the last [SEP]
    assert np.all((ids == 2).sum(1) == 2) and np.all((ids == 3).sum(1) == 1)
    assert np.all(ids[mask == 0] == 6) and not np.any(ids[mask == 1] == 6)  # padding: <pad>
    assert np.all(data["token_boundary"][:, 0] == 1) and np.all(data["token_boundary"][rows, n - 1] == 1)

    w = data["masked_lm_weights"] > 0
    at = np.take_along_axis(ids, data["masked_lm_positions"], 1)[w]
    original = data["masked_lm_ids"][w]
    assert abs(np.mean(at == 1) - 0.8) < 0.02  # [MASK] is 1 here
    random_replacements = at[(at != 1) & (at != original)]
    assert len(random_replacements) > 0.07 * len(at)
    assert random_replacements.min() >= 7 and random_replacements.max() < 3000  # ordinary ids only
    assert not np.isin(original, [1, 2, 3, 6]).any()  # labels are never [MASK], [SEP], [CLS], <pad> (<unk> may be)
    summary = json.load(open(unusual["summary"].summary_files[0]))
    assert summary["special_tokens"] == UNUSUAL_TOKENS.to_dict()
    assert summary["masking"] == {"max_predictions_per_seq": 20, "masked_lm_prob": 0.15, "do_whole_word_mask": True,
                                  "ngram": 3, "favor_shorter_ngram": True}


def test_read_data_summary_finds_the_ids_and_settings(unusual):
    directory = os.path.dirname(unusual["files"][0])
    summary = read_data_summary(os.path.join(directory, "train.tfrecord-*"))
    assert summary.special_tokens == UNUSUAL_TOKENS and summary.vocab_size == 3000
    assert summary.masking == MaskingSettings(max_predictions_per_seq=20, masked_lm_prob=0.15,
                                              do_whole_word_mask=True, ngram=3, favor_shorter_ngram=True)
    assert summary.max_seq_length == 128
    assert summary.spm_model_sha256 == file_sha256(unusual["spm_model"])
    assert summary.summary_files == (os.path.join(directory, "summary_train.tfrecord.json"),)
    assert read_data_summary(unusual["files"]) == summary


def test_read_data_summary_errors_name_the_files(unusual, pretraining_records, tmp_path):
    files = unusual["files"]
    lonely = str(tmp_path / "lonely.tfrecord")
    shutil.copy(files[0], lonely)
    with pytest.raises(ValueError) as e:
        read_data_summary([lonely])
    assert str(e.value).startswith(f"--input_file: {lonely} has no data summary: no summary_*.json beside it lists it.")

    release_files, _ = pretraining_records
    with pytest.raises(ValueError) as e:
        read_data_summary([files[0], release_files[0]])
    message = str(e.value)
    assert message.startswith(f"--input_file: {files[0]} (")
    assert f"and {release_files[0]} (" in message
    for difference in ("special_tokens.pad_id 6 vs 0", "special_tokens.cls_id 3 vs 2", "special_tokens.mask_id 1 vs 4",
                       "spm_model_sha256"):
        assert difference in message

    old = tmp_path / "summary_lonely.tfrecord.json"
    old.write_text(json.dumps({"output_files": {lonely: 10}, "instances": 10}))
    with pytest.raises(ValueError) as e:
        read_data_summary([lonely])
    assert str(e.value) == (f"{old}: this summary predates the recording of special token ids and masking settings; "
                            "create the data again with create_pretraining_data.")
    old.write_text('{"output_files": {', encoding="utf-8")  # damaged: the one JSON reader's words
    with pytest.raises(ValueError) as e:
        read_data_summary([lonely])
    assert str(e.value) == (f"{old}:1:19: not valid JSON (Expecting property name enclosed in double quotes): "
                            '{"output_files": {; expected a data summary of create_pretraining_data: create the data '
                            "again with create_pretraining_data.")


def test_dynamic_masking_uses_the_ids_of_the_summary(unusual):
    from albert_tf.data.pipeline import DynamicMasking, pretraining_dataset

    masking = DynamicMasking.from_summary(read_data_summary(unusual["files"]))
    assert masking == DynamicMasking(UNUSUAL_TOKENS, masked_lm_prob=0.15, ngram=3, favor_shorter_ngram=True,
                                     do_whole_word_mask=True)
    ds = pretraining_dataset(unusual["files"], 64, 128, 20, deterministic=True, dynamic_masking=masking,
                             shuffle_buffer_size=500)
    got = {}
    for batch in ds.take(20):
        for k, v in batch.items():
            got.setdefault(k, []).append(v.numpy())
    got = {k: np.concatenate(v) for k, v in got.items()}
    ids, mask, w = got["input_word_ids"], got["input_mask"], got["masked_lm_weights"] > 0
    assert np.all(ids[:, 0] == 3) and np.all(ids[mask == 0] == 6)
    at = np.take_along_axis(ids, got["masked_lm_positions"], 1)[w]
    original = got["masked_lm_ids"][w]
    assert abs(np.mean(at == 1) - 0.8) < 0.03
    random_replacements = at[(at != 1) & (at != original)]
    assert len(random_replacements) > 0.06 * len(at)
    assert random_replacements.min() >= 7 and random_replacements.max() < 3000
    assert not np.isin(original, [1, 2, 3, 6]).any()  # [CLS], [SEP], padding are never masked
    assert np.all((ids == 2).sum(1) == 2)  # both [SEP] kept


def test_a_model_without_one_of_the_pieces_is_named(sample_corpus, tmp_path):
    path = train_sentencepiece([sample_corpus], str(tmp_path / "nopad"),
                               SentencePieceOptions(vocab_size=500, num_threads=1, pad_id=-1))
    with pytest.raises(ValueError) as e:
        SpecialTokens.from_sentencepiece(path)
    assert str(e.value) == (f"spm_model_file {path!r} lacks the pieces <pad>; train it with "
                            "tools/train_sentencepiece.py (pad <pad>, unk <unk>, control symbols [CLS],[SEP],[MASK]).")
    with pytest.raises(ValueError) as e:
        SpecialTokens.from_sentencepiece(tmp_path / "missing.model")
    assert str(e.value) == f"spm_model_file {str(tmp_path / 'missing.model')!r} does not exist or is not a file."
