"""SQuAD feature files: features cached as TFRecords beside sidecars saying what made them.

    result = load_or_build_features("train-v2.0.json", "out/train.tfrecord", tokenizer,
                                    FeatureSettings(is_training=True))    # result.rebuilt, result.reason

The records: int64 unique_ids [1], input_ids, input_mask, segment_ids, p_mask [T],
start_positions, end_positions, is_impossible [1] (the release's names), with the sidecar
and reuse rule of albert_tf.data.feature_cache. Prediction files also get
`<file>.spans.json` with each feature's example mapping, token spans and max-context flags
(post-processing without re-tokenizing).
"""

import dataclasses
import json
import os

import numpy as np

from albert_tf.data import feature_cache
from albert_tf.storage.json_files import read_json
from albert_tf.tasks.squad.features import ConvertSummary, SquadFeature, SquadFeatures, iter_features
from albert_tf.tasks.squad.reading import SquadDataError, normalize_version, read_squad_examples
from albert_tf.storage import files

FEATURE_FORMAT = 2  # bump when the feature layout changes: old caches are rebuilt (2: shared sidecar layout)
RECORD_FEATURES = ("unique_ids", "input_ids", "input_mask", "segment_ids", "p_mask", "start_positions",
                   "end_positions", "is_impossible")
_PER_POSITION = ("input_ids", "input_mask", "segment_ids", "p_mask")


def _record_shapes(settings):
    T = int(settings["max_seq_length"])
    return {name: (T,) if name in _PER_POSITION else () for name in RECORD_FEATURES}


SQUAD_FEATURES = feature_cache.FeatureKind(
    name="albert_tf squad features", format=FEATURE_FORMAT, shapes=_record_shapes,
    dtypes={"unique_ids": np.int64}, error=SquadDataError)
SPANS_SUFFIX = ".spans.json"


def feature_file_settings(settings, tokenizer, input_file):
    """The record of what makes a feature file: settings, tokenizer, input file."""
    settings.validate()
    input_file = os.fspath(input_file)
    if not files.isfile(input_file):
        raise SquadDataError(f"{input_file}: no such file.")
    return {
        "format": FEATURE_FORMAT,
        "max_seq_length": settings.max_seq_length,
        "doc_stride": settings.doc_stride,
        "max_query_length": settings.max_query_length,
        "is_training": bool(settings.is_training),
        "version": normalize_version(settings.version, input_file),
        **feature_cache.tokenizer_record(tokenizer),
        **feature_cache.input_record(input_file, SquadDataError),
    }


def write_feature_file(features, path, settings, extra=None):
    """Writes features (an iterable of SquadFeature) to the TFRecord `path`; for prediction
    settings (feature_file_settings' dict, "is_training" false) also `<path>.spans.json`;
    then the sidecar `<path>.json` with `extra` (a dict, or a function returning it once the
    features are written) (feature_cache.write_feature_file). Returns the sidecar dict."""
    keep_spans = not settings.get("is_training", True)
    columns = {k: [] for k in ("unique_ids", "example_index", "qas_id", "doc_span_index", "doc_start",
                               "context_spans", "context_is_max")}
    encoder = feature_cache.RecordEncoder(RECORD_FEATURES)

    def records():
        for f in features:
            yield encoder.encode_int64({
                "unique_ids": [int(f.unique_id)], "input_ids": f.input_ids, "input_mask": f.input_mask,
                "segment_ids": f.segment_ids, "p_mask": f.p_mask, "start_positions": [int(f.start_position)],
                "end_positions": [int(f.end_position)], "is_impossible": [int(f.is_impossible)]})
            if keep_spans:
                values = (int(f.unique_id), int(f.example_index), f.qas_id, int(f.doc_span_index), int(f.doc_start),
                          f.context_spans.reshape(-1).tolist(), "".join("1" if v else "0" for v in f.context_is_max))
                for column, value in zip(columns.values(), values):
                    column.append(value)

    def companions():
        if not keep_spans:
            return {}
        return {SPANS_SUFFIX: json.dumps(columns, separators=(",", ":")) + "\n"}

    return feature_cache.write_feature_file(records(), path, SQUAD_FEATURES, settings, extra=extra,
                                            companions=companions)


def read_feature_arrays(path):
    """A feature TFRecord -> {name: numpy array} (features_to_arrays' layout). Uses TensorFlow."""
    return feature_cache.read_feature_arrays(path, SQUAD_FEATURES)


