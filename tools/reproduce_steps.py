"""The steps of tools/reproduce.py, each run through the project's own commands in this
process (their `define_flags` / `run`, parsed as their command lines): the data tool
(albert_tf.create_pretraining_data), albert_tf.run_pretraining, run_classifier,
run_squad_v1 and run_race; the SentencePiece trainer and the task tools
(tools/make_topic_task.py, make_squad_data.py, make_race_data.py) through their library
functions. One TensorFlow start serves the whole grid.

A step is done when its record `steps/<step>.json` exists (written atomically, last): a killed grid
starts again at the first step without one, and a training step killed half-way resumes
from its run's newest checkpoint (what the commands do for their own output directories).

Layout of --output_dir:

    grid.json                      the settings (compared on resume)
    data/corpus/                   pretrain.txt, held_out.txt, held_out.jsonl (held-out entries)
    data/spm.model                 SentencePiece model of pretrain.txt
    data/{train,eval}_{sop,nsp}.tfrecord   pretraining data; eval_* from held-out documents
    data/tasks/{topic,squad,race}/ the downstream tasks (held-out documents) and feature caches
    cells/<cell>/albert_config.json
    data/steps/<step>.json         records of the finished data steps
    cells/<cell>/seed<k>/{pretrain,eval_sop,eval_nsp,topic,squad,race}/   the runs
    cells/<cell>/seed<k>/steps/<step>.json                                  their records
    cells/<cell>/seed<k>/log.txt   what the commands printed
"""

import contextlib
import json
import os
import sys
import time
import zlib

from absl import flags

from albert_tf import cli
from albert_tf.storage import atomic
from albert_tf.storage.json_files import read_json
from albert_tf.tasks.race.reading import RACE_ARTICLE

if __package__:  # imported as tools.reproduce_steps
    from . import make_race_data
    from . import make_squad_data
    from . import make_topic_task
else:  # imported by a tool run as a script: tools/ is sys.path[0]
    import make_race_data
    import make_squad_data
    import make_topic_task


def read_done(path):
    """The record of a finished step ({"result", "seconds"}), or None."""
    if not os.path.isfile(path):
        return None
    return read_json(path, "the record of a finished step")


def call_command(module, name, args, log_path):
    """Runs `python -m albert_tf.<name> ARGS` in this process: the command's own flag
    definitions and checks; its output goes to `log_path` (appended). Returns what its
    run() returns; its errors propagate (a ValueError names the flag or file). The commands
    print to sys.stdout / sys.stderr as they are at the call (no default stream is bound at
    import), here the log."""
    values = flags.FlagValues()
    module.define_flags(values)
    cli.parse_flags(name, [name, *args], values)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "a", encoding="utf-8") as log, contextlib.redirect_stdout(log), \
            contextlib.redirect_stderr(log):
        print(f"$ python -m albert_tf.{name} " + " ".join(args), flush=True)
        try:
            return module.run(values)
        finally:
            _release_models()


def _release_models():
    import keras

    keras.backend.clear_session()  # collects garbage itself (free_memory=True)


class Paths:
    """Where everything of a grid lives (module docstring)."""

    def __init__(self, output_dir):
        self.root = output_dir
        self.data = os.path.join(output_dir, "data")
        self.corpus = os.path.join(self.data, "corpus")
        self.pretrain_text = os.path.join(self.corpus, "pretrain.txt")
        self.held_out_text = os.path.join(self.corpus, "held_out.txt")
        self.held_out_entries = os.path.join(self.corpus, "held_out.jsonl")
        self.spm_prefix = os.path.join(self.data, "spm")
        self.spm_model = self.spm_prefix + ".model"
        self.tasks = os.path.join(self.data, "tasks")

    def records(self, split, objective):
        return os.path.join(self.data, f"{split}_{objective}.tfrecord")

    def cell(self, cell):
        return os.path.join(self.root, "cells", cell.id)

    def run(self, cell, seed, step):
        return os.path.join(self.cell(cell), f"seed{seed}", step)

    def record(self, cell, seed, step):
        """The record of a finished step: of a cell's seed, or (cell None) of the data."""
        where = self.data if cell is None else os.path.join(self.cell(cell), f"seed{seed}")
        return os.path.join(where, "steps", f"{step}.json")

    def task(self, name):
        return os.path.join(self.tasks, name)


