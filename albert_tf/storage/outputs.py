"""No command deletes or overwrites what it did not make: the one rule for output paths
(docs/outputs.md).

Every output is an `Output(flag, path, kind)`; `check` decides for all of a command's outputs
at once, before any work (new, albert_tf's own by its `MARKER`, else `OutputRefused`, a
ValueError naming the flag and the path) and takes the `held` outputs' locks (storage.lock)
for the rest of the command; the writers below hold theirs while they write.

    from albert_tf.storage import outputs
    outputs.check([outputs.Output("--output_dir", run_dir, outputs.RUN),
                   outputs.Output("--export_dir", export_dir, outputs.EXPORT)],
                  [outputs.Input("--init_checkpoint", init_checkpoint)])     # before any work
    outputs.claim_run(run_dir)                        # creates it (or keeps it), marked
    with outputs.replacing_dir(export_dir, outputs.EXPORT) as tmp:            # writers
        ...                                           # tmp replaces export_dir when complete
    with outputs.replacing_file(cache, outputs.FEATURE_CACHE):
        ...                                           # the file is written (atomically) here
"""

import contextlib
import dataclasses
import os
import time

from albert_tf.storage import atomic, files, lock, provenance
from albert_tf.storage.json_files import read_json

MARKER = ".albert_tf_output.json"
LOCK = ".albert_tf_lock"  # the lock's file (storage.lock), placed as the marker is but inside kept directories only
RUN, EXPORT, CONVERSION, FEATURE_CACHE, PRETRAINING_DATA = (
    "run", "export", "conversion", "feature_cache", "pretraining_data")
# what the tools write
GENERATED_DATA, DATA_DIRECTORY, SENTENCEPIECE_MODEL, PLOT, CONFIG, DEMO = (
    "generated_data", "data_directory", "sentencepiece_model", "plot", "config", "demo")
# export_litert's .tflite, and beside it its SentencePiece model and JSON (kinds of their own)
LITERT_MODEL, LITERT_SENTENCEPIECE, LITERT_INFO = "litert_model", "litert_sentencepiece", "litert_info"
REPRODUCTION = "reproduction"  # tools/reproduce.py's grid directory (resumed)
LEARNING_CHECKS = "learning_checks"  # a learning-checks results directory (reused)
DESCRIPTIONS = {RUN: "run directory", EXPORT: "export", CONVERSION: "conversion", FEATURE_CACHE: "feature cache",
                PRETRAINING_DATA: "pretraining data file", GENERATED_DATA: "generated data file",
                DATA_DIRECTORY: "generated data directory", SENTENCEPIECE_MODEL: "SentencePiece model file",
                PLOT: "plot", CONFIG: "config file", DEMO: "demo directory", LITERT_MODEL: "LiteRT model",
                LITERT_SENTENCEPIECE: "LiteRT model's SentencePiece model", LITERT_INFO: "LiteRT model's JSON",
                REPRODUCTION: "reproduction directory", LEARNING_CHECKS: "learning checks' results directory"}
DIRECTORY_KINDS = (RUN, EXPORT, CONVERSION, DATA_DIRECTORY, DEMO, REPRODUCTION, LEARNING_CHECKS)
WHAT_HAPPENS = {RUN: "resumes", REPRODUCTION: "resumes", DEMO: "reuses", LEARNING_CHECKS: "reuses"}  # else replaces
# not locked: a cache is made from its inputs and replaced whole, and a reader of a run may write it too
UNLOCKED = (FEATURE_CACHE,)

# what a run directory holds itself: an output nested in a run may not take these names
RUN_INFO = "run_info.json"
RUN_NAMES = ("best", "train", "eval", "checkpoint", RUN_INFO, "metrics.jsonl", "eval_results.json",
             "eval_results.txt", "training_curves.png", "albert_config.json", "model.json", MARKER, LOCK)
RUN_NAME_PREFIXES = ("ckpt-", ".ckpt")
RUN_NAME_SUFFIXES = (".weights.h5",)


