"""Where create_pretraining_data draws its "random next" segments (NSP negatives) from: a
sample of the whole input, the `size` documents of smallest rank (a hash of the seed and the
document's key), so the same set whatever the input's order, files or runner; an input of at
most `size` documents is taken whole, as the release does. Memory: about `size` documents of
text in each process that makes instances. Pure Python (no TensorFlow).
docs/pretraining_data.md.
"""

import functools
import hashlib
import heapq


def pool_rank(seed, key):
    """The rank of the document of `key` in the pool's sample for `seed` (smallest first)."""
    return hashlib.sha256(f"{seed}:pool:{key}".encode()).hexdigest()


def sample_documents(documents, size, seed):
    """The pool: the `size` (at least 1) documents of smallest `pool_rank` for `seed` of the
    (key, sentences) pairs `documents`. Returns (entries, total): a list of (key, tuple of
    sentences) ordered by rank, and the number of documents of the stream."""
    total = 0

    def ranked():
        nonlocal total
        for key, sentences in documents:
            total += 1
            yield pool_rank(seed, key), key, tuple(sentences)

    smallest = heapq.nsmallest(size, ranked())
    return [(key, sentences) for _, key, sentences in smallest], total


class InputDocuments:
    """The input-wide pool of `sample_documents`: documents tokenized when drawn.

    Args:
        entries: the (key, sentences) of `sample_documents`.
        encode_batch: sentences -> one list of ids per sentence (the writer's tokenizer).
    """

    # drawn documents kept tokenized (most recently drawn first out of the cache): a document
    # is drawn again by other negatives, and its ids are the same each time
    cached_documents = 4096

    def __init__(self, entries, encode_batch):
        self.entries = entries
        self.encode_batch = encode_batch
        self._encoded = functools.lru_cache(maxsize=self.cached_documents)(self._encode)

    def __len__(self):
        return len(self.entries)

    def key(self, k):
        """The key of pool document k (compared with the current document's)."""
        return self.entries[k][0]

    def document(self, k):
        """Pool document k as segments (the non-empty lists of ids of its sentences; not to be
        modified: a cached list)."""
        return self._encoded(k)

    def _encode(self, k):
        return [ids for ids in self.encode_batch(list(self.entries[k][1])) if ids]


def describe(kept, total):
    """The summary's line on where random-next documents came from: a pool of `kept` of the
    input's `total` documents."""
    if kept >= total:
        return f"all {total} input documents"
    return f"a uniform sample of {kept} of the {total} input documents"
