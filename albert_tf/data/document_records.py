"""How a document becomes pretraining records: the one definition both paths (the local
writer, the Beam pipeline) run.

Every draw of a document's instances comes from `random.Random(f"{random_seed}:{key}")` and
every record's 64-bit shuffle key from `random.Random(f"{random_seed}:order:{key}")`, `key`
being the document's content key (`documents.document_key`): a document's records depend on
the seed, the flags and its content only (NSP negatives also on the input-wide pool). Pure
Python (no TensorFlow).
"""

import dataclasses
import random

from albert_tf.data.document_pool import InputDocuments
from albert_tf.data.documents import document_key
from albert_tf.data.example_codec import ExampleEncoder
from albert_tf.data.instances import InstanceMaker, MaskingStats, num_to_predict
from albert_tf.data.tokenization import SentencePieceTokenizer


@dataclasses.dataclass
class Counts:
    """What some documents (or the whole run) produced, for the summary."""

    documents: int = 0
    instances: int = 0
    tokens: int = 0
    label_1: int = 0
    expected_predictions: int = 0
    stats: MaskingStats = None

    COUNTERS = ("documents", "instances", "tokens", "label_1", "expected_predictions")

    def add(self, other):
        for f in self.COUNTERS:
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.stats.add(other.stats)
        return self


class DocumentRecords:
    """Turns documents (lists of sentence strings) into keyed, serialized Examples.

    Args:
        spm_model_file: the SentencePiece model (`model_bytes`: its bytes, read before).
        options: `writer.WriterOptions` (its `instance`, `do_lower_case`, `dupe_factor`, `random_seed`).
        pool_entries: `document_pool.sample_documents`' entries, or None: no NSP negatives.
    """

    def __init__(self, spm_model_file, options, pool_entries=None, model_bytes=None):
        self.options = options
        self.tokenizer = SentencePieceTokenizer(spm_model_file, options.do_lower_case, model_bytes)
        self.pool = None if pool_entries is None else InputDocuments(pool_entries, self.tokenizer.encode_batch)
        tokens = self.tokenizer.special_tokens
        self.maker = InstanceMaker(options.instance, tokens, self.tokenizer.word_start)
        self.encoder = ExampleEncoder(options.instance.max_seq_length, options.instance.max_predictions_per_seq,
                                      pad_id=tokens.pad_id, max_id=tokens.vocab_size)

    def empty_counts(self):
        return Counts(stats=MaskingStats.empty(self.options.instance.ngram))

    def records(self, key, sentences, counts):
        """-> list of (shuffle key, serialized Example) of the document of content key
        `key` and `sentences`; adds what it made to `counts` (a `Counts`)."""
        o, seed = self.options.instance, self.options.random_seed
        counts.documents += 1
        segments = [ids for ids in self.tokenizer.encode_batch(list(sentences)) if ids]
        if not segments:
            return []
        rng, order = random.Random(f"{seed}:{key}"), random.Random(f"{seed}:order:{key}")
        keyed = []
        for _ in range(self.options.dupe_factor):
            for instance in self.maker.from_document(segments, rng, counts.stats, self.pool, key):
                keyed.append((order.getrandbits(64), self.encoder.encode(instance)))
                n = len(instance.input_ids)
                counts.tokens += n
                counts.label_1 += instance.next_sentence_label
                counts.expected_predictions += num_to_predict(n, o.max_predictions_per_seq, o.masked_lm_prob)
        counts.instances += len(keyed)
        return keyed

    def chunk_records(self, texts):
        """(keyed records, Counts) of a chunk of documents (lists of sentence strings)."""
        counts = self.empty_counts()
        keyed = []
        for sentences in texts:
            keyed.extend(self.records(document_key(sentences), sentences, counts))
        return keyed, counts
