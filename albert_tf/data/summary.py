"""The data summary create_pretraining_data writes beside its TFRecords
(`dir/summary_train.tfrecord.json`, a name no glob over the outputs matches), and reading it
back. Besides counts and shares it records what a reader of the files must agree with:
"special_tokens" (SpecialTokens), "masking" (MaskingSettings), "max_seq_length",
"spm_model_sha256", "output_files" ({path: instances}) and "made_by".

    summary = read_data_summary(["out/train.tfrecord-00000-of-00002", ...])
    summary.special_tokens.mask_id, summary.masking.masked_lm_prob
"""

import dataclasses
import hashlib

from albert_tf.data.files import InputError, expand_input_files
from albert_tf.data.vocab import SpecialTokens, dataclass_values
from albert_tf.storage import files
from albert_tf.storage.json_files import read_json

SUMMARY_PREFIX = "summary_"


def summary_path_for(output_file):
    """`dir/train.tfrecord` -> `dir/summary_train.tfrecord.json`: beside the output, but
    not matched by globs over the outputs."""
    directory, name = files.split(files.abspath(output_file))
    return files.join(directory, f"{SUMMARY_PREFIX}{name}.json")


@dataclasses.dataclass(frozen=True)
class MaskingSettings:
    """The masking settings the files were written with (create_pretraining_data's flags)."""

    max_predictions_per_seq: int
    masked_lm_prob: float
    do_whole_word_mask: bool
    ngram: int
    favor_shorter_ngram: bool

    @classmethod
    def from_instance_options(cls, options):
        return cls(**{f.name: getattr(options, f.name) for f in dataclasses.fields(cls)})

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values, source):
        return cls(**dataclass_values(cls, values, source, "masking"))


@dataclasses.dataclass(frozen=True)
class DataSummary:
    """What a set of pretraining TFRecord files was written with.

    Attributes:
        special_tokens: `SpecialTokens` of the SentencePiece model.
        masking: `MaskingSettings`.
        max_seq_length: T of the files.
        spm_model_sha256: SHA-256 of the SentencePiece model file.
        summary_files: the summary JSON files read (sorted).
    """

    special_tokens: SpecialTokens
    masking: MaskingSettings
    max_seq_length: int
    spm_model_sha256: str
    summary_files: tuple = ()

    @property
    def vocab_size(self):
        return self.special_tokens.vocab_size

    def description(self):
        """The summary fields that files read together must share."""
        return {"special_tokens": self.special_tokens.to_dict(), "masking": self.masking.to_dict(),
                "max_seq_length": self.max_seq_length, "spm_model_sha256": self.spm_model_sha256}


def file_sha256(path):
    with files.open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def describe_data(special_tokens, instance_options, spm_model_file):
    """The summary entries a reader needs, as a dict."""
    return DataSummary(special_tokens, MaskingSettings.from_instance_options(instance_options),
                       instance_options.max_seq_length, file_sha256(spm_model_file)).description()


def _summaries_in(directory):
    """{summary path: parsed JSON} for the summary_*.json files of `directory`."""
    names = files.listdir(directory or ".")
    found = {}
    for name in sorted(names):
        if not (name.startswith(SUMMARY_PREFIX) and name.endswith(".json")):
            continue
        path = files.join(directory, name) if directory else name
        data = read_json(path, "a data summary of create_pretraining_data",
                         fix="create the data again with create_pretraining_data", error=InputError)
        if isinstance(data.get("output_files"), dict):
            found[path] = data
    return found


def _parse(path, data):
    if "special_tokens" not in data or "masking" not in data:
        raise InputError(f"{path}: this summary predates the recording of special token ids and masking "
                         "settings; create the data again with create_pretraining_data.")
    try:
        return DataSummary(SpecialTokens.from_dict(data["special_tokens"], path),
                           MaskingSettings.from_dict(data["masking"], path),
                           int(data["max_seq_length"]), str(data["spm_model_sha256"]), (path,))
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"{path}: broken data summary ({e}).") from None


def _differences(a, b):
    da, db = a.description(), b.description()
    out = []
    for key in da:
        if isinstance(da[key], dict):
            out += [f"{key}.{k} {da[key][k]!r} vs {db[key][k]!r}" for k in da[key] if da[key][k] != db[key][k]]
        elif da[key] != db[key]:
            out.append(f"{key} {da[key]!r} vs {db[key]!r}")
    return out


def read_data_summary(input_files, flag="--input_file"):
    """The `DataSummary` of a set of pretraining TFRecord files (a list, or comma-separated
    files or globs). Raises InputError naming the file when no summary_*.json beside a file
    lists it, a summary lacks the special tokens (older data), or the summaries disagree."""
    paths = expand_input_files(input_files, flag=flag)
    by_directory = {}
    chosen = []  # (file, DataSummary)
    for path in paths:
        directory, name = files.split(path)
        if directory not in by_directory:
            by_directory[directory] = _summaries_in(directory)
        listing = [(s, data) for s, data in by_directory[directory].items()
                   if name in {files.basename(k) for k in data["output_files"]}]
        if not listing:
            raise InputError(
                f"{flag}: {path} has no data summary: no {SUMMARY_PREFIX}*.json beside it lists it. "
                "create_pretraining_data writes summary_<output>.json beside its outputs; keep it with them.")
        for summary_path, data in listing:
            chosen.append((path, _parse(summary_path, data)))
    first_file, first = chosen[0]
    for path, summary in chosen[1:]:
        differences = _differences(first, summary)
        if differences:
            raise InputError(
                f"{flag}: {first_file} ({first.summary_files[0]}) and {path} ({summary.summary_files[0]}) were "
                f"written differently: {'; '.join(differences)}. Read files of one SentencePiece model and one "
                "set of masking settings together.")
    paths = tuple(sorted({s.summary_files[0] for _, s in chosen}))
    return dataclasses.replace(first, summary_files=paths)
