"""create_pretraining_data: statistics, determinism, format and every bad input."""

import json
import os
import time

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import create_pretraining_data
from albert_tf.data.example_codec import feature_lengths
from albert_tf.data.instances import InstanceOptions, num_to_predict
from albert_tf.data.summary import read_data_summary, summary_path_for
from albert_tf.data.tokenization import SentencePieceTokenizer, is_start_piece
from albert_tf.data.writer import WriterOptions, write_pretraining_data

from conftest import run_in_process


def read_records(paths, T=128, P=20):
    spec = {}
    for name, (length, dtype) in feature_lengths(T, P).items():
        spec[name] = tf.io.FixedLenFeature([length], tf.float32 if dtype == "float32" else tf.int64)
    columns = {k: [] for k in spec}
    for batch in tf.data.TFRecordDataset(paths).batch(4096).map(lambda r: tf.io.parse_example(r, spec)):
        for k, v in batch.items():
            columns[k].append(v.numpy())
    return {k: np.concatenate(v) for k, v in columns.items()}


@pytest.fixture(scope="module")
def records(pretraining_records):
    outputs, summary = pretraining_records
    return read_records(outputs), summary


def test_eight_features_of_the_release(pretraining_records, records, spm_model):
    outputs, summary = pretraining_records
    tok = SentencePieceTokenizer(spm_model)
    example = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(outputs[0]))).numpy())
    features = example.features.feature
    assert sorted(features) == sorted(feature_lengths(128, 20))
    assert features["masked_lm_weights"].WhichOneof("kind") == "float_list"
    assert all(features[k].WhichOneof("kind") == "int64_list" for k in features if k != "masked_lm_weights")
    data, _ = records
    assert len(data["input_ids"]) == summary["instances"] == sum(summary["output_files"].values())
    assert summary["summary_file"] == summary_path_for(outputs[0])
    on_disk = json.load(open(summary_path_for(outputs[0])))
    assert on_disk == {k: v for k, v in summary.items() if k != "summary_file"}
    n = len(data["input_ids"])
    counts = [sum(1 for _ in tf.data.TFRecordDataset(p)) for p in outputs]
    assert on_disk["output_files"] == dict(zip(outputs, counts))  # a record's shard: its random key modulo 2
    assert all(abs(c - n / 2) < 4 * (n / 4) ** 0.5 for c in counts), counts
    assert on_disk["special_tokens"] == tok.special_tokens.to_dict()
    mask = data["input_mask"]
    assert np.all(data["input_ids"][mask == 0] == tok.pad_id)
    assert np.all(data["input_ids"][:, 0] == tok.cls_id)


def test_statistics_on_the_sample_corpus(records, spm_model):
    data, summary = records
    tok = SentencePieceTokenizer(spm_model)
    lengths = data["input_mask"].sum(1)
    weights = data["masked_lm_weights"]
    predictions = weights.sum(1)
    expected = np.mean([num_to_predict(int(n), 20, 0.15) for n in lengths])
    assert abs(predictions.mean() - expected) / expected < 0.03

    ids, positions, labels = data["input_ids"], data["masked_lm_positions"], data["masked_lm_ids"]
    at = np.take_along_axis(ids, positions, 1)[weights > 0]
    original = labels[weights > 0]
    shares = {"mask": np.mean(at == tok.mask_id), "kept": np.mean(at == original)}
    shares["random"] = 1 - shares["mask"] - shares["kept"]
    assert abs(shares["mask"] - 0.8) < 0.02
    assert abs(shares["kept"] - 0.1) < 0.02
    assert abs(shares["random"] - 0.1) < 0.02

    for n, p in zip(("1", "2", "3"), (6 / 11, 3 / 11, 2 / 11)):
        assert abs(summary["ngram_drawn_shares"][n] - p) < 0.03, summary["ngram_drawn_shares"]
    labels_sop = data["next_sentence_labels"][:, 0]
    assert abs(labels_sop.mean() - 0.5) < 0.03
    assert summary["sentence_order_label_1_share"] == pytest.approx(labels_sop.mean())

    # token_boundary marks word starts of the original (unmasked) pieces, and [CLS]/[SEP]
    restored = ids.copy()
    rows, cols = np.nonzero(weights > 0)
    restored[rows, positions[rows, cols]] = labels[rows, cols]
    for r in range(200):
        n = lengths[r]
        expected_boundary = [
            1 if t in (tok.cls_id, tok.sep_id) or is_start_piece(tok.id_to_piece(t)) else 0 for t in restored[r, :n]
        ]
        assert data["token_boundary"][r, :n].tolist() == expected_boundary

    # positions are sorted, inside the sequence, never [CLS]/[SEP]
    for r in range(200):
        m = int(predictions[r])
        p = positions[r, :m]
        assert np.all(np.diff(p) > 0) and np.all(p < lengths[r])
        assert not np.isin(restored[r, p], [tok.cls_id, tok.sep_id]).any()


