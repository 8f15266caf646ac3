"""The one training driver: every command (pretraining and the fine-tuning tasks) runs
through `train_and_evaluate(task, options)`. A task (`Task`, training/task.py) brings its
model, loss and summed terms, metrics, datasets and starting weights; the driver owns the
rest once (what it owns: docs/fine_tuning.md, "The driver").

Shape legend: B batch per replica, G global batch.
"""

import dataclasses
import math
import time

import numpy as np
import tensorflow as tf

from albert_tf.data import record_check
from albert_tf.data.maps import graph_map, without_autotune
from albert_tf.modeling.records import run_info_record
from albert_tf.storage import atomic, space
from albert_tf.training import sessions
from albert_tf.training import step as step_lib
from albert_tf.training.accumulation import check_accumulation
from albert_tf.storage.integrity import newest_checkpoint
from albert_tf.training.checkpoints import BEST_DIR, TrainingCheckpoints, read_run_info, remove_partial_saves
from albert_tf.training.distribution import check_best_kept, check_global_batch, check_same_start, worker_lost
from albert_tf.training.errors import TERMINATED, TRAINING_LOOP, TrainingDivergedError, raise_if_interrupted
from albert_tf.training.optimizer import create_optimizer
from albert_tf.training.options import TrainingOptions
from albert_tf.training.precision import choose, policy_scope
from albert_tf.training.reporting import MetricsLogger, cut_partial_events, plot_curves, read_records
from albert_tf.training.schedules import WarmupPolynomialDecay
from albert_tf.training.task import EXAMPLE_INDEX, EXAMPLE_WEIGHT, Task
from albert_tf.storage import files


