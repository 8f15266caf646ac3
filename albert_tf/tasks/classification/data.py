"""Sentence(-pair) classification data: the GLUE tasks in their standard TSV layout.

Task names: those of `TASKS` (the release's, case-insensitive), plus `tsv` (text_a /
text_b / label columns named by header). Each reader checks every row: a wrong column count names the file and line, a
label outside the task's set is an error, an empty file is an error.

Example:
```python
task = get_task("MRPC")
examples = read_examples(task, "glue_data/MRPC", "dev")
examples[0].text_a, examples[0].text_b, examples[0].label
```
"""

import csv
import dataclasses
import io
import sys
from albert_tf.storage import files


@dataclasses.dataclass(frozen=True)
class Example:
    guid: str
    text_a: str
    text_b: object  # str or None
    label: object  # str (classification), float (regression) or None (test sets)


@dataclasses.dataclass(frozen=True)
class Task:
    """Where a task's columns are, per split: (text_a, text_b or None, label or None)."""

    name: str
    labels: tuple  # () for regression
    metrics: tuple
    files: dict  # split -> file name
    columns: dict  # split -> (a, b, label) indexes; for `tsv`: header names (a, b, label)
    header: bool = True
    by_name: bool = False  # `tsv`: columns are found by header name, in {split}.tsv


def glue_task(name, labels, metrics, columns, test_columns=None, dev_file="dev.tsv", test_file="test.tsv",
              header=True):
    """A task in the GLUE TSV layout: train.tsv, `dev_file` and `test_file` in --data_dir.

    Args:
        name: its --task_name (lower case).
        labels: the label values as written in the files; () for regression.
        metrics: names of classification.metrics.METRICS; the first picks the best checkpoint.
        columns: (text_a, text_b or None, label) indexes of train and dev rows.
        test_columns: those of test rows (label None); default `columns` without the label.
        header: whether train and dev start with a header line (test files always do).
    """
    test_columns = test_columns or (*columns[:2], None)
    return Task(name, tuple(labels), tuple(metrics), {"train": "train.tsv", "dev": dev_file, "test": test_file},
                {"train": columns, "dev": columns, "test": test_columns}, header)


# the named tasks, as the release spells them (docs/fine_tuning.md lists them: a test checks it)
TASKS = {task.name: task for task in (
    glue_task("cola", ("0", "1"), ("matthews_corrcoef", "accuracy"), (3, None, 1), (1, None, None), header=False),
    glue_task("sst-2", ("0", "1"), ("accuracy",), (0, None, 1), (1, None, None)),
    glue_task("mrpc", ("0", "1"), ("accuracy", "f1"), (3, 4, 0)),
    glue_task("sts-b", (), ("pearson", "spearman"), (7, 8, 9)),
    glue_task("qqp", ("0", "1"), ("accuracy", "f1"), (3, 4, 5), (1, 2, None)),
    glue_task("mnli", ("contradiction", "entailment", "neutral"), ("accuracy",), (8, 9, -1),
              dev_file="dev_matched.tsv", test_file="test_matched.tsv"),
    glue_task("mismnli", ("contradiction", "entailment", "neutral"), ("accuracy",), (8, 9, -1),
              dev_file="dev_mismatched.tsv", test_file="test_mismatched.tsv"),
    glue_task("qnli", ("entailment", "not_entailment"), ("accuracy",), (1, 2, 3)),
    glue_task("rte", ("entailment", "not_entailment"), ("accuracy",), (1, 2, 3)),
    glue_task("wnli", ("0", "1"), ("accuracy",), (1, 2, 3)),
)}


class DataError(ValueError):
    """Bad classification data; the message names the file and line."""


def get_task(name, labels=None, text_a_column="text_a", text_b_column=None, label_column="label"):
    """A task by its release name (case-insensitive), or the generic `tsv` task.

    For `tsv`, columns are found by header name in `{split}.tsv`; `labels` (a list)
    makes it a classification task (metric: accuracy), None a regression task
    (Pearson, Spearman). `text_b_column` None or "": single sentences; a name: sentence
    pairs, and a header without that column is an error.
    """
    key = name.lower()
    if key == "tsv":
        labels = tuple(str(l) for l in labels) if labels else ()
        names = (text_a_column, text_b_column or None, label_column)
        return Task("tsv", labels, ("accuracy",) if labels else ("pearson", "spearman"),
                    {s: f"{s}.tsv" for s in ("train", "dev", "test")}, {s: names for s in ("train", "dev", "test")},
                    by_name=True)
    if key not in TASKS:
        raise ValueError(f"--task_name={name!r} is not one of {', '.join(TASKS)}, tsv.")
    return TASKS[key]


def _decode(path, data):
    """UTF-8 bytes -> text; DataError naming the file and line of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise DataError(f"{path}:{line}: not valid UTF-8 ({e.reason} at byte {column} of the line); "
                        "save the file as UTF-8.") from None


def _rows(path):
    if not files.isfile(path):
        raise DataError(f"{path}: no such file.")
    csv.field_size_limit(sys.maxsize)
    text = _decode(path, files.read_bytes(path))
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter="\t", quotechar=None))
    if not rows or (len(rows) == 1 and not any(rows[0])):
        raise DataError(f"{path}: the file is empty.")
    return rows


def _label(task_labels, value, path, line, regression):
    if regression:
        try:
            return float(value)
        except ValueError:
            raise DataError(f"{path}:{line}: label {value!r} is not a number (regression task).") from None
    if value not in task_labels:
        raise DataError(f"{path}:{line}: label {value!r} is not one of {', '.join(task_labels)}.")
    return value


def read_examples(task, data_dir, split):
    """Reads `split` (train, dev, test) of `task` from `data_dir`; returns Examples."""
    path = files.join(data_dir, task.files[split])
    rows = _rows(path)
    if task.by_name:  # the generic tsv task
        a_name, b_name, label_name = task.columns[split]
        header = rows[0]
        columns = ", ".join(header)
        if a_name not in header:
            raise DataError(f"{path}:1: no column {a_name!r} in the header ({columns}); check --text_a_column.")
        if b_name and b_name not in header:
            raise DataError(f"{path}:1: no column {b_name!r} in the header ({columns}); check --text_b_column, "
                            "or leave it empty for single sentences.")
        a = header.index(a_name)
        b = header.index(b_name) if b_name else None
        y = header.index(label_name) if label_name in header else None
        if y is None and split != "test":
            raise DataError(f"{path}:1: no label column {label_name!r} in the header ({columns}); "
                            "check --label_column.")
        width, body, first_line = len(header), rows[1:], 2
    else:
        a, b, y = task.columns[split]
        body, first_line = (rows[1:], 2) if (task.header or split == "test") else (rows, 1)
        width = len(rows[0]) if (task.header or split == "test") else 4
    regression, task_labels = not task.labels, task.labels
    if not body:
        raise DataError(f"{path}: no example after the header.")
    examples = []
    for offset, row in enumerate(body):
        line = first_line + offset
        if len(row) != width:
            raise DataError(f"{path}:{line}: {len(row)} columns, expected {width}.")
        label = None if y is None else _label(task_labels, row[y], path, line, regression)
        examples.append(Example(f"{split}-{offset}", row[a], row[b] if b is not None else None, label))
    return examples
