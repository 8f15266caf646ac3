"""One writer per output: an output that a live albert_tf process is writing is refused to any
other, before any work (docs/outputs.md, "One writer per output").

    with lock.command("run_pretraining"):        # albert_tf.entry_points, around every command
        lock.hold(where, "--output_dir", path)   # outputs.check: held until the command ends
    with lock.holding(where, "--output", path):  # a writer outside a command (the Python API)
        ...                                      # held while the block runs

`where` is the lock's own path (outputs.lock_path: inside a run directory, beside any other
output). A live holder raises `Held` (a ValueError: exit status 2), naming it; a holder that is
gone is taken over with a line on stderr. On a local disk the lock is `fcntl.flock` on the lock
file through a descriptor this process keeps open: the system lets go of it when the process
ends, however it ends (SIGKILL too), so a process id that was reused never keeps an output;
the file records the holder (host, process id, command, since) for the messages. On an object
store (any URL) it is a lease object with the same record, rewritten every LEASE_SECONDS / 4
by a thread while the process lives and stale LEASE_SECONDS after its last renewal (what a
lease cannot guarantee: docs/outputs.md).
"""

import atexit
import contextlib
import json
import os
import secrets
import socket
import sys
import threading
import time

from albert_tf.storage import files, space
from albert_tf.storage.json_files import read_json

try:
    import fcntl
except ImportError:  # no flock (Windows): local outputs are not locked there
    fcntl = None

LEASE_SECONDS = 120  # an object store's lease is stale this long after its last renewal
LEASE_VARIABLE = "ALBERT_TF_LEASE_SECONDS"  # for tests only: a shorter LEASE_SECONDS
SETTLE_SECONDS = 1.0  # a lease is read back this long after it is written: a starter that wrote meanwhile wins
_TRIES = 20

_HELD = {}  # the lock's key -> this process's _FileLock or _Lease
_COMMANDS = []  # (name, keys it took) of each command running, the innermost last


class Held(ValueError):
    """An output that another live albert_tf process holds; the message names it, its holder
    (`holder`, its record; None when it has not written one yet) and what to do."""

    def __init__(self, flag, path, holder):
        self.holder = holder
        here = holder and holder.get("host") == socket.gethostname()
        stop = f" or stop it (kill {holder.get('pid')})" if here else ""
        super().__init__(f"{_named(flag, path)} is being written by {describe(holder)}. One output "
                         f"takes one writer: let that command end{stop}, or choose another {flag or 'path'}.")


def _named(flag, path):
    return f"{flag}={path}" if flag else path


def lease_seconds():
    """LEASE_SECONDS, or the value of the environment variable LEASE_VARIABLE (for tests)."""
    return float(os.environ.get(LEASE_VARIABLE) or LEASE_SECONDS)


def _ago(seconds):
    seconds = max(0, int(seconds))
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def describe(holder):
    """A holder's record in a user's words: "run_pretraining (process 4242 on this machine,
    tpu-vm-1), since 2026-12-07 12:05:09 UTC, 3 min ago"."""
    if not holder:
        return "another albert_tf process (it is starting and has not recorded itself yet)"
    host = holder.get("host", "?")
    where = f"this machine, {host}" if host == socket.gethostname() else f"host {host}"
    since = float(holder.get("since", 0))
    return (f"{holder.get('command', 'albert_tf')} (process {holder.get('pid', '?')} on {where}), since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S %Z', time.localtime(since))}, {_ago(time.time() - since)} ago")


def leads(strategy):
    """Whether this process holds the outputs of its command under --strategy=`strategy`:
    always, but for a worker of a multi_worker_mirrored cluster (TF_CONFIG) that is not its
    chief (the "chief" task, else worker 0), which writes into the chief's outputs."""
    if strategy != "multi_worker_mirrored":
        return True
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    kind, index = resolver.task_type, resolver.task_id
    return kind in (None, "chief") or (kind == "worker" and index == 0 and "chief" not in resolver.cluster_spec().jobs)


def _record():
    return {"host": socket.gethostname(), "pid": os.getpid(), "since": time.time(),
            "command": _COMMANDS[-1][0] if _COMMANDS else os.path.basename(sys.argv[0] or "python")}


def _read(path):
    """The holder's record at `path`, or None (none, or not written yet)."""
    try:
        return read_json(path, "albert_tf's record of an output's writer")
    except (OSError, ValueError):
        return None


def _dump(record):
    return (json.dumps(record, sort_keys=True) + "\n").encode()


def _key(where):
    return files.realpath(where)


@contextlib.contextmanager
def command(name):
    """While command `name` runs: what `hold` takes is held until the block ends."""
    keys = []
    _COMMANDS.append((name, keys))
    try:
        yield
    finally:
        _COMMANDS.pop()
        for key in reversed(keys):
            _release(key)


def hold(where, flag, path):
    """Inside a command: takes the lock at `where` of output `flag`=`path` until the command
    ends (nothing when this process holds it already); outside one, nothing. Raises Held."""
    if _COMMANDS and _key(where) not in _HELD:
        _COMMANDS[-1][1].append(_acquire(where, flag, path))


