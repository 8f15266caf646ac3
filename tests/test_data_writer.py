"""create_pretraining_data's writer: byte-identical to the output before the WriterOptions
refactor, for any number of workers, through every entry point (cases D and E: pinned when
NSP negatives came to be drawn from the whole input, issue 52).

The inputs are built without training anything (a hand-made unigram SentencePiece model
and a generated corpus), so the reference hashes depend only on the writer and on
SentencePiece's encoding. They were taken from the writer as it was before the
refactor (commit 63936e4, `create_pretraining_data(...)` with 13 arguments).
"""

import dataclasses
import hashlib
import json
import os
import random
import subprocess
import sys

import pytest

from albert_tf.data import writer
from albert_tf.data.files import InputError
from albert_tf.data.instances import InstanceOptions
from albert_tf.data.summary import read_data_summary
from albert_tf.data.writer import WriterOptions, write_pretraining_data

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

WORDS = ("the a of to and in is it that for on with as was by at be this from or an are not "
         "value file list data model text line word order name first second each other when then "
         "returns given number string object method class module function error").split()
PIECE_TYPES = {"<pad>": 3, "<unk>": 2, "[CLS]": 3, "[SEP]": 3, "[MASK]": 3}  # CONTROL 3, UNKNOWN 2


def write_fixed_model(path, specials=("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")):
    """A 102-piece unigram SentencePiece model built by hand (no training): the special
    pieces in the order given, 5 user symbols, 54 whole words, 43 single characters."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    m = pb.ModelProto()
    for piece in specials:
        p = m.pieces.add()
        p.piece, p.score, p.type = piece, 0.0, PIECE_TYPES[piece]
    for piece in ("(", ")", '"', "-", "."):
        p = m.pieces.add()
        p.piece, p.score, p.type = piece, 0.0, 4
    for i, word in enumerate(WORDS):
        p = m.pieces.add()
        p.piece, p.score, p.type = "\u2581" + word, -2.0 - i / 100, 1
    for i, c in enumerate("\u2581abcdefghijklmnopqrstuvwxyz0123456789,;:'?!"):
        p = m.pieces.add()
        p.piece, p.score, p.type = c, -8.0 - i / 100, 1
    m.trainer_spec.model_type = pb.TrainerSpec.UNIGRAM
    m.trainer_spec.vocab_size = len(m.pieces)
    ids = {p.piece: i for i, p in enumerate(m.pieces)}
    m.trainer_spec.unk_id = ids["<unk>"]
    m.trainer_spec.pad_id = ids["<pad>"]
    m.trainer_spec.bos_id = -1
    m.trainer_spec.eos_id = -1
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = True
    m.normalizer_spec.remove_extra_whitespaces = True
    m.normalizer_spec.escape_whitespaces = True
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def write_fixed_corpus(path, documents=80, seed=0):
    """80 documents of 1 to 8 sentences; a fifth of the words are random letters (so
    words of several pieces, whole-word masking and continuation pieces occur)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    lines = []
    for _ in range(documents):
        for _ in range(rng.choice((1, 1, 2, 3, 5, 8))):
            words = []
            for _ in range(rng.randint(3, 18)):
                if rng.random() < 0.2:
                    words.append("".join(rng.choice(letters) for _ in range(rng.randint(2, 9))))
                else:
                    words.append(rng.choice(WORDS))
            words[0] = words[0].capitalize()
            lines.append(" ".join(words) + rng.choice((".", ".", "?", "!")))
        lines.append("")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


