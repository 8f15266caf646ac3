"""Errors of the training room, importable without TensorFlow (entry points catch them
before anything heavy is imported), and the Ctrl-C flag the driver checks."""

import threading

# Set by the entry points' SIGINT handler (albert_tf.cli). Python raises KeyboardInterrupt
# wherever the main thread is when the signal is handled; raised inside a finalizer (a
# TensorFlow resource deleted by the garbage collector) it is only printed and lost, and a
# long run would go on. The driver checks this flag between loops, so Ctrl-C always ends it.
INTERRUPTED = threading.Event()


def raise_if_interrupted():
    """KeyboardInterrupt when Ctrl-C came (see INTERRUPTED)."""
    if INTERRUPTED.is_set():
        raise KeyboardInterrupt


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite."""


class WorkerLostError(RuntimeError):
    """Multi-worker training lost a worker (killed, preempted, unreachable): the others
    cannot go on, since every step's gradients are summed over all of them. The message
    names the lost worker as far as TensorFlow's error tells it, the newest checkpoint
    and how to resume (albert_tf.training.distribution.worker_lost)."""
