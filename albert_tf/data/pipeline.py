"""tf.data input for pretraining TFRecords (the release's eight features).

`pretraining_dataset` reads file globs, shards files per worker, interleaves, shuffles,
repeats, parses (int64 to int32), batches with drop_remainder and prefetches; it validates the
first record, naming the file and feature on a mismatch. `DynamicMasking` re-draws the n-gram
masks of every example each time it is read, in the graph, with the static tool's statistics
and stateless random ops seeded by (seed, element index).

Batches are dicts of int32 [B, T] `input_word_ids`, `input_mask`, `input_type_ids`;
int32 [B, P] `masked_lm_positions`, `masked_lm_ids`; float32 [B, P]
`masked_lm_weights`; int32 [B, 1] `next_sentence_labels`.
"""

import dataclasses

import tensorflow as tf

from albert_tf.data import record_check
from albert_tf.data.example_codec import FEATURE_NAMES, feature_lengths
from albert_tf.data.files import expand_input_files
from albert_tf.data.instances import ngram_weights
from albert_tf.data.maps import graph_map
from albert_tf.data.vocab import SpecialTokens


@dataclasses.dataclass(frozen=True)
class DynamicMasking:
    """Settings of in-graph re-masking: the ids and masking settings the files were
    written with, from their data summary (`DynamicMasking.from_summary`).

    Attributes:
        special_tokens: `SpecialTokens`: [CLS]/[SEP] are never masked, [MASK] replaces,
            random replacements come from [first_ordinary_id, vocab_size).
        masked_lm_prob, ngram, favor_shorter_ngram, do_whole_word_mask: as
            create_pretraining_data's flags.
    """

    special_tokens: SpecialTokens
    masked_lm_prob: float
    ngram: int
    favor_shorter_ngram: bool
    do_whole_word_mask: bool

    @classmethod
    def from_summary(cls, summary):
        """From a `DataSummary` (`read_data_summary(files)`): the same ids and settings."""
        m = summary.masking
        return cls(summary.special_tokens, m.masked_lm_prob, m.ngram, m.favor_shorter_ngram, m.do_whole_word_mask)


def validate_first_record(path, max_seq_length, max_predictions_per_seq):
    """Checks the first Example of `path` against the expected features and lengths."""
    spec = feature_lengths(max_seq_length, max_predictions_per_seq)
    try:
        raw = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    except tf.errors.OpError:
        raise ValueError(f"{path}: not a readable TFRecord file (cut short, changed, or no TFRecord file).") from None
    if raw is None:
        raise ValueError(f"{path}: holds no record.")
    try:
        example = tf.train.Example.FromString(raw.numpy())
    except Exception:  # noqa: BLE001 - protobuf raises its own DecodeError
        raise ValueError(f"{path}: the first record is not a tf.train.Example.") from None
    feature = example.features.feature
    missing = [name for name in FEATURE_NAMES if name not in feature]
    if missing:
        raise ValueError(f"{path}: missing features {', '.join(missing)}; expected the release's "
                         f"eight ({', '.join(FEATURE_NAMES)}).")
    hints = {max_seq_length: "max_seq_length", max_predictions_per_seq: "max_predictions_per_seq"}
    for name, (length, dtype) in spec.items():
        values = feature[name].float_list.value if dtype == "float32" else feature[name].int64_list.value
        if len(values) != length:
            flag = hints.get(length, "")
            raise ValueError(
                f"{path}: feature {name} has {len(values)} values, expected {length}"
                + (f" (--{flag}={length}); the file was written with a different {flag}."
                   if flag and name != "next_sentence_labels" else ".")
            )


def _parse_fn(max_seq_length, max_predictions_per_seq):
    spec = {name: tf.io.FixedLenFeature([length], tf.float32 if dtype == "float32" else tf.int64)
            for name, (length, dtype) in feature_lengths(max_seq_length, max_predictions_per_seq).items()}

    def parse(record):
        features = tf.io.parse_single_example(record, spec)
        return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in features.items()}

    return parse


