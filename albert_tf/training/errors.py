"""Errors of the training room, importable without TensorFlow (entry points catch them
before anything heavy is imported)."""


from albert_tf.storage.report import CheckpointMismatchError  # noqa: F401  (re-exported)


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite."""
