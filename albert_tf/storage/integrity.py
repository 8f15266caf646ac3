"""Damaged files: a checkpoint or a weights file that is cut short, has changed bytes or lacks
a part is named with what is wrong and what to do (`DamagedFileError`, a ValueError: exit
status 2), never with a library's internal text; a damaged training checkpoint is set aside
(kept, never deleted); albert_tf's `.weights.h5` files carry a sha256 of their weights.

    with integrity.reading_checkpoint(prefix, "--init_checkpoint=run", fix):  # reading errors named
        tf.train.Checkpoint(model=model).read(prefix)
    path, damaged = integrity.restore_newest(run_dir, restore, trains=True)  # resume past damage
    integrity.set_aside(prefix)   # run/ckpt-4.* -> run/ckpt-4.damaged-<UTC time>/ (run/best -> run/best.damaged-...)
    integrity.seal_weights_file(tmp)         # after model.save_weights(tmp): the weights' sha256
    integrity.check_weights_file(path, fix)  # before loading: DamagedFileError when it differs
    with integrity.sizes_recorded(paths, kind):  # writing file outputs: each one's size into its marker
        integrity.forget_sizes(paths, kind)  # just before the new files take their names
    integrity.changed_size(path, kind)       # before reading: what differs from the recorded size, or None

Why it is built so (which errors TensorFlow and h5py raise for each kind of damage): docs/damaged_files.md.
"""

import contextlib
import hashlib
import os
import re
import time

from albert_tf.storage import atomic, files, outputs

# the attribute of a `.weights.h5` file's root group that holds the sha256 of its weights
# (`weights_digest`); a file without it (written before albert_tf kept one, or by another
# program) loads unchecked
DIGEST_ATTRIBUTE = "albert_tf_weights_sha256"
DAMAGED = ".damaged-"
_SHARD = re.compile(r"\.data-(\d+)-of-(\d+)$")


# what a reader of a damaged checkpoint is told to do
READER_FIX = ("Restore it from a copy, or name an older checkpoint (its prefix, e.g. run/ckpt-N); the training "
              "command started again on its run directory sets a damaged checkpoint aside and continues from the "
              "newest one that restores.")
_STEP = re.compile(r"^ckpt-(\d+)$")


class DamagedFileError(ValueError):
    """A file that cannot be read as what it should be (cut short, bytes changed, a part
    missing); the message names it, what is wrong and what to do."""


# ----------------------------------------------------------------------------------------------------------
# TensorFlow checkpoints


def is_damage(error):
    """Whether `error`, raised reading a checkpoint, says it is damaged: TensorFlow 2.21 raises
    IndexError for a data file cut short, DataLossError for changed bytes (InternalError where
    they fall in a value that then does not decode), NotFoundError for a missing file, and its
    checkpoint reader a bare OpError (code UNKNOWN) for an index cut short or changed and for
    changed data (docs/damaged_files.md). A storage error (UnavailableError,
    PermissionDeniedError, ...) is none."""
    import tensorflow as tf

    if isinstance(error, (IndexError, tf.errors.DataLossError, tf.errors.NotFoundError, tf.errors.OutOfRangeError,
                          tf.errors.InternalError)):  # Internal: a changed byte in a value that does not decode
        return True
    return type(error) is tf.errors.OpError


def checkpoint_damage(prefix, error=None):
    """What is wrong with the checkpoint at `prefix`, in plain words: from its files (a part
    missing, an index that does not open), else from `error` reading it raised."""
    name = files.basename(prefix)
    if not files.exists(prefix + ".index"):
        return f"its index file {name}.index is missing"
    directory = files.dirname(prefix)
    shards = [n for n in files.listdir(directory) if n.startswith(name + ".data-") and _SHARD.search(n)]
    if not shards:
        return f"its data file ({name}.data-*) is missing"
    count = int(_SHARD.search(shards[0]).group(2))
    expected = [f"{name}.data-{i:05d}-of-{count:05d}" for i in range(count)]
    missing = [shard for shard in expected if shard not in shards]
    if len(missing) > 1:
        return f"its data files {', '.join(missing)} are missing"
    if missing:
        return f"its data file {missing[0]} is missing"
    import tensorflow as tf

    try:
        tf.compat.v1.train.NewCheckpointReader(prefix)
    except Exception as e:  # noqa: BLE001 - whatever the index's reader raises, it does not open
        if not is_damage(e):
            raise
        return f"its index file {name}.index is cut short or changed"
    if isinstance(error, IndexError):
        return "its data is cut short"
    if isinstance(error, tf.errors.InternalError):
        return "its data changed (a value does not decode)"
    return "its data changed (a checksum does not match)"


