"""The multiple-choice task: RACE (and users' own data), for `python -m albert_tf.run_race`
(the release's recipe and its features: docs/race.md).

Task names: "race" (data_dir/RACE/{train,dev,test}/{middle,high}: one JSON article per
*.txt, or the release's all.txt), any other ArticleSet of `DATA_SETS` (the same layout
under its own directory and levels) and "multiple_choice" (data_dir/{train,dev,test}.jsonl:
context, question, options, answer).

Shape legend: B batch, C options, T max_seq_length.
"""

import json

import numpy as np
import tensorflow as tf

from albert_tf.data.buckets import bucketed_batches, cut_to_width
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice, multiple_choice_loss
from albert_tf.storage import atomic, files
from albert_tf.tasks.common import check_model_source, spm_file_for
from albert_tf.tasks.fine_tuning import FineTuningTask, choice_metrics, choice_terms, wanted_splits
from albert_tf.tasks.race.options import MultipleChoiceOptions  # noqa: F401 (re-exported)
from albert_tf.tasks.race.reading import DATA_SETS, LEVELS
from albert_tf.training.task import EXAMPLE_INDEX

JSON_LINES = "multiple_choice"  # the --task_name of generic JSON-lines data (no levels)
CACHE_FLAGS = {"train": "train_file", "dev": "eval_file", "test": "predict_file"}  # each split's feature cache


def read_split(o, split):
    """The examples of one split (MultipleChoiceExamples), checked."""
    from albert_tf.tasks.race.reading import read_articles, read_multiple_choice_jsonl, read_race

    if o.task_name == "race":
        return read_race(o.data_dir, split, high_only=o.high_only, middle_only=o.middle_only)
    if o.task_name in DATA_SETS:
        return read_articles(DATA_SETS[o.task_name], o.data_dir, split)
    path = files.join(o.data_dir, f"{split}.jsonl")
    if not files.isfile(path):
        raise ValueError(f"--task_name=multiple_choice reads {path}, which does not exist (JSON lines with context, "
                         "question, options and answer).")
    return read_multiple_choice_jsonl(path)


def accuracy_by_level(probabilities, labels, levels, level_names=LEVELS):
    """{"count", "count_<level>": int} of the questions with a label and, where not 0, their
    "accuracy", "accuracy_<level>", for probabilities float [N, C], labels int [N] (-1: none,
    not counted) and levels str [N], over `level_names` (RACE's: middle, high)."""
    predicted = np.argmax(probabilities, axis=-1)
    labels = np.asarray(labels)
    levels = np.asarray(levels, dtype=object)
    known = labels >= 0
    metrics = {}
    for suffix, keep in (("", known), *((f"_{level}", known & (levels == level)) for level in level_names)):
        count = int(keep.sum())
        if count:
            metrics["accuracy" + suffix] = int((predicted[keep] == labels[keep]).sum()) / count
        metrics["count" + suffix] = count
    return metrics


def eval_line(summary, levels=LEVELS):
    """The accuracies of `accuracy_by_level`'s dict as printed, each with its question count:
    "n/a" for a group without questions (no accuracy); of the overall one and `levels` (none,
    () or False, for generic multiple-choice data)."""
    parts = []
    for suffix in ("", *(f"_{level}" for level in levels or ())):
        value = summary.get("accuracy" + suffix)
        parts.append(f"accuracy{suffix} {'n/a' if value is None else f'{value:.4f}'} "
                     f"({summary.get('count' + suffix, 0)} questions)")
    return ", ".join(parts)


