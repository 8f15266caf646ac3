"""The original pretraining losses and metrics, shared by training and evaluation.

    masked_lm_loss    = sum(w * nll) / (sum(w) + 1e-5)   over masked_lm_weights w
    sentence_order_loss = mean cross-entropy
    loss              = masked_lm_loss + sentence_order_loss

Each ratio is also available as its (numerator, denominator) terms, so a distributed
loop can sum both across replicas before dividing and get the global-batch value.

Shape legend: B batch, P predictions per sequence, V vocabulary size.
"""

from keras import ops

MLM_LOSS_EPSILON = 1e-5


def _log_softmax(logits):
    return ops.log_softmax(ops.cast(logits, "float32"), axis=-1)


def masked_lm_terms(mlm_logits, masked_lm_ids, masked_lm_weights):
    """Sums behind the masked-LM loss and accuracy.

    Args:
        mlm_logits: float [B, P, V].
        masked_lm_ids: int [B, P] target ids.
        masked_lm_weights: float [B, P], 1 for real predictions, 0 for padding.

    Returns:
        dict of scalars: `nll_sum` = sum(w * nll), `correct_sum` = sum(w * [argmax == id]),
        `weight_sum` = sum(w).
    """
    log_probs = _log_softmax(mlm_logits)
    ids = ops.expand_dims(ops.cast(masked_lm_ids, "int32"), -1)
    nll = -ops.squeeze(ops.take_along_axis(log_probs, ids, axis=-1), -1)  # [B, P]
    weights = ops.cast(masked_lm_weights, "float32")
    correct = ops.cast(ops.equal(ops.argmax(log_probs, axis=-1), ops.squeeze(ids, -1)), "float32")
    return {
        "nll_sum": ops.sum(weights * nll),
        "correct_sum": ops.sum(weights * correct),
        "weight_sum": ops.sum(weights),
    }


def sentence_order_terms(sop_logits, sentence_order_labels):
    """Sums behind the SOP loss and accuracy.

    Args:
        sop_logits: float [B, 2].
        sentence_order_labels: int [B] or [B, 1] (the TFRecord's `next_sentence_labels`).

    Returns:
        dict of scalars `nll_sum`, `correct_sum`, `count`.
    """
    labels = ops.reshape(ops.cast(sentence_order_labels, "int32"), (-1, 1))
    log_probs = _log_softmax(sop_logits)
    nll = -ops.squeeze(ops.take_along_axis(log_probs, labels, axis=-1), -1)
    correct = ops.cast(ops.equal(ops.argmax(log_probs, axis=-1), ops.squeeze(labels, -1)), "float32")
    return {
        "nll_sum": ops.sum(nll),
        "correct_sum": ops.sum(correct),
        "count": ops.cast(ops.shape(nll)[0], "float32"),
    }


def metrics_from_terms(mlm, sop):
    """The four reported metrics and the total loss from (possibly all-reduced) terms."""
    masked_lm_loss = mlm["nll_sum"] / (mlm["weight_sum"] + MLM_LOSS_EPSILON)
    sentence_order_loss = ops.divide_no_nan(sop["nll_sum"], sop["count"])
    return {
        "loss": masked_lm_loss + sentence_order_loss,
        "masked_lm_loss": masked_lm_loss,
        "masked_lm_accuracy": ops.divide_no_nan(mlm["correct_sum"], mlm["weight_sum"]),
        "sentence_order_loss": sentence_order_loss,
        "sentence_order_accuracy": ops.divide_no_nan(sop["correct_sum"], sop["count"]),
    }


def pretraining_metrics(outputs, batch):
    """Loss and metrics of one batch.

    Args:
        outputs: the pretrainer's dict (`mlm_logits`, `sop_logits`).
        batch: dict with `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`.

    Returns:
        dict of scalars: loss, masked_lm_loss, masked_lm_accuracy, sentence_order_loss,
        sentence_order_accuracy.
    """
    mlm = masked_lm_terms(outputs["mlm_logits"], batch["masked_lm_ids"], batch["masked_lm_weights"])
    sop = sentence_order_terms(outputs["sop_logits"], batch["next_sentence_labels"])
    return metrics_from_terms(mlm, sop)


def masked_lm_loss(mlm_logits, masked_lm_ids, masked_lm_weights):
    t = masked_lm_terms(mlm_logits, masked_lm_ids, masked_lm_weights)
    return t["nll_sum"] / (t["weight_sum"] + MLM_LOSS_EPSILON)


def masked_lm_accuracy(mlm_logits, masked_lm_ids, masked_lm_weights):
    t = masked_lm_terms(mlm_logits, masked_lm_ids, masked_lm_weights)
    return ops.divide_no_nan(t["correct_sum"], t["weight_sum"])


def sentence_order_loss(sop_logits, sentence_order_labels):
    t = sentence_order_terms(sop_logits, sentence_order_labels)
    return ops.divide_no_nan(t["nll_sum"], t["count"])


def sentence_order_accuracy(sop_logits, sentence_order_labels):
    t = sentence_order_terms(sop_logits, sentence_order_labels)
    return ops.divide_no_nan(t["correct_sum"], t["count"])


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
    ids = ops.reshape(ops.cast(labels, "int32"), (-1, 1))
    return -ops.squeeze(ops.take_along_axis(ops.log_softmax(logits, axis=-1), ids, axis=-1), -1)
