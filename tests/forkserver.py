"""Starts the suite's Python subprocesses without paying for TensorFlow's import each time.

The suite starts about 60 Python subprocesses that import TensorFlow (58 counted in one run,
besides those killed on purpose): `python -m albert_tf.<command>`, `python tools/<tool>.py`,
`python benchmarks/<bench>.py`, `python tests/<helper>.py`, `python -c CODE`. Each paid for
TensorFlow's import (3.7 CPU-seconds for `import tensorflow` on the 2-core EPYC) before its
first line of work. Measured 2026-11-26 back to back on the 72 tests of the modules that start
most of them, two workers: 244.7 s and 440 CPU-seconds with fresh interpreters
(ALBERT_TF_TEST_FORKSERVER=0), 189.9 s and 358 CPU-seconds served. Under pytest (conftest.py),
such a command is served by a fork server instead: one process per test worker (and per
environment) that imported TensorFlow, Keras and the other heavy third-party packages once,
before any TensorFlow runtime started, and forks a child per command. The child is a process
of its own, with the command's argv, environment, working directory and stdin/stdout/stderr;
it sets sys.path as the interpreter would and then runs the module, script or code exactly as
`python -m` / `python FILE` / `python -c` do (runpy's `_run_module_as_main`, a fresh `__main__`,
uncaught exceptions and exit codes left to the interpreter). What TensorFlow printed while
importing is replayed on the child's stderr/stdout first. albert_tf itself is imported by the
child, not the server.

What the test holds is a small client process (`python tests/forkserver.py client ...`, no
third-party import) that hands its argv, environment, working directory and standard streams
to the server and exits with the child's status (killed by a signal: the same signal). Signals
sent through the Popen object (send_signal, terminate, kill, subprocess.run's timeout) go to
the child itself, and wait() returns only once the child is gone; a client that dies without
one takes its child with it.

Not served (real interpreters, as a user's shell starts them): commands of tests marked
`real_process` (interpreter start-up is what they check), other executables, other modules
than albert_tf's, and every command when ALBERT_TF_TEST_FORKSERVER=0.

    python tests/forkserver.py serve SOCKET_DIR      (started by `served_command`)
    python tests/forkserver.py client SOCKET_DIR ARGS...
"""

import gc
import json
import os
import signal
import socket
import struct
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# imported once by the server; each is a third-party package the commands import anyway
PRELOAD = ("numpy", "absl.flags", "absl.logging", "tensorflow", "keras", "tensorflow_text", "sentencepiece")
_HEADER = struct.Struct("!I")
# environment variables nothing reads while importing PRELOAD: a child sets them for itself
# (pytest changes PYTEST_CURRENT_TEST for every test, TF_CONFIG is read when a strategy starts); any
# other difference needs another server
PER_CHILD = frozenset({"PYTHONPATH", "PYTEST_CURRENT_TEST", "TF_CONFIG"})
MAX_SERVERS = 3  # per test worker; other environments start fresh interpreters


# ---------------------------------------------------------------------------------------------
# In the pytest worker


