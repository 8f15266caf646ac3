"""What made a run: one entry per session in `output_dir/run_info.json`, and the refusal
of a session that would continue a training with other settings.

run_info.json keeps its top-level keys (where the weights started, the task, the model
record, the first session's dtype policy) and holds a "sessions" list: every command run
on the directory (training, or evaluation and prediction alone) appends one entry, never
rewriting an earlier one. An entry records

- `command`, `flags` (every flag value as the user gave it) and `settings` (the flags
  that change a training's result, with the dtype policy resolved and paths absolute);
- `albert_tf` (version; git commit and whether the tree was modified, or a sha256 of the
  package's .py files where no git checkout is found), `python`, `tensorflow`, `keras`;
- `device` (CPU model and flags, GPU names, strategy and replicas) and the resolved
  `dtype_policy` with its reason;
- `start_step`, `resumed_from`, `changes` (the settings that differ from the previous
  training session's, each {setting, old, new}: a longer training, or changes the user
  allowed), then at its end `final_step` and `status` (finished, interrupted, terminated,
  failed).

`check_settings` runs before any work: a training session whose settings differ from the
previous training session's (learning rate and schedule, batch, warmup, precision,
accumulation, sequence length, optimizer, seed, starting weights) is refused with a
ValueError naming each change, unless the session allows it (--allow_changed_settings).
The length of the training (--num_train_steps, --train_step, --num_train_epochs) may
change: it is recorded. Sessions that do not train are never refused.
"""

import dataclasses
import functools
import hashlib
import json
import os
import platform
import subprocess
import time
import uuid

from albert_tf.storage import atomic
from albert_tf.training.checkpoints import RUN_INFO, newest_checkpoint

SESSIONS = "sessions"
ALLOW_FLAG = "--allow_changed_settings"
GIT_TIMEOUT_S = 5


@dataclasses.dataclass
class Session:
    """What a command says about its session (entry points fill it from their flags).

    Attributes:
        command: the command's name (e.g. "run_classifier").
        flags: every flag value as given ({name: value}).
        settings: the values that change a training's result ({flag name: value}), the
            dtype policy resolved ("float32" or "mixed_bfloat16"), paths absolute.
        length: {flag name: value} of the training's length (allowed to change).
        trains: whether this session trains (only those are checked).
        allow_changed_settings: continue a training with changed settings (recorded).
        changes: set by `check_settings`: [{"setting", "old", "new"}].
    """

    command: str
    flags: dict = dataclasses.field(default_factory=dict)
    settings: dict = dataclasses.field(default_factory=dict)
    length: dict = dataclasses.field(default_factory=dict)
    trains: bool = True
    allow_changed_settings: bool = False
    changes: list = dataclasses.field(default_factory=list)


def read_run_info(output_dir):
    """run_info.json of a run directory as a dict ({} when there is none)."""
    path = os.path.join(output_dir, RUN_INFO)
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def resolve_policy(requested, tpu=False):
    """The dtype policy --dtype_policy=`requested` computes in on this machine (`tpu`: the
    run's strategy is a TPU one), as the driver will resolve it (training/precision.py)."""
    from albert_tf.training.precision import choose

    return choose(requested, tpu=tpu).policy


def _last_training(info):
    for entry in reversed(info.get(SESSIONS, [])):
        if entry.get("trains"):
            return entry
    return None


def _differences(old, new):
    return [{"setting": k, "old": old[k], "new": v} for k, v in new.items() if k in old and old[k] != v]


def describe_change(change):
    """"--learning_rate 0.005 -> 0.001" (the dtype policy: "(resolved)")."""
    resolved = " (resolved)" if change["setting"] == "dtype_policy" else ""
    return f"--{change['setting']}{resolved} {change['old']} -> {change['new']}"


