import numpy as np
import tensorflow as tf

from albert_tf import AlbertPretrainer
from albert_tf.modeling import losses
from conftest import random_inputs
from harness import check_config_round_trip, check_saved_model_round_trip, to_numpy


def _batch(config, batch=3, length=12, predictions=4, seed=0):
    inputs = random_inputs(config, batch=batch, length=length, seed=seed)
    rng = np.random.default_rng(seed)
    inputs["masked_lm_positions"] = np.sort(rng.integers(1, 3, (batch, predictions)), axis=1).astype("int32")
    return inputs


def _layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def test_outputs_and_tied_masked_lm_head(tiny_config):
    config = tiny_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = AlbertPretrainer(config)
    batch = _batch(config)
    outputs = to_numpy(model(batch))
    assert outputs["mlm_logits"].shape == (3, 4, config.vocab_size)
    assert outputs["sop_logits"].shape == (3, 2)

    head = model.masked_lm_head
    assert head.embeddings.word_embeddings is model.encoder.embeddings.word_embeddings
    tables = [v for v in model.weights if tuple(v.shape) == (config.vocab_size, config.embedding_size)]
    assert len(tables) == 1  # one [V, E] table: the head has no copy of its own

    # the head's formula on the encoder's sequence output, in NumPy
    seq = to_numpy(model.encoder({k: batch[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}))
    gathered = np.take_along_axis(seq["sequence_output"], batch["masked_lm_positions"][..., None], axis=1)
    x = gathered @ np.asarray(head.transform.kernel) + np.asarray(head.transform.bias)
    x = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    x = _layer_norm(x, np.asarray(head.transform_layer_norm.gamma), np.asarray(head.transform_layer_norm.beta))
    logits = x @ np.asarray(model.encoder.embeddings.word_embeddings).T + np.asarray(head.output_bias)
    np.testing.assert_allclose(outputs["mlm_logits"], logits, atol=1e-4)

    sop = model.sentence_order_head
    expected = seq["pooled_output"] @ np.asarray(sop.output_weights).T + np.asarray(sop.output_bias)
    np.testing.assert_allclose(outputs["sop_logits"], expected, atol=1e-5)
    assert tuple(sop.output_weights.shape) == (2, config.hidden_size)


def test_mlm_gradient_reaches_the_tied_embeddings(tiny_config):
    model = AlbertPretrainer(tiny_config)
    batch = _batch(tiny_config)
    labels = {
        "masked_lm_ids": np.full((3, 4), 7, "int32"),
        "masked_lm_weights": np.ones((3, 4), "float32"),
        "next_sentence_labels": np.zeros((3, 1), "int32"),
    }
    table = model.encoder.embeddings.word_embeddings
    with tf.GradientTape() as tape:
        loss = losses.pretraining_metrics(model(batch, training=True), labels)["masked_lm_loss"]
    grad = tf.convert_to_tensor(tape.gradient(loss, table))
    # row 7 is every target: the tied output projection must give it gradient
    assert np.abs(grad.numpy()[7]).sum() > 0
    assert np.abs(grad.numpy()).sum() > 0


def test_config_and_keras_save_round_trip(tiny_config, tmp_path):
    model = AlbertPretrainer(tiny_config)
    rebuilt = check_config_round_trip(model)
    assert rebuilt.config == tiny_config
    restored = check_saved_model_round_trip(model, _batch(tiny_config), str(tmp_path))
    assert restored.masked_lm_head.embeddings.word_embeddings is restored.encoder.embeddings.word_embeddings


def test_variable_prediction_counts_and_lengths(tiny_config):
    model = AlbertPretrainer(tiny_config)
    for length, predictions in ((8, 1), (20, 5), (64, 20)):
        outputs = model(_batch(tiny_config, length=length, predictions=predictions))
        assert outputs["mlm_logits"].shape == (3, predictions, tiny_config.vocab_size)
