"""The classification task: GLUE (and any TSV) classification and regression, for
`python -m albert_tf.run_classifier` (the recipe and its reasons: docs/fine_tuning.md).

The model starts from an export (`encoder/` through EncoderTFSMLayer, tokenization from
its `preprocess/` SavedModel) or from an albert_tf checkpoint (AlbertEncoder and an
in-memory PreprocessModule), so training and the exported classifier tokenize identically.

Shape legend: B batch, T max_seq_length, C classes (1 for regression).
"""


import numpy as np
import tensorflow as tf

from albert_tf.data.bucket_widths import bucket_widths
from albert_tf.data.buckets import bucketed_batches, take_rows
from albert_tf.tasks.classification.data import get_task, read_examples
from albert_tf.tasks.classification.metrics import compute
from albert_tf.tasks.classification.pipeline import label_ids, pack_segments, packed_lengths, tokenize_segments
from albert_tf.data.maps import graph_map
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.modeling.losses import classifier_nll
from albert_tf.storage import atomic, files
from albert_tf.tasks.common import config_file_for
from albert_tf.tasks.classification.options import ClassificationOptions  # noqa: F401 (re-exported)
from albert_tf.tasks.fine_tuning import FineTuningTask, choice_metrics, choice_terms, wanted_splits
from albert_tf.training.task import EXAMPLE_INDEX


def _check_model_source(o):
    """The export (encoder/ and preprocess/) or the checkpoint's config and SentencePiece
    model, and --max_seq_length within the config's position embeddings."""
    from albert_tf.modeling.config import AlbertConfig

    if o.albert_hub_module_handle:
        for sub in ("encoder", "preprocess"):
            if not files.isfile(files.join(o.albert_hub_module_handle, sub, "saved_model.pb")):
                raise ValueError(f"--albert_hub_module_handle={o.albert_hub_module_handle}: no {sub}/saved_model.pb; "
                                 "expected the directory written by albert_tf.export_tfhub (encoder/ and preprocess/).")
        config_path = files.join(o.albert_hub_module_handle, "encoder", "assets", "albert_config.json")
        source = f"--albert_hub_module_handle={o.albert_hub_module_handle}"
    else:
        if not o.spm_model_file:
            raise ValueError("--spm_model_file is required without --albert_hub_module_handle.")
        if not files.isfile(o.spm_model_file):
            raise ValueError(f"--spm_model_file={o.spm_model_file} does not exist.")
        config_path = config_file_for(o)
        if not config_path:
            raise ValueError("--albert_config_file is required (or an --init_checkpoint directory holding "
                             "albert_config.json).")
        source = config_path
    if files.isfile(config_path):
        positions = AlbertConfig.from_json_file(config_path).max_position_embeddings
        if o.max_seq_length > positions:
            raise ValueError(f"--max_seq_length ({o.max_seq_length}) exceeds max_position_embeddings ({positions}) "
                             f"of {source}; use --max_seq_length={positions} or less.")
    elif not o.albert_hub_module_handle:
        raise ValueError(f"--albert_config_file={config_path} does not exist.")


