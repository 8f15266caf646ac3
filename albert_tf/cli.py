"""What every albert_tf entry point (run_*, export_tfhub, convert, param_table, tools/)
does around its work: one style, one error convention.

    RECORD = Command("some_command", ((SomeOptions, None),))   # its options record (storage.options)

    def define_flags(flag_values):
        option_flags.define_command(flag_values, RECORD)        # a flag per field
    def run(f): ...                                             # f: the parsed flags

    main, entry = entry_points.command("some_command", define_flags, run)   # main(argv) -> status

`main` defines the flags in a FlagValues of its own, parses them (flag files with
--flagfile), calls `run(flags)` with absl logging at WARNING (unless --verbosity is given)
and returns the exit status; what it changed in the process is put back (see `main`).
TensorFlow prints a few lines while it loads whatever TF_CPP_MIN_LOG_LEVEL says (README,
"TensorFlow's loading lines"); they are left as they are. The exit status is one of
`EXIT_STATUSES` (docs/exit_status.md: each with its line and what to do): on any but 0 one line
`name: WORD ...` on stderr, no traceback (`_ending` maps the errors: a write that failed for space
4, every ValueError and OSError 2 naming the input or path, a diverged training and another
TensorFlow error 1, a lost worker 3, Ctrl-C 130, SIGTERM 143; any other error is raised); 0
otherwise (or what `run` returns when it returns an int).
"""

import contextlib
import os
import signal
import sys
import threading

from albert_tf import compat


def _describe_os_error(e):
    path = e.filename if e.filename is not None else ""
    what = e.strerror or str(e)
    if path:
        extra = f" -> {e.filename2}" if getattr(e, "filename2", None) else ""
        return f"{path}{extra}: {what}. Check that the path exists, is of the right kind and is writable."
    return what


# The exit statuses every command returns (`run_entry_point`, `main`); docs/exit_status.md has a
# row for each (tests/test_full_disk.py checks), with what to do.
DONE, FAILED, INPUT, WORKER_LOST, DISK_FULL, ON_CTRL_C, ON_SIGTERM = 0, 1, 2, 3, 4, 130, 143
EXIT_STATUSES = {
    DONE: "done",
    FAILED: "training diverged, another TensorFlow error, param_table's counts differ; also --help",
    INPUT: "bad flags or input, an output that is not albert_tf's, held by a live run or damaged",
    WORKER_LOST: "a worker of a multi-worker run was lost",
    DISK_FULL: "a write failed for space: the disk or the quota is full",
    ON_CTRL_C: "Ctrl-C",
    ON_SIGTERM: "SIGTERM",
}


def run_entry_point(name, run, flag_values=None):
    """Runs `run(FLAGS)`; returns the exit status (see module docstring)."""
    from absl import flags, logging

    from albert_tf.storage import space
    from albert_tf.training.errors import INTERRUPTED, TERMINATED

    fv = flags.FLAGS if flag_values is None else flag_values
    if "verbosity" in fv:
        logging.set_verbosity(fv.verbosity if fv["verbosity"].present else logging.WARNING)
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, _on_sigint), signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        status = run(fv)
    except BaseException as e:
        ending = _ending(e)
        if ending is None:
            raise
        if ending[0] == DISK_FULL:
            space.free_quietly(e)
        print(f"{name}: {ending[1]}", file=sys.stderr)
        return ending[0]
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous[0])
            signal.signal(signal.SIGTERM, previous[1])
        INTERRUPTED.clear()
        TERMINATED.clear()
    return status if isinstance(status, int) else DONE


def _ending(error):
    """(exit status, the line after `name: `) for an error that ends a command (module
    docstring); None for any other (raised on, with its traceback)."""
    from albert_tf.storage import integrity, space
    from albert_tf.training.errors import Terminated, TrainingDivergedError, WorkerLostError

    full = space.disk_full(error)
    if full is not None and full.then is None and full.directory:  # a run's write before training: the lock's record
        newest = None
        with contextlib.suppress(Exception):
            newest = integrity.newest_checkpoint(full.directory)
        if newest:
            return DISK_FULL, (f"disk full: {full.what}. {space.REMOVED} The newest complete checkpoint is "
                               f"{newest}: free space, then run the same command again to continue from it.")
    if full is not None:
        return DISK_FULL, f"disk full: {full}"
    if isinstance(error, OSError):
        return INPUT, f"error: {_describe_os_error(error)}"
    for kind, status, word in ((ValueError, INPUT, "error: "), (TrainingDivergedError, FAILED, "stopped: "),
                               (WorkerLostError, WORKER_LOST, "worker lost: "),
                               (Terminated, ON_SIGTERM, "terminated (SIGTERM). ")):
        if isinstance(error, kind):
            return status, f"{word}{error}"
    if isinstance(error, KeyboardInterrupt):
        return ON_CTRL_C, ("interrupted. Everything already written is complete; run the same command again to "
                           "resume from the newest checkpoint (training commands).")
    if compat.is_tensorflow_error(error):
        return FAILED, f"failed: {type(error).__name__}: {' '.join(str(error.message).split())[:2000]}"
    return None


