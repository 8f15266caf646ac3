"""Loading an exported encoder into a Keras 3 model: `EncoderTFSMLayer`, TFSMLayer with the
albert_tf endpoints preselected and the ":0" suffix dropped from the variable names, so any
Keras optimizer fine-tunes the encoder (why: docs/export.md).

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