class Trainer:
    """The model, optimizer and compiled steps of one task under one strategy.

    Args:
        task: a `Task`.
        options: `TrainingOptions`.
        strategy: a tf.distribute strategy (default: the current one).
    """

    def __init__(self, task, options, strategy=None):
        self.task = task
        self.options = options
        self.strategy = strategy or tf.distribute.get_strategy()
        check_global_batch(self.strategy, options.train_batch_size)
        check_global_batch(self.strategy, options.eval_batch_size, flag="--eval_batch_size")
        check_accumulation(options.gradient_accumulation_steps, options.train_batch_size,
                           self.strategy.num_replicas_in_sync)
        # one place decides what every command computes in (training/precision.py)
        self.precision = choose(options.dtype_policy, self.strategy)
        with self.strategy.scope():
            with policy_scope(self.precision.policy):
                self.model = task.build_model()
            self.schedule = WarmupPolynomialDecay(options.learning_rate, options.num_train_steps,
                                                  options.num_warmup_steps, options.start_warmup_step,
                                                  options.poly_power)
            self.optimizer = create_optimizer(options.optimizer, self.schedule)
            self.optimizer.build(self.model.trainable_variables)
        # XLA and TPUs need static shapes; padding skipping gives each batch its own token count
        static_shapes = options.jit_compile or isinstance(self.strategy, tf.distribute.TPUStrategy)
        skip_padding = bool(task.skip_padding and not static_shapes)
        # the model's own run-time options (modeling.runtime.RuntimeOptions); False for a model
        # without an AlbertEncoder (e.g. around a loaded SavedModel) or without them
        configure = getattr(self.model, "configure_runtime", None)
        applied = bool(configure and configure(skip_padding=skip_padding, remat=options.remat,
                                               replica_index=_replica_index))
        # whether the encoder skips padding / rematerializes
        self.skips_padding = skip_padding and applied
        self.remats = bool(options.remat) and applied
        # the gradient pass of a batch (or of each slice of it: a tf.function, called in a loop)
        if options.jit_compile:
            self._gradients_fn = tf.function(self._gradients, jit_compile=True, autograph=False)
        elif options.gradient_accumulation_steps > 1:
            self._gradients_fn = tf.function(self._gradients, autograph=False)
        else:
            self._gradients_fn = self._gradients
        # The step is a function of its own, called once in the loop below, so it is traced
        # once. Model, loss and metrics code has no Python control flow on tensors, so the
        # step, the loop (a tf.while_loop) and the evaluation skip AutoGraph's source
        # conversion (a quarter of tracing; data/maps.py does the same for the input functions).
        self._step_fn = tf.function(self._reduced_step, autograph=False)
        self._train_fn = tf.function(self._train_loop, autograph=False)
        self._eval_fn = tf.function(self._eval_step, autograph=False)

    def model_in(self, policy):
        """The model computing in `policy` with this model's weights: the model itself when it
        already does, else a copy the task builds in that policy (e.g. a float32 export of a
        mixed_bfloat16 run: the weights are float32 either way)."""
        if policy == self.precision.policy:
            return self.model
        with policy_scope(policy):
            model = self.task.build_model()
        model.set_weights(self.model.get_weights())
        return model

    @property
    def step(self):
        return int(self.optimizer.iterations.numpy())

    @property
    def global_batch_size(self):
        return int(self.options.train_batch_size)

    # --- training ---------------------------------------------------------------------

    def _gradients(self, batch, normalizers):
        return step_lib.gradients(self.task, self.model, batch, normalizers)

    def replica_step(self, batch):
        """One optimizer step on this replica's batch [B, ...] (inside strategy.run), in
        `gradient_accumulation_steps` slices; returns its terms (training/step.py)."""
        return step_lib.replica_step(self.task, self.model, self.optimizer, self._gradients_fn, batch,
                                     self.options.clip_norm, self.options.gradient_accumulation_steps)

    def _reduced_step(self, iterator):
        per_replica = self.strategy.run(self.replica_step, args=(next(iterator),))
        return {k: self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in per_replica.items()}

    def _train_loop(self, iterator, steps):
        # one call site of the step in the graph (its traced outputs give the terms' structure),
        # so graph optimization sees the step once
        totals = step_lib.zero_terms(self._step_fn.get_concrete_function(iterator).structured_outputs)

        def body(i, totals):
            step_terms = self._step_fn(iterator)
            return i + 1, {k: totals[k] + step_terms[k] for k in totals}

        return tf.while_loop(lambda i, _: i < steps, body, (tf.constant(0, steps.dtype), totals))[1]

    def train(self, iterator, steps):
        """Runs `steps` (>= 1) steps in one tf.function call; returns the summed terms as floats."""
        totals = self._train_fn(iterator, tf.constant(int(steps), tf.int32))
        return {k: float(v) for k, v in totals.items()}

    # --- evaluation and prediction -------------------------------------------------------

    def _eval_step(self, batch):
        def step(b):
            outputs = self.task.eval_outputs(self.model, b)
            outputs[EXAMPLE_WEIGHT] = b[EXAMPLE_WEIGHT]
            if EXAMPLE_INDEX in b:
                outputs[EXAMPLE_INDEX] = b[EXAMPLE_INDEX]
            return outputs

        return self.strategy.run(step, args=(batch,))

    def per_example_outputs(self, dataset, global_batch_size, max_steps=None):
        """Runs task.eval_outputs over every example of `dataset` (batches of up to G);
        returns the concatenated numpy outputs without padding rows, in example order
        when the batches carry `example_index`.

        Raises:
            ValueError: the dataset holds no example.
        """
        padded = graph_map(dataset, lambda b: pad_batch(b, global_batch_size))
        distributed = self.strategy.experimental_distribute_dataset(padded.with_options(without_autotune()))
        # traced once for the dataset's spec (a length bucket's width is left unknown, as in
        # the training loop), not once per width: each trace costs as much as a short evaluation
        self._eval_fn.get_concrete_function(distributed.element_spec)
        chunks = {}
        steps = 0
        for batch in distributed:
            if max_steps is not None and steps >= max_steps:
                break
            outputs = self._eval_fn(batch)
            for k, v in outputs.items():
                chunks.setdefault(k, []).extend(np.asarray(t) for t in self.strategy.experimental_local_results(v))
            steps += 1
        if not steps:
            raise ValueError("the evaluation set holds no example; check the eval/dev input.")
        out = {k: np.concatenate(v) for k, v in chunks.items()}
        keep = out.pop(EXAMPLE_WEIGHT) > 0
        out = {k: v[keep] for k, v in out.items()}
        if EXAMPLE_INDEX in out:
            order = np.argsort(out[EXAMPLE_INDEX], kind="stable")
            out = {k: v[order] for k, v in out.items()}
        out["_batches"] = steps
        return out

    def evaluate(self):
        """The task's metrics over its evaluation set (`examples` and `steps` added)."""
        dataset = self.task.eval_dataset(self.options.eval_batch_size)
        if dataset is None:
            raise ValueError(f"{self.task.name}: no evaluation data.")
        outputs = self.per_example_outputs(dataset, self.options.eval_batch_size, self.options.max_eval_steps)
        steps = outputs.pop("_batches")
        examples = len(next(iter(outputs.values()))) if outputs else 0
        metrics = {k: (v if isinstance(v, int) else float(v)) for k, v in self.task.eval_metrics(outputs).items()}
        metrics.update(examples=int(examples), steps=int(steps))
        return metrics


