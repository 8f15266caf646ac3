"""Errors of the training room, importable without TensorFlow (entry points catch them
before anything heavy is imported), and the Ctrl-C and SIGTERM flags the driver checks."""

import threading

# Set by the entry points' SIGINT handler (albert_tf.cli). Python raises KeyboardInterrupt
# wherever the main thread is when the signal is handled; raised inside a finalizer (a
# TensorFlow resource deleted by the garbage collector) it is only printed and lost, and a
# long run would go on. The driver checks this flag between loops, so Ctrl-C always ends it.
INTERRUPTED = threading.Event()
# Set by the entry points' SIGTERM handler (preemptible VMs, TPU pods and schedulers send
# it before they stop a process). While the driver's training loop runs (TRAINING_LOOP set)
# the handler only sets it: the loop then saves a checkpoint at the current step and raises
# Terminated. Elsewhere the handler raises Terminated at once.
TERMINATED = threading.Event()
TRAINING_LOOP = threading.Event()


def raise_if_interrupted():
    """KeyboardInterrupt when Ctrl-C came (see INTERRUPTED)."""
    if INTERRUPTED.is_set():
        raise KeyboardInterrupt


class Terminated(KeyboardInterrupt):
    """SIGTERM came (a KeyboardInterrupt, so that no `except Exception` swallows it); the
    message says what was saved and how to resume. Entry points exit with status 143."""


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite."""


class WorkerLostError(RuntimeError):
    """Multi-worker training lost a worker (killed, preempted, unreachable): the others
    cannot go on, since every step's gradients are summed over all of them. The message
    names the lost worker as far as TensorFlow's error tells it, the newest checkpoint
    and how to resume (albert_tf.training.distribution.worker_lost)."""