def test_segments_are_packed_like_the_release(records, spm_model):
    data, _ = records
    sep_id = SentencePieceTokenizer(spm_model).sep_id
    for r in range(100):
        n = data["input_mask"][r].sum()
        seg = data["segment_ids"][r, :n]
        sep = np.nonzero(data["input_ids"][r, :n] == sep_id)[0]  # [SEP] is never masked
        assert len(sep) == 2 and sep[-1] == n - 1
        assert np.all(seg[: sep[0] + 1] == 0) and np.all(seg[sep[0] + 1 :] == 1)
        assert np.all(data["segment_ids"][r, n:] == 0)


def test_byte_identical_for_one_and_two_workers(sample_corpus, spm_model, pretraining_records, tmp_path):
    outputs, summary = pretraining_records
    mine = [str(tmp_path / "w2-0.tfrecord"), str(tmp_path / "w2-1.tfrecord")]
    again = write_pretraining_data([sample_corpus], mine, spm_model,
                                   WriterOptions(InstanceOptions(max_seq_length=128), dupe_factor=2, num_workers=2),
                                   progress_stream=None)
    for a, b in zip(outputs, mine):
        assert open(a, "rb").read() == open(b, "rb").read()
    assert again["instances"] == summary["instances"] and again["tokens"] == summary["tokens"]
    # and the random_seed does change it
    other = [str(tmp_path / "s.tfrecord")]
    write_pretraining_data([sample_corpus], other, spm_model,
                           WriterOptions(InstanceOptions(max_seq_length=128), dupe_factor=1, random_seed=7),
                           progress_stream=None)
    first = next(iter(tf.data.TFRecordDataset(other))).numpy()
    assert first != next(iter(tf.data.TFRecordDataset(outputs))).numpy()


def test_legacy_single_chunk_mode_reproduces_the_release_bias(sample_corpus, spm_model, tmp_path):
    out = [str(tmp_path / "legacy.tfrecord")]
    summary = write_pretraining_data(
        [sample_corpus], out, spm_model,
        WriterOptions(InstanceOptions(max_seq_length=128, legacy_single_chunk_random_next=True), dupe_factor=3),
        progress_stream=None)
    # Significantly above the fair 0.5: more than 4 binomial standard deviations (the share
    # itself moves with the corpus, which is built from the installed packages).
    share, n = summary["sentence_order_label_1_share"], summary["instances"]
    assert (share - 0.5) / (0.25 / n) ** 0.5 > 4, (share, n, (share - 0.5) / (0.25 / n) ** 0.5)


def _run_tool(*args):
    """`python tools/create_pretraining_data.py ARGS` (the tool is albert_tf.create_pretraining_data's
    command) in this process."""
    return run_in_process(create_pretraining_data, args)


def _assert_clean_failure(result, message, directory):
    assert result.returncode == 2, (result.returncode, result.stderr[-1500:])
    assert result.stderr.strip().splitlines()[-1] == f"create_pretraining_data: error: {message}", result.stderr[-1500:]
    assert "Traceback" not in result.stderr
    leftovers = [p for p in os.listdir(directory) if "out" in p]
    assert not leftovers, leftovers


def test_bad_inputs_give_clear_errors_and_no_output(tmp_path, spm_model, sample_corpus):
    out = str(tmp_path / "out.tfrecord")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    good = ["--max_seq_length=64", "--dupe_factor=1", f"--spm_model_file={spm_model}"]
    cases = [
        ([f"--input_file={tmp_path}/missing.txt", f"--output_file={out}", *good],
         f"--input_file: '{tmp_path}/missing.txt' matches no file."),
        ([f"--input_file={empty}", f"--output_file={out}", *good], f"--input_file: {empty} is empty."),
        ([f"--input_file={tmp_path}", f"--output_file={out}", *good],
         f"--input_file: '{tmp_path}' is a directory; name the files in it (e.g. {tmp_path}/*)."),
        ([f"--input_file={sample_corpus}", f"--output_file={out}", "--max_seq_length=7",
          f"--spm_model_file={spm_model}"], "--max_seq_length must be at least 8, got 7."),
        ([f"--input_file={sample_corpus}", f"--output_file={out}", "--max_seq_length=16",
          "--max_predictions_per_seq=20", f"--spm_model_file={spm_model}"],
         "--max_predictions_per_seq (20) must be between 1 and --max_seq_length (16)."),
        ([f"--input_file={sample_corpus}", f"--output_file={out}", "--max_seq_length=64"],
         "--spm_model_file is required (tools/train_sentencepiece.py makes one)."),
        ([f"--input_file={sample_corpus}", f"--output_file={out}", "--do_permutation", *good],
         "--do_permutation is not supported: the released ALBERT models were trained without it; leave it False."),
        ([f"--input_file={sample_corpus}", f"--output_file={out}", "--num_output_shards=0", *good],
         "--num_output_shards must be at least 1, got 0."),
    ]
    for args, message in cases:
        _assert_clean_failure(_run_tool(*args), message, tmp_path)


