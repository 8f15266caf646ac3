"""Helpers shared by the conversion and question-answering tests: small configs, fixed
inputs, known weights, checkpoints written the way the TF1 release wrote them, and the
release's SQuAD v2 head names."""

import os

import numpy as np
import tensorflow as tf

from albert_tf import AlbertConfig

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)


def config(**changes):
    values = dict(vocab_size=500, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    values.update(changes)
    return AlbertConfig.from_preset("albert_tiny").replace(**values)


def inputs(cfg, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, cfg.vocab_size, (2, 12)).astype("int32")
    mask = np.ones((2, 12), "int32")
    mask[1, 8:] = 0
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros((2, 12), "int32")}


def randomize(model, seed=1):
    """Known, non-default weights everywhere (biases and LayerNorms included)."""
    rng = np.random.default_rng(seed)
    for v in model.weights:
        v.assign(rng.normal(scale=0.05, size=v.shape).astype("float32") + (1.0 if "gamma" in v.path else 0.0))
    return model


def write_release_checkpoint(values, prefix, module_prefix=False, slots=True):
    """A TF1 checkpoint as the release wrote it: tf.compat.v1 variables, LAMB slots, global_step."""
    graph = tf.Graph()
    with graph.as_default():
        variables = []
        for name, value in sorted(values.items()):
            full = ("module/" if module_prefix else "") + name
            variables.append(tf.compat.v1.get_variable(full, initializer=value))
            if slots:
                variables.append(tf.compat.v1.get_variable(full + "/adam_m", initializer=np.zeros_like(value)))
                variables.append(tf.compat.v1.get_variable(full + "/adam_v", initializer=np.zeros_like(value)))
        variables.append(tf.compat.v1.train.get_or_create_global_step())
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return tf.compat.v1.train.Saver(variables).save(session, prefix, write_meta_graph=False)


RELEASE_V2_HEAD = {  # release name -> (SquadV2Head attribute, variable), from squad_utils.create_v2_model
    "start_logits/dense/kernel": ("start_dense", "kernel"),
    "start_logits/dense/bias": ("start_dense", "bias"),
    "end_logits/dense_0/kernel": ("end_dense_0", "kernel"),
    "end_logits/dense_0/bias": ("end_dense_0", "bias"),
    "end_logits/LayerNorm/gamma": ("end_layer_norm", "gamma"),
    "end_logits/LayerNorm/beta": ("end_layer_norm", "beta"),
    "end_logits/dense_1/kernel": ("end_dense_1", "kernel"),
    "end_logits/dense_1/bias": ("end_dense_1", "bias"),
    "answer_class/dense_0/kernel": ("answer_dense_0", "kernel"),
    "answer_class/dense_0/bias": ("answer_dense_0", "bias"),
    "answer_class/dense_1/kernel": ("answer_dense_1", "kernel"),
}
