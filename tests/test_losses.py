"""The pretraining loss and metrics against hand-computed NumPy values."""

import keras
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


def _terms(e, **kwargs):
    return losses.pretraining_terms(e["mlm_logits"], e["sop_logits"], e["masked_lm_ids"], e["masked_lm_weights"],
                                    e["next_sentence_labels"], **kwargs)


def _numpy_rows(e):
    """Each example's six terms, by hand."""
    w = e["masked_lm_weights"].astype("float64")
    log_probs = _log_softmax(e["mlm_logits"].astype("float64"))
    nll = -np.take_along_axis(log_probs, e["masked_lm_ids"][..., None], -1)[..., 0]
    correct = (e["mlm_logits"].argmax(-1) == e["masked_lm_ids"]).astype("float64")
    labels = e["next_sentence_labels"].reshape(-1)
    sop_nll = -_log_softmax(e["sop_logits"].astype("float64"))[np.arange(len(labels)), labels]
    return {
        "mlm_nll_sum": (w * nll).sum(-1),
        "mlm_correct_sum": (w * correct).sum(-1),
        "mlm_weight_sum": w.sum(-1),
        "sop_nll_sum": sop_nll,
        "sop_correct_sum": (e["sop_logits"].argmax(-1) == labels).astype("float64"),
        "sop_count": np.ones(len(labels)),
    }


def test_names():
    assert losses.PRETRAINING_TERMS == ("mlm_nll_sum", "mlm_correct_sum", "mlm_weight_sum", "sop_nll_sum",
                                        "sop_correct_sum", "sop_count")
    assert losses.PRETRAINING_METRICS == ("loss", "masked_lm_loss", "masked_lm_accuracy", "sentence_order_loss",
                                          "sentence_order_accuracy")
    assert losses.MLM_LOSS_EPSILON == 1e-5


@pytest.mark.parametrize("label_shape", [(4, 1), (4,)])
def test_terms_are_the_hand_computed_sums(example, label_shape):
    e = dict(example, next_sentence_labels=example["next_sentence_labels"].reshape(label_shape))
    expected = {k: v.sum() for k, v in _numpy_rows(e).items()}
    assert 0 < expected["mlm_correct_sum"] < expected["mlm_weight_sum"] < 20  # a non-trivial example
    terms = _terms(e)
    assert tuple(terms) == losses.PRETRAINING_TERMS
    for key in losses.PRETRAINING_TERMS:
        value = keras.ops.convert_to_numpy(terms[key])
        assert value.shape == () and value.dtype == np.float32, key
        assert float(value) == pytest.approx(expected[key], rel=1e-5), key
    assert float(terms["sop_count"]) == 4.0


def test_per_example_terms(example):
    expected = _numpy_rows(example)
    rows = _terms(example, per_example=True)
    assert set(rows) == set(losses.PRETRAINING_TERMS)
    for key in losses.PRETRAINING_TERMS:
        value = keras.ops.convert_to_numpy(rows[key])
        assert value.shape == (4,), key
        np.testing.assert_allclose(value, expected[key], rtol=1e-5, err_msg=key)


def test_loss_is_the_release_loss_split_over_replicas(example):
    e = example
    rows = _numpy_rows(e)
    w_total = rows["mlm_weight_sum"].sum()
    release = rows["mlm_nll_sum"].sum() / (w_total + 1e-5) + rows["sop_nll_sum"].mean()
    # one replica holding the whole batch
    whole = losses.pretraining_loss(_terms(e), w_total, 4)
    assert float(whole) == pytest.approx(release, rel=1e-5)
    # two replicas: each its own terms, the global weight total and batch size
    shares = [losses.pretraining_loss(_terms({k: v[i : i + 2] for k, v in e.items()}), w_total, 4) for i in (0, 2)]
    assert float(shares[0]) != pytest.approx(release / 2, rel=1e-3)  # the halves differ...
    assert sum(float(s) for s in shares) == pytest.approx(release, rel=1e-5)  # ...and add up
    # hand-checked on round numbers: 3 / (2 + 1e-5) + 1 / 4
    terms = {"mlm_nll_sum": np.float32(3.0), "sop_nll_sum": np.float32(1.0)}
    assert float(losses.pretraining_loss(terms, np.float32(2.0), 4)) == pytest.approx(3 / (2 + 1e-5) + 0.25, rel=1e-6)


def test_metrics_match_the_release_formulas(example):
    rows = _numpy_rows(example)
    t = {k: v.sum() for k, v in rows.items()}
    mlm_loss = t["mlm_nll_sum"] / (t["mlm_weight_sum"] + 1e-5)
    sop_loss = rows["sop_nll_sum"].mean()
    got = losses.pretraining_metrics(_terms(example))
    assert tuple(got) == losses.PRETRAINING_METRICS
    assert all(type(v) is float for v in got.values())
    assert got["masked_lm_loss"] == pytest.approx(mlm_loss, rel=1e-5)
    assert got["masked_lm_accuracy"] == pytest.approx(t["mlm_correct_sum"] / t["mlm_weight_sum"], rel=1e-6)
    assert got["sentence_order_loss"] == pytest.approx(sop_loss, rel=1e-5)
    assert got["sentence_order_accuracy"] == pytest.approx(rows["sop_correct_sum"].mean(), rel=1e-6)
    assert got["loss"] == pytest.approx(mlm_loss + sop_loss, rel=1e-5)