def _restore_original_ids(f):
    weights = f["masked_lm_weights"] > 0
    positions = tf.boolean_mask(f["masked_lm_positions"], weights)
    labels = tf.boolean_mask(f["masked_lm_ids"], weights)
    return tf.tensor_scatter_nd_update(f["input_ids"], positions[:, None], labels)


def remask(features, seed, options, max_predictions_per_seq):
    """Draws new masks for one parsed example: the original ids restored from the static
    labels, then whole-word n-grams (p proportional to 1/n), the release's num_to_predict
    budget and 80/10/10 replacement drawn again. `seed`: int32 [2]."""
    o, tokens = options, options.special_tokens
    P = max_predictions_per_seq
    ids = _restore_original_ids(features)
    T = tf.shape(ids)[0]
    real = features["input_mask"] > 0
    special = tf.logical_or(tf.equal(ids, tokens.cls_id), tf.equal(ids, tokens.sep_id))
    candidate = tf.logical_and(real, tf.logical_not(special))
    start = tf.logical_and(candidate, features["token_boundary"] > 0) if o.do_whole_word_mask else candidate
    word_of = tf.cumsum(tf.cast(start, tf.int32)) - 1  # [T]; -1 before the first word
    in_word = tf.logical_and(candidate, word_of >= 0)
    num_words = tf.reduce_sum(tf.cast(start, tf.int32))
    word_len = tf.math.unsorted_segment_sum(
        tf.cast(in_word, tf.int32), tf.where(in_word, word_of, num_words), num_words + 1)[:num_words]

    num_tokens = tf.reduce_sum(tf.cast(real, tf.float32))
    # Python's round() rounds half to even, as tf.round does.
    budget = tf.minimum(P, tf.maximum(1, tf.cast(tf.round(num_tokens * o.masked_lm_prob), tf.int32)))

    seeds = tf.random.experimental.stateless_split(seed, 4)
    order = tf.argsort(tf.random.stateless_uniform([num_words], seeds[0]))
    draws = tf.random.stateless_uniform([num_words], seeds[1])
    cumulative = tf.constant(
        [sum(ngram_weights(o.ngram, o.favor_shorter_ngram)[: i + 1]) for i in range(o.ngram)], tf.float32)
    prefix = tf.concat([[0], tf.cumsum(word_len)], 0)  # tokens before word w

    def body(i, count, covered):
        s = order[i]
        limit = tf.minimum(o.ngram, num_words - s)
        x = draws[i] * tf.gather(cumulative, limit - 1)
        n = 1 + tf.reduce_sum(tf.cast(x >= cumulative[: o.ngram - 1], tf.int32) * tf.cast(
            tf.range(1, o.ngram) < limit, tf.int32))
        # shrink n while the span exceeds the budget (as the static tool does)
        span_tokens = prefix[s + 1 : s + o.ngram + 1][: n] - prefix[s]
        fits = tf.reduce_sum(tf.cast(count + span_tokens <= budget, tf.int32))
        n = tf.minimum(n, fits)
        overlap = tf.reduce_any(covered[s : s + n])
        take = tf.logical_and(n > 0, tf.logical_not(overlap))
        new_cover = tf.tensor_scatter_nd_update(covered, (s + tf.range(n))[:, None], tf.ones([n], tf.bool))
        covered = tf.where(take, new_cover, covered)
        count = tf.where(take, count + tf.gather(prefix, s + n) - prefix[s], count)
        return i + 1, count, covered

    _, _, covered = tf.while_loop(
        lambda i, count, covered: tf.logical_and(i < num_words, count < budget),
        body, (tf.constant(0), tf.constant(0), tf.zeros([num_words], tf.bool)))

    chosen = tf.logical_and(in_word, tf.gather(covered, tf.maximum(word_of, 0)))
    positions = tf.cast(tf.where(chosen)[:, 0], tf.int32)[:P]
    labels = tf.gather(ids, positions)
    u = tf.random.stateless_uniform([T], seeds[2])
    random_ids = tf.random.stateless_uniform([T], seeds[3], minval=tokens.first_ordinary_id,
                                             maxval=tokens.vocab_size, dtype=tf.int32)
    replacement = tf.where(u < 0.8, tokens.mask_id, tf.where(u < 0.9, ids, random_ids))
    new_ids = tf.where(chosen, replacement, ids)
    m = tf.shape(positions)[0]
    pad = [[0, P - m]]
    out = dict(features)
    out["input_ids"] = new_ids
    out["masked_lm_positions"] = tf.ensure_shape(tf.pad(positions, pad), [P])
    out["masked_lm_ids"] = tf.ensure_shape(tf.pad(labels, pad), [P])
    out["masked_lm_weights"] = tf.ensure_shape(tf.pad(tf.ones([m], tf.float32), pad), [P])
    return out


