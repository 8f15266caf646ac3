"""The one way albert_tf writes a SavedModel: `save(module, path, trace)`, every function
traced once, in the save's own context, and no Keras model's default save signature
(why: docs/export.md, "How an export is written")."""

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