class _Server:
    def __init__(self, env):
        import subprocess
        import tempfile

        self.directory = tempfile.mkdtemp(prefix="albert-tf-fs-")
        if len(self.directory) > 90:  # a Unix socket's path holds at most 107 bytes
            os.rmdir(self.directory)
            self.directory = tempfile.mkdtemp(prefix="albert-tf-fs-", dir="/tmp")
        self.socket = os.path.join(self.directory, "socket")
        # the server's own interpreter starts without PYTHONPATH: each child sets its sys.path
        server_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        self.log = os.path.join(self.directory, "server.log")
        with open(self.log, "wb") as log:
            self.process = _REAL_POPEN([sys.executable, __file__, "serve", self.directory], env=server_env, cwd=ROOT,
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.tokens = 0
        deadline = time.time() + 300
        while not os.path.exists(self.socket):
            if self.process.poll() is not None or time.time() > deadline:
                with open(self.log, encoding="utf-8", errors="replace") as f:
                    log = f.read()[-3000:]
                self.close()
                raise RuntimeError(f"the fork server did not start: {log}")
            time.sleep(0.02)

    def served_cpu(self):
        """CPU seconds of the children the server has reaped so far."""
        try:
            with open(os.path.join(self.directory, "cpu"), encoding="utf-8") as f:
                return sum(float(line) for line in f if line.strip())
        except FileNotFoundError:
            return 0.0

    def token(self):
        """A name for the next client, unique in this server."""
        self.tokens += 1
        return f"{os.getpid()}-{self.tokens}"

    def child_of(self, token, timeout=120):
        """The pid of the child serving the client `token`, or None once it was reaped."""
        path = os.path.join(self.directory, "pids", token)
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                if text.endswith("\n"):
                    return int(text)
            except FileNotFoundError:
                if os.path.exists(path + ".done"):
                    return None
            time.sleep(0.005)
        raise RuntimeError(f"the fork server named no child for client {token} in {timeout} s")

    def close(self):
        import shutil

        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except Exception:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


_SERVERS = {}
_FAILED = set()  # environments whose server failed to start
_REAL_POPEN = None
enabled = True  # conftest turns it off around tests marked real_process


def _servable(args, cwd=None):
    """Whether a command line is `python -m albert_tf...`, `python -c CODE` or `python FILE.py`."""
    if not isinstance(args, (list, tuple)) or len(args) < 2 or args[0] != sys.executable:
        return False
    first = str(args[1])
    if first in ("-m", "-c"):
        return len(args) > 2 and (first == "-c" or str(args[2]).split(".")[0] == "albert_tf")
    path = os.path.realpath(os.path.join(os.getcwd() if cwd is None else str(cwd), first))
    return first.endswith(".py") and path != os.path.realpath(__file__)


def served_command(args, env, cwd):
    """(`args` rewritten to go through a fork server for `env` (the Popen's env, None: this
    process's), the server, the client's token), or Nones when it is not to be served."""
    if not enabled or not _servable(args, cwd):
        return None, None, None
    env = dict(os.environ if env is None else env)
    key = tuple(sorted((k, v) for k, v in env.items() if k not in PER_CHILD))
    if key in _FAILED:
        return None, None, None
    server = _SERVERS.get(key)
    if server is None or server.process.poll() is not None:
        if server is None and len(_SERVERS) >= MAX_SERVERS:
            return None, None, None
        try:
            server = _SERVERS[key] = _Server(env)
        except (OSError, RuntimeError) as error:  # slower, not different: fresh interpreters
            import warnings

            _SERVERS.pop(key, None)
            _FAILED.add(key)
            warnings.warn(f"tests/forkserver.py: no fork server ({error}); fresh interpreters instead")
            return None, None, None
    token = server.token()
    return [sys.executable, __file__, "client", server.directory, token, *[str(a) for a in args[1:]]], server, token


def install():
    """Routes servable Popen commands of this process through fork servers."""
    import subprocess

    global _REAL_POPEN
    if _REAL_POPEN is not None:
        return
    _REAL_POPEN = subprocess.Popen

    class ServedPopen(subprocess.Popen):
        _server = None

        def __init__(self, args, *rest, **kwargs):
            served, server, token = served_command(args, kwargs.get("env"), kwargs.get("cwd"))
            super().__init__(served or args, *rest, **kwargs)
            self.args = args
            self._server, self._token = server, token

        def send_signal(self, sig):  # Popen's kill(), terminate() and run()'s timeout come here too
            if self._server is None:
                return super().send_signal(sig)
            self.poll()
            if self.returncode is not None:
                return
            child = self._server.child_of(self._token)
            if child is not None:
                try:
                    os.kill(child, sig)
                except ProcessLookupError:
                    pass

    subprocess.Popen = ServedPopen


def served_cpu():
    """CPU seconds of every child the fork servers of this process have reaped."""
    return sum(server.served_cpu() for server in _SERVERS.values())


def shutdown():
    for server in _SERVERS.values():
        server.close()
    _SERVERS.clear()


# ---------------------------------------------------------------------------------------------
# The client


def _send(sock, payload, fds):
    data = json.dumps(payload).encode()
    socket.send_fds(sock, [_HEADER.pack(len(data))], fds)
    sock.sendall(data)


def _receive(sock):
    header, fds, _, _ = socket.recv_fds(sock, _HEADER.size, 3)
    (size,) = _HEADER.unpack(header)
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("the client went away")
        data += chunk
    return json.loads(data), fds


def _signal_state():
    """This fresh interpreter's signal dispositions (each "ignore", "default" or "python":
    Python's KeyboardInterrupt handler) and blocked signals: what the command would start
    with, inherited from the test."""
    dispositions = {}
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            handler = signal.getsignal(sig)
        except ValueError:
            continue
        dispositions[int(sig)] = ("ignore" if handler == signal.SIG_IGN else
                                  "python" if handler is signal.default_int_handler else "default")
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return {"dispositions": dispositions, "blocked": sorted(int(s) for s in blocked)}


def _take_signal_state(state):
    """In the child: the client's dispositions and blocked signals, not the server's. A
    server inherits those of the pytest worker at the moment it starts; one started while
    the worker had SIGINT and SIGQUIT ignored (seen in a full suite: both at once is what C's
    system() does to its calling process while it runs) passed that on to every child."""
    handlers = {"ignore": signal.SIG_IGN, "default": signal.SIG_DFL, "python": signal.default_int_handler}
    for sig, kind in state["dispositions"].items():
        try:
            signal.signal(int(sig), handlers[kind])
        except (OSError, ValueError):
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, [int(s) for s in state["blocked"]])


