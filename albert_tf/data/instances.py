"""Pretraining instances from tokenized documents: SOP/NSP pairs and n-gram masking.

Pure Python (no TensorFlow). Follows the original release (shared/ALBERT_REFERENCE.md
section 4) with its two bugs fixed: a one-segment chunk is split inside that segment into A
and B (`legacy_single_chunk_random_next=True` restores the release's random-document B), and
every random draw comes from the `random.Random` passed in (docs/pretraining_data.md).
"""

import dataclasses


@dataclasses.dataclass
class Instance:
    """One packed example before padding.

    input_ids, segment_ids, token_boundary: lists of length <= max_seq_length.
    masked_lm_positions, masked_lm_ids: sorted positions and their original ids.
    next_sentence_label: 1 when B does not follow A (swapped, or a random document).
    """

    input_ids: list
    segment_ids: list
    token_boundary: list
    masked_lm_positions: list
    masked_lm_ids: list
    next_sentence_label: int


@dataclasses.dataclass
class MaskingStats:
    """Counts behind the summary JSON: which n-gram lengths were drawn and applied."""

    ngram_drawn: list
    ngram_applied: list
    masked: int = 0
    replaced_by_mask: int = 0
    kept: int = 0
    replaced_random: int = 0

    @classmethod
    def empty(cls, ngram):
        return cls([0] * (ngram + 1), [0] * (ngram + 1))

    def add(self, other):
        for counts, more in ((self.ngram_drawn, other.ngram_drawn), (self.ngram_applied, other.ngram_applied)):
            counts[:] = [a + b for a, b in zip(counts, more)]
        for name in ("masked", "replaced_by_mask", "kept", "replaced_random"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """The instance-creation settings of create_pretraining_data (original flag names)."""

    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True
    random_next_sentence: bool = False
    legacy_single_chunk_random_next: bool = False

    def validate(self):
        if self.max_seq_length < 8:
            raise ValueError(f"--max_seq_length must be at least 8, got {self.max_seq_length}.")
        if not 1 <= self.max_predictions_per_seq <= self.max_seq_length:
            raise ValueError(f"--max_predictions_per_seq ({self.max_predictions_per_seq}) must be between 1 and "
                             f"--max_seq_length ({self.max_seq_length}).")
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise ValueError(f"--masked_lm_prob must be in (0, 1), got {self.masked_lm_prob}.")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"--short_seq_prob must be in [0, 1], got {self.short_seq_prob}.")
        if self.ngram < 1:
            raise ValueError(f"--ngram must be at least 1, got {self.ngram}.")


def ngram_weights(ngram, favor_shorter_ngram):
    """P(n) for n = 1..ngram: proportional to 1/n (6/11, 3/11, 2/11 for 3), or uniform."""
    raw = [1.0 / n if favor_shorter_ngram else 1.0 for n in range(1, ngram + 1)]
    total = sum(raw)
    return [w / total for w in raw]


def num_to_predict(length, max_predictions_per_seq, masked_lm_prob):
    """The release's budget: min(max_predictions, max(1, round(len * masked_lm_prob)))."""
    return min(max_predictions_per_seq, max(1, int(round(length * masked_lm_prob))))


def truncate_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Trims the longer side, from the front or the back at random, until both fit."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


