"""Errors of the training room, importable without TensorFlow (entry points catch them
before anything heavy is imported)."""


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite."""