@contextlib.contextmanager
def reading_checkpoint(prefix, source, fix):
    """Runs the block that reads the checkpoint at `prefix`; TensorFlow's errors for a damaged
    checkpoint become DamagedFileError naming `source` (e.g. "--init_checkpoint=run/ckpt-4"),
    what is wrong and `fix` (what to do)."""
    try:
        yield
    except Exception as e:
        if not is_damage(e):
            raise
        raise DamagedFileError(f"{source}: the checkpoint {prefix} is damaged: {checkpoint_damage(prefix, e)}. "
                               f"{fix}") from None


def read_variables(prefix, roots=None):
    """Reads every variable of the checkpoint at `prefix` (those under the objects `roots`,
    e.g. {"model"}, when given); TensorFlow checks each one's checksum and raises its error
    (`is_damage`) for one that does not read."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    for name in reader.get_variable_to_shape_map():
        if roots is None or name.split("/", 1)[0] in roots:
            reader.get_tensor(name)


def check_checkpoint(prefix, source, root=None):
    """`read_variables` (those under object `root`, e.g. "model", when given):
    DamagedFileError naming `source` when one does not read."""
    with reading_checkpoint(prefix, source, READER_FIX):
        read_variables(prefix, None if root is None else {root})


def check_named_checkpoint(path):
    """DamagedFileError when `path` is a prefix whose data files are there but not its index,
    or a directory whose `checkpoint` state file names such a prefix in it."""
    prefix = _state(path)[0] if files.isdir(path) else path
    if prefix and not files.exists(prefix + ".index") and files.glob(prefix + ".data-*"):
        raise DamagedFileError(f"{path}: the checkpoint {prefix} is damaged: {checkpoint_damage(prefix)}. "
                               f"{READER_FIX}")


def _state(directory):
    """(the newest prefix, every prefix) that the `checkpoint` state file of `directory` names
    in the directory itself, joined to `directory` as TensorFlow does; (None, []) without one."""
    import tensorflow as tf

    state = tf.train.get_checkpoint_state(directory)
    if state is None:
        return None, []
    here = files.abspath(directory)

    def inside(path):
        return files.join(directory, files.basename(path)) if files.dirname(files.abspath(path)) == here else None

    named = [p for p in map(inside, state.all_model_checkpoint_paths) if p]
    return (inside(state.model_checkpoint_path) if state.model_checkpoint_path else None), named


def checkpoint_candidates(output_dir):
    """The training checkpoints (`ckpt-N` prefixes) of `output_dir` to resume from, newest
    first: the one its `checkpoint` state file names, then the others it names or that have an
    index, by step. Each has its index or its data files (a damaged one may lack the other)."""
    newest, named = _state(output_dir)
    found = [files.join(output_dir, n[: -len(".index")]) for n in files.listdir(output_dir)
             if n.endswith(".index")] if files.isdir(output_dir) else []
    steps = {}
    for prefix in named + found:
        m = _STEP.match(files.basename(prefix))
        if m and prefix != newest:
            steps[prefix] = int(m.group(1))
    ordered = ([newest] if newest else []) + sorted(steps, key=steps.get, reverse=True)
    return [p for p in ordered if files.exists(p + ".index") or files.glob(p + ".data-*")]


def newest_checkpoint(output_dir):
    """The newest training checkpoint (`ckpt-N` prefix) of a run directory, or None: the
    one its `checkpoint` state file names, else (a run stopped after a checkpoint's files
    were complete, TF writes the .index last, but before the state file named it) the
    highest ckpt-N (`checkpoint_candidates`, with an index)."""
    return next((p for p in checkpoint_candidates(output_dir) if files.exists(p + ".index")), None)


def damage_of(prefix, read):
    """What is wrong with the checkpoint at `prefix` (`checkpoint_damage`) when `read(prefix)`
    raises a reading error (`is_damage`); None when it reads."""
    try:
        read(prefix)
    except Exception as e:
        if not is_damage(e):
            raise
        return checkpoint_damage(prefix, e)
    return None


def restore_newest(output_dir, restore, trains):
    """Calls `restore(prefix)` on the training checkpoints of `output_dir`, newest first
    (`checkpoint_candidates`), until one does not raise a reading error. Returns (that
    prefix or None, [(prefix, what is wrong)] for each damaged one before it, to be named
    and set aside: `set_aside`). Nothing is moved here: every worker of a multi-worker run
    chooses from the same files before its chief moves any.

    Raises:
        DamagedFileError: checkpoints exist and none restores (each named: never a silent
            start from step 0); or, when not `trains` (a run that only reads), the newest
            does not.
    """
    damaged = []
    for prefix in checkpoint_candidates(output_dir):
        what = damage_of(prefix, restore)
        if what is None:
            return prefix, damaged
        damaged.append((prefix, what))
        if not trains:
            raise DamagedFileError(f"--output_dir={output_dir}: the newest checkpoint {prefix} is damaged: {what}. "
                                   f"{READER_FIX}")
    if damaged:
        raise DamagedFileError(
            f"--output_dir={output_dir}: no checkpoint restores: "
            f"{'; '.join(f'{prefix} ({what})' for prefix, what in damaged)}. They are left as they are: restore them "
            "from a copy, or start anew in another --output_dir (or move them away).")
    return None, []


def set_aside(path, chief=True):
    """Sets the damaged checkpoint `path` aside, kept: a prefix (`set_aside_checkpoint`), or
    the directory that holds one with its record (`run/best`), renamed `damaged_name(path)`
    whole. Returns the console's words: "set aside as <where>"; where not `chief` (a worker of
    a multi-worker run, which writes nothing in the run: its chief does) it moves nothing and
    returns "the chief sets it aside"."""
    if not chief:
        return "the chief sets it aside"
    if files.isdir(path):
        return f"set aside as {files.rename(path, damaged_name(path))}"
    return f"set aside as {set_aside_checkpoint(path)}"


def damaged_name(prefix, when=None):
    """`run/ckpt-4` -> `run/ckpt-4.damaged-20261207T120000Z`: where `set_aside_checkpoint` keeps it."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))
    return f"{prefix}{DAMAGED}{stamp}"