def test_metrics_of_round_numbers():
    totals = {"mlm_nll_sum": 6.0, "mlm_correct_sum": 3.0, "mlm_weight_sum": 4.0,
              "sop_nll_sum": 2.0, "sop_correct_sum": 1.0, "sop_count": 8.0}
    got = losses.pretraining_metrics(totals)
    assert got == pytest.approx({
        "loss": 6 / (4 + 1e-5) + 0.25,
        "masked_lm_loss": 6 / (4 + 1e-5),
        "masked_lm_accuracy": 0.75,
        "sentence_order_loss": 0.25,
        "sentence_order_accuracy": 0.125,
    }, rel=1e-12)


def test_terms_summed_over_shards_give_the_whole_batch_metrics(example):
    e = example
    whole = losses.pretraining_metrics(_terms(e))
    halves = [_terms({k: v[i : i + 2] for k, v in e.items()}) for i in (0, 2)]
    summed = losses.pretraining_metrics({k: halves[0][k] + halves[1][k] for k in losses.PRETRAINING_TERMS})
    assert summed == pytest.approx(whole, rel=1e-6)
    # per-example terms summed on the host: the same again
    rows = _terms(e, per_example=True)
    host = losses.pretraining_metrics({k: keras.ops.convert_to_numpy(v).sum() for k, v in rows.items()})
    assert host == pytest.approx(whole, rel=1e-6)


def test_zero_weight_and_zero_count_give_zero_not_nan(example):
    e = dict(example, masked_lm_weights=np.zeros((4, 5), "float32"))
    got = losses.pretraining_metrics(_terms(e))
    assert got["masked_lm_loss"] == 0.0
    assert got["masked_lm_accuracy"] == 0.0
    assert got["loss"] == pytest.approx(got["sentence_order_loss"]) and got["loss"] > 0
    empty = losses.pretraining_metrics({k: 0.0 for k in losses.PRETRAINING_TERMS})
    assert empty == {k: 0.0 for k in losses.PRETRAINING_METRICS}


def test_removed_duplicates():
    # one definition: the nested-terms forms and single-metric wrappers are gone
    for name in ("masked_lm_loss", "masked_lm_accuracy", "sentence_order_loss", "sentence_order_accuracy",
                 "masked_lm_terms", "sentence_order_terms", "metrics_from_terms"):
        assert not hasattr(losses, name), name


def test_without_the_sentence_loss_only_masked_lm_is_trained(example, tiny_config):
    """sentence_loss=False (the paper's 'None' objective): the loss is the masked-LM term
    alone, and the sentence head gets no gradient through the pretraining task while the
    encoder still does."""
    import tensorflow as tf

    from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask
    from conftest import random_inputs

    rows = _numpy_rows(example)
    w_total = rows["mlm_weight_sum"].sum()
    got = losses.pretraining_loss(_terms(example), w_total, 4, sentence_loss=False)
    assert float(got) == pytest.approx(rows["mlm_nll_sum"].sum() / (w_total + 1e-5), rel=1e-5)
    metrics = losses.pretraining_metrics(_terms(example), sentence_loss=False)
    assert metrics["loss"] == pytest.approx(metrics["masked_lm_loss"], rel=1e-7)
    assert metrics["sentence_order_loss"] == pytest.approx(rows["sop_nll_sum"].mean(), rel=1e-5)  # still evaluated

    batch = random_inputs(tiny_config, batch=2, length=12)
    batch.update(masked_lm_positions=np.array([[1, 2], [3, 0]], "int32"),
                 masked_lm_ids=np.array([[7, 8], [9, 0]], "int32"),
                 masked_lm_weights=np.array([[1, 1], [1, 0]], "float32"),
                 next_sentence_labels=np.array([[0], [1]], "int32"))
    for sentence_loss in (True, False):
        task = PretrainingTask(PretrainingOptions(config=tiny_config, input_files=[], global_batch_size=2,
                                                  sentence_loss=sentence_loss))
        model = task.build_model()
        with tf.GradientTape() as tape:
            loss, _ = task.loss_and_terms(model, batch, task.loss_normalizers(batch), training=True)
        head = model.sentence_order_head.trainable_weights
        grads = tape.gradient(loss, head + model.encoder.trainable_weights)
        head_norm = sum(float(tf.norm(g)) for g in grads[: len(head)] if g is not None)
        encoder_norm = sum(float(tf.norm(g)) for g in grads[len(head):] if g is not None)
        assert encoder_norm > 0
        assert (head_norm > 0) == sentence_loss, (sentence_loss, head_norm)
