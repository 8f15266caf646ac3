"""Errors of the training room, importable without TensorFlow (entry points catch them
before anything heavy is imported)."""


class CheckpointMismatchError(ValueError):
    """init_checkpoint does not match the model; the message lists every difference."""


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite."""