def read_feature_file(path, settings=None):
    """Feature file `path` -> SquadFeatures. With `settings` (feature_file_settings), raises
    SquadDataError when the file was made otherwise. Prediction files come back whole
    (token spans, max-context flags, example mapping from `<path>.spans.json`); training
    files without those (context_spans / context_is_max None, example_index -1, qas_id "")."""
    path = os.fspath(path)
    if settings is not None:
        ok, reason = feature_cache.check_feature_file(path, settings, SQUAD_FEATURES)
        if not ok:
            raise SquadDataError(f"{path}: stale or incomplete feature file: {reason}.")
    sidecar = feature_cache.read_sidecar(path, SQUAD_FEATURES)
    arrays = read_feature_arrays(path)
    meta = None
    if SPANS_SUFFIX in (sidecar.get("companions") or {}):
        meta = read_json(path + SPANS_SUFFIX, "the feature file's spans (written beside it)",
                         fix="rebuild the features", error=SquadDataError)
    out = SquadFeatures()
    for k in range(len(arrays["input_ids"])):
        seg, pm = arrays["segment_ids"][k], arrays["p_mask"][k]
        context = np.nonzero((seg == 1) & (pm == 0))[0]
        offset, length = int(context[0]), len(context)
        spans = is_max = None
        example_index, qas_id, span_index, doc_start = -1, "", -1, -1
        if meta is not None:
            if meta["unique_ids"][k] != int(arrays["unique_ids"][k]):
                raise SquadDataError(f"{path}{SPANS_SUFFIX}: feature {k} has unique_id {meta['unique_ids'][k]}, "
                                     f"the records {int(arrays['unique_ids'][k])}; rebuild the features.")
            spans = np.asarray(meta["context_spans"][k], np.int32).reshape(-1, 2)
            is_max = np.frombuffer(meta["context_is_max"][k].encode(), np.uint8) == ord("1")
            example_index, qas_id = meta["example_index"][k], meta["qas_id"][k]
            span_index, doc_start = meta["doc_span_index"][k], meta["doc_start"][k]
        out.append(SquadFeature(
            unique_id=int(arrays["unique_ids"][k]), example_index=example_index, qas_id=qas_id,
            doc_span_index=span_index, doc_start=doc_start, input_ids=arrays["input_ids"][k].copy(),
            context_offset=offset, context_length=length, context_spans=spans, context_is_max=is_max,
            start_position=int(arrays["start_positions"][k]), end_position=int(arrays["end_positions"][k]),
            is_impossible=bool(arrays["is_impossible"][k])))
    return out


@dataclasses.dataclass
class FeatureCacheResult:
    """load_or_build_features' answer.

    examples: the SquadExamples (always read; cheap); features: SquadFeatures or None (see
    return_features); num_features; rebuilt: whether the file was (re)written; reason: why
    (or "reused: ..."); feature_file. The read and conversion summaries are in the sidecar."""

    examples: list
    features: object
    num_features: int
    rebuilt: bool
    reason: str
    feature_file: str


def load_or_build_features(input_file, feature_file, tokenizer, settings, return_features=None):
    """The features of SQuAD file `input_file` under `settings`, from `feature_file` when it
    was made from the same settings, tokenizer and input content, else built and written
    (feature_cache.load_or_build).

    Args:
        input_file: the SQuAD JSON.
        feature_file: the TFRecord cache (with sidecars `<feature_file>.json` and, for
            prediction, `<feature_file>.spans.json`).
        tokenizer: SentencePieceTokenizer.
        settings: FeatureSettings.
        return_features: keep / read the features in memory; default: for prediction only
            (training reads the TFRecord through tf.data).
    """
    feature_file = os.fspath(feature_file)
    if return_features is None:
        return_features = not settings.is_training
    record = feature_file_settings(settings, tokenizer, input_file)
    examples = read_squad_examples(input_file, settings.is_training, settings.version)
    summary = ConvertSummary()

    def build():
        stream = iter_features(examples, tokenizer, settings.max_seq_length, settings.doc_stride,
                               settings.max_query_length, settings.is_training, summary=summary)
        features = None
        if return_features:
            features = SquadFeatures(stream)
            features.summary = summary
            stream = features
        write_feature_file(stream, feature_file, record,
                           extra=lambda: {"read_summary": examples.summary.to_dict(),
                                          "convert_summary": summary.to_dict()})
        return features

    outcome = feature_cache.load_or_build(feature_file, record, SQUAD_FEATURES, build)
    features = outcome.built
    if not outcome.rebuilt and return_features:
        features = read_feature_file(feature_file)
    return FeatureCacheResult(examples, features, outcome.sidecar["num_features"], outcome.rebuilt, outcome.reason,
                              feature_file)
