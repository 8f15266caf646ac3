"""The one way albert_tf writes a SavedModel: `save(module, path, trace)`.

`tf.saved_model.save` traces functions inside a "save context", and that context is part
of tf.function's cache key: every function traced before the save (the signatures, the
hub contract's `__call__` for training True and False, ...) was traced a second time
while saving, which about doubled the time of an export. Here the module's tracing runs
inside the context the save then uses, so every function is traced once.

Keras 3 gives every Keras Model a `_default_save_signature` property (its TensorFlow
backend's layer class): `tf.saved_model.save` reads every attribute of each object it
saves, so each Keras model inside a module (the encoder, a classifier around it) had
its whole forward traced once more and saved as an unused function of that object. No
albert_tf export serves through it (each module's own functions and signatures are the
contract), so the property answers None while `save` runs.
"""

import tensorflow as tf

from albert_tf.compat import keras_default_save_signatures_off, save_context


def save(module, path, trace):
    """Traces `module` (via `trace()`, returning its signatures dict) and writes it to `path`.

    Args:
        module: a tf.Module / tf.train.Checkpoint whose tf.functions are to be saved.
        path: the SavedModel directory to write.
        trace: () -> {signature name: concrete function}; traces every function to save.
    """
    options = tf.saved_model.SaveOptions()
    with save_context(options):
        signatures = trace()
    with keras_default_save_signatures_off():
        tf.saved_model.save(module, path, signatures=signatures, options=options)
