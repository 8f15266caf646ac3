"""The one file layer: every path albert_tf reads or writes (a local path or a URL) goes here.

A local path uses the standard library (TensorFlow is not imported); a path with a URL scheme
(gs://, s3://, hdfs://, ram://) goes through `tf.io.gfile`, imported only then. `join` keeps
"scheme://".

    files.exists(p); files.isdir(p); files.isfile(p); files.getsize(p); files.listdir(p)
    files.glob("gs://b/text/*.txt"); files.makedirs(p); files.remove(p)  # a file or a tree
    files.read_bytes(p); files.read_text(p); with files.open(p, "rb") as f: ...
    files.rename(src, dst); files.copy(src, dst); files.join("gs://b", "run", "ckpt")
    files.check_reachable(p, "--output_dir", write=True)   # before the work: exit 2, bounded

The contract on an object store (a rename is a copy: temporaries, a directory copied file by
file with its marker last, stale temporaries after STALE_SECONDS, the probe bounded by
PROBE_SECONDS): docs/outputs.md.
"""

import builtins
import contextlib
import glob as _glob
import io
import os
import shutil
import threading

STALE_SECONDS = 24 * 3600
PROBE_SECONDS = 30


class UnreachablePath(ValueError):
    """A path whose store does not answer, refuses it or cannot be written; names the flag."""


def is_url(path):
    """Whether `path` has a URL scheme ("gs://b/x"); "file://" is a URL too (gfile serves it)."""
    return "://" in os.fspath(path)


def _gfile():
    import tensorflow as tf

    return tf.io.gfile


def _split_url(path):
    scheme, rest = path.split("://", 1)
    return scheme + "://", rest


def join(path, *parts):
    """os.path.join for a local path; for a URL, "/"-joined with the scheme kept."""
    path = os.fspath(path)
    if not is_url(path):
        return os.path.join(path, *parts)
    for part in parts:
        part = os.fspath(part)
        if is_url(part):
            path = part
        elif part:
            path = path.rstrip("/") + "/" + part.lstrip("/") if not path.endswith("://") else path + part
    return path


def split(path):
    """(directory, name); for a URL "gs://b/a/x" -> ("gs://b/a", "x")."""
    path = os.fspath(path)
    if not is_url(path):
        return os.path.split(path)
    scheme, rest = _split_url(path.rstrip("/") if not path.endswith("://") else path)
    head, _, name = rest.rpartition("/")
    return scheme + head, name


def store(path):
    """What answers for `path`: "gs://bucket" for a URL, "" (this machine) for a local path."""
    path = os.fspath(path)
    if not is_url(path):
        return ""
    scheme, rest = _split_url(path)
    return scheme + rest.split("/", 1)[0]


def dirname(path):
    return split(path)[0]


def basename(path):
    return split(path)[1]


def abspath(path):
    """os.path.abspath for a local path; a URL as it is (without a trailing "/")."""
    path = os.fspath(path)
    return path.rstrip("/") if is_url(path) else os.path.abspath(path)


def realpath(path):
    """os.path.realpath for a local path; a URL as it is (stores have no links)."""
    path = os.fspath(path)
    return abspath(path) if is_url(path) else os.path.realpath(os.path.abspath(path))


def sep(path):
    return "/" if is_url(path) else os.sep


def _ram(path):
    return path.startswith("ram://")


def _ram_exists(path):
    """TensorFlow's ram:// (a test filesystem) answers exists and isdir for any prefix of a
    name ("ram://b/ck" exists when "ram://b/ckpt-2.index" does); its glob does not."""
    g = _gfile()
    path = path.rstrip("/")
    return bool(g.glob(path)) or bool(g.glob(path + "/*"))


def exists(path):
    path = os.fspath(path)
    if not is_url(path):
        return os.path.exists(path)
    return _ram_exists(path) if _ram(path) else _gfile().exists(path)


def lexists(path):
    """Whether anything is at `path` (a broken local link counts)."""
    path = os.fspath(path)
    return exists(path) if is_url(path) else os.path.lexists(path)