def _on_sigint(signum, frame):
    from albert_tf.training.errors import INTERRUPTED

    INTERRUPTED.set()  # the driver stops at its next loop even if this exception gets lost
    raise KeyboardInterrupt


def _on_sigterm(signum, frame):
    from albert_tf.training.errors import TERMINATED, TRAINING_LOOP, Terminated

    TERMINATED.set()
    if not TRAINING_LOOP.is_set():  # the training loop saves a checkpoint first, then raises
        raise Terminated("Everything already written is complete; run the same command again to resume from the "
                         "newest checkpoint (training commands).")


def describe_flag_error(error):
    """One line for an absl flags.Error: the unreadable --flagfile named with the reason
    (absl's own message only has it inside an "ERROR::" prefix), else absl's message."""
    from absl import flags

    cause = error.__context__
    if isinstance(error, flags.CantOpenFlagFileError) and isinstance(cause, OSError):
        what = cause.strerror or str(cause)
        return (f"--flagfile={cause.filename}: {what}. Check the flag file's path (a relative path is read from "
                f"the current directory, {os.getcwd()}).")
    return " ".join(str(error).split()) + " (see --helpfull)."


def parse_flags(name, argv, flag_values=None):
    """Parses `argv` (program name first) into the flags, like absl.app.run's parser, but a
    flag that cannot be parsed (unknown, a bad value, a --flagfile that cannot be read)
    is reported as `name: error: ...` with exit status 2 like every other bad input.

    Args:
        name: the command's name for the message.
        argv: the command line, program name first.
        flag_values: the FlagValues to fill (default absl's FLAGS).
    Returns:
        The arguments left after the flags (program name first).
    Raises:
        SystemExit(2): after printing the message, when the flags cannot be parsed.
    """
    from absl import flags

    fv = flags.FLAGS if flag_values is None else flag_values
    try:
        return fv(argv)
    except flags.Error as e:
        print(f"{name}: error: {describe_flag_error(e)}", file=sys.stderr)
        raise SystemExit(INPUT) from None


def main(name, define_flags, run, argv=None):
    """The whole of a command: defines its flags in a FlagValues of its own
    (`define_flags(flag_values)`, plus --help/--helpshort/-?, --helpfull and --verbosity/-v),
    parses `argv` (`parse_flags`: flag files with --flagfile), runs `run(flags)` and returns
    the exit status (module docstring; --help and --helpfull print the command's help and
    return 1, as absl does). Every command module's `main(argv)` is this call.

    What it changes in the process is put back when it returns: the absl verbosity (WARNING
    while it runs unless --verbosity is given), Python's root logging handlers and the root's
    and absl's logger levels (absl's handler is installed while it runs, writing to the
    sys.stderr of the call), Keras' global dtype
    policy, the global random seeds of Python, NumPy, TensorFlow and Keras, TensorFlow's op
    determinism (run_pretraining --deterministic), the SIGINT/SIGTERM handlers. So two calls in
    one process with different arguments give what two processes give (single-process
    strategies). What cannot be put back (`IRREVERSIBLE`, listed in each command's `main`): a
    multi-worker or TPU strategy's set-up, the physical devices' configuration (threads, memory
    growth, logical devices) once TensorFlow started.

    Args:
        name: the command's name, for its messages (`name: error: ...`).
        define_flags: defines the command's flags in the FlagValues it is given.
        run: `run(flags)` does the work; returns None, an exit status or results (status 0).
        argv: the arguments without the program name (default sys.argv[1:]).
    Returns:
        The exit status: what `python -m ...` exits with.
    """
    from absl import flags

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ INFO and WARNING lines (read once)
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    values = flags.FlagValues()
    define_flags(values)
    _define_process_flags(values)
    with _process_state_restored():
        try:
            rest = parse_flags(name, [name, *argv], values)
        except SystemExit as e:
            return e.code
        except _HelpRequested as e:
            _print_help(name, run, values, e.full)
            return FAILED
        if len(rest) > 1:
            print(f"{name}: error: unexpected arguments {rest[1:]}; every option is a --flag (see --helpfull).",
                  file=sys.stderr)
            return INPUT
        return run_entry_point(name, run, values)


IRREVERSIBLE = ("a multi-worker or TPU strategy's set-up (the cluster stays the process's)",
                "the physical devices' configuration (threads, memory growth, logical devices) once TensorFlow "
                "started")


