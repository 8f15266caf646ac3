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

Which paths a command may write at all (new, or albert_tf's own output) is decided by
`albert_tf.storage.outputs`, before any of these writes.

The temporary name lives in the target's own directory (so the final rename never
crosses file systems) and is `.<name>.tmp-<pid>-<random><suffix>`: hidden, owned by one
process, and keeping the target's suffix (Keras insists on `.weights.h5`, matplotlib
picks the format from `.png`). On an exception the temporary is removed and the previous
output is untouched. A process killed with SIGKILL cannot clean up after itself: the
next atomic write into the same directory removes the temporaries of processes that no
longer run (`sweep`), and writers that own a directory (a run's output_dir, an export)
sweep it when they start. (Unnamed O_TMPFILE files would avoid even that, but linking
them into place fails on some file systems, this sandbox's among them.)

A directory is replaced in two renames (old aside, new in place); a kill between the
two leaves the old one under its aside name, which `sweep` puts back when nothing took
its place.
"""

import contextlib
import io
import json
import os
import re
import secrets
import shutil

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
    directory, name = os.path.split(os.path.abspath(path))
    _, suffix = _split_suffix(name)
    return os.path.join(directory, f".{name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}{suffix}")


def _alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def remove_own(path):
    """Removes `path` (a file or a directory tree; nothing if it is absent), for callers
    removing what they made themselves in this run: a scratch file, a temporary directory,
    a cache's own companion files that its sidecar lists. The one place outside the
    temporary-name machinery where albert_tf deletes; never call it on a user's path."""
    _remove(path)


def sweep(directory):
    """Removes temporaries of dead processes in `directory`; puts back a directory that a
    killed replacement left aside. Returns the names removed or restored."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    done = []
    for name in names:
        m = _TMP.match(name)
        if not m or _alive(int(m.group("pid"))):
            continue
        path = os.path.join(directory, name)
        target = os.path.join(directory, m.group("base"))
        if m.group("kind") == "old" and not os.path.exists(target):
            os.replace(path, target)  # the replacement never arrived: the old output stays
        else:
            _remove(path)
        done.append(name)
    return done


def _prepare(path):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    sweep(directory)
    return directory


def _fsync_dir(directory):
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
    if mode.startswith("a") and os.path.exists(path):
        with open(path, "rb") as f:
            previous = f.read()
    with output_path(path) as tmp:
        with open(tmp, mode[0].replace("a", "w") + "b") as raw:
            if previous:
                raw.write(previous)
            f = raw if "b" in mode else io.TextIOWrapper(raw, encoding=encoding, newline="")
            yield f
            f.flush()
            os.fsync(raw.fileno())
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
def output_path(path):
    """Yields a temporary file name beside `path` for a library to write; renames it to
    `path` when the block ends, removes it on an exception."""
    directory = _prepare(path)
    tmp = temporary_name(path)
    try:
        yield tmp
        if not os.path.exists(tmp):
            raise FileNotFoundError(f"nothing was written to the temporary name of {path}")
        os.replace(tmp, path)
        _fsync_dir(directory)
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def output_dir(path):
    """Yields a temporary directory beside `path`; on success it replaces `path` (an old
    directory there is removed only after the new one is in place)."""
    directory = _prepare(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(f"{path} exists and is not a directory; choose another path or remove it.")
    tmp = temporary_name(path)
    os.makedirs(tmp)
    try:
        yield tmp
        replace_dir(tmp, path)
    except BaseException:
        _remove(tmp)
        raise
    _fsync_dir(directory)


def _first_missing(path):
    """The outermost of `path` and its ancestors that does not exist (runs/ for
    runs/mrpc when neither exists); None when `path` exists."""
    path = os.path.abspath(path)
    if os.path.lexists(path):
        return None
    while True:
        parent = os.path.dirname(path)
        if parent == path or os.path.lexists(parent):
            return path
        path = parent


@contextlib.contextmanager
def removed_if_refused(path, refused):
    """Runs the block; when it raises one of `refused`, removes what the block created for
    output directory `path`: the directory itself (and its ancestors that it created too)
    when it did not exist before, else the entries of `path` that were not there before.
    So a run refused at its start (e.g. for its --init_checkpoint) leaves no output
    directory, and no new file (albert_config.json, its marker) in a directory that
    existed. What existed before is never touched, nor is anything on another exception
    (an interrupted or diverged run keeps what it wrote).

    Args:
        path: the directory the block may create or write into (None: nothing is watched).
        refused: an exception class or tuple of them.
    """
    created = _first_missing(path) if path else None
    before = None
    if path and created is None and os.path.isdir(path) and not os.path.islink(path):
        before = set(os.listdir(path))
    try:
        yield
    except refused:
        if created is not None and os.path.isdir(created) and not os.path.islink(created):
            shutil.rmtree(created, ignore_errors=True)
        elif before is not None and os.path.isdir(path):
            for name in set(os.listdir(path)) - before:
                _remove(os.path.join(path, name))
        raise


def replace_dir(source, path):
    """Moves directory `source` to `path`, replacing a directory there: the old one goes
    aside first and is deleted only once the new one has its name."""
    old = None
    if os.path.isdir(path):
        old = temporary_name(path, kind="old")
        os.replace(path, old)
    try:
        os.replace(source, path)
    except BaseException:
        if old:
            os.replace(old, path)
        raise
    if old:
        _remove(old)
    return path