class MultipleChoiceTask(FineTuningTask):
    """RACE / multiple-choice fine-tuning (see module docstring).

    Args:
        options: MultipleChoiceOptions.
        splits: {split: MultipleChoiceExamples}.
        arrays: {split: {name: array}} features of each split (albert_tf.tasks.race.features layout).
    """

    skip_padding = True  # the loss reads pooled outputs only
    best_metric = "accuracy"
    progress_metrics = (("loss", "loss"), ("accuracy", "acc"))
    served = "the multiple-choice model (raw article, question, options in)"
    prediction_files = {"dev": ("dev_predictions.jsonl", "dev_predictions"),
                        "test": ("predictions.jsonl", "predictions")}
    predicted = "questions"
    weights_file = AlbertForMultipleChoice.WEIGHTS_FILE

    def __init__(self, options, splits, arrays):
        self.options = options
        self.name = options.task_name
        self.splits = splits
        self.arrays = arrays

    def head(self, encoder):
        return AlbertForMultipleChoice(encoder, dropout_prob=self.options.dropout_prob)

    @staticmethod
    def check_task(o):
        names = (*DATA_SETS, JSON_LINES)
        if o.task_name not in names:
            raise ValueError(f"--task_name must be one of {', '.join(names)}, got {o.task_name!r}.")
        for name in ("data_dir", "output_dir"):
            if not getattr(o, name):
                raise ValueError(f"--{name} is required.")
        if not files.isdir(o.data_dir):
            raise ValueError(f"--data_dir={o.data_dir} is not a directory.")
        if not (o.do_train or o.do_eval or o.do_predict or o.export_dir):
            raise ValueError("at least one of --do_train, --do_eval, --do_predict and --export_dir is needed.")
        if o.high_only and o.middle_only:
            raise ValueError("--high_only and --middle_only exclude each other.")
        if (o.high_only or o.middle_only) and o.task_name != "race":
            raise ValueError("--high_only / --middle_only are for --task_name=race.")
        check_model_source(o)
        if o.max_seq_length - o.max_qa_length - 3 < 1:
            raise ValueError(f"--max_seq_length ({o.max_seq_length}) must exceed --max_qa_length "
                             f"({o.max_qa_length}) + 3 to leave room for the article.")
        if not 0 <= o.dropout_prob < 1:
            raise ValueError(f"--dropout_prob must be in [0, 1), got {o.dropout_prob}.")
        for flag in CACHE_FLAGS.values():
            path = getattr(o, flag)
            if path and files.isdir(path):
                raise ValueError(f"--{flag}={path} is a directory; give a file path (the feature cache).")

    @staticmethod
    def feature_caches(o):
        return tuple((CACHE_FLAGS[split], o.feature_file(split), True) for split in wanted_splits(o))

    @classmethod
    def read(cls, o, stream):
        from albert_tf.data.tokenization import SentencePieceTokenizer

        splits = {split: read_split(o, split) for split in wanted_splits(o)}
        for split, examples in splits.items():
            print(f"{split}: {examples.summary.source}", file=stream, flush=True)
            if not len(examples):
                raise ValueError(f"--data_dir={o.data_dir}: the {split} split has no questions.")
            if split != "test" and any(e.label is None for e in examples):
                raise ValueError(f"--data_dir={o.data_dir}: {split} questions need answers "
                                 f"(first without one: {next(e.source for e in examples if e.label is None)}).")
        return splits, SentencePieceTokenizer(spm_file_for(o), do_lower_case=o.do_lower_case)

    @classmethod
    def prepare(cls, o, inputs, training, stream):
        from albert_tf.tasks.race.cache import load_or_build_features
        from albert_tf.tasks.race.features import MultipleChoiceSettings

        splits, tokenizer = inputs
        settings = MultipleChoiceSettings(max_seq_length=o.max_seq_length, max_qa_length=o.max_qa_length)
        arrays = {}
        for split, examples in splits.items():
            cache = load_or_build_features(examples, o.feature_file(split), tokenizer, settings)
            print(f"{split} features {cache.feature_file}: {cache.num_features} ({cache.reason})", file=stream,
                  flush=True)
            arrays[split] = cache.arrays
        return cls(o, splits, arrays)

    def describe_training(self, training):
        n = len(self.splits["train"])
        return (f"{self.name}: {n} training questions, batch {training.train_batch_size}, "
                f"{training.num_train_steps} steps ({training.num_train_steps * training.train_batch_size / n:.1f} "
                f"epochs), lr {training.learning_rate:g}, warmup {training.num_warmup_steps}")

    def report(self, outcome, results, stream):
        if "summary" in outcome:
            levels = DATA_SETS[self.name].levels if self.name in DATA_SETS else ()
            print("eval: " + eval_line(outcome["summary"], levels), file=stream, flush=True)

    def write_predictions(self, split, outputs, path):
        write_predictions(path, self.splits[split], outputs["probabilities"])

    def export(self, outcome, results, made_by):
        from albert_tf.tasks.race.export import export_multiple_choice

        o = self.options
        return export_multiple_choice(
            outcome["trainer"].model_in("float32"), spm_file_for(o), o.export_dir, do_lower_case=o.do_lower_case,
            max_seq_length=o.max_seq_length, max_qa_length=o.max_qa_length, widths=self.widths,
            extra_info={"task_name": o.task_name, "global_step": outcome["final_step"],
                        "initialized_from": outcome["initialized_from"]},
            made_by=made_by)

    def _batches(self, split, batch_size, training, **kwargs):
        columns = self.columns(split, with_index=not training)
        lengths = columns["input_mask"].sum(-1).max(-1)  # the longest option of each question
        return bucketed_batches(columns, lengths, batch_size, self.widths, cut_to_width(INPUT_NAMES, self.widths),
                                training=training, **kwargs)

    def columns(self, split, with_index=False):
        a = self.arrays[split]
        columns = {"input_word_ids": a["input_ids"], "input_mask": a["input_mask"],
                   "input_type_ids": a["segment_ids"], "label": np.maximum(a["label_ids"], 0)}
        columns = {k: np.asarray(v, np.int32) for k, v in columns.items()}
        if with_index:
            columns[EXAMPLE_INDEX] = np.arange(len(columns["label"]), dtype=np.int32)
        return columns

    def train_dataset(self, input_context, batch_size, skip_batches):
        return self._batches("train", batch_size, True, seed=self.options.random_seed, input_context=input_context,
                             skip_batches=skip_batches).prefetch(tf.data.AUTOTUNE)

    def split_dataset(self, split, batch_size):
        return self._batches(split, batch_size, False)

    def loss_and_terms(self, model, batch, normalizers, training):
        logits = model({k: batch[k] for k in INPUT_NAMES}, training=training)["logits"]  # [B, C]
        return choice_terms(logits, batch["label"], multiple_choice_loss(logits, batch["label"], per_example=True),
                            normalizers)

    train_metrics = staticmethod(choice_metrics)

    def eval_outputs(self, model, batch):
        logits = tf.cast(model({k: batch[k] for k in INPUT_NAMES}, training=False)["logits"], tf.float32)
        return {"probabilities": tf.nn.softmax(logits, -1), "label": batch["label"],
                "nll": multiple_choice_loss(logits, batch["label"], per_example=True)}

    def eval_metrics(self, outputs):
        examples = self.splits["dev"]
        index = outputs[EXAMPLE_INDEX]
        labels = np.array([examples[i].label if examples[i].label is not None else -1 for i in index])
        # generic JSON lines have no levels: their middle and high counts are 0
        level_names = DATA_SETS[self.name].levels if self.name in DATA_SETS else LEVELS
        metrics = accuracy_by_level(outputs["probabilities"], labels, [examples[i].level for i in index], level_names)
        metrics["loss"] = float(np.mean(outputs["nll"]))
        return metrics


def write_predictions(path, examples, probabilities):
    """predictions.jsonl: per question its article id, question index, chosen letter, the
    option probabilities (unrounded: float(p) read back is the model's p) and (when known)
    the gold letter and level."""
    lines = []
    for example, probs in zip(examples, probabilities, strict=True):
        row = {"id": example.example_id, "question_index": int(example.question_index),
               "prediction": chr(ord("A") + int(np.argmax(probs))),
               "probabilities": [float(p) for p in probs]}  # exact: json writes a float's repr
        if example.label is not None:
            row["label"] = chr(ord("A") + int(example.label))
        if example.level:
            row["level"] = example.level
        lines.append(json.dumps(row, ensure_ascii=False))
    atomic.write_text(path, "".join(line + "\n" for line in lines))
    return path