def _replica_index():
    """This replica's index in the step being traced (0 outside a replica context): the
    encoders fold it into their dropout seeds, so that replicas draw different masks."""
    context = tf.distribute.get_replica_context()
    return 0 if context is None else context.replica_id_in_sync_group


def pad_batch(batch, size):
    """Pads every tensor of a batch dict along axis 0 to `size` rows with zeros and adds
    `example_weight` (1 for real rows, 0 for padding); shapes become static."""
    n = tf.shape(next(iter(batch.values())))[0]
    out = {}
    for k, v in batch.items():
        paddings = [[0, size - n]] + [[0, 0]] * (len(v.shape) - 1)
        padded = tf.pad(v, paddings)
        padded.set_shape([size] + v.shape[1:].as_list())
        out[k] = padded
    weight = tf.concat([tf.ones([n], tf.float32), tf.zeros([size - n], tf.float32)], axis=0)
    weight.set_shape([size])
    out[EXAMPLE_WEIGHT] = weight
    return out


@dataclasses.dataclass
class SessionContext:
    """What one call of `train_and_evaluate` works with (its arguments, then what it makes):
    the functions of its steps take this record. `iterator` is in the checkpoints when
    `saves_iterator` (only the default strategy's can be; under the others a resumed run skips
    the batches already consumed); `resumed`: the checkpoint resumed from, or None."""

    task: Task
    options: TrainingOptions
    strategy: tf.distribute.Strategy
    is_chief: bool
    stream: object
    trainer: Trainer = None
    checkpoints: TrainingCheckpoints = None
    iterator: object = None
    saves_iterator: bool = False
    resumed: str = None
    logger: MetricsLogger = None
    results: dict = None


def train_and_evaluate(task, options, strategy=None, is_chief=True, stream=None, stop_after_steps=None):
    """Runs a task: resume or initialize, train with checkpoints and evaluation, write
    the results. Returns a dict: trainer, final_step, eval (metrics), best (info or None),
    summary (eval_results.json's, when evaluated), curves, initialized_from, resumed_from,
    precision, remat.

    Args:
        task: a `Task`.
        options: `TrainingOptions`.
        strategy: the tf.distribute strategy (default: the current one).
        is_chief: whether this worker writes output_dir.
        stream: where progress goes.
        stop_after_steps: stop early at this step (tests of interruption).

    Raises:
        TrainingDivergedError: the loss became NaN or infinite (no checkpoint written for it).
        WorkerLostError: multi-worker training lost a worker (TensorFlow aborted the
            collective ops); names it and the newest checkpoint, which every worker
            resumes from when all are started again.
        Terminated: SIGTERM; a checkpoint was saved at the step reached.
        DiskFull: a write failed for space (storage.space); names the newest complete
            checkpoint, the save's partial files removed.
        ValueError: an output_dir whose checkpoints do not fit this run (named), workers
            that would resume from different steps, or a best checkpoint kept under
            multi-worker training (before any work).
    """
    s = SessionContext(task, options, strategy or tf.distribute.get_strategy(), is_chief, stream)
    check_best_kept(s.strategy, options.keep_best and task.best_metric is not None)
    try:
        _open(s)
        _resume(s)
        session_id = _record_session(s)
        try:
            _start_logging(s)
            _train(s, stop_after_steps)
            _finish(s)
        except BaseException as e:
            sessions.end_session(options.output_dir, session_id, s.trainer.step, e)
            raise
        sessions.end_session(options.output_dir, session_id, s.results["final_step"])
        return s.results
    except Exception as e:
        _raise_if_disk_full(options.output_dir, e, s.is_chief)
        if isinstance(e, tf.errors.OpError):
            record_check.raise_if_damaged(e)
            _raise_if_worker_lost(s, e)
        raise


