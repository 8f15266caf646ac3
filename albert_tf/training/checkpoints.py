"""Checkpoints that survive: CheckpointManager in output_dir, exact resume, the best
checkpoint by dev metric, strict init_checkpoint.

A training checkpoint (`output_dir/ckpt-N`, N = global step) holds `model`, `optimizer`
(slots and iterations = global step), `random_states` (dropout RNG) and, when given,
`iterator` (the input position). `output_dir/best/ckpt-N` is the checkpoint with the best
dev metric so far, described by `best/best_metrics.json`; `output_dir/run_info.json`
records where the run's weights started and each session (training/sessions.py). Under multi-worker training
every worker saves
(the collective needs them all), the non-chief ones to a temporary directory that is
removed, and every worker resumes from the chief's newest checkpoint in output_dir (so
output_dir must be one directory that every worker reads: a shared filesystem).
"""

import functools
import re
import tempfile
import weakref

import tensorflow as tf

from albert_tf.modeling.pretrained import PRETRAINER_WEIGHTS
from albert_tf.storage import atomic, integrity
from albert_tf.storage.integrity import checkpoint_candidates
from albert_tf.storage.json_files import read_json
from albert_tf.training.errors import TERMINATED, Terminated
from albert_tf.storage.checkpoints import list_variables, load_init_checkpoint as _load, model_variables, \
    object_variables, random_states
from albert_tf.storage.report import CheckpointMismatchError, MatchReport
from albert_tf.storage import files, space

BEST_DIR = "best"
BEST_METRICS = "best_metrics.json"
# what a run that only reads its damaged best checkpoint is told to do
BEST_FIX = ("Restore it from a copy, or run the training command again on the run: it sets a damaged best checkpoint "
            "aside and chooses the best anew (moved away, evaluation and prediction use the newest checkpoint).")
RUN_INFO = "run_info.json"


def read_run_info(output_dir):
    """run_info.json of a run directory as a dict ({} when there is none)."""
    path = files.join(output_dir, RUN_INFO)
    if not files.isfile(path):
        return {}
    return read_json(path, f"albert_tf's record of the run ({RUN_INFO})",
                     fix="it was damaged: restore it, or start anew in another --output_dir")


def load_init_checkpoint(model, init_checkpoint):
    """Loads `model` (an AlbertPretrainer) from a training checkpoint (prefix or run
    directory) or an albert_tf pretrained directory; see storage.checkpoints."""
    return _load(model, init_checkpoint, weights_file_names=(PRETRAINER_WEIGHTS,))


_PARTIAL_SAVE = re.compile(r"^(ckpt-\d+_temp|checkpoint\.tmp[0-9a-f]+)$")


def remove_partial_saves(output_dir):
    """Removes what a killed save left in a run directory and its best/: TensorFlow's
    `ckpt-N_temp/` and the state file's temporary. Only for the chief of a run it holds
    (storage.lock): no other save is under way there. Returns the paths removed."""
    removed = []
    for directory in (output_dir, files.join(output_dir, BEST_DIR)):
        for name in files.listdir(directory) if files.isdir(directory) else ():
            if _PARTIAL_SAVE.match(name):
                files.remove(files.join(directory, name))
                removed.append(files.join(directory, name))
    return removed


def _partial_files_removed(directory, step):
    """Around a CheckpointManager's save of `ckpt-{step}` in `directory`: what a failed save
    left (TensorFlow's `ckpt-N_temp/`, partial `ckpt-N.*` files, the state file's temporary)
    is removed; the checkpoints before stay."""
    return space.partial_files_removed(directory, f"ckpt-{int(step)}.", f"ckpt-{int(step)}_temp", "checkpoint.tmp")


