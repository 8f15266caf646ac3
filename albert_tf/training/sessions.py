"""What made a run: one entry per session in `output_dir/run_info.json` (docs/pretraining.md),
and the refusal, before any work, of a session that would continue a training with other
settings (`check_settings`).

run_info.json keeps its top-level keys (where the weights started, the task, the model
record, the first session's dtype policy) and a "sessions" list, appended to, never
rewritten. An entry holds `command`, `flags` (as given), `settings` (what changes a
training's result, the dtype policy resolved, paths absolute), `length`, the environment
(`storage.provenance.environment`), the resolved `dtype_policy` with its reason,
`start_step`, `resumed_from`, `changes` (each {setting, old, new}), then at its end
`final_step` and `status` (finished, interrupted, terminated, failed).
"""

import dataclasses
import uuid

from albert_tf.storage import atomic, provenance
from albert_tf.storage.integrity import newest_checkpoint
from albert_tf.training.checkpoints import RUN_INFO, read_run_info
from albert_tf.storage import files

SESSIONS = "sessions"
ALLOW_FLAG = "--allow_changed_settings"
# the settings that are paths: compared as absolute paths
PATH_SETTINGS = ("init_checkpoint", "albert_hub_module_handle")


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


def resolve_policy(requested, tpu=False):
    """The dtype policy --dtype_policy=`requested` computes in on this machine (`tpu`: the
    run's strategy is a TPU one), as the driver will resolve it (training/precision.py)."""
    from albert_tf.training.precision import choose

    return choose(requested, tpu=tpu).policy


def _last_training(info):
    return next((entry for entry in reversed(info.get(SESSIONS, [])) if entry.get("trains")), None)


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
    Writes nothing.
    """
    if session is None or not session.trains:
        return []
    session.changes = []
    info = read_run_info(output_dir)
    previous = _last_training(info)
    if previous is None:
        return []
    old_settings, old_length = previous["settings"], previous["length"]
    if not newest_checkpoint(output_dir):
        return []  # nothing to continue: the training starts anew
    changed = _differences(old_settings, session.settings)
    longer = _differences(old_length, session.length)
    if changed and not session.allow_changed_settings:
        raise ValueError(
            f"--output_dir={output_dir} holds a training with other settings: "
            f"{'; '.join(describe_change(c) for c in changed)}. Continuing it with these would make one result of "
            f"two trainings: start a new run with a new --output_dir, or pass {ALLOW_FLAG} to continue this one "
            f"with the new settings (the change is recorded in {files.join(output_dir, RUN_INFO)}).")
    session.changes = changed + longer
    return session.changes


def entry(session, precision, strategy, start_step, resumed_from):
    """This session's run_info.json entry (see the module docstring)."""
    return {"id": uuid.uuid4().hex, "started": provenance.utc_now(),
            "command": session.command, "trains": session.trains, "flags": session.flags,
            "settings": session.settings, "length": session.length,
            "allow_changed_settings": session.allow_changed_settings, "changes": session.changes,
            **provenance.environment(strategy), **precision.as_dict(),
            "start_step": int(start_step), "resumed_from": resumed_from}


def made_by(session, precision=None):
    """The "made_by" record (albert_tf.storage.provenance.record) of what a session writes
    besides run_info.json (a fine-tuning run's export): its command and flags as given, and
    the dtype policy the run resolved (`precision`'s, else the session's settings'). None
    where there is no session (a library call without a command)."""
    if session is None:
        return None
    policy = precision.policy if precision is not None else session.settings.get("dtype_policy")
    return provenance.record(session.command, session.flags, dtype_policy=policy)


def append_session(output_dir, session_entry, top_level=None):
    """Appends `session_entry` to run_info.json's sessions (earlier ones kept as they are);
    `top_level` (a new run's initialized_from, task, model...) updates the other keys."""
    info = read_run_info(output_dir)
    if top_level:
        info.update(top_level)
    info.setdefault(SESSIONS, []).append(session_entry)
    atomic.write_json(files.join(output_dir, RUN_INFO), info)


def end_session(output_dir, session_id, final_step, error=None):
    """Adds the end to this session's entry (by its id; None: nothing, a worker that does
    not write): final_step and status "finished", or for `error` (what stopped it)
    "terminated" (SIGTERM), "interrupted" (Ctrl-C) or "failed" with the error. A write
    that fails then is ignored: the error that stopped the run is the one to report."""
    if session_id is None:
        return
    from albert_tf.training.errors import Terminated

    fields = {"final_step": int(final_step), "status": "finished",
              "ended": provenance.utc_now()}
    if error is not None:
        fields["status"] = ("terminated" if isinstance(error, Terminated) else
                            "interrupted" if isinstance(error, KeyboardInterrupt) else "failed")
        fields["error"] = f"{type(error).__name__}: {error}"[:500]
    try:
        info = read_run_info(output_dir)
        for item in info.get(SESSIONS, []):
            if item.get("id") == session_id:
                item.update(fields)
                atomic.write_json(files.join(output_dir, RUN_INFO), info)
                return
    except OSError:
        if error is None:
            raise
