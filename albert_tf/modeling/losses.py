"""The pretraining loss and metrics (one definition, used by training and evaluation),
and the fine-tuning loss.

The release's formulas:

    masked_lm_loss      = sum(w * nll) / (sum(w) + 1e-5)   over masked_lm_weights w
    masked_lm_accuracy  = sum(w * [argmax == id]) / sum(w)
    sentence_order_loss = mean cross-entropy
    sentence_order_accuracy = mean [argmax == label]
    loss                = masked_lm_loss + sentence_order_loss

Everything is computed from six sums, `PRETRAINING_TERMS`, so a distributed loop or an
evaluation can add them over replicas, steps or examples and divide once:

    terms = pretraining_terms(mlm_logits, sop_logits, ids, weights, labels)   # keras.ops
    loss = pretraining_loss(terms, mlm_weight_total, global_batch_size)      # to minimize
    metrics = pretraining_metrics(summed_terms)                              # floats

Shape legend: B batch, P predictions per sequence, V vocabulary size, C classes.
"""

from keras import ops

MLM_LOSS_EPSILON = 1e-5

PRETRAINING_TERMS = ("mlm_nll_sum", "mlm_correct_sum", "mlm_weight_sum", "sop_nll_sum", "sop_correct_sum", "sop_count")
PRETRAINING_METRICS = ("loss", "masked_lm_loss", "masked_lm_accuracy", "sentence_order_loss",
                       "sentence_order_accuracy")


def gold_nll(log_probs, labels):
    """float [..., K] log-probs, int [...] labels -> float32 [...] negative log-likelihood of each label."""
    labels = ops.expand_dims(ops.cast(labels, "int32"), -1)
    return -ops.squeeze(ops.take_along_axis(ops.cast(log_probs, "float32"), labels, axis=-1), -1)


def _nll_and_correct(logits, labels):
    """float [..., K] logits, int [...] labels -> float32 nll [...], float32 correct [...]."""
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    labels = ops.cast(labels, "int32")
    nll = gold_nll(log_probs, labels)
    correct = ops.cast(ops.equal(ops.cast(ops.argmax(log_probs, axis=-1), "int32"), labels), "float32")
    return nll, correct


def _mlm_rows(mlm_logits, masked_lm_ids, masked_lm_weights):
    """The mlm_* terms of each example: float32 [B] each."""
    nll, correct = _nll_and_correct(mlm_logits, masked_lm_ids)  # [B, P]
    weights = ops.cast(masked_lm_weights, "float32")  # [B, P]
    return {
        "mlm_nll_sum": ops.sum(weights * nll, axis=-1),
        "mlm_correct_sum": ops.sum(weights * correct, axis=-1),
        "mlm_weight_sum": ops.sum(weights, axis=-1),
    }


def _sop_rows(sop_logits, next_sentence_labels):
    """The sop_* terms of each example: float32 [B] each."""
    nll, correct = _nll_and_correct(sop_logits, ops.reshape(next_sentence_labels, (-1,)))  # [B]
    return {"sop_nll_sum": nll, "sop_correct_sum": correct, "sop_count": ops.ones_like(nll)}


def pretraining_terms(mlm_logits, sop_logits, masked_lm_ids, masked_lm_weights, next_sentence_labels,
                      per_example=False):
    """The six sums behind the pretraining loss and metrics, for one batch.

    Args:
        mlm_logits: float [B, P, V].
        sop_logits: float [B, 2].
        masked_lm_ids: int [B, P] target ids.
        masked_lm_weights: float [B, P], 1 for real predictions, 0 for padding.
        next_sentence_labels: int [B] or [B, 1] sentence-order labels (the TFRecord key).
        per_example: bool. False: float32 scalars summed over the batch. True: float32
            [B], each example's own sums (`sop_count` 1 per example), for an evaluation
            that drops padding examples before summing.

    Returns:
        dict over `PRETRAINING_TERMS`: `mlm_nll_sum` = sum(w * nll), `mlm_correct_sum` =
        sum(w * [argmax == id]), `mlm_weight_sum` = sum(w), `sop_nll_sum` = sum(nll),
        `sop_correct_sum` = sum([argmax == label]), `sop_count` = number of examples.
    """
    per_row = {**_mlm_rows(mlm_logits, masked_lm_ids, masked_lm_weights),
               **_sop_rows(sop_logits, next_sentence_labels)}
    if per_example:
        return per_row
    return {k: ops.sum(per_row[k]) for k in PRETRAINING_TERMS}


