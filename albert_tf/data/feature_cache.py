"""Cached feature files of the fine-tuning tasks (SQuAD, multiple choice): one machinery.

A feature file is a TFRecord of tf.train.Examples with int64 features (`RecordEncoder`) plus
`<file>.json`, a sidecar recording the settings, tokenizer and input that made it, written
last (its presence vouches for a complete file). A `FeatureKind` names the features and
their per-record shapes, so `read_feature_arrays` can read any kind back.

    kind = FeatureKind("albert_tf xyz features", format=1,
                       shapes=lambda s: {"input_ids": (s["max_seq_length"],), "label_ids": ()})
    record = {"max_seq_length": 128, **tokenizer_record(tokenizer), **input_record(["train.jsonl"])}
    outcome = load_or_build("out/train.tfrecord", record, kind,
                            build=lambda: write_feature_file(serialized_examples, "out/train.tfrecord",
                                                             kind, record))
    outcome.rebuilt, outcome.reason          # False, "reused: settings and input unchanged"
    arrays = read_feature_arrays("out/train.tfrecord", kind)   # {"input_ids": [N, 128], ...}

Reuse rule (`check_feature_file`): same kind and format, the record file and every companion
of the size the sidecar says, and every settings entry equal (the input by its content: its
path and mtime are informational); the reason names what differs.
"""

import dataclasses
import hashlib
import logging
import os
import time

import numpy as np

from albert_tf.data import record_check
from albert_tf.data.summary import file_sha256
from albert_tf.data.tokenization import TOKENIZATION_VERSION
from albert_tf.storage import atomic, files, outputs
from albert_tf.storage.json_files import read_json

logger = logging.getLogger("albert_tf")

# Settings entries that describe but do not decide: a moved or touched input is still the same input.
INFORMATIONAL = ("input_file", "input_mtime")
# Settings entries that describe the input's content: a difference in any is one reason.
INPUT_CONTENT = ("input_sha256", "input_size", "input_files")


class FeatureFileError(ValueError):
    """A feature file that cannot be used; the message names the file and what to do."""


@dataclasses.dataclass(frozen=True)
class FeatureKind:
    """One kind of feature file.

    Attributes:
        name: the sidecar's "kind" (a file of another kind is never reused).
        format: bump when the layout changes: older files are rebuilt.
        shapes: settings dict -> {feature name: per-record shape}, in record order; () is
            one value per record. Records hold each feature flattened (int64 list of the
            shape's size); `read_feature_arrays` gives it back as [N, *shape].
        dtypes: {feature name: numpy dtype} for the arrays read back (default int32).
        error: the ValueError subclass raised for unreadable files of this kind.
    """

    name: str
    format: int
    shapes: object
    dtypes: dict = dataclasses.field(default_factory=dict)
    error: type = FeatureFileError



class RecordEncoder:
    """Serializes tf.train.Examples of the int64 features `names`: `encode_int64({name: ints})`
    -> bytes (a list, tuple or numpy array of any shape, flattened; negative values kept)."""

    def __init__(self, names):
        import tensorflow as tf  # imported when features are built, not when this module is

        self.names = tuple(names)
        self._train = tf.train

    def encode_int64(self, values):
        train = self._train
        feature = {name: train.Feature(int64_list=train.Int64List(
            value=np.asarray(values[name], np.int64).reshape(-1).tolist())) for name in self.names}
        return train.Example(features=train.Features(feature=feature)).SerializeToString()



def tokenizer_record(tokenizer):
    """The tokenizer's part of a settings record: TOKENIZATION_VERSION, do_lower_case, the
    SentencePiece model's sha256 and its special ids."""
    return {
        "tokenization": TOKENIZATION_VERSION,
        "do_lower_case": bool(tokenizer.do_lower_case),
        "spm_model_sha256": file_sha256(tokenizer.model_file),
        "special_tokens": tokenizer.special_tokens.to_dict(),
    }