from albert_tf.option_flags import PROCESS_FLAGS  # noqa: E402 (the flags `main` adds to every command's own)


class _HelpRequested(Exception):  # neither ValueError nor TypeError: absl's parser lets it through
    def __init__(self, full):
        super().__init__("help")
        self.full = full


def _define_process_flags(values):
    from absl import flags

    class Help(flags.BooleanFlag):
        def __init__(self, name, short_name, full, text):
            super().__init__(name, False, text, short_name=short_name)
            self.full = full

        def parse(self, argument):
            if self._parse(argument):
                raise _HelpRequested(self.full)

    for flag in (Help("help", "?", False, "show this help"), Help("helpshort", None, False, "show this help"),
                 Help("helpfull", None, True, "show full help")):
        flags.DEFINE_flag(flag, flag_values=values)
    flags.DEFINE_integer("verbosity", None, "Logging verbosity of absl (and TensorFlow's Python) logging: -1 "
                         "warnings (the default while a command runs), 0 info, 1 debug.", short_name="v",
                         flag_values=values)


def _print_help(name, run, values, full):
    """absl's usage text on stdout: the command's docstring, then its flags (with --helpfull
    also --flagfile, --undefok, --verbosity and the help flags)."""
    doc = sys.modules[run.__module__].__doc__ or f"\nUSAGE: {name} [flags]\n"
    shared = {*PROCESS_FLAGS, "flagfile", "undefok"}
    if full:
        text = values.get_help()
    else:
        text = "\n\n".join(values.module_help(module) for module, module_flags
                           in sorted(values.flags_by_module_dict().items())
                           if any(f.name not in shared for f in module_flags))
    sys.stdout.write(doc + "\nflags:\n" + text + "\n")
    if not full:
        sys.stdout.write("\nTry --helpfull to get a list of all flags.\n")


@contextlib.contextmanager
def _process_state_restored():
    """Puts back what a command changes in the process (see `main`)."""
    import logging as python_logging
    import random

    from absl import flags, logging

    handlers = list(python_logging.root.handlers)
    levels = python_logging.root.level, python_logging.getLogger("absl").level  # absl's verbosity sets them
    verbosity = logging.get_verbosity()
    global_flags_parsed = flags.FLAGS.is_parsed()
    if not global_flags_parsed:
        flags.FLAGS.mark_as_parsed()  # else absl's handler prints a "before flag parsing" notice
    logging.use_absl_handler()
    # absl's handler writes to the stderr of absl's import: the command's lines go to this one
    absl_stream = logging.get_absl_handler().python_handler.setStream(sys.stderr)
    python_state = random.getstate()
    numpy = sys.modules.get("numpy")
    numpy_state = numpy.random.get_state() if numpy is not None else None
    keras_state = _keras_state()
    try:
        yield
    finally:
        _restore_keras_state(keras_state)
        random.setstate(python_state)
        if numpy_state is not None:
            numpy.random.set_state(numpy_state)
        if not global_flags_parsed:  # while absl's handler is there (else logging.info installs one of its own)
            disabled = python_logging.root.manager.disable
            python_logging.disable(python_logging.INFO)  # unparse_flags' own "unparse_flags() called" line
            flags.FLAGS.unparse_flags()
            python_logging.disable(disabled)
        python_logging.root.handlers[:] = handlers
        if absl_stream is not None:
            logging.get_absl_handler().python_handler.setStream(absl_stream)
        logging.set_verbosity(verbosity)
        python_logging.root.setLevel(levels[0])
        python_logging.getLogger("absl").setLevel(levels[1])


def _loaded(name):
    """Whether module `name` is imported (a None entry in sys.modules, which makes its import
    fail, is not: e.g. TensorFlow blocked where the model runs on another Keras backend)."""
    return sys.modules.get(name) is not None


def _keras_state():
    """(dtype policy name, Keras' global seed, TensorFlow's global seed, TensorFlow's op
    determinism), or None when Keras was not imported yet (then its defaults are what to put
    back)."""
    if not _loaded("keras"):
        return None
    import keras

    tf_seed, deterministic = None, False
    if _loaded("tensorflow"):
        tf_seed, deterministic = compat.tensorflow_global_seed(), compat.op_determinism_enabled()
    return keras.config.dtype_policy().name, compat.keras_global_seed(), tf_seed, deterministic


def _restore_keras_state(state):
    if not _loaded("keras"):
        return
    import keras

    policy, seed, tf_seed, deterministic = state if state is not None else ("float32", None, None, False)
    keras.config.set_dtype_policy(policy)
    compat.set_keras_global_seed(seed)
    if _loaded("tensorflow"):
        import tensorflow as tf

        tf.random.set_seed(tf_seed)
        if compat.op_determinism_enabled() and not deterministic:  # --deterministic
            compat.disable_op_determinism()
