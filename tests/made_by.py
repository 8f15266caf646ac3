"""The check of an output's "made_by" record (albert_tf.storage.provenance) against what
this test process finds itself: the imported versions, git, /proc/cpuinfo."""

import calendar
import os
import platform
import subprocess
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.split(":")[0].strip() == "model name":
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def _git(*args):
    done = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, timeout=30)
    return done.stdout.strip() if done.returncode == 0 else None


def check_made_by(made_by, command, flags, dtype_policy=None, since=None):
    """Asserts `made_by` names `command`, holds each of `flags` ({name: value as given}),
    albert_tf's version and source state (this checkout's git commit and whether albert_tf/
    is modified; a 64-hex sha256 where no git checkout is found), this process's
    Python/TensorFlow/Keras versions, /proc/cpuinfo's CPU model and TensorFlow's GPUs,
    `dtype_policy` (None: no such key) and a "written" UTC time not before `since`
    (seconds since the epoch) and not after now."""
    import keras
    import tensorflow as tf

    import albert_tf

    assert made_by["command"] == command
    for name, value in flags.items():
        assert made_by["flags"][name] == value, (name, made_by["flags"].get(name), value)
    state = made_by["albert_tf"]
    assert state["version"] == albert_tf.__version__
    top = _git("rev-parse", "--show-toplevel")
    if top and os.path.realpath(top) == os.path.realpath(ROOT):
        assert state["git_commit"] == _git("rev-parse", "HEAD")
        assert state["modified"] == bool(_git("status", "--porcelain", "--", "albert_tf"))
        assert len(state["sha256"]) == 64 if state["modified"] else "sha256" not in state
    else:
        assert len(state["sha256"]) == 64 and int(state["sha256"], 16) >= 0
    assert made_by["python"] == platform.python_version()
    assert made_by["tensorflow"] == tf.__version__ and made_by["keras"] == keras.__version__
    assert made_by["device"]["cpu"] == _cpu_model()
    assert len(made_by["device"]["gpus"]) == len(tf.config.list_physical_devices("GPU"))
    if dtype_policy is None:
        assert "dtype_policy" not in made_by
    else:
        assert made_by["dtype_policy"] == dtype_policy
    written = calendar.timegm(time.strptime(made_by["written"], "%Y-%m-%dT%H:%M:%SZ"))
    assert (since is None or written >= int(since)) and written <= time.time() + 1