def holding(where, flag, path):
    """Takes the lock at `where` now (raises Held) and returns a context manager that lets go
    of it at its end; when this process holds it already (a command's output), it stays."""
    if _key(where) in _HELD:
        return contextlib.nullcontext()
    release = contextlib.ExitStack()
    release.callback(_release, _acquire(where, flag, path))
    return release


def _acquire(where, flag, path):
    lock = _Lease(where) if files.is_url(where) else _FileLock(where)
    gone = lock.acquire(flag, path, _record())
    key = _key(where)
    _HELD[key] = lock
    if gone:
        print(f"{_record()['command']}: {_named(flag, path)}: its writer {describe(gone)} is gone without letting "
              "go of it; this command takes it over.", file=sys.stderr, flush=True)
    return key


def _release(key):
    lock = _HELD.pop(key, None)
    if lock is not None and lock.pid == os.getpid():  # a forked child leaves its parent's locks alone
        lock.release()


@atexit.register
def _release_all():
    for key in list(_HELD):
        _release(key)


class _FileLock:
    """flock on a local file, held through an open descriptor; the file is removed when let go."""

    def __init__(self, path):
        self.path, self.fd, self.made, self.pid = files.abspath(path), None, [], os.getpid()

    def acquire(self, flag, path, record):
        """Takes the lock (raises Held); returns the record of a gone holder taken over, or None."""
        for _ in range(_TRIES):
            self.made += _made_directories(files.dirname(self.path))
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except FileNotFoundError:  # its directory went meanwhile, with a holder that let go
                continue
            try:
                _flock(fd, self.path)
            except BlockingIOError:
                os.close(fd)
                raise Held(flag, path, _read(self.path)) from None
            if not _same_file(fd, self.path):  # a holder let go (removed it) between our open and flock
                os.close(fd)
                continue
            self.fd = fd
            gone = _read(self.path)
            os.ftruncate(fd, 0)
            try:
                with space.naming(self.path):  # a full disk: its directory named
                    os.pwrite(fd, _dump(record), 0)
            except OSError:
                self.release()
                raise
            return gone
        raise OSError(f"{self.path}: could not take the lock in {_TRIES} tries (other processes took and let go "
                      "of it meanwhile); run the command again.")

    def release(self):
        if self.fd is None:
            return
        os.ftruncate(self.fd, 0)  # no record: the next holder takes nothing over
        files.remove(self.path)  # still held: a process that opened it meanwhile sees it is gone
        os.close(self.fd)
        self.fd = None
        for directory in reversed(self.made):  # those the lock made, if nothing else came into them
            with contextlib.suppress(OSError):
                os.rmdir(directory)


def _flock(fd, path):
    """flock(fd) or BlockingIOError; a file system without flock leaves the output unlocked."""
    if fcntl is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise
    except OSError as e:  # e.g. ENOLCK, EOPNOTSUPP (some network and FUSE file systems)
        print(f"albert_tf: warning: cannot lock {path} ({e.strerror}): "
              "another albert_tf process writing the same output would not be noticed.", file=sys.stderr)


def _same_file(fd, path):
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def _made_directories(directory):
    """Makes local `directory` and its missing parents; returns those it made, outermost first."""
    missing = []
    while not files.exists(directory) and files.dirname(directory) != directory:
        missing.insert(0, directory)
        directory = files.dirname(directory)
    if missing:
        files.makedirs(missing[-1])
    return missing


class _Lease:
    """A lease object on a store: the holder's record with a token, renewed by a thread."""

    def __init__(self, path):
        self.path, self.pid, self.record, self.stop, self.thread = path, os.getpid(), None, threading.Event(), None

    def acquire(self, flag, path, record):
        """Takes the lease (raises Held); returns the record of a stale holder taken over, or None."""
        found = _read(self.path)
        if found and time.time() - float(found.get("renewed", 0)) <= lease_seconds():
            raise Held(flag, path, found)
        self.record = dict(record, token=secrets.token_hex(8), renewed=record["since"])
        files.write_bytes(self.path, _dump(self.record))
        if not self.path.startswith("ram://"):  # TensorFlow's in-memory store: no other process sees it
            time.sleep(SETTLE_SECONDS)
        now = _read(self.path)
        if not now or now.get("token") != self.record["token"]:  # another starter wrote after this one
            raise Held(flag, path, now)
        self.thread = threading.Thread(target=self._renew, args=(flag, path), daemon=True)
        self.thread.start()
        return found

    def _renew(self, flag, path):
        while not self.stop.wait(lease_seconds() / 4):
            try:
                now = _read(self.path)
                if now is not None and now.get("token") != self.record["token"]:
                    print(f"albert_tf: warning: {_named(flag, path)} was taken over by {describe(now)} after this "
                          "process did not renew its lease in time: two processes may be writing it now.",
                          file=sys.stderr)
                    return
                self.record["renewed"] = time.time()
                files.write_bytes(self.path, _dump(self.record))
            except Exception:  # noqa: BLE001 (a store that did not answer: the next renewal tries again)
                continue

    def release(self):
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=30)
        with contextlib.suppress(Exception):  # a store that does not answer: the lease goes stale by itself
            if (_read(self.path) or {}).get("token") == self.record["token"]:
                files.remove(self.path)