# ---- shared data ---------------------------------------------------------------------------

def held_out(entry, percent):
    """Whether a corpus entry is held out: by a hash of its source file, so a module's
    documents stay together (no near-duplicate docstrings across the split)."""
    return zlib.crc32(entry["source"].encode("utf-8")) % 100 < percent


def build_corpus(settings, paths):
    """The fixed sample corpus (albert_tf.data.sample_corpus: its documents in order;
    --corpus_mb of them, 0: all), split by
    source file into pretraining and held-out documents. Writes pretrain.txt and
    held_out.txt (create_pretraining_data's format) and held_out.jsonl (the entries the
    task tools read); returns the counts."""
    from albert_tf.data import sample_corpus

    limit = int(settings.corpus_mb * 1_000_000) if settings.corpus_mb else None
    parts = {"pretrain": [], "held_out": []}
    held_entries, total = [], 0
    for entry in sample_corpus.iter_entries():
        block = "\n".join(entry["sentences"]) + "\n\n"
        total += len(block.encode("utf-8"))
        if held_out(entry, settings.held_out_percent):
            parts["held_out"].append(block)
            held_entries.append(entry)
        else:
            parts["pretrain"].append(block)
        if limit and total >= limit:
            break
    os.makedirs(paths.corpus, exist_ok=True)
    for name, path in (("pretrain", paths.pretrain_text), ("held_out", paths.held_out_text)):
        atomic.write_text(path, "".join(parts[name]))
    sample_corpus.write_entries(paths.held_out_entries, held_entries)
    return {f"{name}_{what}": value for name, blocks in parts.items()
            for what, value in (("documents", len(blocks)), ("bytes", sum(len(b.encode("utf-8")) for b in blocks)))}


def train_spm(settings, paths):
    """The release's SentencePiece recipe on pretrain.txt (albert_tf.data.spm_training)."""
    from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece

    options = SentencePieceOptions(vocab_size=settings.vocab_size, input_sentence_size=1_000_000,
                                   num_threads=os.cpu_count() or 1)
    train_sentencepiece([paths.pretrain_text], paths.spm_prefix, options)
    return {"spm_model": paths.spm_model, "vocab_size": settings.vocab_size}


PRETRAINING_DATA = (  # (split, objective, dupe_factor)
    ("train", "sop", 3), ("train", "nsp", 3), ("eval", "sop", 1), ("eval", "nsp", 1))


def make_pretraining_data(settings, paths, split, objective, dupe_factor, log_path):
    """create_pretraining_data on pretrain.txt (train) or held_out.txt (eval): sentence
    order (SOP, the release's default) or next sentence (NSP: --random_next_sentence)."""
    from albert_tf import create_pretraining_data

    text = paths.pretrain_text if split == "train" else paths.held_out_text
    args = [f"--input_file={text}", f"--output_file={paths.records(split, objective)}",
            f"--spm_model_file={paths.spm_model}", f"--max_seq_length={settings.max_seq_length}",
            f"--max_predictions_per_seq={settings.max_predictions_per_seq}", f"--dupe_factor={dupe_factor}",
            f"--random_next_sentence={objective == 'nsp'}", "--num_workers=1",
            f"--random_seed={12345 + (split == 'eval')}"]
    call_command(create_pretraining_data, "create_pretraining_data", args, log_path)
    return {"records": paths.records(split, objective)}


def baselines(settings, paths):
    """What each held-out accuracy of `evaluate` is judged against (tools/reproduce_stats.py),
    from the records it reads (the first EVAL_EXAMPLES of each eval set, in file order):

        mlm_piece / mlm_accuracy   {"sop", "nsp"}: the piece most frequent among the masked
                                   positions of train_<data> (ties: the smaller id), and the
                                   percent of eval_sop's masked positions that hold it (the
                                   unigram baseline of a cell trained on that data)
        mlm_positions              masked positions (weight > 0) of eval_sop read
        {sop,nsp}_pairs            held-out pairs read from eval_<objective>
        {sop,nsp}_accuracy         chance: percent of those pairs with the more frequent
                                   label (50 or more)
    """
    import numpy as np

    def read(path, limit=None):
        ids, labels = [], []
        for masked, weights, label in _records(path, settings, limit):
            ids.append(masked[weights > 0])
            labels.append(label)
        return np.concatenate(ids), np.concatenate(labels)

    out = {"mlm_piece": {}, "mlm_accuracy": {}}
    held_ids, _ = read(paths.records("eval", "sop"), EVAL_EXAMPLES)
    out["mlm_positions"] = int(held_ids.size)
    for data in ("sop", "nsp"):
        train_ids, _ = read(paths.records("train", data))
        piece = int(np.argmax(np.bincount(train_ids)))
        out["mlm_piece"][data] = piece
        out["mlm_accuracy"][data] = 100.0 * float(np.mean(held_ids == piece))
    for objective in ("sop", "nsp"):
        _, labels = read(paths.records("eval", objective), EVAL_EXAMPLES)
        out[f"{objective}_pairs"] = int(labels.size)
        out[f"{objective}_accuracy"] = 100.0 * max(float(np.mean(labels == 0)), float(np.mean(labels == 1)))
    return out