class OutputRefused(ValueError):
    """An output path albert_tf may not write; the message names the flag and the path."""


@dataclasses.dataclass(frozen=True)
class Output:
    """An output of a command: its flag (for the message), path and kind (RUN, ...); `held`
    False where the command writes it without holding its lock (`check`): a run it only reads
    (evaluation or prediction alone), a worker's output that its cluster's chief holds."""

    flag: str
    path: str
    kind: str
    held: bool = True


@dataclasses.dataclass(frozen=True)
class Input:
    """An input of a command (a file, a directory or a checkpoint prefix)."""

    flag: str
    path: str



def _own_file(path, inside, suffix):
    """`path/<suffix>` (`inside`), else `dir/.<name><suffix>` beside `path`."""
    path = os.fspath(path)
    if inside:
        return files.join(path, suffix)
    directory, name = files.split(files.abspath(path))
    return files.join(directory, f".{name}{suffix}")


def marker_path(path, kind):
    """Where the marker of output `path` of `kind` lives: `path/MARKER` for a directory
    kind, `dir/.<name>.albert_tf_output.json` beside a file."""
    return _own_file(path, kind in DIRECTORY_KINDS, MARKER)


def lock_path(path, kind):
    """Where the lock of output `path` of `kind` lives: `path/LOCK` in a directory kept in
    place (a run), `dir/.<name>.albert_tf_lock` beside any other (a replaced output takes its
    contents away, and its parent must be writable anyway)."""
    return _own_file(path, kind in WHAT_HAPPENS, LOCK)


def read_marker(path, kind):
    """The marker dict of output `path` (None when there is none); an unreadable marker
    is {"kind": None}."""
    where = marker_path(path, kind)
    if not files.lexists(where):
        return None
    try:
        data = read_json(where, "albert_tf's record of an output")
    except (OSError, ValueError):
        data = None
    return data if isinstance(data, dict) else {"kind": None}


def _companions(path):
    """The files beside file output `path` named `<name>.json` or `<name>.<part>.json` (a
    feature cache's sidecar and companions)."""
    directory, name = files.split(files.abspath(path))
    if not files.isdir(directory):
        return []
    return [files.join(directory, n) for n in sorted(files.listdir(directory))
            if n.startswith(name + ".") and n.endswith(".json")]