def pretraining_loss(terms, mlm_weight_total, global_batch_size, sentence_loss=True):
    """This replica's share of the release's loss over the global batch.

        terms["mlm_nll_sum"] / (mlm_weight_total + MLM_LOSS_EPSILON)
            + terms["sop_nll_sum"] / global_batch_size

    Summed over the replicas it is exactly `masked_lm_loss + sentence_order_loss` of the
    whole global batch (one replica: of the batch).

    Args:
        terms: this replica's `pretraining_terms` (scalars).
        mlm_weight_total: float scalar, sum of masked_lm_weights over the global batch.
        global_batch_size: int, examples over all replicas.
        sentence_loss: bool; False drops the sentence term (masked LM only: the paper's
            "None" row of the sentence-level table; the sentence head is left untrained).

    Returns:
        float32 scalar.
    """
    mlm_weight_total = ops.cast(mlm_weight_total, "float32")
    mlm = terms["mlm_nll_sum"] / (mlm_weight_total + MLM_LOSS_EPSILON)
    return mlm + terms["sop_nll_sum"] / float(global_batch_size) if sentence_loss else mlm


def _ratio(numerator, denominator):
    # An empty total (no masked predictions, no examples) reports 0, not NaN: as the
    # release's tf.metrics.mean / accuracy (div_no_nan) on zero weight.
    return numerator / denominator if denominator > 0 else 0.0


def pretraining_metrics(totals, sentence_loss=True):
    """The reported metrics from summed terms.

    Args:
        totals: dict over `PRETRAINING_TERMS` (summed over any number of batches,
            replicas or examples): scalars, tensors or NumPy values.

    Returns:
        dict over `PRETRAINING_METRICS` of Python floats, the module's formulas (loss is
        masked_lm_loss alone when `sentence_loss` is False); a zero weight_sum or sop_count
        gives 0.0 for the ratios over it (not NaN).
    """
    t = {k: float(ops.convert_to_numpy(totals[k])) for k in PRETRAINING_TERMS}
    masked_lm_loss = t["mlm_nll_sum"] / (t["mlm_weight_sum"] + MLM_LOSS_EPSILON)
    sentence_order_loss = _ratio(t["sop_nll_sum"], t["sop_count"])
    return {
        "loss": masked_lm_loss + sentence_order_loss if sentence_loss else masked_lm_loss,
        "masked_lm_loss": masked_lm_loss,
        "masked_lm_accuracy": _ratio(t["mlm_correct_sum"], t["mlm_weight_sum"]),
        "sentence_order_loss": sentence_order_loss,
        "sentence_order_accuracy": _ratio(t["sop_correct_sum"], t["sop_count"]),
    }


def classifier_nll(logits, labels):
    """Per-example loss of a fine-tuned classifier, as the release's run_classifier.

    Args:
        logits: float [B, C]; C = 1 is regression.
        labels: int [B] class ids, or float [B] targets for regression.

    Returns:
        float [B]: cross-entropy of the softmax, or squared error for regression.
    """
    logits = ops.cast(logits, "float32")
    if logits.shape[-1] == 1:
        return ops.square(ops.squeeze(logits, -1) - ops.cast(labels, "float32"))
    return softmax_nll(logits, labels)


def softmax_nll(logits, labels):
    """Per-example cross-entropy of the softmax over the last axis.

    Args:
        logits: float [B, C]; labels: int [B].
    Returns:
        float32 [B].
    """
    return gold_nll(ops.log_softmax(ops.cast(logits, "float32"), axis=-1), ops.reshape(labels, (-1,)))