def _records(path, settings, limit=None):
    """(masked_lm_ids [P], masked_lm_weights [P], next_sentence_labels [1]) numpy arrays per
    batch of records of a pretraining TFRecord file, the first `limit` (None: all)."""
    import tensorflow as tf

    from albert_tf.data.example_codec import feature_lengths

    lengths = feature_lengths(settings.max_seq_length, settings.max_predictions_per_seq)
    spec = {name: tf.io.FixedLenFeature([lengths[name][0]], tf.float32 if lengths[name][1] == "float32" else tf.int64)
            for name in ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")}
    ds = tf.data.TFRecordDataset(path)
    if limit is not None:
        ds = ds.take(limit)
    for batch in ds.batch(4096).map(lambda x: tf.io.parse_example(x, spec)).as_numpy_iterator():
        yield batch["masked_lm_ids"].ravel(), batch["masked_lm_weights"].ravel(), batch["next_sentence_labels"].ravel()


def make_tasks(settings, paths, quick):
    """The three downstream tasks from the held-out entries, by the project's task tools."""
    from albert_tf.data import sample_corpus

    entries = sample_corpus.read_entries(paths.held_out_entries)
    sizes = TASK_SIZES["quick" if quick else "default"]
    topical = [e for e in entries if make_topic_task.package_of(e["source"]) not in TOPIC_EXCLUDED]
    train, dev, labels = make_topic_task.make_corpus_task(topical, num_classes=4, per_class=sizes["per_class"],
                                                          source=paths.held_out_entries)
    make_topic_task.write_task(paths.task("topic"), train, dev)
    functions = make_squad_data.corpus_docstring_entries(entries)
    squad = {}
    for split, count in (("train", sizes["squad_train"]), ("dev", sizes["squad_dev"])):
        dataset = make_squad_data.make_dataset("1.1", count, 12345, 600, split=split, entries=functions)
        path = os.path.join(paths.task("squad"), f"{split}.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic.write_text(path, json.dumps(dataset, ensure_ascii=False))
        squad[split] = sum(len(p["qas"]) for a in dataset["data"] for p in a["paragraphs"])
    race = make_race_data.make_race(paths.task("race"), num_articles=sizes["race_articles"], seed=12345,
                                    entries=functions)
    return {"topic_labels": list(labels), "topic_train": len(train), "topic_dev": len(dev),
            "squad_train": squad["train"], "squad_dev": squad["dev"],
            "race_dev": sum(level["questions"] for level in race["counts"]["dev"].values()),
            "squad_train_features": squad_train_features(settings, paths)}


def race_dev_questions(paths):
    """The RACE-style dev questions of a grid's task files (a tasks record of before it held
    "race_dev")."""
    import glob

    count = 0
    for path in glob.glob(os.path.join(paths.task("race"), "RACE", "dev", "*", "*.txt")):
        if os.path.basename(path) != "all.txt":
            count += len(read_json(path, RACE_ARTICLE)["questions"])
    return count


SQUAD_DOC_STRIDE, SQUAD_QUERY_LENGTH = 24, 20


def squad_train_features(settings, paths):
    """Builds the SQuAD training features once (the cache every run reuses) and returns
    their number, so that every SQuAD run takes exactly --finetune_steps steps."""
    from albert_tf.tasks.squad.cache import load_or_build_features
    from albert_tf.tasks.squad.features import FeatureSettings
    from albert_tf.data.tokenization import SentencePieceTokenizer

    squad = paths.task("squad")
    feature_settings = FeatureSettings(settings.max_seq_length, SQUAD_DOC_STRIDE, SQUAD_QUERY_LENGTH, True, "v1")
    cache = load_or_build_features(os.path.join(squad, "train.json"), os.path.join(squad, "train_features.tfrecord"),
                                   SentencePieceTokenizer(paths.spm_model, do_lower_case=True), feature_settings)
    return cache.num_features


# tf_keras holds Keras 2's copy of keras's docstrings: as a topic it would be told from
# keras by little more than chance, so it is left out of the topic task's classes.
TOPIC_EXCLUDED = ("tf_keras",)
TASK_SIZES = {
    "default": {"per_class": 400, "squad_train": 600, "squad_dev": 150, "race_articles": 60},
    "quick": {"per_class": 40, "squad_train": 60, "squad_dev": 20, "race_articles": 3},
}


# ---- per cell and seed ---------------------------------------------------------------------

def write_cell_config(settings, paths, cell):
    path = os.path.join(paths.cell(cell), "albert_config.json")
    if not os.path.isfile(path):
        atomic.write_text(path, json.dumps(settings.albert_config(cell), indent=2, sort_keys=True) + "\n")
    return path


def _common(settings, seed):
    return [f"--random_seed={seed}", f"--dtype_policy={settings.dtype_policy}"]


def pretrain(settings, paths, cell, seed, log_path):
    """run_pretraining of one cell: the objective's data (none: the SOP data without the
    sentence loss), the grid's budget; metrics.jsonl holds its learning curve."""
    from albert_tf import run_pretraining

    data = "nsp" if cell.objective == "nsp" else "sop"
    steps = settings.pretrain_steps
    args = [f"--albert_config_file={write_cell_config(settings, paths, cell)}",
            f"--input_file={paths.records('train', data)}", f"--output_dir={paths.run(cell, seed, 'pretrain')}",
            f"--max_seq_length={settings.max_seq_length}",
            f"--max_predictions_per_seq={settings.max_predictions_per_seq}",
            f"--train_batch_size={settings.pretrain_batch_size}", f"--learning_rate={settings.pretrain_learning_rate}",
            f"--num_train_steps={steps}", f"--num_warmup_steps={steps // 10}", f"--save_checkpoints_steps={steps}",
            "--keep_checkpoint_max=1", f"--iterations_per_loop={max(1, min(100, steps // 10))}",
            "--do_train", "--nodo_eval", "--dynamic_masking", f"--sentence_loss={cell.objective != 'none'}",
            "--optimizer=lamb", *_common(settings, seed)]
    results = call_command(run_pretraining, "run_pretraining", args, log_path)
    return {"final_step": results["final_step"]}


EVAL_BATCHES, EVAL_BATCH_SIZE = 20, 128  # the standard error of an accuracy near 50% is about 1 point
EVAL_EXAMPLES = EVAL_BATCHES * EVAL_BATCH_SIZE  # evaluate's examples: the first of the file, in file order


def evaluate(settings, paths, cell, seed, objective, log_path):
    """The pretrained model on a held-out set (run_pretraining --nodo_train): masked-LM
    accuracy and its sentence head's accuracy on SOP or NSP pairs of held-out documents."""
    from albert_tf import run_pretraining

    args = [f"--albert_config_file={write_cell_config(settings, paths, cell)}",
            f"--init_checkpoint={paths.run(cell, seed, 'pretrain')}",
            f"--eval_input_file={paths.records('eval', objective)}",
            f"--output_dir={paths.run(cell, seed, 'eval_' + objective)}",
            f"--max_seq_length={settings.max_seq_length}",
            f"--max_predictions_per_seq={settings.max_predictions_per_seq}",
            f"--eval_batch_size={EVAL_BATCH_SIZE}", f"--max_eval_steps={EVAL_BATCHES}", "--nodo_train", "--do_eval",
            *_common(settings, seed)]
    results = call_command(run_pretraining, "run_pretraining", args, log_path)
    return {k: float(v) for k, v in results["eval"].items() if isinstance(v, (int, float))}


def _model_source(settings, paths, cell, seed):
    config = write_cell_config(settings, paths, cell)
    source = [f"--albert_config_file={config}", f"--spm_model_file={paths.spm_model}"]
    if cell.pretrained:
        source.append(f"--init_checkpoint={paths.run(cell, seed, 'pretrain')}")
    return source


def finetune(settings, paths, cell, seed, task, data, log_path):
    """One downstream task from the cell's pretrained model (or from random weights for
    the control), the same budget for every cell; returns its dev score in percent from the
    best dev checkpoint (the paper's protocol; SQuAD through run_squad_v1
    --best_checkpoint)."""
    from albert_tf import run_classifier, run_race, run_squad_v1

    steps, batch = settings.finetune_steps, settings.finetune_batch_size
    if task == "race":  # a question is four sequences: half the batch keeps a step's cost near the others'
        batch = max(1, batch // 2)
    rate = settings.topic_learning_rate if task == "topic" else settings.finetune_learning_rate
    out = paths.run(cell, seed, task)
    common = [*_model_source(settings, paths, cell, seed), f"--output_dir={out}",
              f"--max_seq_length={settings.max_seq_length}", f"--train_batch_size={batch}",
              f"--learning_rate={rate}", *_common(settings, seed)]
    # three dev evaluations (and checkpoints) per run; a run too short to pick from (the
    # --quick grid's) is evaluated once, at its end
    every = steps // 3 if steps >= 30 else steps
    if task == "topic":
        args = [*common, "--task_name=tsv", f"--data_dir={paths.task('topic')}", "--text_a_column=sentence",
                f"--labels={','.join(data['topic_labels'])}", "--do_train", "--do_eval", f"--train_step={steps}",
                f"--warmup_step={steps // 10}", f"--save_checkpoints_steps={every}", "--keep_checkpoint_max=1",
                f"--iterations_per_loop={every}", "--eval_batch_size=64"]
        results = call_command(run_classifier, "run_classifier", args, log_path)
        return {"score": 100 * results["eval"]["accuracy"], "best_step": results["eval"].get("best_step")}
    if task == "squad":
        squad = paths.task("squad")
        # int(features / batch x epochs) is the run's step count: exactly `steps`
        epochs = (steps + 0.5) * batch / data["squad_train_features"]
        args = [*common, f"--train_file={os.path.join(squad, 'train.json')}",
                f"--predict_file={os.path.join(squad, 'dev.json')}",
                f"--train_feature_file={os.path.join(squad, 'train_features.tfrecord')}",
                f"--predict_feature_file={os.path.join(squad, 'dev_features.tfrecord')}",
                f"--predict_feature_left_file={os.path.join(squad, 'dev_features_left.pkl')}",
                "--do_train", "--do_predict", "--best_checkpoint", f"--num_train_epochs={epochs!r}",
                f"--doc_stride={SQUAD_DOC_STRIDE}", f"--max_query_length={SQUAD_QUERY_LENGTH}",
                "--predict_batch_size=64",
                f"--save_checkpoints_steps={every}", "--keep_checkpoint_max=1", f"--iterations_per_loop={every}"]
        results = call_command(run_squad_v1, "run_squad_v1", args, log_path)
        metrics = results["metrics"]
        return {"score": (metrics["f1"] + metrics["exact_match"]) / 2, "f1": metrics["f1"],
                "exact_match": metrics["exact_match"], "best_step": results.get("best_step")}
    race = paths.task("race")
    args = [*common, f"--data_dir={os.path.join(race, 'RACE')}",
            f"--train_file={os.path.join(race, 'train_features.tfrecord')}",
            f"--eval_file={os.path.join(race, 'dev_features.tfrecord')}",
            "--do_train", "--do_eval", f"--train_step={steps}", f"--warmup_step={steps // 10}",
            f"--save_checkpoints_steps={every}", "--num_keep_checkpoint=1", f"--iterations_per_loop={every}",
            f"--max_qa_length={settings.max_seq_length // 3}", "--eval_batch_size=64"]
    results = call_command(run_race, "run_race", args, log_path)
    return {"score": 100 * results["eval"]["accuracy"], "best_step": results["eval"].get("best_step")}


def timed(function, *args):
    """(result, seconds) of function(*args)."""
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def record_done(path, result, seconds):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic.write_text(path,
                      json.dumps({"result": result, "seconds": round(seconds, 2)}, indent=2, sort_keys=True) + "\n")


def log_line(stream, text):
    print(text, file=stream or sys.stdout, flush=True)
