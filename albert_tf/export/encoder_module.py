"""The encoder SavedModel of the TF-Hub contract (shared/ALBERT_REFERENCE.md section 6).

Root: `__call__(inputs, training=False)` on a dict of int32 [B, T] `input_word_ids`,
`input_mask`, `input_type_ids`, traced for training True and False, returning
`pooled_output` [B, H], `sequence_output` [B, T, H], `encoder_outputs` (L x [B, T, H])
and `default` (= pooled_output). Attributes `variables`, `trainable_variables`,
`regularization_losses` (empty), so `hub.KerasLayer(path, trainable=True)` fine-tunes
it. `serve(inputs)` / `train(inputs)` are the same call with training fixed, for
`keras.layers.TFSMLayer`; the `serving_default` signature returns the flat tensors.

`.mlm`: the same inputs plus `masked_lm_positions` [B, P] -> everything above plus
`mlm_logits` [B, P, V]; its head weights are in `.mlm.variables` only, not among the
root's trainable variables. With `jit_compile=True`, `serve` and `serving_default` run the
encoder as one XLA program, compiled by the loading process once per new [B, T] shape.
"""

import tensorflow as tf

from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.storage.checkpoints import random_states


def input_specs(with_positions=False):
    specs = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_NAMES}
    if with_positions:
        specs["masked_lm_positions"] = tf.TensorSpec([None, None], tf.int32, name="masked_lm_positions")
    return specs


def _tf_variables(keras_variables):
    return [getattr(v, "value", v) for v in keras_variables]


def _encode(encoder, inputs, training):
    # float32 outputs whatever the encoder computes in (a mixed_bfloat16 export keeps the
    # float32 contract of its signatures)
    outputs = encoder({k: inputs[k] for k in INPUT_NAMES}, training=training)
    pooled = tf.cast(outputs["pooled_output"], tf.float32)
    return {
        "pooled_output": pooled,
        "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
        "encoder_outputs": [tf.cast(x, tf.float32) for x in outputs["encoder_outputs"]],
        "default": pooled,
    }


class MaskedLMModule(tf.train.Checkpoint):
    """`.mlm`: encoder outputs plus the tied masked-LM logits. `encode(inputs, training)`
    is the root's `__call__`: its traces are called here, not traced again."""

    def __init__(self, encoder, head, encode):
        super().__init__()
        # lambdas, not tracked Keras objects: each variable saved once, as the listed entry that
        # `__call__` reads (else a loaded `.mlm` fine-tunes a copy of the head's bias)
        self._head = lambda sequence_output, positions: head(sequence_output, positions)
        self._encode = lambda inputs, training: encode(inputs, training=training)  # the root's traces
        self.variables = _tf_variables(encoder.weights) + _tf_variables(
            [w for w in head.weights if all(w is not e for e in encoder.weights)])
        self.trainable_variables = _tf_variables(encoder.trainable_weights) + _tf_variables(
            [w for w in head.trainable_weights if all(w is not e for e in encoder.trainable_weights)])
        self.regularization_losses = []

    @tf.function(autograph=False)
    def __call__(self, inputs, training=False):
        outputs = dict(self._encode({k: inputs[k] for k in INPUT_NAMES}, training))
        outputs["mlm_logits"] = tf.cast(self._head(outputs["sequence_output"], inputs["masked_lm_positions"]),
                                        tf.float32)
        return outputs


class EncoderModule(tf.train.Checkpoint):
    """Root object of the encoder SavedModel.

    Args:
        encoder: an AlbertEncoder.
        mlm_head: the pretrainer's AlbertMaskedLMHead, or None for no `.mlm`.
        assets: dict attribute name -> file path, copied into the SavedModel's assets.
        jit_compile: serve (`serve`, `serving_default`) through XLA.
    """

    def __init__(self, encoder, mlm_head=None, assets=None, jit_compile=False):
        super().__init__()
        self._encoder = encoder
        # the inference forward, nested in `serve` and the signature: XLA-compiled when asked
        # (the attribute travels in the SavedModel's function library)
        self._infer = tf.function(lambda inputs: _encode(encoder, inputs, False), jit_compile=bool(jit_compile),
                                  autograph=False)
        self.variables = _tf_variables(encoder.weights)
        self.trainable_variables = _tf_variables(encoder.trainable_weights)
        self.regularization_losses = []
        # Dropout's RNG states (Keras SeedGenerators) are captured by the training=True
        # trace; TF tracking does not reach them through the Keras model, so hold them here.
        self._random_states = random_states(encoder) + (random_states(mlm_head) if mlm_head is not None else [])
        for name, path in (assets or {}).items():
            setattr(self, name, tf.saved_model.Asset(path))
        if mlm_head is not None:
            self.mlm = MaskedLMModule(encoder, mlm_head, self.__call__)

    @tf.function(autograph=False)
    def __call__(self, inputs, training=False):
        return _encode(self._encoder, inputs, training)

    @tf.function(autograph=False)
    def serve(self, inputs):
        return self._infer({k: inputs[k] for k in INPUT_NAMES})

    @tf.function(autograph=False)
    def train(self, inputs):
        return self.__call__({k: inputs[k] for k in INPUT_NAMES}, training=True)

    @tf.function(autograph=False)
    def _signature(self, input_word_ids, input_mask, input_type_ids):
        outputs = self._infer({"input_word_ids": input_word_ids, "input_mask": input_mask,
                               "input_type_ids": input_type_ids})
        flat = {k: outputs[k] for k in ("pooled_output", "sequence_output", "default")}
        for i, tensor in enumerate(outputs["encoder_outputs"]):
            flat[f"encoder_outputs_{i}"] = tensor
        return flat

    def trace(self):
        """Traces every function for the contract's input signatures; returns signatures."""
        for training in (True, False):
            self.__call__.get_concrete_function(input_specs(), training=training)
        if hasattr(self, "mlm"):  # calls the traces above
            for training in (True, False):
                self.mlm.__call__.get_concrete_function(input_specs(True), training=training)
        self._infer.get_concrete_function(input_specs())  # named specs: not traced again while saving
        self.serve.get_concrete_function(input_specs())
        self.train.get_concrete_function(input_specs())
        specs = input_specs()
        return {"serving_default": self._signature.get_concrete_function(**specs)}
