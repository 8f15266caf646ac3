"""Fine-tuning loop and checkpoints for AlbertClassifier, under any tf.distribute strategy.

As the release's run_classifier: per-example cross-entropy (squared error for
regression) averaged over the global batch, gradients summed over replicas and clipped
to global norm 1.0, the release's AdamW (or LAMB) with linear warmup and linear decay
to 0 at `num_train_steps`.

Checkpoints: `output_dir/ckpt-N` (model and optimizer, the newest `keep_checkpoint_max`
kept; a run resumes from the newest) and `output_dir/best/ckpt-N`, the checkpoint with
the best dev metric so far, with `best/best_metrics.json`.
"""

import json
import os

import numpy as np
import tensorflow as tf

from albert_tf.modeling.losses import classifier_nll
from albert_tf.training.checkpoints import TrainingCheckpoints
from albert_tf.training.distribution import check_global_batch, sum_and_clip
from albert_tf.training.optimizer import create_optimizer
from albert_tf.training.schedules import WarmupPolynomialDecay

BEST_DIR = "best"
BEST_METRICS = "best_metrics.json"


class FineTuningLoop:
    """Optimizer and the compiled train/predict steps of a classifier.

    Args:
        strategy: the tf.distribute strategy the classifier was built under.
        model: AlbertClassifier (built in `strategy.scope()`).
        global_batch_size: examples per step over all replicas.
        optimizer: "adamw" (the release's run_classifier default) or "lamb".
        learning_rate, num_train_steps, num_warmup_steps: the schedule (poly power 1).
        clip_norm: global gradient norm.
    """

    def __init__(self, strategy, model, global_batch_size, optimizer="adamw", learning_rate=5e-5,
                 num_train_steps=1000, num_warmup_steps=0, clip_norm=1.0):
        self.strategy = strategy
        self.model = model
        self.global_batch_size = int(global_batch_size)
        self.clip_norm = float(clip_norm)
        check_global_batch(strategy, global_batch_size)
        with strategy.scope():
            self.schedule = WarmupPolynomialDecay(learning_rate, num_train_steps, num_warmup_steps)
            self.optimizer = create_optimizer(optimizer, self.schedule)
            self.optimizer.build(model.trainable_variables)
        self._train_fn = tf.function(self._train_loop)
        self._predict_fn = tf.function(lambda inputs: model(inputs, training=False))

    @property
    def step(self):
        return int(self.optimizer.iterations.numpy())

    def _replica_step(self, inputs, labels):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            nll = classifier_nll(self.model(inputs, training=True), labels)  # [B]
            loss_sum = tf.reduce_sum(nll)
            loss = loss_sum / float(self.global_batch_size)
        self.optimizer.apply(sum_and_clip(tape.gradient(loss, variables), self.clip_norm), variables)
        return loss_sum

    def _train_loop(self, iterator, steps):
        total = tf.constant(0.0)
        for _ in tf.range(steps):
            inputs, labels = next(iterator)
            per_replica = self.strategy.run(self._replica_step, args=(inputs, labels))
            total += self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
        return total

    def train(self, iterator, steps):
        """Runs `steps` steps on a distributed iterator; returns their mean loss."""
        total = self._train_fn(iterator, tf.constant(steps, tf.int32))
        return float(total) / (steps * self.global_batch_size)

    def predict(self, dataset):
        """Logits [N, C] and labels [N] of a (non-distributed) dataset, in order."""
        logits, labels = [], []
        for inputs, batch_labels in dataset:
            logits.append(np.asarray(self._predict_fn(inputs)))
            labels.append(batch_labels.numpy())
        return np.concatenate(logits), np.concatenate(labels)


def predictions_from_logits(logits):
    """[N, C] -> class ids [N]; [N, 1] (regression) -> scores [N]."""
    return logits[:, 0] if logits.shape[-1] == 1 else np.argmax(logits, axis=-1)


class FineTuningCheckpoints(TrainingCheckpoints):
    """`ckpt-N` in output_dir (resume, with the dropout RNG state) and the best one by dev
    metric in output_dir/best.

    Args:
        output_dir: the run directory.
        model, optimizer: what to save.
        keep_checkpoint_max: regular checkpoints kept.
    """

    def __init__(self, output_dir, model, optimizer, keep_checkpoint_max=5):
        super().__init__(output_dir, model, optimizer, keep_checkpoint_max, write_pretrained=False)
        self.best_dir = os.path.join(output_dir, BEST_DIR)
        self.best_manager = tf.train.CheckpointManager(self.checkpoint, self.best_dir, max_to_keep=1,
                                                       checkpoint_name="ckpt")
        self.best = self._read_best()

    def _read_best(self):
        path = os.path.join(self.best_dir, BEST_METRICS)
        if not (os.path.isfile(path) and self.best_manager.latest_checkpoint):
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def restore_best(self):
        """Restores the best checkpoint (if any); returns its path or None."""
        path = self.best_manager.latest_checkpoint
        if path:
            self.checkpoint.restore(path).assert_existing_objects_matched()
        return path

    def offer(self, step, metrics, key):
        """Keeps the model as the best checkpoint if metrics[key] beats the best so far.

        Returns:
            True when it became the best.
        """
        if self.best is not None and not metrics[key] > self.best["metrics"][key]:
            return False
        self.best_manager.save(checkpoint_number=int(step))
        self.best = {"step": int(step), "metric": key, "metrics": metrics,
                     "checkpoint": os.path.basename(self.best_manager.latest_checkpoint)}
        path = os.path.join(self.best_dir, BEST_METRICS)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(self.best, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(path + ".tmp", path)
        return True
