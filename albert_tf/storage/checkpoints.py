"""Reading checkpoints: finding the newest prefix, listing variables, and loading a model
from an init_checkpoint with the one matching report (`albert_tf.storage.report`)."""

import os
import re
import tempfile

import tensorflow as tf

from albert_tf.compat import all_layers, seed_generators
from albert_tf.storage.report import CheckpointMismatchError, MatchReport
from albert_tf.storage.weights_file import load_weights_file
from albert_tf.storage import files, integrity

_STEP = re.compile(r"-(\d+)\.index$")
_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"


def latest_prefix(path):
    """A checkpoint prefix from `path`: the prefix itself, or for a directory the one its
    `checkpoint` file names, else the highest-numbered `*-N.index` in it (ckpt-10000 over
    ckpt-9, not the alphabetically last). None when there is none; DamagedFileError for a
    checkpoint without its index (`path` itself, or the one the `checkpoint` file names)."""
    path = os.fspath(path)
    if files.exists(path + ".index"):
        return path
    integrity.check_named_checkpoint(path)
    if not files.isdir(path):
        return None
    named = tf.train.latest_checkpoint(path)
    if named:
        return named
    candidates = []
    for name in files.listdir(path):
        if name.endswith(".index"):
            m = _STEP.search(name)
            candidates.append((int(m.group(1)) if m else -1, name))
    if not candidates:
        return None
    steps = [c for c in candidates if c[0] >= 0]
    if not steps and len(candidates) > 1:
        raise CheckpointMismatchError(
            f"{path} holds several checkpoints without step numbers and no `checkpoint` file: "
            + ", ".join(sorted(n for _, n in candidates)) + ". Name the one to use (its prefix, without .index).")
    _, best = max(candidates)
    return files.join(path, best[: -len(".index")])


def list_variables(prefix):
    """{name: shape} of every variable in the checkpoint at `prefix`."""
    # the reader of the prefix itself: tf.train.list_variables first asks whether `prefix` is a
    # directory, which ram:// answers yes for any prefix of a name (storage/files.py)
    shapes = tf.compat.v1.train.NewCheckpointReader(prefix).get_variable_to_shape_map()
    return {n: tuple(shapes[n]) for n in sorted(shapes)}


def object_variables(prefix, root):
    """{name: shape} of the variables under object `root` of an object-based checkpoint
    (e.g. root "model"), names without the `/.ATTRIBUTES/VARIABLE_VALUE` suffix."""
    return {n[: -len(_VALUE)]: tuple(s) for n, s in list_variables(prefix).items()
            if n.startswith(root + "/") and n.endswith(_VALUE)}


def model_variables(model, root="model"):
    """{name: shape} that `tf.train.Checkpoint(root=model)` writes for `model`."""
    with tempfile.TemporaryDirectory() as tmp:
        prefix = tf.train.Checkpoint(**{root: model}).write(files.join(tmp, "probe"))
        return object_variables(prefix, root)


def load_init_checkpoint(model, init_checkpoint, flag="--init_checkpoint", weights_file_names=()):
    """Loads `model` from a training checkpoint (a prefix or a run directory) or from an
    albert_tf pretrained directory holding one of `weights_file_names` (Keras
    `.weights.h5`). Every model variable must be present with its shape (the report lists
    what is not); optimizer slots, the step and the input position are ignored. Returns the
    path that was read; CheckpointMismatchError for no checkpoint or variables that differ,
    DamagedFileError (storage.integrity) for a checkpoint or weights file that is damaged.
    """
    init_checkpoint = os.fspath(init_checkpoint)
    prefix = latest_prefix(init_checkpoint)
    if prefix is None:
        for name in weights_file_names:
            weights = files.join(init_checkpoint, name)
            if files.isfile(weights):
                return load_weights_file(model, weights, flag)
        raise CheckpointMismatchError(
            f"{flag}={init_checkpoint}: no checkpoint there (expected a ckpt-N prefix, a directory holding one"
            + (", or a directory with " + " or ".join(weights_file_names) if weights_file_names else "") + ").")
    expected = model_variables(model)
    with integrity.reading_checkpoint(prefix, f"{flag}={init_checkpoint}", integrity.READER_FIX):
        found = object_variables(prefix, "model")
        MatchReport.compare(expected, found, f"{flag}={prefix}").raise_if_mismatched()
        tf.train.Checkpoint(model=model).read(prefix).expect_partial().assert_existing_objects_matched()
    return prefix


def random_states(model):
    """The state variables of every Keras SeedGenerator in `model` (dropout), in layer
    order. TF checkpoint tracking does not reach them, so checkpoints save them
    explicitly; without them a resumed run would draw other dropout masks."""
    return [getattr(generator.state, "value", generator.state)
            for layer in all_layers(model) for generator in seed_generators(layer)]
