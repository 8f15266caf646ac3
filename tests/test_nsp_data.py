"""NSP data (issue 52): "random next" segments come from the whole input, not the work chunk.

A corpus in source order keeps a package's documents together, so a chunk of consecutive
documents is mostly one topic, and negatives drawn from it read like the true next segment
(the grid's docstring corpus: 67.5% of chunk-drawn random documents were of the same
top-level package, 8.4% of whole-input draws). The corpus here is such an input made by
hand: four topics (disjoint words of the hand-made SentencePiece model of
test_data_writer), 20 consecutive documents each, one work chunk per topic. Since issue 65
the pool is the documents of smallest rank (a hash of the seed and the document's key).
"""

import hashlib
import math
import random

import numpy as np
import pytest

from albert_tf.data.document_pool import sample_documents
from albert_tf.data.instances import InstanceOptions
from albert_tf.data.writer import WriterOptions, write_pretraining_data
from test_data_writer import WORDS, write_fixed_model

TOPICS, PER_TOPIC, SEQ = 4, 20, 32
FIRST_WORD_ID = 10  # the fixed model: 5 special pieces, 5 user symbols, then WORDS in order


def write_topic_corpus(path, seed):
    """TOPICS x PER_TOPIC documents of 4 to 8 sentences, a topic's documents consecutive and
    its words WORDS[topic::TOPICS] only (no two alike)."""
    rng = random.Random(seed)
    lines = []
    for topic in range(TOPICS):
        words = WORDS[topic::TOPICS]
        for _ in range(PER_TOPIC):
            for _ in range(rng.randint(4, 8)):
                lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(4, 9))).capitalize() + ".")
            lines.append("")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


def nsp_options(pool, dupe_factor, seed):
    """NSP data of the topic corpus, one work chunk per topic, the input-wide pool of `pool`
    documents."""
    return WriterOptions(InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=5, random_next_sentence=True),
                         dupe_factor=dupe_factor, random_seed=seed, documents_per_chunk=PER_TOPIC,
                         random_document_pool=pool)


@pytest.fixture(scope="module")
def topic_data(tmp_path_factory):
    """{(split, "input"): (records path, summary)}."""
    d = tmp_path_factory.mktemp("topics")
    model = write_fixed_model(str(d / "fixed.model"))
    texts = {"train": write_topic_corpus(str(d / "train.txt"), 0), "eval": write_topic_corpus(str(d / "eval.txt"), 1)}
    data = {}
    for split, dupe_factor, seed in (("train", 10, 1), ("eval", 2, 2)):
        for kind, pool in (("input", 50_000),):
            path = str(d / f"{split}_{kind}.tfrecord")
            summary = write_pretraining_data([texts[split]], [path], model, nsp_options(pool, dupe_factor, seed),
                                             progress_stream=None)
            data[split, kind] = path, summary
    return data


def read_pairs(path):
    """(topics of A's words, topics of B's words, label) per record, masked words restored."""
    import tensorflow as tf

    pairs = []
    for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
        f = tf.train.Example.FromString(raw).features.feature
        ids = np.array(f["input_ids"].int64_list.value)
        segments = np.array(f["segment_ids"].int64_list.value)
        weights = np.array(f["masked_lm_weights"].float_list.value) > 0
        positions = np.array(f["masked_lm_positions"].int64_list.value)[weights]
        ids[positions] = np.array(f["masked_lm_ids"].int64_list.value)[weights]
        topics = [set(), set()]
        for token, segment in zip(ids, segments):
            if FIRST_WORD_ID <= token < FIRST_WORD_ID + len(WORDS):
                topics[segment].add(int(token - FIRST_WORD_ID) % TOPICS)
        pairs.append((topics[0], topics[1], f["next_sentence_labels"].int64_list.value[0]))
    return pairs


def test_a_sample_of_the_whole_input_holds_every_document_or_a_uniform_share():
    keyed = lambda n: ((f"k{i}", [f"s{i}"]) for i in range(n))
    every, total = sample_documents(keyed(7), 10, "s")
    assert total == 7 and sorted(every) == [(f"k{i}", (f"s{i}",)) for i in range(7)]  # all of them
    sample, total = sample_documents(keyed(100), 10, "s")
    assert total == 100 and len({k for k, _ in sample}) == 10 and all(doc == (f"s{k[1:]}",) for k, doc in sample)
    assert sample == sample_documents(keyed(100), 10, "s")[0]  # seeded
    assert sample == sample_documents(reversed(list(keyed(100))), 10, "s")[0]  # whatever the input's order
    # the smallest ranks: an independent computation of the ranks
    ranks = sorted((hashlib.sha256(f"s:pool:k{i}".encode()).hexdigest(), f"k{i}") for i in range(100))
    assert [k for k, _ in sample] == [k for _, k in ranks[:10]]
    # uniform: every document is kept in 10% of the samples; 2000 samples: 200 +- 13.4 (1 se)
    counts = np.zeros(100)
    for seed in range(2000):
        for k, _ in sample_documents(((i, [i]) for i in range(100)), 10, seed)[0]:
            counts[k] += 1
    assert counts.sum() == 20_000 and 200 - 4 * 13.4 < counts.min() and counts.max() < 200 + 4 * 13.4
    # early and late alike: a sample holds hypergeometric(10 of 100, 50 early) early ones
    assert counts[:50].sum() == pytest.approx(10_000, abs=4 * math.sqrt(2000 * 10 * 0.25 * 90 / 99))


def test_negatives_come_from_the_whole_input_not_the_work_chunk(topic_data):
    """A negative's B is of another topic as often as a random other document of the whole
    input is (60 of 79); drawn from the work chunk (before issue 52) it never was."""
    for kind, expected_source in (("input", "all 80 input documents"),):
        path, summary = topic_data["train", kind]
        assert summary["random_next_documents_from"] == expected_source
        pairs = read_pairs(path)
        positives = [(a, b) for a, b, label in pairs if label == 0]
        negatives = [(a, b) for a, b, label in pairs if label == 1]
        assert all(len(a | b) == 1 for a, b in positives)  # B follows A in the same document
        # (a side may hold no word: a sentence split inside, B its final ".")
        compared = [(a, b) for a, b in negatives if a and b]
        assert len(compared) > 0.95 * len(negatives) and all(len(a) == len(b) == 1 for a, b in compared)
        other = sum(a != b for a, b in compared) / len(compared)
        se = math.sqrt(60 / 79 * 19 / 79 / len(compared))
        assert abs(other - 60 / 79) < 3 * se, (other, len(compared))
        assert abs(len(negatives) / len(pairs) - 0.5) < 3 * math.sqrt(0.25 / len(pairs))
