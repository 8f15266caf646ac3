"""A write that fails for space (a full disk or an exceeded quota), said plainly.

Python's OSError (errno ENOSPC or EDQUOT), TensorFlow's error of a C++ write ("No space left on
device", "Disk quota exceeded": a ResourceExhaustedError) and h5py's OSError are all the same
fault to the user. `disk_full(error)` recognises it and gives a `DiskFull` that names the
directory; the entry points end the command with its own exit status (albert_tf.cli).

    with space.partial_files_removed(run_dir, "ckpt-4.", "ckpt-4_temp"):   # a library writes there
        manager.save(4)
    with space.naming(path):               # a Python write whose error would not name its file
        f.write(data)
    with space.reported(path, note):       # a Beam worker's write: note(path, quota) in place of the error
        f.write(data)
    full = space.disk_full(error, then="The newest complete checkpoint is ...")   # DiskFull or None

What a command writes goes to temporary names first (storage.atomic) and is removed when the
write fails, so a full disk leaves what was there before and nothing half written; the same
command runs again once there is room (docs/exit_status.md).
"""

import contextlib
import errno
import gc
import io
import os
import re
import sys

from albert_tf.compat import is_tensorflow_error
from albert_tf.storage import files

_ERRNOS = {errno.ENOSPC: False, errno.EDQUOT: True}  # errno -> whether a quota (not the disk) is full
_TEXTS = {"No space left on device": False, "Disk quota exceeded": True}
# where the libraries name the file in their text: TensorFlow "PATH; No space left on device",
# h5py "filename = 'PATH'"
_PATH_IN_TEXT = re.compile(r"filename = '(?P<h5>[^']+)'|(?P<tf>[^\s;{}']+); (?:No space left|Disk quota)")
_WHERE = "_albert_tf_space_path"  # the path `naming` attaches to an error that names none


REMOVED = "The files this command was writing were removed; what was there before is unchanged."


class DiskFull(Exception):
    """A write failed because the disk (or the user's quota) is full.

    Attributes:
        directory: the directory the write went to (the nearest that still exists once the
            partial files are removed), or None when the error named no path.
        quota: whether a quota, not the disk itself, is exhausted.
        what: the message's first sentence (what is full), without its advice.
        then: the advice the raiser gave, or None (the general advice is the message's).
    """

    def __init__(self, path, quota, then=None):
        self.directory = _existing_directory(path)
        self.quota = quota
        self.then = then
        where = self.directory or "the output"
        self.what = f"the disk quota for {where} is exceeded" if quota else f"no space left on the disk of {where}"
        then = then or f"{REMOVED} Free space, then run the same command again."
        super().__init__(f"{self.what}. {then}")


def _existing_directory(path):
    """The directory of file `path`, or its nearest ancestor that exists (a temporary
    directory of the write is gone by now)."""
    if not path:
        return None
    directory = files.dirname(files.abspath(path))
    with contextlib.suppress(Exception):  # a store that cannot be asked: the directory as it is named
        while not files.exists(directory) and files.dirname(directory) != directory:
            directory = files.dirname(directory)
    return directory


def _causes(error, past_none=False):
    """`error` and what it was raised from or while handling (bounded; not past `from None`
    unless `past_none`)."""
    seen = []
    while error is not None and len(seen) < 8 and error not in seen:
        seen.append(error)
        stop = error.__suppress_context__ and not past_none
        error = error.__cause__ if error.__cause__ is not None or stop else error.__context__
    return seen


def _space_fault(error):
    """(path or None, quota) when `error` itself is a write that failed for space, else None."""
    if isinstance(error, OSError):
        text, quota = str(error), _ERRNOS.get(error.errno)
    elif is_tensorflow_error(error):
        text, quota = str(error.message), None
    else:
        return None
    if quota is None:
        quota = next((q for t, q in _TEXTS.items() if t in text), None)
        if quota is None:
            return None
    path = getattr(error, "filename", None) or getattr(error, _WHERE, None)
    if not path:
        found = _PATH_IN_TEXT.search(text)
        path = found and (found.group("h5") or found.group("tf"))
    return path, quota


def disk_full(error, then=None):
    """A `DiskFull` for `error` when it (or what it was raised from) is a write that failed
    for space, else None. `then`: what to do, in place of the default (free space, run the
    same command again); a DiskFull given is returned as it is."""
    for cause in _causes(error):
        if isinstance(cause, DiskFull):
            return cause
        fault = _space_fault(cause)
        if fault is not None:
            return DiskFull(*fault, then=then)
    return None


def free_quietly(error):
    """Frees what the finished frames of `error` (and of what it was raised from) hold, their
    callers' too (Keras cuts its own frames out of a traceback: they hang on as callers),
    saying nothing: a library whose file object is freed then (h5py) reports the write's
    failure again, with its own text."""
    with contextlib.redirect_stderr(io.StringIO()):
        hook, sys.unraisablehook = sys.unraisablehook, lambda unraisable: None
        try:
            _close_removed_hdf5_files()
            for cause in _causes(error, past_none=True):
                tb = cause.__traceback__
                while tb is not None:
                    frame = tb.tb_frame
                    with contextlib.suppress(RuntimeError):  # an executing frame: the caller's own, left as it is
                        while frame is not None:
                            frame.clear()
                            frame = frame.f_back
                    tb = tb.tb_next
            gc.collect()
        finally:
            sys.unraisablehook = hook


def _close_removed_hdf5_files():
    """Closes the files HDF5 still holds open whose temporaries are removed: a write h5py could not
    finish leaves its file open, and freed only later it crashes the process as it exits."""
    h5py = sys.modules.get("h5py")
    if h5py is None:
        return
    for file_id in h5py.h5f.get_obj_ids(types=h5py.h5f.OBJ_FILE):
        with contextlib.suppress(Exception):
            if not files.exists(os.fsdecode(file_id.name)):
                h5py.File(file_id).close()  # with every object open in it


def attribute(error, path):
    """Attributes `error` to a write to `path` for `disk_full`'s message, unless it names a
    file itself (a buffered write's error does not) or was attributed already."""
    if not getattr(error, "filename", None) and not hasattr(error, _WHERE):
        with contextlib.suppress(AttributeError):
            setattr(error, _WHERE, path)


@contextlib.contextmanager
def naming(path):
    """Around a write to `path`: its error is attributed to `path` (`attribute`)."""
    try:
        yield
    except Exception as e:
        attribute(e, path)
        raise


@contextlib.contextmanager
def reported(path, report):
    """Around a write to `path` whose error cannot reach the command as it is (a Beam worker's:
    the runner prints its traceback and wraps it in its own text): when it fails for space,
    `path` is removed and `report(path, quota)` called in place of the error; any other error
    is raised."""
    try:
        yield
    except Exception as e:
        fault = _space_fault(e)
        if fault is None:
            raise
        files.remove(path)
        report(path, fault[1])


@contextlib.contextmanager
def partial_files_removed(directory, *prefixes):
    """Around a library's write into `directory` (a checkpoint's save): when it fails, the
    entries it added whose names start with one of `prefixes` are removed (TensorFlow
    leaves `ckpt-N_temp/` and partial `ckpt-N.*` files); what was there before stays."""
    before = set(files.listdir(directory)) if files.isdir(directory) else set()
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            for name in set(files.listdir(directory) if files.isdir(directory) else ()) - before:
                if name.startswith(prefixes):
                    files.remove(files.join(directory, name))
        raise