# case -> (WriterOptions, number of outputs, sha256 of each output before the refactor)
CASES = {
    "A": (WriterOptions(InstanceOptions(max_seq_length=64, max_predictions_per_seq=10), dupe_factor=3,
                        shuffle_buffer_size=50, documents_per_chunk=16), 2,
          ["89d6460bd77d6ed15cdfa47f6872b82515fec981907a7ab22a67c673ccb566fc",
           "6c1b4123a5037201fdbedfa4ce15a412b634cf8d0f9cfcd205919316aaebec0d"]),
    "B": (WriterOptions(InstanceOptions(max_seq_length=32, max_predictions_per_seq=6, short_seq_prob=0.3, ngram=2,
                                        favor_shorter_ngram=False, do_whole_word_mask=False,
                                        legacy_single_chunk_random_next=True),
                        dupe_factor=2, random_seed=7, documents_per_chunk=10, random_document_pool=0), 1,
          ["f2566bee3f1b3fda8b85d2f78a8e85edd3bf6351e2dc65edbece587f7a1831f3"]),
    "C": (WriterOptions(InstanceOptions(max_seq_length=48, max_predictions_per_seq=8, masked_lm_prob=0.2,
                                        random_next_sentence=True),
                        dupe_factor=2, random_seed=3, do_lower_case=False), 1,
          ["3454bf6f87b265b649aa254292cac601c20fe2772144f359763a5da5c543a0e8"]),
    # since issue 52, NSP negatives come from the whole input (B: only with --random_document_pool=0; C: its one
    # chunk was the whole input): B with the input-wide pool, and NSP over chunks with a pool sampled past its bound
    "D": (WriterOptions(InstanceOptions(max_seq_length=32, max_predictions_per_seq=6, short_seq_prob=0.3, ngram=2,
                                        favor_shorter_ngram=False, do_whole_word_mask=False,
                                        legacy_single_chunk_random_next=True),
                        dupe_factor=2, random_seed=7, documents_per_chunk=10), 1,
          ["bb83a89c180a8fc64b6ba2052ff9840696c27f7a410ee79d80348572b7e9b979"]),
    "E": (WriterOptions(InstanceOptions(max_seq_length=48, max_predictions_per_seq=8, random_next_sentence=True),
                        dupe_factor=2, random_seed=3, documents_per_chunk=16, shuffle_buffer_size=50,
                        random_document_pool=30), 2,
          ["c7a91c8522fae1bd852e1800626907f1238d214d0fdcb78fd64de8ae4bd41ae4",
           "f29210468b2f471627892a8be74455848344fce55f092cf59a362e1c2555fa51"]),
}
# the tool with --max_seq_length=40 --max_predictions_per_seq=7 --dupe_factor=2
# --num_output_shards=2 --documents_per_chunk=20
TOOL_SHA256 = ["b9d6cb16c7141eefc0b8f09552f01d24425f6d4570764634f148db217097a455",
               "31869f01bc8182aefb49262bf852c858f13408472855dc905750ae226671827f"]