def _foreign_companion(path):
    """For a feature cache that does not exist: an existing `<name>.json` or
    `<name>.<part>.json` beside it (the sidecar and companions it would write) that is not
    albert_tf's, or None."""
    found = _companions(path)
    if not found or read_marker(path, FEATURE_CACHE) is not None:
        return None  # the marker stays while companions do: they are its own
    return found[0]


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What `examine` found: status "new", "own" or "foreign", and why (for "foreign")."""

    status: str
    why: str = ""


def examine(path, kind):
    """The rule's three cases for one path: Verdict("new"), Verdict("own") or
    Verdict("foreign", why)."""
    if kind not in DESCRIPTIONS:
        raise ValueError(f"unknown output kind {kind!r}; one of {', '.join(DESCRIPTIONS)}.")
    path = os.fspath(path)
    what = DESCRIPTIONS[kind]
    if not files.lexists(path):
        taken = _foreign_companion(path) if kind == FEATURE_CACHE else None
        return Verdict("foreign", f"does not exist, but {taken} does and albert_tf did not make it (a feature cache "
                                  "writes its sidecar and companions there)") if taken else Verdict("new")
    if files.islink(path) and kind != RUN:
        return Verdict("foreign", "is a symbolic link (albert_tf would replace the link)")
    if kind in DIRECTORY_KINDS:
        if not files.isdir(path):
            return Verdict("foreign", "exists and is not a directory")
        if all(n.endswith(LOCK) for n in files.listdir(path)):  # empty but for locks (its own, its outputs')
            return Verdict("new")
    elif files.isdir(path):
        return Verdict("foreign", "is a directory")
    marker = read_marker(path, kind)
    if marker is not None:
        if marker.get("kind") == kind:
            return Verdict("own")
        other = DESCRIPTIONS.get(marker.get("kind"))
        article = "an" if what[0] in "aeiou" else "a"
        return Verdict("foreign", f"is albert_tf's {other}, not {article} {what}" if other else
                       f"has an unreadable marker {marker_path(path, kind)}")
    thing = "a directory" if files.isdir(path) else "a file"
    return Verdict("foreign", f"is {thing} that albert_tf did not make (no marker "
                              f"{files.basename(marker_path(path, kind))})")


def refuse_if_foreign(path, kind, flag=None):
    """Raises OutputRefused unless `path` is new or albert_tf's own `kind`; returns the
    status ("new" or "own")."""
    verdict = examine(path, kind)
    if verdict.status == "foreign":
        named = f"{flag}={path}" if flag else path
        raise OutputRefused(
            f"{named} {verdict.why}. albert_tf writes a new {DESCRIPTIONS[kind]} or "
            f"{WHAT_HAPPENS.get(kind, 'replaces')} its own, and never overwrites what it did not make: choose another "
            "path, or move this one away yourself.")
    return verdict.status


def _locked(take, path, kind, flag):
    """take(lock_path, flag, path) (lock.hold or lock.holding) for output `path`; an output
    that another live albert_tf process holds is refused (OutputRefused naming it)."""
    if kind in UNLOCKED:
        return contextlib.nullcontext()
    try:
        return take(lock_path(path, kind), flag, path)
    except lock.Held as e:
        reading = (" (A command that only reads the run, evaluation or prediction alone or an export from its "
                   "checkpoint, may run beside it.)" if kind == RUN else "")
        raise OutputRefused(f"{e}{reading}") from None



def _inside(child, parent):
    """Whether real path `child` lies strictly inside real path `parent`."""
    return child != parent and child.startswith(parent.rstrip(files.sep(parent)) + files.sep(parent))


def _run_name(name):
    return name in RUN_NAMES or name.startswith(RUN_NAME_PREFIXES) or name.endswith(RUN_NAME_SUFFIXES)


def _check_nesting(a, b):
    """Outputs a and b of one command (real paths differ): one inside the other is allowed
    only inside a run directory, under a name the run does not write itself."""
    ra, rb = files.realpath(a.path), files.realpath(b.path)
    for outer, inner, r_outer, r_inner in ((a, b, ra, rb), (b, a, rb, ra)):
        if not _inside(r_inner, r_outer):
            continue
        top = r_inner[len(r_outer.rstrip(files.sep(r_outer))):].lstrip(files.sep(r_outer)).split(files.sep(r_outer))[0]
        if outer.kind == RUN and not _run_name(top):
            continue
        why = (f"takes the name {top!r}, which the run in {outer.flag} writes itself" if outer.kind == RUN else
               f"lies inside {outer.flag}={outer.path}, which albert_tf writes as a whole")
        raise OutputRefused(f"{inner.flag}={inner.path} {why}; choose another {inner.flag}.")


def check(outputs, inputs=()):
    """Checks every output of one command before it does any work; writes nothing but the
    outputs' locks.

    Args:
        outputs: Output items (those with an empty path are skipped).
        inputs: Input items (those with an empty path are skipped): what the command reads.

    Returns:
        {output path: "new" or "own"}; inside a command (storage.lock.command) the `held`
        outputs' locks are taken, kept until the command ends.

    Raises:
        files.UnreachablePath: a store that does not answer or refuses; an unwritable output.
        OutputRefused: an output that equals, contains or lies inside an input; two outputs
            on one path, or one inside another; an output that is not new or own; an output
            that another live albert_tf process writes.
    """
    outputs = [o for o in outputs if o.path]
    inputs = [i for i in inputs if i.path]
    # one probe a store for the inputs, one written (and removed again) a directory for the outputs
    for i in {files.store(i.path): i for i in inputs[::-1]}.values():
        files.check_reachable(i.path, i.flag)
    for o in {files.dirname(files.abspath(o.path)): o for o in outputs[::-1]}.values():
        files.check_reachable(o.path, o.flag, write=True)
    for o in outputs:
        ro = files.realpath(o.path)
        for i in inputs:
            ri = files.realpath(i.path)
            if ro == ri:
                relation = "is the same path as"
            elif _inside(ri, ro):
                relation = "contains"
            elif _inside(ro, ri):
                relation = "lies inside"
            else:
                continue
            raise OutputRefused(f"{o.flag}={o.path} {relation} the input {i.flag}={i.path}: writing it would "
                                f"{'replace' if o.kind != RUN else 'write into'} what the command reads; choose "
                                f"another {o.flag}.")
    for n, a in enumerate(outputs):
        for b in outputs[n + 1:]:
            if files.realpath(a.path) == files.realpath(b.path):
                raise OutputRefused(f"{a.flag}={a.path} and {b.flag}={b.path} are the same path; each output needs "
                                    "its own.")
            _check_nesting(a, b)
    found = {o.path: refuse_if_foreign(o.path, o.kind, o.flag) for o in outputs}
    for o in outputs:
        if o.held:
            _locked(lock.hold, o.path, o.kind, o.flag)
    return found



def write_marker(path, kind, made_by=None):
    """Marks `path` as albert_tf's own `kind` (the writers below do it; for a directory
    being written under a temporary name, mark the temporary); `made_by` (a
    `provenance.record`) is kept in the marker, stamped with the time."""
    record = {"kind": kind, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "about": f"albert_tf made this {DESCRIPTIONS[kind]}; it resumes or replaces only outputs marked as its "
                       "own, and never overwrites what it did not make."}
    if made_by is not None:
        record["made_by"] = provenance.stamp(made_by)
    return atomic.write_json(marker_path(path, kind), record)


def claim_dir(path, kind, flag=None):
    """A directory output kept in place (RUN, DEMO): created when new, kept (resumed,
    reused) when albert_tf's own `kind`, refused (OutputRefused) otherwise; marked either
    way. Returns "new" or "own"."""
    status = refuse_if_foreign(path, kind, flag)
    files.makedirs(path)
    if read_marker(path, kind) is None:
        write_marker(path, kind)
    return status


def claim_run(path, flag="--output_dir"):
    """A run directory for this run: created when new, resumed when albert_tf's own run,
    refused (OutputRefused) otherwise; marked either way. Returns "new" or "own"."""
    return claim_dir(path, RUN, flag)


@contextlib.contextmanager
def replacing_dir(path, kind, flag=None, made_by=None):
    """Writes directory output `path` of `kind` (EXPORT, CONVERSION, DATA_DIRECTORY) under a
    temporary name (yielded, already marked) that replaces `path` only when the block
    completes; refuses (OutputRefused) a path that is not new or own, or that another live
    albert_tf process holds (its lock is held while the block runs). `made_by` (a
    `provenance.record`) goes into the marker, stamped, when the block completes."""
    refuse_if_foreign(path, kind, flag)
    with _locked(lock.holding, path, kind, flag), atomic.output_dir(path) as tmp:
        write_marker(tmp, kind)
        yield tmp
        if made_by is not None:
            write_marker(tmp, kind, made_by)


@contextlib.contextmanager
def replacing_file(path, kind, flag=None, held=True):
    """Around the (atomic) writing of file output `path` of `kind`: refuses (OutputRefused) a
    path that is not new or own, or (`held`) that another live albert_tf process holds (its
    lock is held while the block runs), marks it before the block, and removes the marker
    again when the block fails leaving neither the file nor a companion of it."""
    refuse_if_foreign(path, kind, flag)
    with _locked(lock.holding, path, kind, flag) if held else contextlib.nullcontext():
        if read_marker(path, kind) is None:  # new (an own output is marked)
            write_marker(path, kind)
        try:
            yield path
        except BaseException:
            if not files.lexists(path) and not _companions(path):  # nothing left for the marker to vouch for
                atomic.remove_own(marker_path(path, kind))
            raise
