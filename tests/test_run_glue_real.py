"""run_classifier on the real GLUE dev sets (../shared/data/real/glue): a 2-step tiny model
with the release's 30k SentencePiece model reports each task's GLUE metric, and every
reported number equals the same metric recomputed here, apart from albert_tf's metric code,
from dev_predictions.tsv and the real dev file (read here with csv)."""

import csv
import json
import math
import os

import pytest
from conftest import write_tiny_config
from real_data import SPM_30K, real_path

SEQ = 64
TRAIN_ROWS = 32  # a training subset: 2 steps of 16

# task: (directory, header, (text_a, text_b, label) columns, dev rows, the metrics reported)
TASKS = {
    "sst-2": ("SST-2", True, (0, None, 1), 872, ("accuracy",)),
    "cola": ("CoLA", False, (3, None, 1), 1043, ("matthews_corrcoef", "accuracy")),
    "rte": ("RTE", True, (1, 2, 3), 277, ("accuracy",)),
    "sts-b": ("STS-B", True, (7, 8, 9), 1500, ("pearson", "spearman")),
    "mrpc": ("MRPC", True, (3, 4, 0), 408, ("accuracy", "f1")),
}
GLUE_METRICS = {"accuracy", "f1", "matthews_corrcoef", "pearson", "spearman"}
POSITIVE = {"cola": "1", "mrpc": "1"}  # the class counted as positive (Matthews, F1)
# float64 sums taken in another order than albert_tf's (NumPy's) differ in the last bits;
# 1e-12 is far below what a score written to 6 decimals, or float32 gold scores, move them
CLOSE = {"rel": 1e-12, "abs": 1e-12}


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    # one layer: the runs' cost is mostly tracing the model, and these check the metrics, not depth
    # vocab_size: the release's SentencePiece model
    return write_tiny_config(tmp_path_factory.mktemp("config"), num_hidden_layers=1, num_hidden_groups=1,
                             vocab_size=30000)


def _rows(path, header):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return (rows[0], rows[1:]) if header else (None, rows)


def _data_dir(task, directory, tmp_path):
    """tmp_path/<task>: dev.tsv a link to the real dev file, train.tsv the real file's first
    TRAIN_ROWS rows (with its header line, byte for byte)."""
    header = TASKS[task][1]
    data_dir = tmp_path / task
    data_dir.mkdir()
    os.symlink(real_path(f"glue/{directory}/dev.tsv"), data_dir / "dev.tsv")
    with open(real_path(f"glue/{directory}/train.tsv"), "rb") as f:
        lines = f.read().split(b"\n")[: TRAIN_ROWS + int(header)]
    (data_dir / "train.tsv").write_bytes(b"\n".join(lines) + b"\n")
    return data_dir


# --- the GLUE metrics, written here from their definitions ---------------------------------

def _accuracy(predicted, gold):
    return sum(p == g for p, g in zip(predicted, gold, strict=True)) / len(gold)


def _counts(predicted, gold, positive):
    pairs = list(zip(predicted, gold, strict=True))
    tp = sum(p == positive and g == positive for p, g in pairs)
    fp = sum(p == positive and g != positive for p, g in pairs)
    fn = sum(p != positive and g == positive for p, g in pairs)
    return tp, fp, fn, len(pairs) - tp - fp - fn


def _f1(predicted, gold, positive):
    tp, fp, fn, _ = _counts(predicted, gold, positive)
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def _matthews(predicted, gold, positive):
    tp, fp, fn, tn = _counts(predicted, gold, positive)
    denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / denominator if denominator else 0.0


def _pearson(x, y):
    mx, my = math.fsum(x) / len(x), math.fsum(y) / len(y)
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx, syy = math.fsum((a - mx) ** 2 for a in x), math.fsum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else 0.0


def _average_ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2 + 1  # ties share their mean rank (1-based)
        start = end + 1
    return ranks


def _metric(name, predicted, gold, task):
    if name == "accuracy":
        return _accuracy(predicted, gold)
    if name == "f1":
        return _f1(predicted, gold, POSITIVE[task])
    if name == "matthews_corrcoef":
        return _matthews(predicted, gold, POSITIVE[task])
    if name == "pearson":
        return _pearson(predicted, gold)
    return _pearson(_average_ranks(predicted), _average_ranks(gold))  # spearman


@pytest.mark.parametrize("task", sorted(TASKS))
def test_two_steps_on_the_real_dev_set_report_the_glue_metric_of_the_predictions(task, config_file, tmp_path):
    from absl import flags

    from albert_tf import run_classifier

    directory, header, (a, b, y), dev_count, names = TASKS[task]
    data_dir, out = _data_dir(task, directory, tmp_path), tmp_path / "run"
    values = flags.FlagValues()
    run_classifier.define_flags(values)
    values(["run_classifier", f"--task_name={task}", f"--data_dir={data_dir}", f"--output_dir={out}",
            f"--spm_model_file={real_path(SPM_30K)}", f"--albert_config_file={config_file}",
            f"--max_seq_length={SEQ}", "--do_train", "--do_eval", "--train_batch_size=16", "--eval_batch_size=128",
            "--train_step=2", "--save_checkpoints_steps=2", "--iterations_per_loop=2", "--learning_rate=1e-3",
            "--dtype_policy=float32"])
    results = run_classifier.run(values, stream=open(os.devnull, "w"))
    summary = json.load(open(out / "eval_results.json", encoding="utf-8"))
    assert results["final_step"] == 2 and summary["best_step"] == 2 and summary["examples"] == dev_count
    # the task's GLUE metrics, the first choosing the best checkpoint, and no other
    assert summary["metric"] == names[0] and GLUE_METRICS & set(summary) == set(names)

    _, dev = _rows(real_path(f"glue/{directory}/dev.tsv"), header)
    with open(out / "dev_predictions.tsv", encoding="utf-8", newline="") as f:
        written = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert written[0] == ["index", "guid", "prediction", "label"] and len(written) - 1 == len(dev) == dev_count
    regression = task == "sts-b"
    gold = [float(row[y]) if regression else row[y] for row in dev]
    assert [float(r[3]) if regression else r[3] for r in written[1:]] == gold
    predicted = [float(r[2]) if regression else r[2] for r in written[1:]]
    for name in names:
        assert summary[name] == pytest.approx(_metric(name, predicted, gold, task), **CLOSE), name
        assert results["eval"][name] == summary[name]
    if regression:  # the loss: squared error, computed by the model in float32
        assert summary["loss"] == pytest.approx(math.fsum((p - g) ** 2 for p, g in zip(predicted, gold)) / len(gold),
                                                rel=1e-6)
    else:
        assert set(predicted) <= set(gold)

    # the majority baseline: the most frequent training label (the mean score) for every dev row
    _, train = _rows(data_dir / "train.tsv", header)
    assert len(train) == TRAIN_ROWS
    if regression:
        constant = math.fsum(float(row[y]) for row in train) / len(train)
    else:
        labels = sorted({row[y] for row in train} | set(gold))  # the task's label order
        constant = max(labels, key=lambda label: (sum(row[y] == label for row in train), -labels.index(label)))
    baseline = summary["majority_baseline"]
    assert set(baseline) == set(names)
    for name in names:
        assert baseline[name] == pytest.approx(_metric(name, [constant] * len(gold), gold, task), **CLOSE), name