def test_spm_model_without_special_pieces_is_refused(tmp_path, sample_corpus):
    import sentencepiece as spm

    spm.SentencePieceTrainer.Train(input=sample_corpus, model_prefix=str(tmp_path / "plain"),
                                   vocab_size=500, minloglevel=2)
    model = f"{tmp_path}/plain.model"
    result = _run_tool(f"--input_file={sample_corpus}", f"--output_file={tmp_path}/out.tfrecord",
                       f"--spm_model_file={model}", "--max_seq_length=64")
    _assert_clean_failure(result, f"spm_model_file {model!r} lacks the pieces <pad>, [CLS], [SEP], [MASK]; train it "
                          "with tools/train_sentencepiece.py (pad <pad>, unk <unk>, control symbols "
                          "[CLS],[SEP],[MASK]).", tmp_path)


def test_non_utf8_lines_are_skipped_and_counted_or_fatal_when_strict(tmp_path, spm_model):
    corpus = tmp_path / "mixed.txt"
    lines = [b"The first sentence of a document is here.", b"A second sentence follows it closely.",
             b"Bad bytes \xff\xfe in this line.", b"", b"Another document starts right here.",
             b"It also has a second sentence to pair."]
    corpus.write_bytes(b"\n".join(lines * 20) + b"\n")
    out = tmp_path / "out.tfrecord"
    ok = _run_tool(f"--input_file={corpus}", f"--output_file={out}", f"--spm_model_file={spm_model}",
                   "--max_seq_length=32", "--max_predictions_per_seq=5", "--dupe_factor=1")
    assert ok.returncode == 0, ok.stderr[-1500:]
    summary = json.load(open(summary_path_for(str(out))))
    assert summary["non_utf8_lines_skipped"] == 20
    assert summary["non_utf8_line_examples"][0] == f"{corpus}:3"
    assert f"{corpus}:3" in ok.stderr
    os.remove(out)
    os.remove(summary_path_for(str(out)))
    strict = _run_tool(f"--input_file={corpus}", f"--output_file={out}", f"--spm_model_file={spm_model}",
                       "--max_seq_length=32", "--max_predictions_per_seq=5", "--strict_utf8")
    _assert_clean_failure(strict, f"{corpus}:3: not valid UTF-8 (invalid start byte at byte 10); fix the file or "
                          "drop --strict_utf8 to skip such lines.", tmp_path)


def test_cli_shards_and_progress(tmp_path, spm_model, sample_corpus):
    out = tmp_path / "shard.tfrecord"
    started = time.time()
    result = _run_tool(f"--input_file={sample_corpus}", f"--output_file={out}",
                       f"--spm_model_file={spm_model}", "--max_seq_length=64", "--max_predictions_per_seq=10",
                       "--dupe_factor=1", "--num_output_shards=3")
    assert result.returncode == 0, result.stderr[-1500:]
    shards = sorted(p.name for p in tmp_path.glob("shard.tfrecord-*"))  # the summary must not match
    assert shards == [f"shard.tfrecord-{i:05d}-of-00003" for i in range(3)]
    summary = json.load(open(tmp_path / "summary_shard.tfrecord.json"))
    progress = [l for l in result.stderr.splitlines() if l.startswith("create_pretraining_data: ")]
    assert progress[-2].startswith(f"create_pretraining_data: {summary['documents']:,} documents, "
                                   f"{summary['instances']:,} instances (")
    assert progress[-2].endswith("100% read, ETA 0s")
    assert progress[-1] == (f"create_pretraining_data: writing {summary['instances']:,} instances in shuffled "
                            "order (from memory)")
    counts = [sum(1 for _ in tf.data.TFRecordDataset(str(tmp_path / s))) for s in shards]
    n = sum(counts)  # a record's shard is its random key modulo 3: binomial(n, 1/3) each
    assert n == summary["instances"] and all(abs(c - n / 3) < 4 * (n * 2 / 9) ** 0.5 for c in counts), counts
    assert summary["output_files"] == {str(tmp_path / s): c for s, c in zip(shards, counts)}
    assert read_data_summary(str(tmp_path / "shard.tfrecord-*")).masking.max_predictions_per_seq == 10
    # what made the files, with the flags as given
    from made_by import check_made_by

    check_made_by(summary["made_by"], "create_pretraining_data", {
        "input_file": sample_corpus, "output_file": str(out), "spm_model_file": spm_model, "max_seq_length": 64,
        "max_predictions_per_seq": 10, "dupe_factor": 1, "num_output_shards": 3, "random_seed": 12345,
        "vocab_file": None}, since=started)
