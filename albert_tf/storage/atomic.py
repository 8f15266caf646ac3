"""Atomic output: a file or directory appears whole under its name, or not at all.

Every writer in albert_tf goes through this module:

    from albert_tf.storage import atomic

    atomic.write_text("out/eval_results.txt", text)
    atomic.write_json("out/eval_results.json", metrics)
    atomic.append_line("out/metrics.jsonl", json.dumps(record))
    with atomic.open_file("out/shard-00000", "wb") as f:     # streamed writes
        f.write(data)
    with atomic.output_path("out/curves.png") as tmp:        # a library writes the file
        figure.savefig(tmp)
    with atomic.output_dir("export/encoder") as tmp:         # a library writes a directory
        tf.saved_model.save(module, tmp)
    with atomic.removed_if_refused("runs/new", CheckpointMismatchError):  # a run's output_dir
        train()                      # refused at its start: what it made there is removed

Paths go through the file layer (`albert_tf.storage.files`), URLs included; which paths a
command may write at all is decided first by `albert_tf.storage.outputs`. A temporary is
`.<name>.tmp-<pid>-<random><suffix>` beside its target; on an exception it is removed and the
previous output is untouched; `sweep` removes a dead writer's temporaries and puts back a
directory a killed replacement left aside. Why it is built so: docs/outputs.md.
"""

import contextlib
import io
import json
import os
import re
import secrets
import time

from albert_tf.storage import files, space

_TMP = re.compile(r"^\.(?P<base>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)-[0-9a-f]{8}(?P<suffix>.*)$")


def _split_suffix(name):
    """'pretrainer.weights.h5' -> ('pretrainer', '.weights.h5'); 'a.png' -> ('a', '.png')."""
    for double in (".weights.h5", ".tar.gz"):
        if name.endswith(double) and len(name) > len(double):
            return name[: -len(double)], double
    stem, suffix = os.path.splitext(name)
    return (stem, suffix) if stem else (name, "")


def temporary_name(path, kind="tmp"):
    """A fresh temporary sibling of `path`: `.<name>.tmp-<pid>-<random><suffix>`."""
    directory, name = files.split(files.abspath(path))
    _, suffix = _split_suffix(name)
    return files.join(directory, f".{name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}{suffix}")


