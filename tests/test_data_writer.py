"""create_pretraining_data's writer: pinned bytes, the same for any number of workers, chunk
size or shuffle buffer, through every entry point; each document's records independent of
the rest of the input; a global shuffle.

The inputs are built without training anything (a hand-made unigram SentencePiece model
and a generated corpus), so the reference hashes depend only on the writer and on
SentencePiece's encoding. They were pinned when records came to be keyed by their
document's content and globally shuffled (issue 65); the cases are those pinned before
(issue 52's D and E: NSP negatives from the whole input), less B (its
--random_document_pool=0 is gone).
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
    from albert_tf.data.spm_model_proto import ModelProto, TrainerSpec

    m = ModelProto()
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
    m.trainer_spec.model_type = TrainerSpec.UNIGRAM
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


# case -> (WriterOptions, number of outputs, sha256 of each output)
CASES = {
    "A": (WriterOptions(InstanceOptions(max_seq_length=64, max_predictions_per_seq=10), dupe_factor=3,
                        shuffle_buffer_size=50, documents_per_chunk=16), 2, [
          "6171301ee46a9c790982633dddc92c99953a2535bc88bf0dd5162eeb77334314",
          "c3e4ba6e36b161a8501f7ff79449183b87985eebcad888bbeab27657b15eec49"]),
    "C": (WriterOptions(InstanceOptions(max_seq_length=48, max_predictions_per_seq=8, masked_lm_prob=0.2,
                                        random_next_sentence=True),
                        dupe_factor=2, random_seed=3, do_lower_case=False), 1, [
          "eceeca81cceda62c0561147f74e8ac3dc54ce99cbe07330633b3083189ee69f6"]),
    "D": (WriterOptions(InstanceOptions(max_seq_length=32, max_predictions_per_seq=6, short_seq_prob=0.3, ngram=2,
                                        favor_shorter_ngram=False, do_whole_word_mask=False,
                                        legacy_single_chunk_random_next=True),
                        dupe_factor=2, random_seed=7, documents_per_chunk=10), 1, [
          "7bbf8d3f5929eac68a5aab2ac7b2dff4b35f1b186ae5e82d58e148e74b6537dd"]),
    "E": (WriterOptions(InstanceOptions(max_seq_length=48, max_predictions_per_seq=8, random_next_sentence=True),
                        dupe_factor=2, random_seed=3, documents_per_chunk=16, shuffle_buffer_size=50,
                        random_document_pool=30), 2, [
          "d12f1d501d2e5ca532cbc6ce62a18f8f80f0aa7471e23150752db974d824317d",
          "66efece239a83af7a9485e92d4d4d46c99f36320ae38907332e55c0e32b8a61d"]),
}
# the tool with --max_seq_length=40 --max_predictions_per_seq=7 --dupe_factor=2
# --num_output_shards=2 --documents_per_chunk=20
TOOL_SHA256 = [
          "bde0bad78958d338bfa9418c41a0204f453f8fdf984d6cba1aeb5aa063c7c330",
          "8bfcb096716e05ee3accc7425eb74bcc4457c5652f0e496cc30aa8623443f630"]
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
def test_output_is_byte_identical_to_the_pinned_bytes(case, fixed, tmp_path):
    corpus, model = fixed
    options, n, expected = CASES[case]
    outputs = [str(tmp_path / f"{case}-{i}.tfrecord") for i in range(n)]
    summary = write_pretraining_data([corpus], outputs, model, options, progress_stream=None)
    assert [sha256(p) for p in outputs] == expected
    assert sum(summary["output_files"].values()) == summary["instances"] > 100
    assert summary["special_tokens"] == {"pad_id": 0, "unk_id": 1, "cls_id": 2, "sep_id": 3, "mask_id": 4,
                                         "first_ordinary_id": 5, "vocab_size": 102}


@pytest.mark.parametrize("case", ["A", "E"])  # E: NSP negatives from the input-wide pool
def test_any_workers_chunks_or_buffer_write_the_same_bytes(case, fixed, tmp_path):
    """2 worker processes; chunks of 3 documents; a buffer of 7 records (so the shuffle
    spills to --temp_dir, which is left as it was)."""
    corpus, model = fixed
    options, n, expected = CASES[case]
    spill = tmp_path / "spill"
    spill.mkdir()
    for i, change in enumerate([dict(num_workers=2), dict(documents_per_chunk=3, shuffle_buffer_size=7,
                                                          temp_dir=str(spill))]):
        outputs = [str(tmp_path / f"w{i}-{k}.tfrecord") for k in range(n)]
        summary = write_pretraining_data([corpus], outputs, model, dataclasses.replace(options, **change),
                                         progress_stream=None)
        assert [sha256(p) for p in outputs] == expected
        assert {k: summary["execution"][k] for k in change} == change and "num_workers" not in summary["settings"]
    assert os.listdir(spill) == []


def test_tfrecord_framing_is_tensorflows(tmp_path):
    """albert_tf.data.tfrecord_file writes what tf.io.TFRecordWriter writes, and reads it back."""
    import io

    import tensorflow as tf

    from albert_tf.data.tfrecord_file import frame, read_records

    records = [b"", b"x", bytes(range(256)) * 41, "é".encode() * 3000]
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as w:
        for r in records:
            w.write(r)
    ours = b"".join(frame(r) for r in records)
    assert (tmp_path / "tf.tfrecord").read_bytes() == ours
    assert list(read_records(io.BytesIO(ours))) == records
    with pytest.raises(ValueError, match="corrupt record"):
        list(read_records(io.BytesIO(ours[:-1] + bytes([ours[-1] ^ 1]))))


def test_the_shuffle_sorts_past_its_memory_in_bounded_buckets(tmp_path):
    """KeySort with room for 3 records and 2,000 of them (more than 256 buckets x 3, so
    buckets are split again): every record once, in (key, record) order, the spill
    directory gone after; keys sharing their top bits go through the deeper split."""
    import random

    from albert_tf.data.shuffle import KeySort

    rng = random.Random(0)
    items = [(rng.getrandbits(64), rng.randbytes(rng.randint(0, 40))) for _ in range(2000)]
    items += [((7 << 56) | rng.getrandbits(20), b"same-top-%d" % i) for i in range(40)]  # one top bucket
    items += [(items[0][0], b"a tie")]
    sort = KeySort(3, str(tmp_path / "spill"))
    biggest = 0
    for key, record in items:
        sort.add(key, record)
        biggest = max(biggest, len(sort.buffer))
    assert biggest < 3 and sort.spilled
    assert list(sort.items()) == sorted(items)
    assert os.listdir(tmp_path) == []
    small = KeySort(10, str(tmp_path / "never"))
    for item in items[:5]:
        small.add(*item)
    assert list(small.items()) == sorted(items[:5]) and os.listdir(tmp_path) == []


def records_of(paths):
    """The records of TFRecord files, in file order."""
    from albert_tf.data.tfrecord_file import read_records

    out = []
    for path in paths:
        with open(path, "rb") as f:
            out.extend(read_records(f, path))
    return out


def test_a_documents_records_depend_on_its_content_only(fixed, tmp_path):
    """SOP data: A alone gives the records A gives beside B, and none of B's; A and B in either
    order, or B renamed, give the same bytes (the key is the content); another seed, other records."""
    import collections

    corpus, model = fixed
    b = write_fixed_corpus(str(tmp_path / "b.txt"), documents=30, seed=5)
    renamed = tmp_path / "b renamed.txt"
    renamed.write_bytes(open(b, "rb").read())
    options = dataclasses.replace(CASES["A"][0], shuffle_buffer_size=100_000)

    def run(name, inputs, **change):
        outputs = [str(tmp_path / f"{name}-{k}.tfrecord") for k in range(2)]
        write_pretraining_data(inputs, outputs, model, dataclasses.replace(options, **change), progress_stream=None)
        return outputs

    alone, beside_b = collections.Counter(records_of(run("a", [corpus]))), run("ab", [corpus, b])
    b_alone = collections.Counter(records_of(run("b", [b])))
    assert collections.Counter(records_of(beside_b)) == alone + b_alone and len(alone) > 300
    assert not alone & b_alone  # disjoint inputs, one seed: no record in common (no shared stream)
    assert [sha256(p) for p in run("ba", [str(renamed), corpus])] == [sha256(p) for p in beside_b]
    other_seed = collections.Counter(records_of(run("s", [corpus], random_seed=99)))
    assert sum((alone & other_seed).values()) < 0.05 * sum(alone.values())  # (a short document has few draws)


def document_of_records(paths, documents):
    """The index of the document each record of `paths` came from: its A and its B, the
    masked positions restored, are contiguous runs of exactly one document's ids."""
    import tensorflow as tf

    owners = []
    for raw in records_of(paths):
        f = tf.train.Example.FromString(raw).features.feature
        ids = list(f["input_ids"].int64_list.value)
        for position, original, weight in zip(f["masked_lm_positions"].int64_list.value,
                                              f["masked_lm_ids"].int64_list.value,
                                              f["masked_lm_weights"].float_list.value):
            if weight:
                ids[position] = original
        first = ids.index(3)  # [CLS] A [SEP] B [SEP]: the fixed model's [SEP] is id 3
        a, b = ids[1:first], ids[first + 1:ids.index(3, first + 1)]
        found = [i for i, doc in enumerate(documents)
                 if all(any(doc[j:j + len(side)] == side for j in range(len(doc) - len(side) + 1)) for side in (a, b))]
        assert len(found) == 1, (a, b, found)
        owners.append(found[0])
    return owners