class TrainingCheckpoints:
    """CheckpointManager over output_dir with chief-only writing.

    Args:
        output_dir: the run directory; checkpoints are `ckpt-N`.
        model, optimizer: what to save.
        keep_checkpoint_max: checkpoints kept.
        is_chief: whether this worker writes to output_dir.
        iterator: optional input iterator to save the input position.
        keep_best: also keep the best checkpoint by a dev metric in output_dir/best (the
            chief alone: the driver refuses it under multi-worker training).
        on_save: called (chief only) after each save.
        trains: whether this run trains. One that does not (predict or eval only) also
            restores a checkpoint without dropout RNG states (written with other dropout
            settings): they only matter for continuing training exactly.
    """

    def __init__(self, output_dir, model, optimizer, keep_checkpoint_max=5, is_chief=True, iterator=None,
                 keep_best=False, on_save=None, trains=True):
        items = {"model": model, "optimizer": optimizer}
        states = random_states(model)
        if states:
            # Keras keeps dropout RNG state in SeedGenerators, which TF checkpoint tracking
            # does not reach: without them a resumed run would draw other dropout masks.
            items["random_states"] = tf.Module()
            items["random_states"].states = states
        if iterator is not None:
            items["iterator"] = iterator
        self.items = items
        self.trains = trains
        self.checkpoint = tf.train.Checkpoint(**items)
        self.model = model
        self.output_dir = output_dir
        self.is_chief = is_chief
        self.on_save = on_save
        directory = output_dir if is_chief else tempfile.mkdtemp(prefix="albert_tf_worker_ckpt_")
        self._temp_dir = None if is_chief else directory
        # removed by close(), or when the process ends otherwise (a lost worker, Ctrl-C)
        self._remove_temp_dir = weakref.finalize(self, atomic.remove_own, directory) if self._temp_dir else None
        self._new_manager = functools.partial(tf.train.CheckpointManager, self.checkpoint, directory,
                                              max_to_keep=keep_checkpoint_max, checkpoint_name="ckpt")
        self.manager = self._new_manager()
        self.keep_best = keep_best
        self.best = None
        self.damaged, self.damaged_best = [], None  # restore_latest's [(prefix, what is wrong)], best/'s (prefix, what)
        self.resumed = None
        if keep_best:
            self.best_dir = files.join(output_dir, BEST_DIR)
            self._new_best_manager = functools.partial(tf.train.CheckpointManager, self.checkpoint, self.best_dir,
                                                       max_to_keep=1, checkpoint_name="ckpt")
            self.best_manager = self._new_best_manager()
            self.best = self._read_best()

    # --- resume ------------------------------------------------------------------------

    def restore_latest(self):
        """Restores the newest checkpoint of output_dir that restores; returns its path or None.

        A damaged one (cut short, bytes changed, a file missing) is skipped, and so, for a
        run that trains, is a damaged best checkpoint (best/ read whole now, not when the run
        ends: the best is then chosen anew); they are in `self.damaged` and
        `self.damaged_best`, for `set_aside_damaged`.

        Raises:
            ValueError: the checkpoint lacks objects this run saves (written by another
                version or another command) or its model does not match (named).
            DamagedFileError: checkpoints exist and none restores (each named), or for a
                run that does not train, the newest is damaged.
        """
        # Every worker restores the chief's newest checkpoint in output_dir (the others only
        # write theirs to scratch directories): a worker that started fresh would train on
        # other weights, input and dropout masks than the chief, step against step.
        # made now (else at the first save): a restore fills it at once, and one that fails
        # leaves no value waiting for it (TensorFlow would warn of it when the run ends)
        self.checkpoint.save_counter  # noqa: B018 (the property makes it)
        self.resumed, self.damaged = integrity.restore_newest(self.output_dir, self._restore, self.trains)
        if self.keep_best and self.trains:  # best/ read now, what restore_best restores (not the input position)
            best = next(iter(checkpoint_candidates(self.best_dir)), None)
            read = functools.partial(integrity.read_variables, roots=set(self.items) - {"iterator"})
            what = best and integrity.damage_of(best, read)
            if what:
                self.damaged_best, self.best = (best, what), None
        return self.resumed

    def set_aside_damaged(self):
        """Lines naming each damaged checkpoint `restore_latest` passed over; the chief sets
        them aside (storage.integrity.set_aside: kept, no longer read). Called once every
        worker has chosen its checkpoint (the driver: after check_same_start), so that no
        worker reads a run's files while its chief moves them."""
        lines = [f"damaged checkpoint {prefix}: {what}; {integrity.set_aside(prefix, self.is_chief)}; continuing "
                 f"from {self.resumed}, the newest checkpoint that restores" for prefix, what in self.damaged]
        if self.damaged_best:  # best/ goes whole, with its record
            prefix, what = self.damaged_best
            kept = integrity.set_aside(self.best_dir, self.is_chief)
            lines.append(f"damaged best checkpoint {prefix}: {what}; {kept}; the best checkpoint is chosen anew from "
                         f"{self.resumed or 'step 0'} on")
        if lines and self.is_chief:  # from the state files without them
            self.manager = self._new_manager()
            if self.keep_best:
                self.best_manager = self._new_best_manager()
        return lines

    def _restore(self, path):
        self.check_resumable(path)
        # a run that does not train (predict or eval only) holds no input iterator: the
        # checkpoint's is left unread on purpose
        self._checkpoint_for(path).restore(path).assert_existing_objects_matched().expect_partial()

    def _checkpoint_for(self, prefix, input_position=True):
        """What `prefix` is restored into: everything this run saves, but for a run that
        does not train and a checkpoint without random_states, the rest alone; without the
        input iterator when not `input_position`."""
        left_out = set() if input_position else {"iterator"}
        if not self.trains and "random_states" in self.items and not any(
                n.startswith("random_states/") for n in list_variables(prefix)):
            left_out.add("random_states")
        if not left_out & set(self.items):
            return self.checkpoint
        return tf.train.Checkpoint(**{k: v for k, v in self.items.items() if k not in left_out})

    def check_resumable(self, prefix):
        names = list_variables(prefix)
        roots = {n.split("/", 1)[0] for n in names}
        fresh = (f"To start a new run, use another --output_dir or remove the ckpt-* files (and checkpoint) "
                 f"from {self.output_dir}.")
        missing = sorted(set(self.items) - roots - (set() if self.trains else {"random_states"}))
        if missing:
            raise ValueError(
                f"cannot resume from {prefix}: it holds no {', '.join(missing)} (this run also saves "
                f"{', '.join(missing)}: it was written by another albert_tf version or command, so the run could "
                f"not continue exactly). {fresh}")
        report = MatchReport.compare(model_variables(self.model), object_variables(prefix, "model"),
                                     f"the checkpoint to resume ({prefix})")
        if not report.ok:
            raise CheckpointMismatchError(report.format(limit=20) + f"\nThe model (its config) changed. {fresh}")
        if "random_states" in self.items and (self.trains or "random_states" in roots):
            found = len([n for n in names if n.startswith("random_states/") and n.endswith("VARIABLE_VALUE")])
            if found != len(self.items["random_states"].states):
                raise ValueError(f"cannot resume from {prefix}: it holds {found} dropout RNG states, the model has "
                                 f"{len(self.items['random_states'].states)}. {fresh}")

    # --- saving --------------------------------------------------------------------------

    def save(self, step):
        with _partial_files_removed(self.manager.directory, step):
            path = self.manager.save(checkpoint_number=int(step))
        if self.is_chief and self.on_save is not None:
            self.on_save()
        if self._temp_dir:  # the scratch directory this manager made
            atomic.remove_own(self._temp_dir)
            files.makedirs(self._temp_dir)
        return path

    def save_if_terminated(self, step):
        """After SIGTERM (errors.TERMINATED): saves a checkpoint at `step` (unless the newest
        is that step's) and raises Terminated naming it; else nothing."""
        if not TERMINATED.is_set():
            return
        path = self.manager.latest_checkpoint
        if not (path and path.endswith(f"ckpt-{int(step)}")):
            path = self.save(step)
        raise Terminated(f"Saved the checkpoint {path} at step {int(step)}; run the same command again to resume "
                         "from it.")

    def close(self):
        if self._remove_temp_dir is not None:
            self._remove_temp_dir()

    # --- best checkpoint -----------------------------------------------------------------

    def _read_best(self):
        path = files.join(self.best_dir, BEST_METRICS)
        if not (files.isfile(path) and self.best_manager.latest_checkpoint):
            return None
        return read_json(path, f"the best checkpoint's record ({BEST_METRICS})",
                         fix=f"it was damaged: remove {self.best_dir} to choose the best checkpoint anew")

    def offer_best(self, step, metrics, key):
        """Keeps the model as the best checkpoint if metrics[key] beats the best so far
        (best/ and its record written). Returns True when it became the best."""
        if key not in metrics:
            raise ValueError(f"the best-checkpoint metric {key!r} is not among the eval metrics {sorted(metrics)}.")
        if self.best is not None and not metrics[key] > self.best["metrics"][key]:
            return False
        with _partial_files_removed(self.best_dir, step):
            self.best_manager.save(checkpoint_number=int(step))
        self.best = {"step": int(step), "metric": key, "metrics": dict(metrics),
                     "checkpoint": files.basename(self.best_manager.latest_checkpoint)}
        atomic.write_json(files.join(self.best_dir, BEST_METRICS), self.best)
        return True

    def restore_best(self):
        """Restores the best checkpoint (if any) for the results, after training: all but the
        input iterator (its position matters only to training; restoring it rebuilds the input
        pipeline, seconds of work). Returns its path or None."""
        path = self.best_manager.latest_checkpoint if self.keep_best else None
        if path:
            with integrity.reading_checkpoint(path, f"the best checkpoint of {self.output_dir}", BEST_FIX):
                self._checkpoint_for(path, input_position=False).restore(path).assert_existing_objects_matched() \
                    .expect_partial()
        return path
