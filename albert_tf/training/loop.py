"""The pretraining loop: the same code under every tf.distribute strategy.

Loss across replicas: each replica computes its share of the global-batch loss,
    mlm_nll_sum_local / (all_reduce(masked weights) + 1e-5) + sop_nll_sum_local / global_batch,
so the shares (and their gradients) sum to the release's loss over the global batch.
Gradients are summed over replicas, clipped to global norm `clip_norm`, then applied.
`iterations_per_loop` steps run inside one tf.function call. With `jit_compile` the
forward and backward passes are compiled by XLA under every strategy (the whole step is
XLA-compatible: tests compile it, as a TPU does). Shapes are static (drop_remainder
batches) and the step holds no string ops, as a TPU requires.
"""

import json
import math
import os
import sys
import time

import tensorflow as tf

from albert_tf.modeling import losses
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.training.distribution import check_global_batch, sum_and_clip
from albert_tf.training.errors import TrainingDivergedError
from albert_tf.training.optimizer import create_optimizer
from albert_tf.training.schedules import WarmupPolynomialDecay

MODEL_INPUTS = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")
TERMS = ("mlm_nll_sum", "mlm_correct_sum", "mlm_weight_sum", "sop_nll_sum", "sop_correct_sum", "sop_count")
METRIC_KEYS = ("loss", "masked_lm_loss", "masked_lm_accuracy", "sentence_order_loss", "sentence_order_accuracy")


def metrics_from_totals(totals):
    """Summed TERMS -> the reported metrics (floats)."""
    mlm = {"nll_sum": totals["mlm_nll_sum"], "correct_sum": totals["mlm_correct_sum"],
           "weight_sum": totals["mlm_weight_sum"]}
    sop = {"nll_sum": totals["sop_nll_sum"], "correct_sum": totals["sop_correct_sum"], "count": totals["sop_count"]}
    return {k: float(v) for k, v in losses.metrics_from_terms(mlm, sop).items()}


def _terms(outputs, batch):
    mlm = losses.masked_lm_terms(outputs["mlm_logits"], batch["masked_lm_ids"], batch["masked_lm_weights"])
    sop = losses.sentence_order_terms(outputs["sop_logits"], batch["next_sentence_labels"])
    return mlm, sop


def _flatten_terms(mlm, sop):
    return {"mlm_nll_sum": mlm["nll_sum"], "mlm_correct_sum": mlm["correct_sum"], "mlm_weight_sum": mlm["weight_sum"],
            "sop_nll_sum": sop["nll_sum"], "sop_correct_sum": sop["correct_sum"], "sop_count": sop["count"]}