def alive(pid):
    """Whether process `pid` of this machine is alive (another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return True


def _stale(directory, name, pid):
    """Whether temporary `name` is a dead writer's: locally its process is gone; on a URL
    (another machine's process cannot be asked) it is older than files.STALE_SECONDS."""
    if not files.is_url(directory):
        return not alive(pid)
    try:
        modified = files.getmtime(files.join(directory, name))
    except Exception:  # gone meanwhile
        return False
    return modified > 0 and time.time() - modified > files.STALE_SECONDS  # 0: the store keeps no times (ram://)


def remove_own(path):
    """Removes `path` (a file or a directory tree; nothing if it is absent) that the caller
    made itself in this run (a scratch file, a cache's own companion); never a user's path."""
    files.remove(path)


def sweep(directory):
    """Removes temporaries of dead processes in `directory`; puts back a directory that a
    killed replacement left aside. Returns the names removed or restored."""
    try:
        names = files.listdir(directory) if files.isdir(directory) else []
    except (FileNotFoundError, NotADirectoryError):
        return []
    done = []
    for name in names:
        m = _TMP.match(name)
        if not m or not _stale(directory, name, int(m.group("pid"))):
            continue
        path = files.join(directory, name)
        target = files.join(directory, m.group("base"))
        if m.group("kind") == "old" and not files.exists(target):
            files.rename(path, target)  # the replacement never arrived: the old output stays
        else:
            files.remove(path)
        done.append(name)
    return done


def _prepare(path):
    directory = files.dirname(files.abspath(path))
    files.makedirs(directory)
    sweep(directory)
    return directory


def _fsync_dir(directory):
    if files.is_url(directory):
        return  # a store has no directory entries to flush
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def open_file(path, mode="w", encoding="utf-8"):
    """Opens a file whose content appears under `path` only when the block ends without
    an exception. `mode` is "w"/"wb", or "a"/"ab" to start from the current content."""
    if mode not in ("w", "wb", "a", "ab"):
        raise ValueError(f"atomic.open_file: mode must be w, wb, a or ab, got {mode!r}")
    previous = None
    if mode.startswith("a") and files.exists(path):
        previous = files.read_bytes(path)
    with output_path(path) as tmp:
        with files.open(tmp, "wb") as raw:
            if previous:
                raw.write(previous)
            f = raw if "b" in mode else io.TextIOWrapper(raw, encoding=encoding, newline="")
            yield f
            f.flush()
            files.fsync(raw)
            if f is not raw:
                f.detach()


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` atomically."""
    with open_file(path, "w") as f:
        f.write(text)
    return path


def write_bytes(path, data):
    with open_file(path, "wb") as f:
        f.write(data)
    return path


def write_json(path, obj, indent=2, sort_keys=True):
    """Writes `obj` as JSON (with a final newline) to `path` atomically."""
    return write_text(path, json.dumps(obj, indent=indent, sort_keys=sort_keys) + "\n")


def write_csv(path, rows, fieldnames=None):
    """Writes `rows` (dicts) as CSV with a header to `path` atomically; the columns are
    `fieldnames` (keys outside them ignored) or the first row's keys."""
    import csv

    fieldnames = list(fieldnames if fieldnames is not None else (rows[0] if rows else []))
    with open_file(path, "w") as f:
        writer = csv.DictWriter(f, fieldnames=fieldnames, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def append_line(path, line):
    """Appends one line to `path`: the file is always the old content, or the old content
    plus the whole new line (never a half-written line)."""
    with open_file(path, "a") as f:
        f.write(line.rstrip("\n") + "\n")
    return path


@contextlib.contextmanager
def _scratch(path):
    """A local temporary directory for the writes to URL `path` (a library writes only
    local files); removed when the block ends."""
    import tempfile

    scratch = tempfile.mkdtemp(prefix="albert_tf-")
    try:
        yield os.path.join(scratch, files.basename(path))
    finally:
        files.remove(scratch)


@contextlib.contextmanager
def output_path(path):
    """Yields a temporary file name beside `path` for a library to write; renames it to
    `path` when the block ends, removes it on an exception. For a URL the name yielded is
    local (in a scratch directory removed afterwards): the complete file is copied to its
    temporary sibling on the store and renamed (files: the object-store contract)."""
    directory = _prepare(path)
    tmp = temporary_name(path)
    with contextlib.ExitStack() as stack:
        written = stack.enter_context(_scratch(path)) if files.is_url(path) else tmp
        try:
            yield written
            if not files.exists(written):
                raise FileNotFoundError(f"nothing was written to the temporary name of {path}")
            if written != tmp:
                files.copy(written, tmp)
            files.rename(tmp, path)
            _fsync_dir(directory)
        except BaseException as e:
            space.attribute(e, path)
            files.remove(tmp)
            raise


@contextlib.contextmanager
def output_dir(path):
    """Yields a temporary directory beside `path`; on success it replaces `path` (an old
    directory there is removed only after the new one is in place). For a URL the
    directory yielded is local (a scratch directory, removed afterwards), copied to the
    store's temporary sibling when complete and moved in place, its marker last."""
    directory = _prepare(path)
    if files.exists(path) and not files.isdir(path):
        raise NotADirectoryError(f"{path} exists and is not a directory; choose another path or remove it.")
    tmp = temporary_name(path)
    if files.exists(tmp):
        raise FileExistsError(tmp)
    with contextlib.ExitStack() as stack:
        written = stack.enter_context(_scratch(path)) if files.is_url(path) else tmp
        files.makedirs(written)
        try:
            yield written
            if written != tmp:
                files.copy_tree(written, tmp)
            replace_dir(tmp, path)
        except BaseException as e:
            space.attribute(e, path)
            files.remove(tmp)
            raise
    _fsync_dir(directory)


def _first_missing(path):
    """The outermost of `path` and its ancestors that does not exist (runs/ for
    runs/mrpc when neither exists); None when `path` exists."""
    path = files.abspath(path)
    if files.lexists(path):
        return None
    while True:
        parent = files.dirname(path)
        if parent == path or parent.endswith("://") or files.lexists(parent):
            return path
        path = parent


@contextlib.contextmanager
def removed_if_refused(path, refused):
    """Runs the block; when it raises one of `refused`, removes what the block created for
    output directory `path`: the directory itself (and the ancestors it created) when it did
    not exist before, else the entries of `path` that were not there before. What existed
    before is never touched, nor is anything on another exception.

    Args:
        path: the directory the block may create or write into (None: nothing is watched).
        refused: an exception class or tuple of them.
    """
    created = _first_missing(path) if path else None
    before = None
    if path and created is None and files.isdir(path) and not files.islink(path):
        before = set(files.listdir(path))
    try:
        yield
    except refused:
        if created is not None and files.isdir(created) and not files.islink(created):
            files.remove(created)
        elif before is not None and files.isdir(path):
            for name in set(files.listdir(path)) - before:
                files.remove(files.join(path, name))
        raise


def replace_dir(source, path):
    """Moves directory `source` to `path`, replacing a directory there: the old one goes
    aside first and is deleted only once the new one has its name."""
    old = None
    if files.isdir(path):
        old = temporary_name(path, kind="old")
        files.rename(path, old)
    try:
        files.rename(source, path)
    except BaseException:
        if old:
            files.rename(old, path)
        raise
    if old:
        files.remove(old)
    return path
