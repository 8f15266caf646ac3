"""GLUE metrics in NumPy: accuracy, F1, Matthews correlation, Pearson, Spearman."""

import numpy as np


def accuracy(predictions, labels):
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    return float(np.mean(predictions == labels)) if len(labels) else 0.0


def f1(predictions, labels, positive=1):
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    tp = np.sum((predictions == positive) & (labels == positive))
    fp = np.sum((predictions == positive) & (labels != positive))
    fn = np.sum((predictions != positive) & (labels == positive))
    return float(2 * tp / (2 * tp + fp + fn)) if tp else 0.0


def matthews_corrcoef(predictions, labels):
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    tp = float(np.sum((predictions == 1) & (labels == 1)))
    tn = float(np.sum((predictions == 0) & (labels == 0)))
    fp = float(np.sum((predictions == 1) & (labels == 0)))
    fn = float(np.sum((predictions == 0) & (labels == 1)))
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def pearson(predictions, labels):
    x, y = np.asarray(predictions, np.float64), np.asarray(labels, np.float64)
    if x.std() == 0 or y.std() == 0:
        return 0.0
    return float(np.corrcoef(x, y)[0, 1])


def _ranks(values):
    """Ranks with ties given their average rank (as scipy.stats.rankdata)."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_values[j + 1] == sorted_values[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1
        i = j + 1
    return ranks


def spearman(predictions, labels):
    return pearson(_ranks(predictions), _ranks(labels))


METRICS = {"accuracy": accuracy, "f1": f1, "matthews_corrcoef": matthews_corrcoef, "pearson": pearson,
           "spearman": spearman}


def compute(names, predictions, labels):
    """name -> value for the task's metric names."""
    return {name: METRICS[name](predictions, labels) for name in names}