def input_record(paths, error=FeatureFileError):
    """The input's part of a settings record of `paths` (one file or a list; `error` raised,
    naming the file, when one is missing): {"input_file", "input_size", "input_mtime",
    "input_sha256"}; for several files also "input_files" (their count), "input_file" their
    common directory, the sizes summed, the newest mtime, and "input_sha256" the sha256 of
    the lines "<relative path>\\t<file sha256>\\n" in sorted order."""
    single = isinstance(paths, (str, os.PathLike))
    paths = [os.fspath(paths)] if single else [os.fspath(p) for p in paths]
    if not paths:
        raise error("no input file to record; read the input first.")
    for p in paths:
        if not files.isfile(p):
            raise error(f"{p}: no such file.")
    sizes, mtimes = [files.getsize(p) for p in paths], [files.getmtime(p) for p in paths]
    if len(paths) == 1:
        return {"input_file": files.abspath(paths[0]), "input_size": sizes[0], "input_mtime": mtimes[0],
                "input_sha256": file_sha256(paths[0])}
    absolute = [files.abspath(p) for p in paths]
    root = os.path.commonpath([os.path.dirname(p) for p in absolute])
    digest = hashlib.sha256()
    for rel, p in sorted((os.path.relpath(p, root), p) for p in absolute):
        digest.update(f"{rel}\t{file_sha256(p)}\n".encode("utf-8"))
    return {"input_file": root, "input_files": len(paths), "input_size": sum(sizes),
            "input_mtime": max(mtimes), "input_sha256": digest.hexdigest()}



def sidecar_path(feature_file):
    """`<feature_file>.json`: the settings record of a feature file."""
    return os.fspath(feature_file) + ".json"


def write_feature_file(records, path, kind, settings, extra=None, companions=None):
    """Writes serialized tf.train.Examples to the TFRecord `path`, then the companion files,
    then the sidecar `<path>.json` (last), each atomically. Returns the sidecar dict.

    Args:
        records: iterable of bytes (RecordEncoder.encode_int64); consumed once, streamed.
        kind: FeatureKind.
        settings: the settings record (JSON-able dict) `check_feature_file` compares.
        extra: more JSON-able sidecar entries, or a function returning them (called once
            the records are written, e.g. for summaries filled while streaming).
        companions: a function returning {suffix: str or bytes}, called after the
            records: each is written to `<path><suffix>` and its size recorded, so a
            missing or truncated companion makes the file stale. Companions an older
            sidecar listed that are not written again are removed.

    Raises:
        OutputRefused: `path` exists and is not albert_tf's own feature cache.
    """
    path = os.fspath(path)
    with outputs.replacing_file(path, outputs.FEATURE_CACHE):
        return _write_feature_file(records, path, kind, settings, extra, companions)