class InstanceMaker:
    """Turns tokenized documents into masked instances.

    Args:
        options: `InstanceOptions`.
        special_tokens: `SpecialTokens` of the SentencePiece model: [CLS], [SEP], [MASK]
            ids; random replacements are drawn from the ordinary ids
            [first_ordinary_id, vocab_size).
        word_start: sequence of bool per id: the piece begins a word.
    """

    def __init__(self, options, special_tokens, word_start):
        options.validate()
        self.options = options
        self.special_tokens = special_tokens
        self.cls_id, self.sep_id, self.mask_id = special_tokens.cls_id, special_tokens.sep_id, special_tokens.mask_id
        self.word_start = word_start
        self.ngrams = list(range(1, options.ngram + 1))
        self.weights = ngram_weights(options.ngram, options.favor_shorter_ngram)
        self.cumulative = [sum(self.weights[: i + 1]) for i in range(len(self.weights))]

    # --- pairs ------------------------------------------------------------------------
    def from_document(self, document, rng, stats, pool=None, key=None):
        """Instances of `document` (a list of segments, each a list of ids).

        NSP negatives (`random_next_sentence` or the legacy single-chunk behaviour) take B
        from a random document of `pool` (albert_tf.data.document_pool: `len`, `key(k)`,
        `document(k)`) whose key is not `key`, the current document's; without a pool
        there are none (an instance that would take one is made as without NSP negatives).
        """
        o = self.options
        max_num_tokens = o.max_seq_length - 3
        target = max_num_tokens
        if rng.random() < o.short_seq_prob:
            target = rng.randint(2, max_num_tokens)
        instances = []
        chunk, length, i = [], 0, 0
        while i < len(document):
            chunk.append(document[i])
            length += len(document[i])
            if i == len(document) - 1 or length >= target:
                if chunk:
                    pair = self._pair(chunk, pool, key, target, rng)
                    if pair is not None:
                        tokens_a, tokens_b, label, unused = pair
                        i -= unused
                        truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
                        if tokens_a and tokens_b:
                            instances.append(self._pack(tokens_a, tokens_b, label, rng, stats))
                chunk, length = [], 0
            i += 1
        return instances

    def _random_document_tokens(self, pool, key, target_b, rng):
        """Segments of a random pool document other than `key`'s, from a random one on,
        until `target_b` ids (the release's draw: up to 10 tries); None if none was found."""
        if pool is None or len(pool) < 2:
            return None
        doc = None
        for _ in range(10):
            other = rng.randint(0, len(pool) - 1)
            if pool.key(other) != key:
                doc = pool.document(other)
                if doc:
                    break
        if not doc:
            return None
        start = rng.randint(0, len(doc) - 1)
        tokens = []
        for segment in doc[start:]:
            tokens.extend(segment)
            if len(tokens) >= target_b:
                break
        return tokens

    def _pair(self, chunk, pool, key, target, rng):
        """(tokens_a, tokens_b, label, unused segments to put back) or None."""
        o = self.options
        a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
        tokens_a = [t for segment in chunk[:a_end] for t in segment]
        nsp_negative = (len(chunk) == 1 and o.legacy_single_chunk_random_next) or (
            o.random_next_sentence and rng.random() < 0.5
        )
        if nsp_negative:
            tokens_b = self._random_document_tokens(pool, key, target - len(tokens_a), rng)
            if tokens_b:
                # the release puts the chunk's unused segments back for the next instance
                return tokens_a, tokens_b, 1, len(chunk) - a_end
        if len(chunk) == 1:
            # One segment: split it inside, so SOP still sees two ordered halves.
            segment = chunk[0]
            if len(segment) < 2:
                return None
            cut = rng.randint(1, len(segment) - 1)
            tokens_a, tokens_b = list(segment[:cut]), list(segment[cut:])
        else:
            tokens_b = [t for segment in chunk[a_end:] for t in segment]
        if not o.random_next_sentence and rng.random() < 0.5:
            return tokens_b, tokens_a, 1, 0  # swapped: sentence-order negative
        return tokens_a, tokens_b, 0, 0

    def _pack(self, tokens_a, tokens_b, label, rng, stats):
        ids = [self.cls_id] + tokens_a + [self.sep_id] + tokens_b + [self.sep_id]
        segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        boundary, positions, labels = self._mask(ids, rng, stats)
        return Instance(ids, segment_ids, boundary, positions, labels, label)

    # --- masking ----------------------------------------------------------------------
    def _draw_n(self, limit, rng):
        """n in 1..limit with the (renormalised) n-gram weights."""
        x = rng.random() * self.cumulative[limit - 1]
        for n in range(1, limit + 1):
            if x < self.cumulative[n - 1]:
                return n
        return limit

    def _mask(self, ids, rng, stats):
        """Masks `ids` in place; returns (token_boundary, positions, original ids)."""
        o = self.options
        boundary = [0] * len(ids)
        words = []  # candidate words: lists of positions
        for i, token in enumerate(ids):
            if token == self.cls_id or token == self.sep_id:
                boundary[i] = 1
                continue
            start = self.word_start[token]
            if o.do_whole_word_mask and words and not start:
                words[-1].append(i)
            else:
                words.append([i])
                if start:
                    boundary[i] = 1
        budget = num_to_predict(len(ids), o.max_predictions_per_seq, o.masked_lm_prob)
        starts = list(range(len(words)))
        rng.shuffle(starts)
        covered = set()
        chosen = []
        for start in starts:
            if len(chosen) >= budget:
                break
            limit = min(o.ngram, len(words) - start)
            n = self._draw_n(limit, rng)
            stats.ngram_drawn[n] += 1
            span = [p for w in words[start : start + n] for p in w]
            while len(chosen) + len(span) > budget and n > 1:
                n -= 1
                span = [p for w in words[start : start + n] for p in w]
            if len(chosen) + len(span) > budget:
                continue
            if any(p in covered for p in span):
                continue
            stats.ngram_applied[n] += 1
            covered.update(span)
            chosen.extend(span)
        chosen.sort()
        labels = [ids[p] for p in chosen]
        for p in chosen:
            if rng.random() < 0.8:
                ids[p] = self.mask_id
                stats.replaced_by_mask += 1
            elif rng.random() < 0.5:
                stats.kept += 1
            else:
                ids[p] = rng.randint(self.special_tokens.first_ordinary_id, self.special_tokens.vocab_size - 1)
                stats.replaced_random += 1
        stats.masked += len(chosen)
        return boundary, chosen, labels