def set_aside_checkpoint(prefix):
    """Moves the files of the damaged checkpoint `prefix` (`ckpt-4.index`, `ckpt-4.data-*`)
    into the new directory `damaged_name(prefix)` beside them, where no reader of checkpoints
    looks (kept for the user; never deleted), and drops `prefix` from the directory's
    `checkpoint` state file. Returns that directory."""
    directory, name = files.split(prefix)
    target = damaged_name(prefix)
    files.makedirs(target)
    for entry in files.listdir(directory):
        if entry == name + ".index" or entry.startswith(name + ".data-"):
            files.rename(files.join(directory, entry), files.join(target, entry))
    _forget(directory, prefix)
    return target


def _forget(directory, prefix):
    """Rewrites the `checkpoint` state file of `directory` without `prefix` (TensorFlow's
    text format; the paths in the directory relative, as CheckpointManager writes them)."""
    import tensorflow as tf
    from google.protobuf import text_format

    state = tf.train.get_checkpoint_state(directory)
    if state is None:
        return
    here, prefix = files.abspath(directory), files.abspath(prefix)

    def relative(path):
        return files.basename(path) if files.dirname(files.abspath(path)) == here else path

    paths = list(state.all_model_checkpoint_paths)
    stamps = list(state.all_model_checkpoint_timestamps)
    stamps += [None] * (len(paths) - len(stamps))
    kept = [(relative(p), t) for p, t in zip(paths, stamps) if files.abspath(p) != prefix]
    newest = state.model_checkpoint_path
    del state.all_model_checkpoint_paths[:]
    del state.all_model_checkpoint_timestamps[:]
    state.all_model_checkpoint_paths.extend(p for p, _ in kept)
    state.all_model_checkpoint_timestamps.extend(t for _, t in kept if t is not None)
    if not newest or files.abspath(newest) == prefix:
        state.model_checkpoint_path = kept[-1][0] if kept else ""
    else:
        state.model_checkpoint_path = relative(newest)
    atomic.write_text(files.join(directory, "checkpoint"), text_format.MessageToString(state))


# ----------------------------------------------------------------------------------------------------------
# .weights.h5 files


