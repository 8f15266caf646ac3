"""Checkpoints that survive: CheckpointManager in output_dir, resume, strict init_checkpoint.

A training checkpoint (`output_dir/ckpt-N`, N = global step) holds `model` (the
AlbertPretrainer), `optimizer` (slots and iterations = global step), `random_states`
(dropout RNG) and, when given, `iterator` (the input position). With each checkpoint the
chief also writes `output_dir/albert_config.json` and `pretrainer.weights.h5`, so a run
directory loads with `AlbertPretrainer.from_pretrained(output_dir)`. Under multi-worker training every worker saves (the
collective needs them all), the non-chief ones to a temporary directory that is removed.
"""

import os
import shutil
import tempfile

import tensorflow as tf

from albert_tf.modeling.pretrained import PRETRAINER_WEIGHTS, save_pretrained
from albert_tf.storage.checkpoints import load_init_checkpoint as _load, random_states
from albert_tf.storage.report import CheckpointMismatchError  # noqa: F401  (re-exported)


def load_init_checkpoint(model, init_checkpoint):
    """Loads `model` (an AlbertPretrainer) from a training checkpoint (prefix or run
    directory) or an albert_tf pretrained directory; see storage.checkpoints."""
    return _load(model, init_checkpoint, weights_file_names=(PRETRAINER_WEIGHTS,))


class TrainingCheckpoints:
    """CheckpointManager over output_dir with chief-only writing.

    Args:
        output_dir: the run directory; checkpoints are `ckpt-N`.
        model, optimizer: what to save.
        keep_checkpoint_max: checkpoints kept.
        is_chief: whether this worker writes to output_dir.
        iterator: optional input iterator to save the input position.
        write_pretrained: also write the model as an albert_tf pretrained directory
            (AlbertEncoder / AlbertPretrainer) with each save.
    """

    def __init__(self, output_dir, model, optimizer, keep_checkpoint_max=5, is_chief=True, iterator=None,
                 write_pretrained=True):
        items = {"model": model, "optimizer": optimizer}
        states = random_states(model)
        if states:
            # Keras keeps dropout RNG state in SeedGenerators, which TF checkpoint tracking
            # does not reach: without them a resumed run would draw other dropout masks.
            items["random_states"] = tf.Module()
            items["random_states"].states = states
        if iterator is not None:
            items["iterator"] = iterator
        self.checkpoint = tf.train.Checkpoint(**items)
        self.model = model
        self.output_dir = output_dir
        self.is_chief = is_chief
        self.write_pretrained = write_pretrained
        directory = output_dir if is_chief else tempfile.mkdtemp(prefix="albert_tf_worker_ckpt_")
        self._temp_dir = None if is_chief else directory
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, directory, max_to_keep=keep_checkpoint_max, checkpoint_name="ckpt")

    def restore_latest(self):
        """Restores the newest checkpoint of output_dir; returns its path or None."""
        path = self.manager.latest_checkpoint
        if path:
            self.checkpoint.restore(path).assert_existing_objects_matched()
        return path

    def save(self, step):
        path = self.manager.save(checkpoint_number=int(step))
        if self.is_chief and self.write_pretrained:
            # the newest weights also as an albert_tf pretrained directory (from_pretrained)
            save_pretrained(self.model, self.output_dir)
        if self._temp_dir:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            os.makedirs(self._temp_dir, exist_ok=True)
        return path

    def close(self):
        if self._temp_dir:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