class ClassificationTask(FineTuningTask):
    """A classifier (or regressor) on the ALBERT encoder (see module docstring).

    Args:
        options: ClassificationOptions.
        task_def: classifier_data.Task (its labels, empty for regression, and metrics, the
            first of which picks the best checkpoint).
        splits: dict split -> list of classifier_data.Example (read and checked already).
    """

    skip_padding = True  # the loss reads pooled outputs only
    # the input calls the preprocessing object (maybe a loaded SavedModel), which an iterator
    # checkpoint may not hold: a resumed run skips the batches consumed (docs/fine_tuning.md)
    checkpointable_input = False
    served = "the classifier (raw strings in)"
    prediction_files = {"dev": ("dev_predictions.tsv", None), "test": ("test_results.tsv", "test_results")}

    def __init__(self, options, task_def, splits):
        self.options = options
        self.name = task_def.name
        self.splits = splits
        self.labels = list(task_def.labels)
        self.metric_names = list(task_def.metrics)
        self.best_metric = self.metric_names[0]
        self.pair = any(e.text_b is not None for split in splits.values() for e in split)
        self.progress_metrics = (("loss", "loss"),) + ((("accuracy", "acc"),) if self.labels else ())
        self.preprocess = None
        self._tokens = {}  # split -> (segments, packed lengths): tokenized once

    @property
    def num_classes(self):
        return len(self.labels) or 1

    @staticmethod
    def check_task(o):
        for name in ("task_name", "data_dir", "output_dir"):
            if not getattr(o, name):
                raise ValueError(f"--{name} is required.")
        get_task(o.task_name)  # names the valid tasks
        if not (o.do_train or o.do_eval or o.do_predict):
            raise ValueError("at least one of --do_train, --do_eval and --do_predict must be true.")
        if o.albert_hub_module_handle and o.init_checkpoint:
            raise ValueError("give --albert_hub_module_handle or --init_checkpoint, not both.")
        if o.max_seq_length < 3:
            raise ValueError(f"--max_seq_length={o.max_seq_length} leaves no room for [CLS] text [SEP].")
        bucket_widths(o.max_seq_length, o.length_buckets)  # names a bad --length_buckets
        if not 0 <= o.classifier_dropout < 1:
            raise ValueError(f"--classifier_dropout must be in [0, 1), got {o.classifier_dropout}.")
        if o.labels and o.task_name.lower() != "tsv":
            raise ValueError(f"--labels is only for --task_name=tsv; {o.task_name} has its own label set.")
        _check_model_source(o)

    @classmethod
    def read(cls, o, stream):
        task_def = get_task(o.task_name, labels=o.labels, text_a_column=o.text_a_column,
                            text_b_column=o.text_b_column, label_column=o.label_column)
        return task_def, {split: read_examples(task_def, o.data_dir, split) for split in wanted_splits(o)}

    @classmethod
    def prepare(cls, o, inputs, training, stream):
        return cls(o, *inputs)

    def describe_training(self, training):
        n = len(self.splits["train"])
        return (f"task {self.name}: {len(self.labels) or 'regression'}{' labels' if self.labels else ''}; "
                f"training {n} examples, batch {training.train_batch_size}, {training.num_train_steps} steps "
                f"({training.num_train_steps * training.train_batch_size / n:.1f} epochs), {training.optimizer} "
                f"lr {training.learning_rate:g}, warmup {training.num_warmup_steps}")

    def report(self, outcome, results, stream):
        results["labels"] = self.labels
        if outcome["best"] is not None:
            summary = outcome["summary"]
            print(f"best dev {self.best_metric} {summary[self.best_metric]:.4f} at step {summary['best_step']} "
                  f"({summary['checkpoint']})", file=stream, flush=True)

    def write_predictions(self, split, outputs, path):
        write_predictions(path, self.splits[split], self.predictions(outputs["logits"]), self.labels,
                          with_gold=split == "dev")

    def export(self, outcome, results, made_by):
        from albert_tf.tasks.classification.export import export_classifier

        o = self.options
        return export_classifier(self.preprocess, outcome["trainer"].model_in("float32"), o.export_dir,
                                 o.max_seq_length, self.labels, self.pair, self.name, widths=self.widths,
                                 made_by=made_by)

    def build_model(self):
        import tensorflow_text  # noqa: F401  (registers the preprocessing model's ops)

        from albert_tf.modeling.classifier import AlbertClassifier

        o = self.options
        if o.albert_hub_module_handle:
            from albert_tf.export.keras3 import EncoderTFSMLayer

            self.preprocess = tf.saved_model.load(files.join(o.albert_hub_module_handle, "preprocess"))
            encoder = EncoderTFSMLayer(files.join(o.albert_hub_module_handle, "encoder"), trainable=True)
            return AlbertClassifier(encoder, self.num_classes, dropout=o.classifier_dropout)

        from albert_tf.export.preprocess_module import PreprocessModule
        from albert_tf.modeling.config import AlbertConfig
        from albert_tf.modeling.pretrainer import AlbertPretrainer

        config = AlbertConfig.from_json_file(config_file_for(o))
        self.preprocess = PreprocessModule(o.spm_model_file, do_lower_case=o.do_lower_case, seq_length=o.max_seq_length)
        self._pretrainer = AlbertPretrainer(config)
        return AlbertClassifier(self._pretrainer.encoder, self.num_classes, dropout=o.classifier_dropout,
                                initializer_range=config.initializer_range)

    def _columns(self, split):
        """The split's pieces (ids_a, with pairs ids_b: int32 ragged [N, (n)]), labels and
        example indices."""
        examples = self.splits[split]
        segments, _ = self._tokenized(split)
        columns = {"label": label_ids(examples, self.labels), EXAMPLE_INDEX: np.arange(len(examples), dtype=np.int32)}
        columns.update(zip(("ids_a", "ids_b"), segments))
        return columns

    def _to_features(self, batch):
        segments = [batch["ids_a"]] + ([batch["ids_b"]] if "ids_b" in batch else [])
        features = pack_segments(self.preprocess, segments, self.options.max_seq_length, self.widths)
        features["label"] = batch["label"]
        features[EXAMPLE_INDEX] = batch[EXAMPLE_INDEX]
        return features

    def _tokenized(self, split):
        """(segments, packed lengths [N]) of a split, tokenized once by the preprocessing
        object: the datasets pack these pieces, they do not tokenize the text again."""
        if split not in self._tokens:
            examples, seq_length = self.splits[split], self.options.max_seq_length
            segments = tokenize_segments(self.preprocess, [e.text_a for e in examples],
                                         [e.text_b or "" for e in examples] if self.pair else None, seq_length)
            self._tokens[split] = segments, packed_lengths(segments, seq_length).numpy()
        return self._tokens[split]

    def _lengths(self, split):
        return self._tokenized(split)[1]

    def train_dataset(self, input_context, batch_size, skip_batches):
        return bucketed_batches(self._columns("train"), self._lengths("train"), batch_size, self.widths,
                                self._to_features, training=True, seed=self.options.random_seed,
                                input_context=input_context, skip_batches=skip_batches).prefetch(tf.data.AUTOTUNE)

    def batches_dataset(self, index_batches, split="train"):
        """The given batches of example indices (lists of ints into `split`, all of one size),
        in that order, each padded to its bucket: to train several models on the same batches."""
        count, sizes = len(self.splits[split]), {len(b) for b in index_batches}
        if len(sizes) != 1 or not min(sizes):
            raise ValueError("batches_dataset: the batches must be non-empty and of one size "
                             f"(got sizes {sorted(sizes)})")
        order = np.concatenate([np.asarray(b, np.int64) for b in index_batches])
        if order.min() < 0 or order.max() >= count:
            raise ValueError(f"batches_dataset: an index is outside {split}'s {count} examples")
        columns = take_rows(self._columns(split), order)
        return graph_map(tf.data.Dataset.from_tensor_slices(columns).batch(sizes.pop()), self._to_features)

    def split_dataset(self, split, batch_size):
        return bucketed_batches(self._columns(split), self._lengths(split), batch_size, self.widths,
                                self._to_features, training=False).prefetch(tf.data.AUTOTUNE)

    def loss_and_terms(self, model, batch, normalizers, training):
        logits = model({k: batch[k] for k in INPUT_NAMES}, training=training)
        return choice_terms(logits, batch["label"], classifier_nll(logits, batch["label"]), normalizers,
                            accuracy=bool(self.labels))

    train_metrics = staticmethod(choice_metrics)

    def eval_outputs(self, model, batch):
        logits = tf.cast(model({k: batch[k] for k in INPUT_NAMES}, training=False), tf.float32)
        return {"logits": logits, "label": batch["label"], "nll": classifier_nll(logits, batch["label"])}

    def predictions(self, logits):
        """[N, C] -> class ids [N]; [N, 1] (regression) -> scores [N]."""
        return logits[:, 0] if logits.shape[-1] == 1 else np.argmax(logits, axis=-1)

    def eval_metrics(self, outputs):
        # the gold of the examples themselves (a regression score as read, float64, not the
        # batch's float32 copy): the metrics of dev_predictions.tsv against the dev file
        examples = self.splits["dev"]
        gold = [examples[i] for i in outputs[EXAMPLE_INDEX]]
        gold = [float(e.label) for e in gold] if not self.labels else label_ids(gold, self.labels)
        metrics = compute(self.metric_names, self.predictions(outputs["logits"]), gold)
        metrics["loss"] = float(np.mean(outputs["nll"]))
        return metrics

    def majority_baseline(self):
        """The dev metrics of always predicting the most frequent training label (the
        training mean for regression)."""
        source = self.splits.get("train") or self.splits["dev"]
        dev_gold = label_ids(self.splits["dev"], self.labels)
        train_gold = label_ids(source, self.labels)
        if self.labels:
            constant = int(max(range(len(self.labels)), key=lambda i: (int((train_gold == i).sum()), -i)))
        else:
            constant = float(train_gold.mean())
        return compute(self.metric_names, [constant] * len(dev_gold), dev_gold)

    def results_extras(self):
        extras = {"labels": self.labels}
        if "dev" in self.splits:
            extras["majority_baseline"] = self.majority_baseline()
        return extras


def write_predictions(path, examples, predictions, labels, with_gold):
    """TSV of index, guid, prediction (label name, or the score unrounded: float() of the text
    is the model's float32 score exactly) and, for dev, the gold label."""
    def show(value):
        return labels[int(value)] if labels else repr(float(value))

    lines = ["index\tguid\tprediction" + ("\tlabel" if with_gold else "")]
    for i, (example, value) in enumerate(zip(examples, predictions, strict=True)):
        row = [str(i), example.guid, show(value)]
        if with_gold:
            row.append(str(example.label))
        lines.append("\t".join(row))
    atomic.write_text(path, "\n".join(lines) + "\n")


check_options = ClassificationTask.check_options
