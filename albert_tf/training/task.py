"""The contract between a task (albert_tf/tasks/) and the one training driver
(training/driver.py): what a task brings (model, loss, metrics, datasets), and the names of
the per-example columns the driver adds to evaluation batches."""

import abc

import tensorflow as tf

EXAMPLE_WEIGHT = "example_weight"
EXAMPLE_INDEX = "example_index"


class Task(abc.ABC):
    """What a command brings to the driver. Subclass and override; see
    albert_tf/tasks/ for the pretraining and classification tasks.

    Attributes:
        name: shown in logs.
        best_metric: eval metric (higher is better) that picks the best checkpoint, or None.
        progress_metrics: (metric key, console label) pairs for the progress line.
        skip_padding: whether the model's encoders may skip padding (docs/design_encoder.md,
            "Skipping padding"; on unless XLA or TPUs): padded positions of sequence outputs
            become zeros, so tasks whose loss reads them leave it off.
        checkpointable_input: whether the training iterator can be saved in checkpoints
            (False when its dataset calls stateful functions, e.g. a loaded SavedModel;
            a resumed run then skips the batches already consumed instead).
        initialized_from: set by `initialize` ("random" when nothing was loaded).
    """

    name = "task"
    skip_padding = False
    checkpointable_input = True
    best_metric = None
    progress_metrics = (("loss", "loss"),)
    initialized_from = "random"
    labels = None  # the class labels of a task that has them (recorded with the run's model)

    @abc.abstractmethod
    def build_model(self):
        """The Keras model (called inside the strategy scope); the driver sets its encoder's
        run-time options through its `configure_runtime` (modeling.runtime.RuntimeOptions),
        where it has one."""

    def initialize(self, model):
        """Loads starting weights for a new run (not on resume); returns where they came
        from, "random" for none."""
        return "random"

    @abc.abstractmethod
    def train_dataset(self, input_context, batch_size, skip_batches):
        """Batches of B examples (dicts of tensors, static shapes), repeating forever,
        with the first `skip_batches` skipped."""

    def eval_dataset(self, batch_size):
        """One pass over the evaluation examples in batches of up to `batch_size` (the
        last may be partial: the driver pads it), or None when there is none."""
        return None

    def loss_normalizers(self, batch):
        """Scalars summed over replicas before the loss (default: the example count)."""
        return {"examples": tf.cast(tf.shape(next(iter(batch.values())))[0], tf.float32)}

    @abc.abstractmethod
    def loss_and_terms(self, model, batch, normalizers, training):
        """(this replica's share of the global loss, dict of scalar sums for metrics)."""

    @abc.abstractmethod
    def train_metrics(self, totals):
        """Summed terms of some steps -> reported metrics (Python floats)."""

    def eval_outputs(self, model, batch):
        """Per-example results [B, ...] of one evaluation batch (dict of tensors)."""
        raise TypeError(f"task {self.name} does not evaluate (no eval_outputs); run it with do_eval off.")

    def eval_metrics(self, outputs):
        """The metrics of the evaluation set from the concatenated per-example results
        (numpy arrays, padding rows already removed)."""
        raise TypeError(f"task {self.name} does not evaluate (no eval_metrics); run it with do_eval off.")

    def results_extras(self):
        """Extra fields for eval_results.json (e.g. a majority-class baseline)."""
        return {}

    def on_checkpoint(self, model, output_dir):
        """Called by the chief after each checkpoint (e.g. write a pretrained directory)."""
