"""Where create_pretraining_data draws its "random next" segments from: the whole input.

An NSP negative (--random_next_sentence, or the release's single-chunk negatives of
--legacy_single_chunk_random_next) pairs A with a segment of a random other document. The
release held every document in memory, shuffled, and drew that document from all of them.
The streaming writer keeps its memory bounded another way: a first pass over the input
draws a uniform sample of at most `size` documents (reservoir sampling, seeded), and the
negatives are drawn from it:

- an input of at most `size` documents: the pool is every document, in input order, so a
  negative's document is uniform over the whole input as in the release;
- a larger input: a uniform sample of `size` of its documents, so each draw is still
  uniform over the whole input (the draws of a run share that sample).

The pool holds the documents' text (tokenized when drawn; the last 4,096 drawn kept
tokenized), so its memory is about `size` documents of text in each process that makes
instances. Pure Python (no TensorFlow).
"""

import functools
import random


def sample_documents(documents, size, seed):
    """A uniform sample of at most `size` documents of a stream (reservoir sampling).

    Args:
        documents: iterable of documents (lists of sentence strings), the whole input in
            order; its position in it identifies a document.
        size: the most documents kept (at least 1).
        seed: the seed of the sample's `random.Random` (drawn from only past `size`
            documents).
    Returns:
        (entries, total): entries a list of (input position, tuple of sentences), in input
        order when total <= size; total the number of documents of the stream.
    """
    rng = random.Random(seed)
    entries, total = [], 0
    for document in documents:
        if total < size:
            entries.append((total, tuple(document)))
        else:
            j = rng.randint(0, total)
            if j < size:
                entries[j] = (total, tuple(document))
        total += 1
    return entries, total


class ChunkDocuments:
    """The documents of one work chunk as the pool (--random_document_pool=0, the writer's
    behaviour before the input-wide pool): keys are positions in `documents`.

    Args:
        documents: list of documents, each a list of segments (lists of ids).
    """

    def __init__(self, documents):
        self.documents = documents

    def __len__(self):
        return len(self.documents)

    def key(self, k):
        return k

    def document(self, k):
        return self.documents[k]


class InputDocuments:
    """The input-wide pool of `sample_documents`: documents tokenized when drawn.

    Args:
        entries: the (input position, sentences) of `sample_documents`.
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
        """The input position of pool document k (compared with the current document's)."""
        return self.entries[k][0]

    def document(self, k):
        """Pool document k as segments (the non-empty lists of ids of its sentences; not to be
        modified: a cached list)."""
        return self._encoded(k)

    def _encode(self, k):
        return [ids for ids in self.encode_batch(list(self.entries[k][1])) if ids]


def describe(entries, total):
    """The summary's line on where random-next documents came from."""
    if entries is None:
        return "the work chunk of each document (--random_document_pool=0)"
    if len(entries) >= total:
        return f"all {total} input documents"
    return f"a uniform sample of {len(entries)} of the {total} input documents"
