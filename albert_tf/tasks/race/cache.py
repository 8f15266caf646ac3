"""Multiple-choice feature files: examples_to_arrays' arrays cached as a TFRecord and its sidecar.

    result = load_or_build_features(examples, "out/train.tfrecord", tokenizer, settings)
    result.arrays, result.rebuilt, result.reason

The records: int64 input_ids, input_mask, segment_ids [C*T], label_ids [1],
is_real_example [1] (the release's names and layout), with the sidecar and reuse rule of
albert_tf.data.feature_cache (`feature_file_settings`: what the sidecar records).
"""

import dataclasses
import os

from albert_tf.data import feature_cache
from albert_tf.tasks.race.examples import MultipleChoiceDataError
from albert_tf.tasks.race.features import examples_to_arrays

FEATURE_FORMAT = 1  # bump when the feature layout changes: old caches are rebuilt
RECORD_FEATURES = ("input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example")
ARRAY_NAMES = ("input_ids", "input_mask", "segment_ids", "label_ids")


def _record_shapes(settings):
    C, T = int(settings["num_choices"]), int(settings["max_seq_length"])
    return {"input_ids": (C, T), "input_mask": (C, T), "segment_ids": (C, T), "label_ids": (), "is_real_example": ()}


MULTIPLE_CHOICE_FEATURES = feature_cache.FeatureKind(
    name="albert_tf multiple-choice features", format=FEATURE_FORMAT, shapes=_record_shapes,
    error=MultipleChoiceDataError)


def feature_file_settings(settings, tokenizer, input_paths, num_choices):
    """The record of what makes a feature file (compared by feature_cache.check_feature_file):
    max_seq_length, max_qa_length, num_choices, the tokenizer and the input's content."""
    settings.validate()
    return {
        "format": FEATURE_FORMAT,
        "max_seq_length": int(settings.max_seq_length),
        "max_qa_length": int(settings.max_qa_length),
        "num_choices": int(num_choices),
        **feature_cache.tokenizer_record(tokenizer),
        **feature_cache.input_record(input_paths, MultipleChoiceDataError),
    }


def write_feature_file(arrays, path, settings, extra=None):
    """examples_to_arrays' arrays -> the TFRecord `path` (+ sidecar), atomically. Returns
    the sidecar dict."""
    encoder = feature_cache.RecordEncoder(RECORD_FEATURES)
    N = len(arrays["label_ids"])

    def records():
        for i in range(N):
            yield encoder.encode_int64({
                "input_ids": arrays["input_ids"][i].reshape(-1), "input_mask": arrays["input_mask"][i].reshape(-1),
                "segment_ids": arrays["segment_ids"][i].reshape(-1), "label_ids": [int(arrays["label_ids"][i])],
                "is_real_example": [1]})

    return feature_cache.write_feature_file(records(), path, MULTIPLE_CHOICE_FEATURES, settings, extra=extra)


def read_feature_arrays(path):
    """A feature file -> {"input_ids", "input_mask", "segment_ids": int32 [N, C, T],
    "label_ids": int32 [N]} (examples_to_arrays' layout). Uses TensorFlow."""
    return feature_cache.read_feature_arrays(path, MULTIPLE_CHOICE_FEATURES, names=ARRAY_NAMES)


@dataclasses.dataclass
class MultipleChoiceFeatures:
    """load_or_build_features' answer.

    Attributes:
        arrays: examples_to_arrays' dict (input_ids, input_mask, segment_ids [N, C, T],
            label_ids [N], -1 where unlabeled).
        num_features: N.
        feature_file: the TFRecord.
        rebuilt: whether it was (re)written now.
        reason: why it was rebuilt, or "reused: ...".
        source: the description of the input.
        sidecar: the feature file's sidecar dict (settings, counts).
    """

    arrays: dict
    num_features: int
    feature_file: str
    rebuilt: bool
    reason: str
    source: str
    sidecar: dict


def load_or_build_features(examples, feature_file, tokenizer, settings, source_description=None, input_paths=None):
    """The features of `examples`, from `feature_file` when it was made with the same
    settings, tokenizer and input content (feature_cache), else built and written.

    Args:
        examples: MultipleChoiceExamples from read_race / read_multiple_choice_jsonl (their
            `.summary` names the input), or any list of MultipleChoiceExample with
            `input_paths` given.
        feature_file: the TFRecord cache (sidecar `<feature_file>.json`).
        tokenizer: SentencePieceTokenizer.
        settings: MultipleChoiceSettings.
        source_description: a line saying what the input is (kept in the sidecar);
            default examples.summary.source.
        input_paths: the file(s) the examples came from, hashed to notice a changed input
            (several files: one combined hash); default examples.summary.paths (every
            file the reader read).

    Returns:
        MultipleChoiceFeatures.
    """
    settings.validate()
    feature_file = os.fspath(feature_file)
    summary = getattr(examples, "summary", None)
    if source_description is None:
        source_description = summary.source if summary is not None else ""
    if input_paths is None:
        if summary is None:
            raise ValueError("load_or_build_features: pass input_paths (the examples carry no summary).")
        input_paths = summary.paths
    if not len(examples):
        raise MultipleChoiceDataError(f"{source_description or feature_file}: no examples to make features of.")
    record = feature_file_settings(settings, tokenizer, input_paths, examples[0].num_choices)

    def stale(sidecar):
        if sidecar.get("num_features") != len(examples):
            return f"{sidecar.get('num_features')} features in the file, {len(examples)} examples given"
        return None

    def build():
        arrays = examples_to_arrays(examples, tokenizer, settings)
        extra = {"source": source_description}
        if summary is not None:
            extra["read_summary"] = summary.to_dict()
        write_feature_file(arrays, feature_file, record, extra=extra)
        return arrays

    outcome = feature_cache.load_or_build(feature_file, record, MULTIPLE_CHOICE_FEATURES, build, also_stale=stale)
    arrays = outcome.built if outcome.rebuilt else read_feature_arrays(feature_file)
    return MultipleChoiceFeatures(arrays, outcome.sidecar["num_features"], feature_file, outcome.rebuilt,
                                  outcome.reason, source_description, outcome.sidecar)