def _open(s):
    """The run directory (chief: made, temporaries of a killed run swept; a training chief, which
    holds the run, also removes a killed save's partial files), the Trainer, the checkpoints and,
    where checkpoints save it, the training input."""
    o = s.options
    if s.is_chief:
        files.makedirs(o.output_dir)
        atomic.sweep(o.output_dir)
        if o.do_train:
            remove_partial_saves(o.output_dir)
    s.trainer = Trainer(s.task, o, s.strategy)
    s.saves_iterator = bool(o.do_train and s.task.checkpointable_input
                            and s.strategy is tf.distribute.get_strategy())
    if s.saves_iterator:
        s.iterator = _train_input(s, 0)
    on_save = (lambda: s.task.on_checkpoint(s.trainer.model, o.output_dir)) if s.is_chief else None
    s.checkpoints = TrainingCheckpoints(o.output_dir, s.trainer.model, s.trainer.optimizer, o.keep_checkpoint_max,
                                        is_chief=s.is_chief, iterator=s.iterator,
                                        keep_best=o.keep_best and s.task.best_metric is not None,
                                        trains=o.do_train, on_save=on_save)


def _train_input(s, skip_steps):
    """The distributed training iterator, the first `skip_steps` steps' batches skipped."""
    def dataset_fn(ctx):
        per_step = ctx.num_replicas_in_sync // ctx.num_input_pipelines
        dataset = s.task.train_dataset(ctx, ctx.get_per_replica_batch_size(s.options.train_batch_size),
                                       skip_steps * per_step)
        return dataset.with_options(without_autotune())

    return iter(s.strategy.distribute_datasets_from_function(dataset_fn))


def _resume(s):
    """Resume from the newest checkpoint of output_dir (every worker from the chief's), or
    load the task's starting weights (`Task.initialize`); sets task.initialized_from."""
    task, checkpoints, trainer, o = s.task, s.checkpoints, s.trainer, s.options
    s.resumed = checkpoints.restore_latest()
    check_same_start(s.strategy, trainer.step, o.output_dir)
    for line in checkpoints.set_aside_damaged():  # once every worker chose (check_same_start's collective)
        print(line, file=s.stream, flush=True)
    if not s.resumed:
        task.initialized_from = task.initialize(trainer.model)
        print(f"initialized from {task.initialized_from}", file=s.stream, flush=True)
        return
    task.initialized_from = read_run_info(o.output_dir).get("initialized_from", task.initialized_from)
    if o.do_train:
        print(f"resuming from {s.resumed} at step {trainer.step}", file=s.stream, flush=True)
    else:  # what evaluation and prediction alone start from (its best checkpoint: restored at the end)
        best = checkpoints.best
        print(f"evaluating the trained checkpoint {s.resumed} (step {trainer.step})"
              + (f"; the best checkpoint {files.join(o.output_dir, BEST_DIR, best['checkpoint'])} (step "
                 f"{best['step']}) is restored for the results" if best else ""), file=s.stream, flush=True)


def _record_session(s):
    """This session's entry in run_info.json (sessions.py; a new run's also its starting
    point); returns its id (None on a worker that does not write)."""
    if not s.is_chief:
        return None
    task, trainer = s.task, s.trainer
    top_level = None
    if not s.resumed:
        top_level = {"initialized_from": task.initialized_from, "task": task.name, **trainer.precision.as_dict(),
                     "remat": trainer.remats, **run_info_record(trainer.model, task.labels)}  # convert reads it
    entry = sessions.entry(s.options.session or sessions.Session(task.name, trains=s.options.do_train),
                           trainer.precision, s.strategy, trainer.step, s.resumed)
    sessions.append_session(s.options.output_dir, entry, top_level)
    return entry["id"]