def islink(path):
    path = os.fspath(path)
    return False if is_url(path) else os.path.islink(path)


def isdir(path):
    path = os.fspath(path)
    if not is_url(path):
        return os.path.isdir(path)
    g = _gfile()
    if _ram(path):
        path = path.rstrip("/")
        return bool(g.glob(path + "/*")) or (bool(g.glob(path)) and g.stat(path).is_directory)
    return g.isdir(path)


def isfile(path):
    path = os.fspath(path)
    if not is_url(path):
        return os.path.isfile(path)
    return exists(path) and not isdir(path)


def getsize(path):
    path = os.fspath(path)
    return _gfile().stat(path).length if is_url(path) else os.path.getsize(path)


def getmtime(path):
    """Seconds since the epoch of the last change of `path`."""
    path = os.fspath(path)
    return _gfile().stat(path).mtime_nsec / 1e9 if is_url(path) else os.path.getmtime(path)


def listdir(path):
    """The names in directory `path` (gfile's trailing "/" of subdirectories dropped)."""
    path = os.fspath(path)
    if is_url(path):
        return [n.rstrip("/") for n in _gfile().listdir(path)]
    return os.listdir(path)


def walk(top):
    """(directory, [subdirectory names], [file names]) from `top` down."""
    top = os.fspath(top)
    if not is_url(top):
        yield from os.walk(top)
        return
    for directory, subdirs, names in _gfile().walk(top):
        yield directory, [d.rstrip("/") for d in subdirs], list(names)


def glob(pattern):
    """The paths matching `pattern`, sorted; a local name that exists as given (even one
    holding [ or *) is itself."""
    pattern = os.fspath(pattern)
    if is_url(pattern):
        return sorted(_gfile().glob(pattern))
    if os.path.exists(pattern):
        return [pattern]
    return sorted(_glob.glob(pattern))


def makedirs(path):
    """Creates directory `path` and its parents (nothing when it is there)."""
    path = os.fspath(path)
    if is_url(path):
        _gfile().makedirs(path)
    else:
        os.makedirs(path, exist_ok=True)


def open(path, mode="r", encoding="utf-8", errors=None, newline=None):  # noqa: A001 (the layer's open)
    """A file object of `path`: builtins.open locally; for a URL a gfile.GFile, in text
    modes wrapped to decode/encode `encoding`."""
    path = os.fspath(path)
    if not is_url(path):
        if "b" in mode:
            return builtins.open(path, mode)
        return builtins.open(path, mode, encoding=encoding, errors=errors, newline=newline)
    mode = mode.replace("t", "")
    raw = _Raw(_gfile().GFile(path, mode.replace("b", "") + "b"), mode.startswith("r"))
    buffered = io.BufferedReader(raw) if mode.startswith("r") else io.BufferedWriter(raw)
    if "b" in mode:
        return buffered
    return io.TextIOWrapper(buffered, encoding=encoding, errors=errors, newline=newline)


class _Raw(io.RawIOBase):
    """A gfile.GFile as a raw io stream (for io's buffered and text wrappers)."""

    def __init__(self, f, reads):
        self._f = f
        self._reads = reads

    def readable(self):
        return self._reads

    def writable(self):
        return not self._reads

    def readinto(self, b):
        data = self._f.read(len(b))
        b[:len(data)] = data
        return len(data)

    def write(self, b):
        self._f.write(bytes(b))
        return len(b)

    def close(self):
        if not self.closed:
            try:
                self._f.close()
            finally:
                super().close()


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def read_text(path, encoding="utf-8", errors=None):
    return read_bytes(path).decode(encoding, errors or "strict")


def write_bytes(path, data):
    """Writes `data` to `path` directly (not atomic: albert_tf.storage.atomic is)."""
    with open(path, "wb") as f:
        f.write(data)
    return path


def fsync(f):
    """Flushes file object `f` to its store (os.fsync locally, flush for gfile)."""
    f.flush()
    with contextlib.suppress(OSError, AttributeError, io.UnsupportedOperation):
        os.fsync(f.fileno())


