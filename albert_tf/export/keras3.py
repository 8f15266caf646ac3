"""Loading an exported encoder into a Keras 3 model: `EncoderTFSMLayer`.

`keras.layers.TFSMLayer` wraps every restored variable in a Keras variable named after
`tf.Variable.name`, which keeps TensorFlow's ":0" suffix ("kernel:0"). Optimizers with
slot variables (Adam, LAMB, ...) derive slot names from it, and TensorFlow refuses ":" in
a variable name, so fine-tuning with Adam fails while SGD (no slots) works.
`EncoderTFSMLayer` is TFSMLayer with the suffix dropped (and the albert_tf endpoints
preselected), so any Keras optimizer fine-tunes the encoder.

Example:
```python
encoder = EncoderTFSMLayer("export/encoder", trainable=True)
outputs = encoder(inputs)  # dict: pooled_output, sequence_output, encoder_outputs, default
```
"""

import keras

from albert_tf.compat import PlainVariableNames


class EncoderTFSMLayer(PlainVariableNames, keras.layers.TFSMLayer):
    """TFSMLayer for albert_tf encoder exports (`serve` / `train` endpoints)."""

    def __init__(self, filepath, call_endpoint="serve", call_training_endpoint="train", **kwargs):
        super().__init__(filepath, call_endpoint=call_endpoint, call_training_endpoint=call_training_endpoint,
                         **kwargs)