def client(directory, token, argv):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.path.join(directory, "socket"))
    _send(sock, {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(), "client": token,
                 "signals": _signal_state()}, [0, 1, 2])
    line = sock.makefile("r", encoding="utf-8").readline()  # the child's exit status
    if not line:
        sys.stderr.write("forkserver client: the server went away\n")
        os._exit(70)
    code = int(line)
    if code < 0:  # the child died of a signal: so does the client
        if -code != signal.SIGKILL:
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(5)
        os._exit(128 - code)
    os._exit(code)


# ---------------------------------------------------------------------------------------------
# The server


def _preload():
    """Imports PRELOAD with the output of those imports captured (replayed by every child)."""
    import tempfile

    captured = []
    saved = [os.dup(1), os.dup(2)]
    files = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
    os.dup2(files[0].fileno(), 1)
    os.dup2(files[1].fileno(), 2)
    try:
        for name in PRELOAD:
            try:
                __import__(name)
            except ImportError:
                pass
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
    for f in files:
        f.seek(0)
        captured.append(f.read())
        f.close()
    return captured


def serve(directory):
    """Accepts requests until terminated or orphaned; returns (request, fds, connection) in
    each forked child."""
    import select

    captured = _preload()
    # what the imports made lives as long as any child: frozen out of the children's garbage
    # collections, each full one of which walked it again (the same objects are collected,
    # at less cost)
    gc.freeze()
    parent = os.getppid()
    os.makedirs(os.path.join(directory, "pids"), exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(os.path.join(directory, "socket.tmp"))
    listener.listen(64)
    os.rename(os.path.join(directory, "socket.tmp"), os.path.join(directory, "socket"))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    children = {}  # pid -> (connection, client pid)
    while True:
        ready, _, _ = select.select([listener], [], [], 0.05)
        if ready:
            connection, _ = listener.accept()
            try:
                request, fds = _receive(connection)
            except (EOFError, OSError, ValueError):
                connection.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _take_signal_state(request["signals"])  # the server's SIGTERM handler goes first
                listener.close()
                for other, _ in children.values():
                    other.close()
                request["captured"] = captured
                return request, fds, connection
            for fd in fds:
                os.close(fd)
            pid_file = os.path.join(directory, "pids", str(request["client"]))
            with open(pid_file + ".tmp", "w", encoding="utf-8") as f:
                f.write(f"{pid}\n")
            os.rename(pid_file + ".tmp", pid_file)
            children[pid] = (connection, request["client"])
        while children:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            connection, client_pid = children.pop(pid)
            with open(os.path.join(directory, "cpu"), "a", encoding="utf-8") as f:
                f.write(f"{usage.ru_utime + usage.ru_stime}\n")
            pid_file = os.path.join(directory, "pids", str(client_pid))
            open(pid_file + ".done", "w").close()
            os.remove(pid_file)
            try:
                connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass
            connection.close()
        if os.getppid() != parent:
            os._exit(0)


def _watch(connection):
    """In the child: dies with its client (a client killed without the Popen's knowledge)."""
    import threading

    def wait():
        try:
            while connection.recv(64):
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    # The thread starts with every signal blocked (it inherits the mask in force when it is
    # created): a signal sent to the process then reaches the main thread, as in a fresh
    # interpreter, which has no other thread (taken by this thread, a signal would not
    # interrupt a blocking call of the main thread, the only one Python runs handlers in).
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        threading.Thread(target=wait, daemon=True).start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _become(request, fds):
    """In the child: the command's streams, directory, environment, argv and sys.path."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if "numpy" in sys.modules:  # a fresh process draws its own global NumPy state
        sys.modules["numpy"].random.seed()
    out, err = request["captured"]
    if err:
        os.write(2, err)
    if out:
        os.write(1, out)
    argv = request["argv"]
    base = sys.path[1:]  # the server's own path without its script's folder
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    if argv[0] == "-m":
        first = os.getcwd()
    elif argv[0] == "-c":
        first = ""
    else:
        first = os.path.dirname(os.path.realpath(argv[0]))
    sys.path[:] = [first, *[os.path.abspath(p) for p in extra], *base]


if __name__ == "__main__":
    if sys.argv[1] == "client":
        client(sys.argv[2], sys.argv[3], sys.argv[4:])
    _request, _fds, _connection = serve(sys.argv[2])
    _watch(_connection)
    _become(_request, _fds)
    import types

    _argv = _request["argv"]
    _main = types.ModuleType("__main__")
    sys.modules["__main__"] = _main
    del _request, _fds
    if _argv[0] == "-m":
        import runpy

        sys.argv = ["-m", *_argv[2:]]  # as the interpreter does until runpy names the file
        runpy._run_module_as_main(_argv[1], alter_argv=True)
    elif _argv[0] == "-c":
        sys.argv = ["-c", *_argv[2:]]
        exec(compile(_argv[1], "<string>", "exec"), _main.__dict__)
    else:
        sys.argv = list(_argv)
        _main.__dict__.update(__file__=_argv[0], __builtins__=__builtins__, __cached__=None)
        with open(_argv[0], "rb") as _source:
            _code = compile(_source.read(), _argv[0], "exec")
        exec(_code, _main.__dict__)