_MODEL_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}  # the rest keep their names


def _to_model_features(f):
    return {_MODEL_NAMES.get(name, name): value for name, value in f.items() if name != "token_boundary"}


def pretraining_dataset(
    file_patterns,
    batch_size,
    max_seq_length,
    max_predictions_per_seq,
    is_training=True,
    input_context=None,
    deterministic=False,
    seed=12345,
    shuffle_buffer_size=10_000,
    cycle_length=8,
    dynamic_masking=None,
    skip_batches=0,
):
    """The pretraining input pipeline.

    Args:
        file_patterns: comma-separated globs or a list of them.
        batch_size: per-replica batch size (the global batch divided by the replicas).
        max_seq_length, max_predictions_per_seq: T and P of the files.
        is_training: repeat and shuffle (eval: one pass, in file order).
        input_context: `tf.distribute.InputContext`; files are sharded per input pipeline.
        deterministic: fixed order and seeds, so a run can be repeated exactly.
        seed: seed of the shuffles and of dynamic masking.
        shuffle_buffer_size: examples in the shuffle buffer.
        cycle_length: files read in parallel.
        dynamic_masking: `DynamicMasking` to re-draw masks on every read, or None.
        skip_batches: batches to skip first (a resumed run).

    Returns:
        A `tf.data.Dataset` of batches (see module docstring).
    """
    files = expand_input_files(file_patterns)
    record_check.check_inputs(files)
    record_check.watch(files)
    deterministic = bool(deterministic) or not is_training  # eval reads in file order
    validate_first_record(files[0], max_seq_length, max_predictions_per_seq)
    ds = tf.data.Dataset.from_tensor_slices(files)
    if input_context is not None and input_context.num_input_pipelines > 1:
        if len(files) < input_context.num_input_pipelines:
            raise ValueError(
                f"input_file: {len(files)} files cannot be sharded over {input_context.num_input_pipelines} "
                "input pipelines; write more shards (--num_output_shards).")
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    options = tf.data.Options()
    options.deterministic = deterministic
    ds = ds.with_options(options)
    parallel = tf.data.AUTOTUNE
    if is_training:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
        ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(cycle_length, len(files)),
                           num_parallel_calls=parallel, deterministic=deterministic)
        ds = ds.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
    else:
        ds = ds.flat_map(tf.data.TFRecordDataset)
    ds = graph_map(ds, _parse_fn(max_seq_length, max_predictions_per_seq), num_parallel_calls=parallel,
                   deterministic=deterministic)
    if dynamic_masking is not None:
        ds = graph_map(
            ds.enumerate(),
            lambda i, f: remask(f, tf.stack([tf.constant(seed, tf.int64), i]), dynamic_masking,
                                max_predictions_per_seq),
            num_parallel_calls=parallel, deterministic=deterministic)
    ds = graph_map(ds, _to_model_features, num_parallel_calls=parallel, deterministic=deterministic)
    ds = ds.batch(batch_size, drop_remainder=True)
    if skip_batches:
        ds = ds.skip(skip_batches)
    return ds.prefetch(parallel)