class PretrainingLoop:
    """Model, optimizer and the compiled train/eval steps under one strategy.

    Args:
        strategy: a tf.distribute strategy.
        config: AlbertConfig.
        global_batch_size: examples per step over all replicas.
        optimizer: "lamb" or "adamw".
        learning_rate, num_train_steps, num_warmup_steps, start_warmup_step, poly_power:
            the release's schedule.
        clip_norm: global gradient norm.
        jit_compile: compile with XLA.
        use_one_hot_embeddings: one-hot word lookup (TPUs).
        dtype_policy: "float32" or "mixed_bfloat16".
    """

    def __init__(self, strategy, config, global_batch_size, optimizer="lamb", learning_rate=0.00176,
                 num_train_steps=125000, num_warmup_steps=3125, start_warmup_step=0, poly_power=1.0,
                 clip_norm=1.0, jit_compile=False, use_one_hot_embeddings=False, dtype_policy="float32"):
        self.strategy = strategy
        self.global_batch_size = int(global_batch_size)
        self.clip_norm = float(clip_norm)
        self.jit_compile = bool(jit_compile)
        check_global_batch(strategy, global_batch_size)
        with strategy.scope():
            self.model = AlbertPretrainer(config, use_one_hot_embeddings=use_one_hot_embeddings,
                                          dtype=None if dtype_policy == "float32" else dtype_policy)
            self.schedule = WarmupPolynomialDecay(learning_rate, num_train_steps, num_warmup_steps,
                                                  start_warmup_step, poly_power)
            self.optimizer = create_optimizer(optimizer, self.schedule)
            self.optimizer.build(self.model.trainable_variables)
        # With jit_compile the forward and backward passes run as one XLA program: on CPUs
        # XLA fuses the element-wise work (GELU, LayerNorm, softmax) around the matmuls; the
        # all-reduce, clipping and optimizer stay outside, so every strategy works. On TPUs
        # the whole step is compiled anyway.
        self._gradients_fn = (tf.function(self._gradients, jit_compile=True) if self.jit_compile
                              else self._gradients)
        self._train_fn = tf.function(self._train_loop)
        self._eval_fn = tf.function(self._eval_step)

    @property
    def step(self):
        return int(self.optimizer.iterations.numpy())

    def _gradients(self, batch, mlm_weight_total):
        """Gradients of this replica's share of the global-batch loss, and its TERMS."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = self.model({k: batch[k] for k in MODEL_INPUTS}, training=True)
            mlm, sop = _terms(outputs, batch)
            loss = (mlm["nll_sum"] / (mlm_weight_total + losses.MLM_LOSS_EPSILON)
                    + sop["nll_sum"] / float(self.global_batch_size))
        return tape.gradient(loss, variables), _flatten_terms(mlm, sop)

    def _replica_step(self, batch):
        ctx = tf.distribute.get_replica_context()
        many = ctx.num_replicas_in_sync > 1
        # The masked-LM denominator is the weight total of the global batch: known from the
        # inputs alone, so it is all-reduced before the (possibly compiled) gradient pass.
        weight = tf.reduce_sum(tf.cast(batch["masked_lm_weights"], tf.float32))
        if many:
            weight = ctx.all_reduce(tf.distribute.ReduceOp.SUM, weight)
        grads, terms = self._gradients_fn(batch, weight)
        self.optimizer.apply(sum_and_clip(grads, self.clip_norm), self.model.trainable_variables)
        return terms

    def _train_loop(self, iterator, steps):
        totals = {k: tf.constant(0.0) for k in TERMS}
        for _ in tf.range(steps):
            per_replica = self.strategy.run(self._replica_step, args=(next(iterator),))
            totals = {k: totals[k] + self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica[k], axis=None)
                      for k in TERMS}
        return totals

    def train(self, iterator, steps):
        """Runs `steps` steps; returns the summed TERMS as floats."""
        totals = self._train_fn(iterator, tf.constant(steps, tf.int32))
        return {k: float(v) for k, v in totals.items()}

    def _eval_step(self, batch):
        def step(b):
            outputs = self.model({k: b[k] for k in MODEL_INPUTS}, training=False)
            return _flatten_terms(*_terms(outputs, b))

        per_replica = self.strategy.run(step, args=(batch,))
        return {k: self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica[k], axis=None) for k in TERMS}

    def evaluate(self, distributed_dataset, max_steps):
        """Evaluates up to `max_steps` batches; returns the metrics (and `steps`)."""
        totals = {k: 0.0 for k in TERMS}
        steps = 0
        for batch in distributed_dataset:
            if steps >= max_steps:
                break
            for k, v in self._eval_fn(batch).items():
                totals[k] += float(v)
            steps += 1
        metrics = metrics_from_totals(totals)
        metrics["steps"] = steps
        return metrics


class MetricsLogger:
    """Console progress, output_dir/metrics.jsonl and TensorBoard summaries (chief only)."""

    def __init__(self, output_dir, num_train_steps, enabled=True, stream=sys.stdout):
        self.enabled = enabled
        self.num_train_steps = num_train_steps
        self.stream = stream
        self.path = os.path.join(output_dir, "metrics.jsonl")
        self.writer = tf.summary.create_file_writer(os.path.join(output_dir, "train")) if enabled else None
        self.eval_writer = tf.summary.create_file_writer(os.path.join(output_dir, "eval")) if enabled else None

    def log_train(self, step, metrics, learning_rate, examples_per_second, seconds_left):
        if not self.enabled:
            return
        record = {"step": step, **{k: metrics[k] for k in METRIC_KEYS},
                  "learning_rate": learning_rate, "examples_per_second": examples_per_second}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        with self.writer.as_default(step=step):
            for k in METRIC_KEYS:
                tf.summary.scalar(k, metrics[k])
            tf.summary.scalar("learning_rate", learning_rate)
            tf.summary.scalar("examples_per_second", examples_per_second)
        self.writer.flush()
        eta = "?" if not math.isfinite(seconds_left) else _duration(seconds_left)
        print(f"step {step}/{self.num_train_steps}  loss {metrics['loss']:.4f}  "
              f"mlm_loss {metrics['masked_lm_loss']:.4f}  mlm_acc {metrics['masked_lm_accuracy']:.4f}  "
              f"sop_loss {metrics['sentence_order_loss']:.4f}  sop_acc {metrics['sentence_order_accuracy']:.4f}  "
              f"lr {learning_rate:.3g}  {examples_per_second:.1f} ex/s  ETA {eta}", file=self.stream, flush=True)

    def log_eval(self, step, metrics):
        if not self.enabled:
            return
        with self.eval_writer.as_default(step=step):
            for k in METRIC_KEYS:
                tf.summary.scalar(k, metrics[k])
        self.eval_writer.flush()
        print(f"eval at step {step} ({metrics['steps']} batches): " + "  ".join(
            f"{k} {metrics[k]:.4f}" for k in METRIC_KEYS), file=self.stream, flush=True)


def _duration(seconds):
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def run_training(loop, iterator, checkpoints, logger, num_train_steps, iterations_per_loop,
                 save_checkpoints_steps, stop_after_steps=None):
    """Trains from the current step to num_train_steps, saving and logging on the way.

    Args:
        loop: PretrainingLoop.
        iterator: distributed iterator over training batches.
        checkpoints: TrainingCheckpoints.
        logger: MetricsLogger.
        stop_after_steps: stop early at this step (tests of interruption).

    Raises:
        TrainingDivergedError: the loss became NaN or infinite; no checkpoint is written
            for the diverged loop, so the last good one stays.
    """
    step = loop.step
    end = num_train_steps if stop_after_steps is None else min(num_train_steps, stop_after_steps)
    while step < end:
        next_save = (step // save_checkpoints_steps + 1) * save_checkpoints_steps
        n = min(iterations_per_loop, next_save - step, end - step)
        start = time.time()
        totals = loop.train(iterator, n)
        elapsed = time.time() - start
        metrics = metrics_from_totals(totals)
        step = loop.step
        if not all(math.isfinite(metrics[k]) for k in METRIC_KEYS):
            last = checkpoints.manager.latest_checkpoint
            raise TrainingDivergedError(
                f"the loss became {metrics['loss']} between steps {step - n} and {step}; stopped without "
                f"saving. Last good checkpoint: {last or 'none'}. Lower --learning_rate or check the data.")
        rate = n * loop.global_batch_size / max(elapsed, 1e-9)
        logger.log_train(step, metrics, float(loop.schedule(step - 1)), rate,
                         (num_train_steps - step) * loop.global_batch_size / rate)
        if step % save_checkpoints_steps == 0 or step == num_train_steps:
            checkpoints.save(step)
    return step
