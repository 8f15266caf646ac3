"""tests/forkserver.py: a served command behaves as the same command in a fresh interpreter
(the reference: the same Popen with the server off), and signals reach the child itself."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import warnings

import forkserver
import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
REPORT = r"""
import json, os, sys
import numpy as np
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "root_on_path": os.environ["PYTHONPATH"] in sys.path,
                  "cwd": os.getcwd(), "name": __name__, "pythonpath": os.environ.get("PYTHONPATH"),
                  "draw": float(np.random.random()), "ppid": os.getppid()}))
print("to stderr", file=sys.stderr)
sys.exit(3)
"""


def _run(args, served, cwd):
    forkserver.enabled = served
    try:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                              env=dict(os.environ, PYTHONPATH=ROOT))
    finally:
        forkserver.enabled = True


def _servers():
    return {server.process.pid for server in forkserver._SERVERS.values()}


@pytest.mark.skipif(forkserver._REAL_POPEN is None, reason="ALBERT_TF_TEST_FORKSERVER=0")
def test_code_and_scripts_see_what_a_fresh_interpreter_sees(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(REPORT)
    for args in (["-c", REPORT, "a", "--b=c d"], [str(script), "a", "--b=c d"]):
        fresh, served = _run(args, False, tmp_path), _run(args, True, tmp_path)
        assert fresh.returncode == served.returncode == 3, (fresh.stderr[-2000:], served.stderr[-2000:])
        assert served.stderr.endswith("to stderr\n") and fresh.stderr.endswith("to stderr\n")
        a, b = json.loads(fresh.stdout), json.loads(served.stdout)
        assert b["ppid"] in _servers() and a["ppid"] == os.getpid()  # the second one was served
        assert a["draw"] != b["draw"]  # NumPy's global generator is the child's own
        for report in (a, b):
            del report["ppid"], report["draw"]
        assert a == b and a["pythonpath"] == ROOT and a["name"] == "__main__" and a["root_on_path"]
    # two served children draw differently too (the server's generator is reseeded in each)
    draws = {json.loads(_run(["-c", REPORT], True, tmp_path).stdout)["draw"] for _ in range(2)}
    assert len(draws) == 2


@pytest.mark.skipif(forkserver._REAL_POPEN is None, reason="ALBERT_TF_TEST_FORKSERVER=0")
def test_an_entry_point_exits_as_from_a_fresh_interpreter(tmp_path):
    args = ["-m", "albert_tf.run_classifier", "--task_name=cola", f"--output_dir={tmp_path / 'out'}"]
    fresh, served = _run(args, False, ROOT), _run(args, True, ROOT)
    assert fresh.returncode == served.returncode == 2
    assert fresh.stdout == served.stdout
    # the same message, last line of both (TensorFlow's import lines come before it in both)
    message = "run_classifier: error: --data_dir is required."
    assert fresh.stderr.splitlines()[-1] == served.stderr.splitlines()[-1] == message
    assert not (tmp_path / "out").exists()


SLEEPER = "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)"


@contextlib.contextmanager
def _default_signals():
    """SIGINT handled by Python and SIGQUIT at its default in this process while the block
    runs, so that a command started in it inherits them (a fresh interpreter keeps an ignored
    SIGINT): full suites were seen to leave the worker with both ignored by the time these
    tests ran."""
    previous = [signal.signal(signal.SIGINT, signal.default_int_handler),
                signal.signal(signal.SIGQUIT, signal.SIG_DFL)]
    try:
        yield
    finally:
        for sig, handler in zip((signal.SIGINT, signal.SIGQUIT), previous, strict=True):
            signal.signal(sig, handler)


def _signalled(proc, child, sig):
    """Sends `sig` through the Popen; its exit status, or a failure naming the served child's
    /proc state when the child is still there 30 s later (the child is killed)."""
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        state = _process_state(child)
        proc.kill()
        pytest.fail(f"the child is still there 30 s after {sig!r}: {state}")


def _process_state(pid):
    """What /proc says of a child that did not end (for the message)."""
    try:
        return str(_status(pid, ("State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt", "Threads")))
    except OSError as e:
        return repr(e)


def _status(pid, fields):
    """{field: value} of /proc/PID/status."""
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        return {k: v.strip() for k, v in (line.split(":", 1) for line in f.read().splitlines()) if k in fields}


@pytest.mark.skipif(forkserver._REAL_POPEN is None, reason="ALBERT_TF_TEST_FORKSERVER=0")
@pytest.mark.parametrize("sig,code", [(signal.SIGKILL, -signal.SIGKILL), (signal.SIGINT, -signal.SIGINT),
                                      (signal.SIGTERM, -signal.SIGTERM)])
def test_signals_reach_the_child_and_wait_returns_once_it_is_gone(sig, code):
    with _default_signals():
        proc = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=dict(os.environ))
    child = int(proc.stdout.readline())
    assert child != proc.pid  # the client's child, forked by the server
    assert _signalled(proc, child, sig) == code
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)
    if sig == signal.SIGINT:  # Python's own handler ran in the child: KeyboardInterrupt, as in a fresh interpreter
        assert "KeyboardInterrupt" in proc.stderr.read()


@pytest.mark.skipif(forkserver._REAL_POPEN is None, reason="ALBERT_TF_TEST_FORKSERVER=0")
def test_a_timeout_kills_the_child():
    code = "import os, sys, time\nopen(sys.argv[1], 'w').write(str(os.getpid()))\ntime.sleep(60)"
    pid_file = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"forkserver-probe-{os.getpid()}")
    subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=120)  # the server is up: a child starts at once
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", code, pid_file], timeout=3)
    child = int(open(pid_file).read())
    os.remove(pid_file)
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


@pytest.mark.skipif(forkserver._REAL_POPEN is None, reason="ALBERT_TF_TEST_FORKSERVER=0")
def test_a_server_that_cannot_start_leaves_fresh_interpreters(monkeypatch):
    def broken(env):
        raise RuntimeError("the fork server did not start: a test's")

    monkeypatch.setattr(forkserver, "_Server", broken)
    monkeypatch.setattr(forkserver, "_SERVERS", {})
    monkeypatch.setattr(forkserver, "_FAILED", set())
    messages = []
    for _ in range(2):  # warned once, then fresh interpreters without trying again
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = subprocess.run([sys.executable, "-c", "import os; print(os.getppid())"], capture_output=True,
                                    text=True, timeout=60)
        assert result.returncode == 0 and int(result.stdout) == os.getpid()  # a child of this process
        messages.append([str(w.message) for w in caught])
    assert len(messages[0]) == 1 and "no fork server (the fork server did not start: a test's)" in messages[0][0]
    assert messages[1] == []


def _ignored(pid):
    mask = int(_status(pid, ("SigIgn",))["SigIgn"], 16)
    return {sig for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM) if mask & (1 << (sig - 1))}


@pytest.mark.skipif(forkserver._REAL_POPEN is None, reason="ALBERT_TF_TEST_FORKSERVER=0")
def test_a_server_started_while_sigint_was_ignored_gives_children_the_tests_signals(monkeypatch):
    """A server keeps the signal dispositions the worker had when it started it; one started
    while SIGINT and SIGQUIT were ignored (what C's system() does to its process while it
    runs, seen in a full suite) still gives each child those of the test that starts it."""
    servers = {}
    monkeypatch.setattr(forkserver, "_SERVERS", servers)
    monkeypatch.setattr(forkserver, "_FAILED", set())
    with _default_signals():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGQUIT, signal.SIG_IGN)
        started = subprocess.run([sys.executable, "-c", "pass"], timeout=120)
    try:
        assert started.returncode == 0
        [server] = servers.values()
        assert _ignored(server.process.pid) == {signal.SIGINT, signal.SIGQUIT}  # the condition seen
        with _default_signals():
            proc = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
        child = int(proc.stdout.readline())
        assert child != proc.pid and _ignored(child) == set()  # served, with the test's dispositions
        assert _signalled(proc, child, signal.SIGINT) == -signal.SIGINT
        assert "KeyboardInterrupt" in proc.stderr.read()
    finally:
        forkserver.shutdown()