def _start_logging(s):
    """The training input where the checkpoints do not hold it, the MetricsLogger, the
    strategy line and the results so far."""
    o, trainer = s.options, s.trainer
    if o.do_train and not s.saves_iterator:
        if s.resumed and trainer.step:
            print(f"skipping the {trainer.step} steps of input already consumed", file=s.stream, flush=True)
        s.iterator = _train_input(s, trainer.step if s.resumed else 0)
    s.logger = MetricsLogger(o.output_dir, o.num_train_steps, s.task.progress_metrics, enabled=s.is_chief,
                             stream=s.stream, fresh=not s.resumed,
                             drop_after=trainer.step if s.resumed and o.do_train else None)
    print(f"strategy {type(s.strategy).__name__} with {s.strategy.num_replicas_in_sync} replicas; global batch "
          f"{o.train_batch_size}"
          + (f" in {o.gradient_accumulation_steps} accumulated slices" if o.gradient_accumulation_steps > 1 else "")
          + f"; dtype policy {trainer.precision.policy} ({trainer.precision.reason})"
          + ("; padding skipped" if trainer.skips_padding else "")
          + ("; blocks rematerialized" if trainer.remats else ""), file=s.stream, flush=True)
    s.results = {"trainer": trainer, "initialized_from": s.task.initialized_from, "resumed_from": s.resumed,
                 "best": None, "eval": None, "precision": trainer.precision, "remat": trainer.remats}