def test_the_shuffle_is_global(fixed, tmp_path):
    """A corpus of 50 documents at dupe_factor 8 (about 900 records) through a shuffle
    buffer of 40 records: the share of adjacent records of one document is at most twice a
    uniform shuffle's (sum n_d (n_d - 1) / (N (N - 1))), and every document with 20 records
    or more has records in both shards."""
    import collections

    import sentencepiece as spm

    _, model = fixed
    corpus = write_fixed_corpus(str(tmp_path / "corpus.txt"), documents=50, seed=11)
    sp = spm.SentencePieceProcessor(model_file=model)
    documents = [[t for line in doc.lower().splitlines() for t in sp.encode(line)]
                 for doc in open(corpus, encoding="utf-8").read().strip().split("\n\n")]
    outputs = [str(tmp_path / f"g-{k}.tfrecord") for k in range(2)]
    options = WriterOptions(InstanceOptions(max_seq_length=32, max_predictions_per_seq=5, short_seq_prob=0.0),
                            dupe_factor=8, shuffle_buffer_size=40, temp_dir=str(tmp_path))
    summary = write_pretraining_data([corpus], outputs, model, options, progress_stream=None)
    owners = [document_of_records([p], documents) for p in outputs]
    n = collections.Counter(o for shard in owners for o in shard)
    total = sum(n.values())
    assert total == summary["instances"] > 40 * 20
    uniform = sum(k * (k - 1) for k in n.values()) / (total * (total - 1))
    pairs = [(x, y) for shard in owners for x, y in zip(shard, shard[1:])]
    adjacent = sum(x == y for x, y in pairs) / len(pairs)
    assert adjacent <= 2 * uniform, (adjacent, uniform)
    for document, count in n.items():
        if count >= 20:
            assert all(document in shard for shard in owners), document


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
        (WriterOptions(random_document_pool=1), "--random_document_pool must be at least 2, got 1"),
        (WriterOptions(random_document_pool=0), r"--random_document_pool must be at least 2, got 0 \(0, the work "),
        (WriterOptions(temp_dir=str(tmp_path / "none")), "--temp_dir=.*: not a local directory"),
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