TOOL_FLAGS = ["--max_seq_length=40", "--max_predictions_per_seq=7", "--dupe_factor=2", "--num_output_shards=2",
              "--documents_per_chunk=20"]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    d = tmp_path_factory.mktemp("fixed")
    return write_fixed_corpus(str(d / "corpus.txt")), write_fixed_model(str(d / "fixed.model"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_output_is_byte_identical_to_before_the_refactor(case, fixed, tmp_path):
    corpus, model = fixed
    options, n, expected = CASES[case]
    outputs = [str(tmp_path / f"{case}-{i}.tfrecord") for i in range(n)]
    summary = write_pretraining_data([corpus], outputs, model, options, progress_stream=None)
    assert [sha256(p) for p in outputs] == expected
    assert sum(summary["output_files"].values()) == summary["instances"] > 100
    assert summary["special_tokens"] == {"pad_id": 0, "unk_id": 1, "cls_id": 2, "sep_id": 3, "mask_id": 4,
                                         "first_ordinary_id": 5, "vocab_size": 102}


@pytest.mark.parametrize("case", ["A", "E"])  # E: NSP negatives from the input-wide pool
def test_two_workers_write_the_same_bytes(case, fixed, tmp_path):
    corpus, model = fixed
    options, n, expected = CASES[case]
    outputs = [str(tmp_path / f"w-{i}.tfrecord") for i in range(n)]
    summary = write_pretraining_data([corpus], outputs, model, dataclasses.replace(options, num_workers=2),
                                     progress_stream=None)
    assert [sha256(p) for p in outputs] == expected
    assert summary["settings"]["num_workers"] == 2


@pytest.mark.parametrize("command", [
    pytest.param("tools_script", marks=pytest.mark.real_process),  # the documented command, a fresh interpreter
    "python_m", "console_script"])
def test_every_entry_point_writes_the_same_bytes(command, fixed, tmp_path, capsys, monkeypatch):
    """`python tools/create_pretraining_data.py` as a process of its own; `python -m
    albert_tf.create_pretraining_data` (the module's main(argv)) and the console script
    albert-create-pretraining-data (its installed target, entry(), on sys.argv) in this process."""
    import types
    from importlib.metadata import entry_points

    from albert_tf import create_pretraining_data

    corpus, model = fixed
    out = tmp_path / "t.tfrecord"
    args = [f"--input_file={corpus}", f"--output_file={out}", f"--spm_model_file={model}", *TOOL_FLAGS]
    monkeypatch.chdir(tmp_path)
    if command == "tools_script":
        result = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "create_pretraining_data.py"), *args],
                                capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    elif command == "python_m":
        from conftest import run_in_process

        result = run_in_process(create_pretraining_data, args)
    else:
        (script,) = entry_points(group="console_scripts", name="albert-create-pretraining-data")
        assert script.load() is create_pretraining_data.entry
        monkeypatch.setattr(sys, "argv", ["albert-create-pretraining-data", *args])
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_:
            script.load()()
        out_text, err_text = capsys.readouterr()
        result = types.SimpleNamespace(returncode=exit_.value.code, stdout=out_text, stderr=err_text)
    assert result.returncode == 0, result.stderr[-2000:]
    shards = [str(tmp_path / f"t.tfrecord-{i:05d}-of-00002") for i in range(2)]
    assert [sha256(p) for p in shards] == TOOL_SHA256
    summary = json.load(open(tmp_path / "summary_t.tfrecord.json"))
    assert list(summary["output_files"]) == shards and sum(summary["output_files"].values()) == summary["instances"]
    assert f"wrote {summary['instances']:,} instances" in result.stdout
    assert read_data_summary(shards).max_seq_length == 40


def test_options_are_checked_before_anything_is_written(fixed, tmp_path):
    corpus, model = fixed
    out = str(tmp_path / "x.tfrecord")
    bad = [
        (WriterOptions(dupe_factor=0), "--dupe_factor must be at least 1, got 0"),
        (WriterOptions(shuffle_buffer_size=0), "--shuffle_buffer_size and --documents_per_chunk must be positive"),
        (WriterOptions(InstanceOptions(max_seq_length=7)), "--max_seq_length must be at least 8, got 7"),
        (WriterOptions(InstanceOptions(masked_lm_prob=1.5)), r"--masked_lm_prob must be in \(0, 1\), got 1.5"),
        (WriterOptions(random_document_pool=1), r"--random_document_pool must be 0 \(the work chunk's documents\) "
         "or at least 2, got 1"),
    ]
    for options, message in bad:
        with pytest.raises(InputError, match=message):
            write_pretraining_data([corpus], [out], model, options, progress_stream=None)
    with pytest.raises(InputError, match="does not exist or is not a file"):
        write_pretraining_data([corpus], [out], str(tmp_path / "none.model"), WriterOptions(), progress_stream=None)
    assert os.listdir(tmp_path) == []


def test_no_instances_leaves_nothing_behind(fixed, tmp_path):
    _, model = fixed
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("a\n\nthe\n")  # two documents of one piece each
    out = str(tmp_path / "y.tfrecord")
    with pytest.raises(InputError, match=r"gave no instances"):
        write_pretraining_data([str(tiny)], [out], model, WriterOptions(InstanceOptions(max_seq_length=16,
                               max_predictions_per_seq=2)), progress_stream=None)
    assert sorted(os.listdir(tmp_path)) == ["tiny.txt"]


def test_the_writer_module_keeps_no_global_state():
    """Worker processes build their own ChunkWorker; nothing is stored in the module."""
    import types

    mutable = {name: type(v).__name__ for name, v in vars(writer).items()
               if not name.startswith("__") and isinstance(v, (dict, list, set))
               and not isinstance(v, types.ModuleType)}
    assert mutable == {}