def _train(s, stop_after_steps):
    """Trains to options.num_train_steps (or `stop_after_steps`): a checkpoint every
    save_checkpoints_steps, each evaluated (evaluate_every_checkpoint); stops on NaN
    (`_stop_if_diverged`) and SIGTERM (TrainingCheckpoints.save_if_terminated)."""
    o, trainer, checkpoints = s.options, s.trainer, s.checkpoints
    if not o.do_train:
        return
    step = trainer.step
    if s.resumed and o.do_eval:
        _resumed_evaluation(s, step)
    end = o.num_train_steps if stop_after_steps is None else min(o.num_train_steps, stop_after_steps)
    first_step, start = step, time.time()
    TRAINING_LOOP.set()  # SIGTERM from here on: a checkpoint at the current step, then Terminated
    try:
        while step < end:
            checkpoints.save_if_terminated(step)
            next_save = (step // o.save_checkpoints_steps + 1) * o.save_checkpoints_steps
            n = min(o.iterations_per_loop, next_save - step, end - step)
            t0 = time.time()
            totals = trainer.train(s.iterator, n)
            raise_if_interrupted()
            elapsed = time.time() - t0
            metrics = s.task.train_metrics(totals)
            step = trainer.step
            _stop_if_diverged(s, metrics, step - n)
            rate = n * o.train_batch_size / max(elapsed, 1e-9)
            overall = (step - first_step) * o.train_batch_size / max(time.time() - start, 1e-9)
            s.logger.log_train(step, metrics, float(trainer.schedule(step - 1)), rate,
                               (o.num_train_steps - step) * o.train_batch_size / max(overall, 1e-9))
            checkpoints.save_if_terminated(step)
            if step % o.save_checkpoints_steps == 0 or step == o.num_train_steps:
                checkpoints.save(step)
                raise_if_interrupted()
                if o.do_eval and o.evaluate_every_checkpoint:
                    s.results["eval"] = _evaluate(s)
    finally:
        TRAINING_LOOP.clear()
    if TERMINATED.is_set():  # it came during the last checkpoint's evaluation: that checkpoint is the step's
        checkpoints.save_if_terminated(step)


def _resumed_evaluation(s, step):
    """The evaluation of the checkpoint resumed from (at `step`), as an uninterrupted run has it:
    the one metrics.jsonl records (a session killed after it), else, where every checkpoint is
    evaluated, one done now (a session killed before or during it; best/ is offered it too). A
    damaged best/ set aside: the recorded one is the first offered."""
    o, checkpoints = s.options, s.checkpoints
    s.results["eval"] = s.logger.evaluation_at(step)
    if s.results["eval"] is None and o.evaluate_every_checkpoint and step % o.save_checkpoints_steps == 0:
        s.results["eval"] = _evaluate(s)
    elif s.results["eval"] is not None and checkpoints.keep_best and checkpoints.best is None:  # best/ set aside
        checkpoints.offer_best(step, s.results["eval"], s.task.best_metric)


def _stop_if_diverged(s, metrics, since):
    """TrainingDivergedError when a metric of the steps since `since` is NaN or infinite
    (no checkpoint is saved for them; the last good one is named)."""
    if all(math.isfinite(v) for v in metrics.values()):
        return
    raise TrainingDivergedError(
        f"the loss became {metrics.get('loss')} between steps {since} and {s.trainer.step}; stopped without "
        f"saving. Last good checkpoint: {s.checkpoints.manager.latest_checkpoint or 'none'}. Lower "
        "--learning_rate or check the data.")


def _raise_if_worker_lost(s, error):
    """WorkerLostError (from None) when the TensorFlow error `error` says a worker of a
    multi-worker run is gone: it names the worker and the newest checkpoint."""
    lost = worker_lost(s.strategy, error, newest_checkpoint(s.options.output_dir))
    if lost is not None:
        raise lost from None


def _raise_if_disk_full(output_dir, error, is_chief):
    """DiskFull (from None) when `error` is a write that failed for space: it names the newest
    complete checkpoint, which the same command continues from once there is room (the chief's
    events files cut to their whole records first)."""
    if space.disk_full(error) is None:
        return
    if is_chief:
        cut_partial_events(output_dir)
    newest = newest_checkpoint(output_dir)
    then = (f"The newest complete checkpoint is {newest}; the partial files were removed. Free "
            "space, then run the same command again to continue from it." if newest else
            "No checkpoint is complete yet; the partial files were removed. Free space, then run the same "
            "command again.")
    raise space.disk_full(error, then) from None


def _evaluate(s):
    """The task's metrics now (global_step added), offered as the best checkpoint and logged."""
    trainer, checkpoints = s.trainer, s.checkpoints
    metrics = trainer.evaluate()
    metrics["global_step"] = trainer.step
    best = checkpoints.offer_best(trainer.step, metrics, s.task.best_metric) if checkpoints.keep_best else False
    s.logger.log_eval(trainer.step, metrics, best=best)
    return metrics


def _finish(s):
    """The final evaluation, unless the last checkpoint's evaluation was of these weights or a
    run that does not train holds its best checkpoint's metrics already; the best checkpoint
    restored (`_restore_best`); eval_results.json / .txt and training_curves.png."""
    o, trainer, checkpoints, results = s.options, s.trainer, s.checkpoints, s.results
    results["final_step"] = trainer.step
    evaluated = results["eval"] is not None and results["eval"]["global_step"] == trainer.step
    have_best = checkpoints.keep_best and checkpoints.best is not None and not o.do_train
    if o.do_eval and not (evaluated or have_best):
        results["eval"] = _evaluate(s)
    _restore_best(s)
    if results["eval"] is not None or results["best"] is not None:
        results["summary"] = _summary(s.task, results)
        if s.is_chief:
            write_eval_results(o.output_dir, results["summary"])
    if s.is_chief and o.write_curves:
        records = read_records(s.logger.path)
        if records:
            metric = s.task.best_metric
            baseline = results.get("summary", {}).get("majority_baseline", {}).get(metric or "")
            results["curves"] = plot_curves(records, files.join(o.output_dir, "training_curves.png"),
                                            title=s.task.name, baseline=baseline, baseline_metric=metric)
    checkpoints.close()
    s.logger.close()


def _restore_best(s):
    """The best checkpoint's weights for the results (predictions, the export), where one is kept."""
    if s.checkpoints.keep_best and s.checkpoints.best is not None:
        s.checkpoints.restore_best()
        s.results["best"] = s.checkpoints.best


def write_eval_results(output_dir, summary):
    """eval_results.json and eval_results.txt (`key = value` lines, sorted) of a summary."""
    atomic.write_json(files.join(output_dir, "eval_results.json"), summary)
    atomic.write_text(files.join(output_dir, "eval_results.txt"),
                      "".join(f"{k} = {summary[k]}\n" for k in sorted(summary)))


def _summary(task, results):
    if results["best"] is not None:
        best = results["best"]
        summary = {**best["metrics"], "best_step": best["step"], "metric": best["metric"],
                   "checkpoint": files.join("best", best["checkpoint"])}
    else:
        summary = dict(results["eval"])
    summary["initialized_from"] = task.initialized_from
    summary["task"] = task.name
    summary.update(results["precision"].as_dict())
    summary["remat"] = results["remat"]
    summary.update(task.results_extras())
    return summary
