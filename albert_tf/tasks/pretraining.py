"""The pretraining task: masked LM + sentence-order prediction on the release's
TFRecords, for `python -m albert_tf.run_pretraining`.

Loss across replicas (the release's loss over the global batch): each replica adds
    mlm_nll_sum_local / (all_reduce(masked weights) + 1e-5) + sop_nll_sum_local / G,
so the shares and their gradients sum to the global-batch loss (the formulas:
`albert_tf.modeling.losses`); training sums the terms over steps, evaluation over examples.

Shape legend: B batch, T max_seq_length, P max_predictions_per_seq, G global batch.
"""


import tensorflow as tf

from albert_tf.data.pipeline import pretraining_dataset, validate_first_record
from albert_tf.modeling import losses
from albert_tf.modeling.config import AlbertConfig
from albert_tf.modeling.pretrained import CONFIG_NAME, save_pretrained
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.tasks.options import PretrainingOptions  # noqa: F401 (re-exported)
from albert_tf.training.checkpoints import load_init_checkpoint
from albert_tf.training.task import Task
from albert_tf.storage import files as file_layer

MODEL_INPUTS = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")


def check_run_config(output_dir, config, config_file):
    """A run directory keeps its own albert_config.json: resuming with another config is
    an error (before anything is written). Returns True when output_dir already has one."""
    path = file_layer.join(output_dir, CONFIG_NAME)
    if not file_layer.isfile(path):
        return False
    existing = AlbertConfig.from_json_file(path)
    if existing.to_dict() != config.to_dict():
        changed = sorted(k for k, v in config.to_dict().items() if existing.to_dict().get(k) != v)
        raise ValueError(
            f"--albert_config_file={config_file} differs from the config of the run in {output_dir} "
            f"({', '.join(changed)}); resume with the run's own {path}, or use another --output_dir.")
    return True


def validate_files(files, max_seq_length, max_predictions_per_seq):
    """Checks the first record of every file (features and lengths), naming the file."""
    for path in files:
        validate_first_record(path, max_seq_length, max_predictions_per_seq)


class PretrainingTask(Task):
    """Masked LM + sentence order on an AlbertPretrainer (see module docstring)."""

    name = "pretraining"
    progress_metrics = (("loss", "loss"), ("masked_lm_loss", "mlm_loss"), ("masked_lm_accuracy", "mlm_acc"),
                        ("sentence_order_loss", "sop_loss"), ("sentence_order_accuracy", "sop_acc"))

    def __init__(self, options):
        self.options = options

    def build_model(self):
        o = self.options
        return AlbertPretrainer(o.config, use_one_hot_embeddings=o.use_one_hot_embeddings)

    def initialize(self, model):
        if not self.options.init_checkpoint:
            return "random"
        return load_init_checkpoint(model, self.options.init_checkpoint)

    def _dataset(self, files, batch_size, is_training, input_context=None, skip_batches=0):
        o = self.options
        return pretraining_dataset(
            files, batch_size, o.max_seq_length, o.max_predictions_per_seq, is_training=is_training,
            input_context=input_context, deterministic=o.deterministic, seed=o.random_seed,
            shuffle_buffer_size=o.shuffle_buffer_size, dynamic_masking=o.dynamic_masking if is_training else None,
            skip_batches=skip_batches)

    def train_dataset(self, input_context, batch_size, skip_batches):
        return self._dataset(self.options.input_files, batch_size, True, input_context, skip_batches)

    def eval_dataset(self, batch_size):
        # one pass in file order over every example: read singly, then batch without
        # dropping the remainder (the driver pads the last batch with zero weight)
        files = self.options.eval_files or self.options.input_files
        return self._dataset(files, 1, False).unbatch().batch(batch_size)

    def loss_normalizers(self, batch):
        return {"mlm_weight": tf.reduce_sum(tf.cast(batch["masked_lm_weights"], tf.float32))}

    def _terms(self, model, batch, training, per_example=False):
        outputs = model({k: batch[k] for k in MODEL_INPUTS}, training=training)
        return losses.pretraining_terms(outputs["mlm_logits"], outputs["sop_logits"], batch["masked_lm_ids"],
                                        batch["masked_lm_weights"], batch["next_sentence_labels"],
                                        per_example=per_example)

    def loss_and_terms(self, model, batch, normalizers, training):
        terms = self._terms(model, batch, training)
        o = self.options
        return losses.pretraining_loss(terms, normalizers["mlm_weight"], o.global_batch_size, o.sentence_loss), terms

    def train_metrics(self, totals):
        return losses.pretraining_metrics(totals, self.options.sentence_loss)

    def eval_outputs(self, model, batch):
        # per-example terms; padding rows carry zero masked-LM weights and are dropped
        # by the driver before the sums
        return self._terms(model, batch, training=False, per_example=True)

    def eval_metrics(self, outputs):
        return losses.pretraining_metrics({k: float(outputs[k].sum()) for k in losses.PRETRAINING_TERMS},
                                          self.options.sentence_loss)

    def on_checkpoint(self, model, output_dir):
        # the newest weights also as an albert_tf pretrained directory (from_pretrained)
        save_pretrained(model, output_dir)
