import numpy as np
import pytest

from albert_tf.modeling import losses


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


@pytest.fixture
def example():
    rng = np.random.default_rng(0)
    return {
        "mlm_logits": rng.normal(size=(4, 5, 11)).astype("float32"),
        "sop_logits": rng.normal(size=(4, 2)).astype("float32"),
        "masked_lm_ids": rng.integers(0, 11, (4, 5)).astype("int32"),
        "masked_lm_weights": (rng.random((4, 5)) > 0.3).astype("float32"),
        "next_sentence_labels": rng.integers(0, 2, (4, 1)).astype("int32"),
    }


def test_metrics_match_the_release_formulas(example):
    e = example
    nll = -np.take_along_axis(_log_softmax(e["mlm_logits"]), e["masked_lm_ids"][..., None], -1)[..., 0]
    w = e["masked_lm_weights"]
    mlm_loss = (w * nll).sum() / (w.sum() + 1e-5)
    mlm_acc = (w * (e["mlm_logits"].argmax(-1) == e["masked_lm_ids"])).sum() / w.sum()
    labels = e["next_sentence_labels"][:, 0]
    sop_nll = -_log_softmax(e["sop_logits"])[np.arange(4), labels]
    sop_acc = (e["sop_logits"].argmax(-1) == labels).mean()

    got = {k: float(v) for k, v in losses.pretraining_metrics(e, e).items()}
    assert got["masked_lm_loss"] == pytest.approx(mlm_loss, rel=1e-5)
    assert got["masked_lm_accuracy"] == pytest.approx(mlm_acc, rel=1e-6)
    assert got["sentence_order_loss"] == pytest.approx(sop_nll.mean(), rel=1e-5)
    assert got["sentence_order_accuracy"] == pytest.approx(sop_acc, rel=1e-6)
    assert got["loss"] == pytest.approx(mlm_loss + sop_nll.mean(), rel=1e-5)
    # the single-metric helpers agree with the dict
    assert float(losses.masked_lm_loss(e["mlm_logits"], e["masked_lm_ids"], w)) == pytest.approx(mlm_loss, rel=1e-5)
    assert float(losses.sentence_order_accuracy(e["sop_logits"], labels)) == pytest.approx(sop_acc)


def test_terms_sum_across_shards_to_the_global_value(example):
    """Summing per-replica terms before dividing gives the whole batch's loss."""
    e = example
    whole = losses.pretraining_metrics(e, e)
    halves = [{k: v[i : i + 2] for k, v in e.items()} for i in (0, 2)]
    mlm = [losses.masked_lm_terms(h["mlm_logits"], h["masked_lm_ids"], h["masked_lm_weights"]) for h in halves]
    sop = [losses.sentence_order_terms(h["sop_logits"], h["next_sentence_labels"]) for h in halves]
    summed = losses.metrics_from_terms(
        {k: mlm[0][k] + mlm[1][k] for k in mlm[0]}, {k: sop[0][k] + sop[1][k] for k in sop[0]}
    )
    for key in whole:
        assert float(summed[key]) == pytest.approx(float(whole[key]), rel=1e-6)


def test_zero_weights_give_zero_loss_not_nan(example):
    e = dict(example, masked_lm_weights=np.zeros((4, 5), "float32"))
    got = losses.pretraining_metrics(e, e)
    assert float(got["masked_lm_loss"]) == 0.0
    assert float(got["masked_lm_accuracy"]) == 0.0
