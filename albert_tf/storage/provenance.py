"""What made an output: the one record every command that writes results keeps.

    record = provenance.record("export_tfhub", flags, dtype_policy="float32")   # entry points
    info["made_by"] = provenance.stamp(record)          # the writer, when it writes the file

A record is {"command", "flags" (every flag value as the user gave it: paths as given),
"albert_tf" (`source_state`: version and git commit + modified, or a sha256 of the
package's .py files), "python", "tensorflow", "keras", "device" (`device`: CPU model and
flags, GPUs), "dtype_policy" (resolved; only for commands with --dtype_policy)}; `stamp`
adds "written" (UTC) when the file is written. training/sessions.py records the same
environment in each run_info.json session (`environment`). TensorFlow and Keras are
imported only inside the functions that need them.
"""

import functools
import hashlib
import os
import platform
import subprocess
import sys
import time

GIT_TIMEOUT_S = 5


def utc_now():
    """The current UTC time as "YYYY-MM-DDTHH:MM:SSZ"."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def read_cpuinfo(cpuinfo="/proc/cpuinfo"):
    """(CPU model name, set of its feature flags) from /proc/cpuinfo ("unknown CPU", empty
    set where it cannot be read). The one reader of the file."""
    model, flags = "unknown CPU", set()
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model == "unknown CPU":
                    model = value.strip()
                elif key == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    return model, flags


def _git(root, *args):
    done = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    if done.returncode:
        raise OSError(done.stderr.strip())
    return done.stdout.strip()


def package_sha256(package_dir):
    """sha256 over the package's .py files (their paths relative to it and contents, in
    sorted order): the source state where no git checkout holds it."""
    digest = hashlib.sha256()
    names = []
    for dirpath, dirnames, filenames in os.walk(package_dir):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        names += [os.path.join(dirpath, n) for n in filenames if n.endswith(".py")]
    for path in sorted(names):
        digest.update(os.path.relpath(path, package_dir).encode("utf-8") + b"\0")
        with open(path, "rb") as f:
            digest.update(f.read() + b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def source_state(package_dir=None):
    """{"version", "git_commit", "modified"} where albert_tf runs from a git checkout (git
    with a short timeout; "sha256" of its .py files added when modified), else {"version",
    "sha256"}: what code made an output."""
    # the package holding this module (importing it by name would make storage/ depend on modeling/)
    package = sys.modules[__name__.split(".")[0]]
    package_dir = package_dir or os.path.dirname(os.path.abspath(package.__file__))
    root = os.path.dirname(package_dir)
    state = {"version": package.__version__}
    try:
        if os.path.realpath(_git(root, "rev-parse", "--show-toplevel")) == os.path.realpath(root):
            state["git_commit"] = _git(root, "rev-parse", "HEAD")
            state["modified"] = bool(_git(root, "status", "--porcelain", "--", package_dir))
            if not state["modified"]:
                return state
    except (OSError, subprocess.SubprocessError):
        pass
    state["sha256"] = package_sha256(package_dir)
    return state


def gpu_devices():
    """[(name, compute capability (major, minor) or None)] of the GPUs TensorFlow sees."""
    import tensorflow as tf

    found = []
    for gpu in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(gpu)
        found.append((details.get("device_name", gpu.name), details.get("compute_capability")))
    return found


def device(strategy=None):
    """The CPU (model name and flags from /proc/cpuinfo), the GPUs TensorFlow sees, and
    (given a tf.distribute `strategy`) the strategy with its replicas."""
    model, flags = read_cpuinfo()
    found = {"cpu": model, "cpu_flags": " ".join(sorted(flags)), "cpu_count": os.cpu_count(),
             "gpus": [name for name, _ in gpu_devices()]}
    if strategy is not None:
        found.update(strategy=type(strategy).__name__, replicas=int(strategy.num_replicas_in_sync))
    return found


def environment(strategy=None):
    """{"albert_tf", "python", "tensorflow", "keras", "device"}: the code and machine."""
    import keras
    import tensorflow as tf

    return {"albert_tf": source_state(), "python": platform.python_version(), "tensorflow": tf.__version__,
            "keras": keras.__version__, "device": device(strategy)}


def record(command, flags, dtype_policy=None, strategy=None):
    """The "made_by" record of a command's output (see the module docstring; `stamp` adds
    "written").

    Args:
        command: the command's name (e.g. "export_tfhub").
        flags: {flag name: value} of every flag, as given (`albert_tf.option_flags.given_flags`).
        dtype_policy: the resolved policy ("float32", "mixed_bfloat16"), for a command
            with --dtype_policy; None leaves the key out.
        strategy: the tf.distribute strategy, where one runs (recorded in "device").
    """
    made = {"command": command, "flags": dict(flags), **environment(strategy)}
    if dtype_policy is not None:
        made["dtype_policy"] = dtype_policy
    return made


def stamp(made_by):
    """`made_by` with "written" (now, UTC), for the file being written; None stays None."""
    return None if made_by is None else {**made_by, "written": utc_now()}