def check_settings(output_dir, session):
    """Compares a training session with the previous training session of `output_dir`
    (run_info.json) before any work; sets session.changes.

    Refused (ValueError naming each change, old -> new, and how to start a new run): a
    changed setting while the directory holds a checkpoint to continue, unless
    session.allow_changed_settings. A changed length is recorded, never refused. A session
    that does not train, or a directory without an earlier training, is never refused.
    Runs written before sessions were recorded are compared on their dtype policy alone.
    Writes nothing.
    """
    if session is None or not session.trains:
        return []
    session.changes = []
    info = read_run_info(output_dir)
    previous = _last_training(info)
    if previous is not None:
        old_settings, old_length = previous.get("settings", {}), previous.get("length", {})
    elif "dtype_policy" in info:  # a run from before sessions: its first session's policy
        old_settings, old_length = {"dtype_policy": info["dtype_policy"]}, {}
    else:
        return []
    if not newest_checkpoint(output_dir):
        return []  # nothing to continue: the training starts anew
    changed = _differences(old_settings, session.settings)
    longer = _differences(old_length, session.length)
    if changed and not session.allow_changed_settings:
        raise ValueError(
            f"--output_dir={output_dir} holds a training with other settings: "
            f"{'; '.join(describe_change(c) for c in changed)}. Continuing it with these would make one result of "
            f"two trainings: start a new run with a new --output_dir, or pass {ALLOW_FLAG} to continue this one "
            f"with the new settings (the change is recorded in {os.path.join(output_dir, RUN_INFO)}).")
    session.changes = changed + longer
    return session.changes


# --- what the session ran on -----------------------------------------------------------

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
    "sha256"}: what code made a run."""
    import albert_tf

    package_dir = package_dir or os.path.dirname(os.path.abspath(albert_tf.__file__))
    root = os.path.dirname(package_dir)
    state = {"version": albert_tf.__version__}
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


def device(strategy=None):
    """The CPU (model name and flags from /proc/cpuinfo), the GPUs TensorFlow sees, and
    the strategy with its replicas."""
    import tensorflow as tf

    from albert_tf.training.precision import read_cpuinfo

    model, flags = read_cpuinfo()
    gpus = []
    for gpu in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(gpu)
        gpus.append(details.get("device_name", gpu.name))
    found = {"cpu": model, "cpu_flags": " ".join(sorted(flags)), "cpu_count": os.cpu_count(), "gpus": gpus}
    if strategy is not None:
        found.update(strategy=type(strategy).__name__, replicas=int(strategy.num_replicas_in_sync))
    return found


def entry(session, precision, strategy, start_step, resumed_from):
    """This session's run_info.json entry (see the module docstring)."""
    import keras
    import tensorflow as tf

    return {"id": uuid.uuid4().hex,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": session.command, "trains": session.trains, "flags": session.flags,
            "settings": session.settings, "length": session.length,
            "allow_changed_settings": session.allow_changed_settings, "changes": session.changes,
            "albert_tf": source_state(), "python": platform.python_version(), "tensorflow": tf.__version__,
            "keras": keras.__version__, "device": device(strategy), **precision.as_dict(),
            "start_step": int(start_step), "resumed_from": resumed_from}


def append_session(output_dir, session_entry, top_level=None):
    """Appends `session_entry` to run_info.json's sessions (earlier ones kept as they are);
    `top_level` (a new run's initialized_from, task, model...) updates the other keys."""
    info = read_run_info(output_dir)
    if top_level:
        info.update(top_level)
    info.setdefault(SESSIONS, []).append(session_entry)
    atomic.write_json(os.path.join(output_dir, RUN_INFO), info)


def end_session(output_dir, session_id, final_step, error=None):
    """Adds the end to this session's entry (by its id; None: nothing, a worker that does
    not write): final_step and status "finished", or for `error` (what stopped it)
    "terminated" (SIGTERM), "interrupted" (Ctrl-C) or "failed" with the error. A write
    that fails then is ignored: the error that stopped the run is the one to report."""
    if session_id is None:
        return
    from albert_tf.training.errors import Terminated

    fields = {"final_step": int(final_step), "status": "finished",
              "ended": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if error is not None:
        fields["status"] = ("terminated" if isinstance(error, Terminated) else
                            "interrupted" if isinstance(error, KeyboardInterrupt) else "failed")
        fields["error"] = f"{type(error).__name__}: {error}"[:500]
    try:
        info = read_run_info(output_dir)
        for item in info.get(SESSIONS, []):
            if item.get("id") == session_id:
                item.update(fields)
                atomic.write_json(os.path.join(output_dir, RUN_INFO), info)
                return
    except OSError:
        if error is None:
            raise