def remove(path):
    """Removes file or tree `path`; nothing when it is absent."""
    path = os.fspath(path)
    if is_url(path):
        g = _gfile()
        if g.isdir(path):
            g.rmtree(path)
        elif g.exists(path):
            g.remove(path)
        return
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def copy(source, target):
    """Copies file `source` to `target` (replacing a file there)."""
    source, target = os.fspath(source), os.fspath(target)
    if is_url(source) or is_url(target):
        _gfile().copy(source, target, overwrite=True)
    else:
        shutil.copyfile(source, target)
    return target


MARKER = ".albert_tf_output.json"  # outputs.MARKER: copied last (the contract above)


def rename(source, target):
    """Moves file or directory `source` to `target`, replacing a file there (os.replace
    locally; on a URL a copy and a delete, a directory's files one by one, its marker
    last)."""
    source, target = os.fspath(source), os.fspath(target)
    if not (is_url(source) or is_url(target)):
        os.replace(source, target)
        return target
    g = _gfile()
    if not g.isdir(source):
        g.rename(source, target, overwrite=True)
        return target
    if g.exists(target):
        raise FileExistsError(f"{target} exists; a directory is moved only to a new name.")
    copy_tree(source, target)
    g.rmtree(source)
    return target


def copy_tree(source, target):
    """Copies directory `source` (local or URL) into `target` file by file, the marker
    (outputs.MARKER) of `source` itself last."""
    source, target = os.fspath(source), os.fspath(target)
    pairs, last = [], []
    for directory, _, names in walk(source):
        relative = directory[len(source.rstrip("/" if is_url(source) else os.sep)):].lstrip("/" + os.sep)
        relative = relative.replace(os.sep, "/") if not is_url(source) else relative
        makedirs(join(target, *relative.split("/")) if relative else target)
        for name in names:
            pair = (join(directory, name), join(target, *relative.split("/"), name) if relative else join(target, name))
            (last if name == MARKER and not relative else pairs).append(pair)
    for a, b in pairs + last:
        copy(a, b)
    return target


def _bounded(fn, seconds):
    """fn()'s value, or TimeoutError after `seconds` (the call is left to end on its own)."""
    box = {}

    def call():
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the caller
            box["error"] = e

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {seconds} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def check_reachable(path, flag, write=False, seconds=None):
    """Raises UnreachablePath (naming `flag`) when the store of URL `path` does not answer
    within `seconds` (PROBE_SECONDS), refuses it, or (`write`) cannot take a file beside
    it: a probe object is written and removed again, so nothing is left. Local paths: only
    `write` is checked (the nearest existing ancestor must be a writable directory)."""
    path = os.fspath(path)
    seconds = PROBE_SECONDS if seconds is None else seconds
    if not is_url(path):
        if write:
            ancestor = os.path.abspath(path)
            while not os.path.lexists(ancestor) and os.path.dirname(ancestor) != ancestor:
                ancestor = os.path.dirname(ancestor)
            target = ancestor if os.path.isdir(ancestor) else os.path.dirname(ancestor)
            if not os.access(target, os.W_OK | os.X_OK):
                raise UnreachablePath(f"{flag}={path}: {target} cannot be written (no permission); choose a "
                                      f"writable {flag}.")
        return

    def probe():
        g = _gfile()
        g.exists(path)
        if write:
            import secrets

            directory, name = split(path)
            name = f".{name}.probe-{os.getpid()}-{secrets.token_hex(4)}"
            target = join(directory, name)
            with g.GFile(target, "wb") as f:
                f.write(b"")
            g.remove(target)

    try:
        _bounded(probe, seconds)
    except TimeoutError:
        raise UnreachablePath(f"{flag}={path}: the store did not answer within {seconds} s; check the address and "
                              "the network, then run again.") from None
    except Exception as e:  # tf.errors.* (NotFound bucket, PermissionDenied, Unimplemented scheme)
        what = "cannot be written" if write else "cannot be read"
        message = str(getattr(e, "message", e)).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UnreachablePath(f"{flag}={path} {what}: {message}") from None