def weights_digest(h5_file):
    """The sha256 of the weights in the open h5py File `h5_file`: every dataset's path, dtype,
    shape and bytes, in path order."""
    import h5py
    import numpy as np

    datasets = []
    h5_file.visititems(lambda name, obj: datasets.append(name) if isinstance(obj, h5py.Dataset) else None)
    digest = hashlib.sha256()
    for name in sorted(datasets):
        value = np.asarray(h5_file[name][()])
        digest.update(f"{name}\t{value.dtype.str}\t{value.shape}\n".encode("utf-8"))
        digest.update(np.ascontiguousarray(value).tobytes())
    return digest.hexdigest()


def seal_weights_file(path):
    """Records the sha256 of the weights in the local `.weights.h5` file `path` (just
    written by Keras' save_weights, before it takes its name) in the file itself."""
    import h5py

    with h5py.File(os.fspath(path), "r+") as f:
        f.attrs[DIGEST_ATTRIBUTE] = weights_digest(f)


@contextlib.contextmanager
def opened_weights_file(path, fix):
    """The `.weights.h5` file `path` open for reading (h5py File); a file h5py cannot open
    (cut short, changed) is DamagedFileError naming it and `fix`."""
    import h5py

    path = os.fspath(path)
    with contextlib.ExitStack() as stack:  # a URL is read through the file layer (h5py takes a file object)
        source = stack.enter_context(files.open(path, "rb")) if files.is_url(path) else path
        try:
            f = stack.enter_context(h5py.File(source, "r"))
        except OSError as e:
            if not files.isfile(path):
                raise
            raise DamagedFileError(f"{path}: damaged: not a readable weights file (cut short or changed). {fix}") \
                from e
        yield f


def check_weights_file(path, fix):
    """Checks the `.weights.h5` file `path` against the sha256 albert_tf recorded in it (a
    file without one passes): DamagedFileError naming it and `fix` when it differs or the
    file cannot be read."""
    with opened_weights_file(path, fix) as f:
        recorded = f.attrs.get(DIGEST_ATTRIBUTE)
        if recorded is None:
            return
        try:
            found = weights_digest(f)
        except (OSError, RuntimeError, ValueError) as e:
            raise DamagedFileError(f"{path}: damaged: its weights cannot be read (cut short or changed). {fix}") \
                from e
    if isinstance(recorded, bytes):
        recorded = recorded.decode("ascii")
    if found != recorded:
        raise DamagedFileError(f"{path}: damaged: its weights changed since albert_tf wrote it (their sha256 "
                               f"{found[:12]}... is not the recorded {recorded[:12]}...). {fix}")


# ----------------------------------------------------------------------------------------------------------
# File outputs' sizes (pretraining data): a file on a store checked without reading it

SIZE = "size"  # the marker's key: the file's size in bytes when albert_tf had written it whole


def _keep_size(path, kind, size):
    """Rewrites the marker of file output `path` of `kind` with `size` as its SIZE (None:
    without one) where that changes it."""
    marker = outputs.read_marker(path, kind) or {"kind": kind}
    if marker.get(SIZE) == size:
        return
    marker.pop(SIZE, None)
    if size is not None:
        marker[SIZE] = size
    atomic.write_json(outputs.marker_path(path, kind), marker)


@contextlib.contextmanager
def sizes_recorded(paths, kind):
    """Around writing file outputs `paths` of `kind` (marked, storage.outputs): each file's
    size goes into its marker once the block completes (`changed_size` compares it)."""
    yield
    for path in paths:
        _keep_size(path, kind, files.getsize(path))


def forget_sizes(paths, kind):
    """Drops the sizes the markers of file outputs `paths` of `kind` recorded, just before new
    files replace them (until `sizes_recorded` records theirs); a command that fails before
    leaves the old files and markers as they were."""
    for path in paths:
        _keep_size(path, kind, None)


def changed_size(path, kind):
    """What differs between file output `path` of `kind` and the size its marker recorded,
    naming the file, or None: the same size, or none recorded (a marker of albert_tf 0.2.0,
    or no marker: a file another program wrote)."""
    recorded = (outputs.read_marker(path, kind) or {}).get(SIZE)
    if not isinstance(recorded, int):
        return None
    size = files.getsize(path)
    if size == recorded:
        return None
    what = "cut short" if size < recorded else "longer than albert_tf wrote it"
    return (f"{path}: {what}: {size} bytes, where albert_tf wrote {recorded} (the size its marker "
            f"{files.basename(outputs.marker_path(path, kind))} records)")