def _write_feature_file(records, path, kind, settings, extra, companions):
    old = read_sidecar(path, kind) or {}
    atomic.remove_own(sidecar_path(path))  # a crash below must not leave an old sidecar vouching for new files
    import tensorflow as tf

    count = 0
    with atomic.output_path(path) as tmp:
        with tf.io.TFRecordWriter(tmp) as writer:
            for record in records:
                writer.write(record)
                count += 1
        with files.open(tmp, "rb") as f:  # on disk before the rename makes it the file
            files.fsync(f)
    written = {}
    for suffix, content in ((companions() if companions else None) or {}).items():
        if isinstance(content, str):
            atomic.write_text(path + suffix, content)
        else:
            atomic.write_bytes(path + suffix, content)
        written[suffix] = files.getsize(path + suffix)
    for suffix in (old.get("companions") or {}):
        if suffix not in written:  # a companion the old sidecar lists: this cache's own file
            atomic.remove_own(path + suffix)
    sidecar = {"kind": kind.name, "format": kind.format, "settings": settings, "num_features": count,
               "record_bytes": files.getsize(path), "companions": written,
               "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    sidecar.update((extra() if callable(extra) else extra) or {})
    atomic.write_json(sidecar_path(path), sidecar)
    return sidecar


def read_sidecar(path, kind):
    """The sidecar dict of feature file `path`; None when missing, unreadable or of another kind."""
    try:
        sidecar = read_json(sidecar_path(path), "a feature file's settings sidecar")
    except (OSError, ValueError):
        return None
    return sidecar if sidecar.get("kind") == kind.name else None


def _describe_change(key, old, new):
    if key == "spm_model_sha256":
        return "the SentencePiece model changed (sha256)"
    if key == "tokenization":
        return f"the tokenization changed (version {old or 1} -> {new}: the release's encode_pieces)"
    return f"{key} {old!r} -> {new!r}"


def check_feature_file(path, settings, kind):
    """(reusable, reason): whether feature file `path` is complete and was made with
    `settings` (the module's reuse rule); reason says what differs, or "reused: ..."."""
    path = os.fspath(path)
    if not files.exists(path):
        return False, f"{path} does not exist"
    sidecar = read_sidecar(path, kind)
    if sidecar is None:
        return False, f"{sidecar_path(path)} is missing, unreadable or of another kind (an interrupted or foreign file)"
    if sidecar.get("format") != kind.format:
        return False, f"feature format {sidecar.get('format')} != {kind.format}"
    if files.getsize(path) != sidecar.get("record_bytes"):
        return False, (f"{path} is damaged: {files.getsize(path)} bytes, its sidecar says "
                       f"{sidecar.get('record_bytes')} (cut short or changed)")
    for suffix, size in (sidecar.get("companions") or {}).items():
        if not files.exists(path + suffix) or files.getsize(path + suffix) != size:
            return False, f"{path + suffix} is missing or incomplete"
    old = sidecar.get("settings") or {}
    keys = sorted(set(old) | set(settings))
    changed = [k for k in keys if k not in INFORMATIONAL and old.get(k) != settings.get(k)]
    if changed:
        parts = [_describe_change(k, old.get(k), settings.get(k)) for k in changed if k not in INPUT_CONTENT]
        if any(k in INPUT_CONTENT for k in changed):
            what = "the input's content changed (sha256)"
            if old.get("input_files") != settings.get("input_files"):
                what += f"; {old.get('input_files') or 1} -> {settings.get('input_files') or 1} input files"
            parts.append(what)
        return False, "; ".join(parts)
    if old.get("input_mtime") != settings.get("input_mtime"):
        return True, "reused: settings unchanged; the input's mtime changed but not its content"
    return True, "reused: settings and input unchanged"


@dataclasses.dataclass
class CacheOutcome:
    """load_or_build's answer: the file's sidecar, whether it was rebuilt and why (or
    "reused: ..."), and what `build` returned (None when reused)."""

    sidecar: dict
    rebuilt: bool
    reason: str
    built: object = None


def load_or_build(feature_file, settings, kind, build, also_stale=None):
    """Reuses `feature_file` when `check_feature_file` allows it (and `also_stale(sidecar)`,
    a task's extra reason to rebuild, gives None), else calls `build()` (which writes it with
    `write_feature_file`); returns a CacheOutcome saying why."""
    feature_file = os.fspath(feature_file)
    ok, reason = check_feature_file(feature_file, settings, kind)
    if ok and also_stale is not None:
        extra_reason = also_stale(read_sidecar(feature_file, kind))
        if extra_reason:
            ok, reason = False, extra_reason
    damage = record_check.damage(feature_file) if ok else None
    if damage:  # bytes changed, the size unchanged (a file cut short fails check_feature_file)
        ok, reason = False, f"damaged: {damage}"
    if ok:
        logger.info("%s: %s", feature_file, reason)
        return CacheOutcome(read_sidecar(feature_file, kind), False, reason)
    logger.info("%s: building features (%s).", feature_file, reason)
    built = build()
    sidecar = read_sidecar(feature_file, kind)
    if sidecar is None:
        raise kind.error(f"{feature_file}: the builder wrote no sidecar; it must call write_feature_file.")
    return CacheOutcome(sidecar, True, reason, built)


def read_feature_arrays(path, kind, names=None):
    """A feature TFRecord -> {name: numpy array [N, *shape]} of `names` (default: all of the
    kind's; shapes from `kind.shapes` of the sidecar's settings). Raises kind.error without a
    sidecar, for a corrupt file or a record count other than the sidecar's."""
    import tensorflow as tf

    from albert_tf.data.maps import graph_map

    path = os.fspath(path)
    sidecar = read_sidecar(path, kind)
    if sidecar is None:
        raise kind.error(f"{path}: no sidecar {sidecar_path(path)} of kind {kind.name!r}; rebuild the features.")
    shapes = {name: tuple(int(d) for d in shape) for name, shape in kind.shapes(sidecar["settings"]).items()}
    spec = {name: tf.io.FixedLenFeature([int(np.prod(shape))] if shape else [], tf.int64)
            for name, shape in shapes.items()}
    names = tuple(shapes) if names is None else tuple(names)
    parts = {name: [] for name in names}
    dataset = graph_map(tf.data.TFRecordDataset(path).batch(4096), lambda r: tf.io.parse_example(r, spec))
    try:
        for batch in dataset.as_numpy_iterator():
            for name in names:
                parts[name].append(batch[name])
    except tf.errors.OpError:
        raise kind.error(f"{path}: unreadable feature file (cut short or its bytes changed); rebuild it.") from None
    out = {}
    for name in names:
        dtype = kind.dtypes.get(name, np.int32)
        values = np.concatenate(parts[name]) if parts[name] else np.zeros((0,), np.int64)
        out[name] = values.astype(dtype).reshape((-1, *shapes[name]))
    count = len(out[names[0]]) if names else 0
    if names and count != sidecar["num_features"]:
        raise kind.error(f"{path}: {count} records, its sidecar says {sidecar['num_features']}; rebuild it.")
    return out
