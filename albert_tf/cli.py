"""What every albert_tf entry point does around its `run(FLAGS)`.

    if __name__ == "__main__":
        start(define_flags, main)          # main(argv) returns run_entry_point("name", run)

Exit status 2 with `name: error: ...` for bad flags or input (every ValueError: flag
checks, DataError with file:line, CheckpointMismatchError), 1 with `name: stopped: ...`
when training diverged, 0 otherwise; never a traceback for bad input. TensorFlow's INFO
logging (every checkpoint and SavedModel write) is off unless --verbosity is given.
"""

import os
import sys


def run_entry_point(name, run):
    """Runs `run(FLAGS)`; returns the exit status (see module docstring)."""
    from absl import flags, logging

    from albert_tf.training.errors import TrainingDivergedError

    if not flags.FLAGS["verbosity"].present:
        logging.set_verbosity(logging.WARNING)
    try:
        run(flags.FLAGS)
    except ValueError as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return 2
    except TrainingDivergedError as e:
        print(f"{name}: stopped: {e}", file=sys.stderr)
        return 1
    return 0


def start(define_flags, main):
    """Quiet TensorFlow's C++ logs, define the flags, parse them and call `main`."""
    from absl import app

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    define_flags()
    app.run(main)
