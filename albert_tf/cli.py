"""What every albert_tf entry point (run_*, export_tfhub, convert, param_table, tools/)
does around its work: one style, one error convention.

    def run(f):                       # f: the parsed absl FLAGS; nothing below sees it
        ...
    if __name__ == "__main__":
        cli.main("run_pretraining", define_flags, run)

`main` quiets TensorFlow's C++ and INFO logs (unless --verbosity is given; see
`quiet_tensorflow_loading` for the lines TensorFlow prints while it loads), defines the
flags, parses them (flag files with --flagfile) and calls `run(FLAGS)`. Exit status:
- 2 with `name: error: ...` for bad flags or input: a flag absl cannot parse (unknown,
  a bad value, a --flagfile that cannot be read: `parse_flags`), every ValueError (flag
  checks, DataError with file:line, CheckpointMismatchError, ConversionError) and OSError
  (a path that is a file, unwritable or unreadable: the path is named), never a traceback;
- 1 with `name: stopped: ...` when training diverged;
- 3 with `name: worker lost: ...` when multi-worker training lost a worker (killed,
  preempted, unreachable): the message names it (as TensorFlow's error does) and the
  newest checkpoint; starting every worker again with the same command resumes from it;
- 130 with `name: interrupted ...` on Ctrl-C (what was written is complete; a training
  run resumes from its newest checkpoint when started again);
- 143 with `name: terminated ...` on SIGTERM (preemptible VMs, TPU pods, schedulers): a
  training run saves a checkpoint at its current step once the running loop of
  --iterations_per_loop steps ends, and resumes from it when started again;
- 1 with `name: failed: ...` for another TensorFlow error (e.g. a storage read that failed);
- 0 otherwise (or what `run` returns when it returns an int).
"""

import contextlib
import importlib.abc
import importlib.util
import os
import re
import signal
import sys
import threading

def _describe_os_error(e):
    path = e.filename if e.filename is not None else ""
    what = e.strerror or str(e)
    if path:
        extra = f" -> {e.filename2}" if getattr(e, "filename2", None) else ""
        return f"{path}{extra}: {what}. Check that the path exists, is of the right kind and is writable."
    return what


def run_entry_point(name, run, flag_values=None):
    """Runs `run(FLAGS)`; returns the exit status (see module docstring)."""
    from absl import flags, logging

    from albert_tf.training.errors import INTERRUPTED, TERMINATED, Terminated, TrainingDivergedError, WorkerLostError

    fv = flags.FLAGS if flag_values is None else flag_values
    if "verbosity" in fv and not fv["verbosity"].present:
        logging.set_verbosity(logging.WARNING)
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, _on_sigint), signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        status = run(fv)
    except ValueError as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{name}: error: {_describe_os_error(e)}", file=sys.stderr)
        return 2
    except TrainingDivergedError as e:
        print(f"{name}: stopped: {e}", file=sys.stderr)
        return 1
    except WorkerLostError as e:
        print(f"{name}: worker lost: {e}", file=sys.stderr)
        return 3
    except Terminated as e:
        print(f"{name}: terminated (SIGTERM). {e}", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"{name}: interrupted. Everything already written is complete; run the same command again to "
              "resume from the newest checkpoint (training commands).", file=sys.stderr)
        return 130
    except Exception as e:
        if not _is_tensorflow_error(e):
            raise
        print(f"{name}: failed: {type(e).__name__}: {' '.join(str(e.message).split())[:2000]}", file=sys.stderr)
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous[0])
            signal.signal(signal.SIGTERM, previous[1])
        INTERRUPTED.clear()
        TERMINATED.clear()
    return status if isinstance(status, int) else 0


def _is_tensorflow_error(e):
    """Whether `e` is a tf.errors.OpError (checked without importing TensorFlow)."""
    errors = sys.modules.get("tensorflow.python.framework.errors_impl")
    return errors is not None and isinstance(e, errors.OpError)


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
        raise SystemExit(2) from None


def main(name, define_flags, run):
    """The `if __name__ == "__main__"` body of every entry point: quiet logs, define the
    flags, parse them (`parse_flags`) and exit with run_entry_point's status."""
    from absl import app

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    quiet_tensorflow_loading()
    define_flags()
    app.run(lambda argv: _main(name, run, argv), flags_parser=lambda argv: parse_flags(name, argv))


# --- the lines TensorFlow prints while it loads ---------------------------------------------
#
# TensorFlow 2.21 logs a few lines while its shared libraries load, before it reads
# TF_CPP_MIN_LOG_LEVEL, and so whatever that says, twice per process (two libraries):
#
#   WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
#   I0000 00:00:1795758206.439373    5191 port.cc:153] oneDNN custom operations are on. ...
#   I0000 00:00:1795758206.439748    5191 cudart_stub.cc:31] Could not find cuda drivers ...
#
# An entry point applies the level to those lines itself: a line of severity below it (I 0,
# W 1, E 2) and, at level 1 or more, absl's header line are left out; fatal lines and
# everything else pass, as they come (a crash while loading still shows its message).

_ABSL_HEADER = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_LOG_LINE = re.compile(r"([IWEF])\d{4} \d\d:\d\d:\d+(?:\.\d+)?\s+\d+ \S+:\d+\] ")
_SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}


def hidden_loading_line(line, level):
    """Whether `line` (one line TensorFlow printed while loading) is below TF_CPP_MIN_LOG_LEVEL
    `level` (an int; 0 shows everything)."""
    if level >= 1 and line.rstrip("\r\n") == _ABSL_HEADER:
        return True
    match = _LOG_LINE.match(line)
    return bool(match) and _SEVERITY[match.group(1)] < min(level, 3)


def min_log_level():
    """TF_CPP_MIN_LOG_LEVEL as an int (0 when unset or not a number)."""
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


def filter_loading_lines(level):
    """Copies stdin's lines to stdout as they come, except those `hidden_loading_line` leaves
    out at `level`: the process that `filtered_lines` starts runs this."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the command: drain to the end
    source, target = sys.stdin.buffer, sys.stdout.buffer
    pending = b""
    while chunk := source.read1(65536):
        *lines, pending = (pending + chunk).split(b"\n")
        kept = [line + b"\n" for line in lines if not hidden_loading_line(line.decode("utf-8", "replace"), level)]
        if kept:
            target.write(b"".join(kept))
            target.flush()
    if pending:
        target.write(pending)
        target.flush()


@contextlib.contextmanager
def filtered_lines(level=None):
    """A pipe (a binary file) whose lines reach this process's stderr (file descriptor 2) as
    they are written, except those `hidden_loading_line` leaves out at `level` (default
    TF_CPP_MIN_LOG_LEVEL): give it as another process's stderr, or see `quiet_tensorflow_loading`.
    The lines pass through a small process of their own, not a thread: what was written
    reaches stderr even when this process dies. Raises OSError when that process cannot start."""
    import subprocess

    # this albert_tf's filter, wherever the command was started from (its parent directory first)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (f"import sys; sys.path.insert(0, {root!r}); from albert_tf.cli import filter_loading_lines; "
            "filter_loading_lines(int(sys.argv[1]))")
    sys.stderr.flush()
    # -u: the filter's own reads and writes unbuffered (it writes each chunk's lines at once)
    process = subprocess.Popen([sys.executable, "-u", "-c", code, str(min_log_level() if level is None else level)],
                               stdin=subprocess.PIPE, stdout=2, stderr=2)
    try:
        yield process.stdin
    finally:
        process.stdin.close()  # the filter's input ends once every other writer is done: it exits
        process.wait()


@contextlib.contextmanager
def _stderr_filtered(level):
    with filtered_lines(level) as pipe:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(pipe.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


class _QuietLoader(importlib.abc.Loader):
    """TensorFlow's own loader, run with its stderr filtered (`filtered_lines`)."""

    def __init__(self, loader, level):
        self.loader, self.level = loader, level

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(_stderr_filtered(self.level))
            except OSError:  # no stderr to redirect or no interpreter to start: load as is
                pass
            try:
                self.loader.exec_module(module)
            finally:
                module.__loader__ = self.loader  # the module keeps TensorFlow's own loader
                if getattr(module, "__spec__", None) is not None:
                    module.__spec__.loader = self.loader


class _QuietFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # once: the real finder from here on
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader, min_log_level())
        return spec


def quiet_tensorflow_loading():
    """Makes the process's first `import tensorflow` (wherever it happens, if it has not
    happened yet) apply TF_CPP_MIN_LOG_LEVEL to the lines TensorFlow prints while it loads
    (see above); called by `main`, so by every entry point. Does nothing at level 0."""
    if "tensorflow" in sys.modules or min_log_level() < 1 or not sys.executable:  # (an embedded interpreter)
        return
    if not any(isinstance(f, _QuietFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietFinder())


def _main(name, run, argv):
    if len(argv) > 1:
        print(f"{name}: error: unexpected arguments {argv[1:]}; every option is a --flag (see --helpfull).",
              file=sys.stderr)
        return 2
    return run_entry_point(name, run)


def define_dtype_policy_flag(flag_values=None, default="auto", what="training and evaluation"):
    """--dtype_policy for a model-building command (albert_tf.training.precision)."""
    from absl import flags

    kwargs = {} if flag_values is None else {"flag_values": flag_values}
    flags.DEFINE_string("dtype_policy", default, f"What {what} compute in: auto (mixed_bfloat16 where the hardware "
                        "computes bf16 natively: TPUs, GPUs of compute capability >= 8.0, CPUs with avx512_bf16 or "
                        "amx_bf16; float32 elsewhere), float32 or mixed_bfloat16. Variables and checkpoints stay "
                        "float32 either way.", **kwargs)


def define_gradient_accumulation_flag(flag_values=None):
    """--gradient_accumulation_steps for a training command (albert_tf.training.accumulation)."""
    from absl import flags

    from albert_tf.training.accumulation import FLAG_HELP

    kwargs = {} if flag_values is None else {"flag_values": flag_values}
    flags.DEFINE_integer("gradient_accumulation_steps", 1, FLAG_HELP, **kwargs)


REMAT_HELP = ("Rematerialization: the backward pass keeps only the input of each application of the encoder's "
              "shared (attention, feed-forward) block and recomputes the rest of its forward from it, instead of "
              "keeping every application's activations: less activation memory for one more forward of the encoder "
              "per step. The gradients are the plain run's (within float rounding; dropout masks are redrawn "
              "identically). Composes with --gradient_accumulation_steps, --dtype_policy and padding skipping.")


def define_remat_flag(flag_values=None):
    """--remat for a training command (AlbertEncoder's "Rematerialization", through the driver)."""
    from absl import flags

    kwargs = {} if flag_values is None else {"flag_values": flag_values}
    flags.DEFINE_bool("remat", False, REMAT_HELP, **kwargs)


def define_allow_changed_settings_flag(flag_values=None):
    """--allow_changed_settings for a training command (albert_tf.training.sessions)."""
    from absl import flags

    kwargs = {} if flag_values is None else {"flag_values": flag_values}
    flags.DEFINE_bool("allow_changed_settings", False, "Continue the training in --output_dir although a setting "
                      "that changes its result (learning rate and schedule, batch size, warmup, resolved dtype "
                      "policy, accumulation steps, sequence length, optimizer, seed, starting weights) differs from "
                      "its previous training session's; the change is recorded in run_info.json. Without it such a "
                      "run is refused (exit status 2): a new run takes a new --output_dir. A longer or shorter "
                      "training is always allowed (and recorded).", **kwargs)


# the settings of `sessions.Session` that are paths: compared as absolute paths
PATH_SETTINGS = ("init_checkpoint", "albert_hub_module_handle")


def given_flags(f):
    """{name: value} of every flag the command defined (absl's own left out), as given."""
    values = {}
    for name in f:
        module = f.find_module_defining_flag(name)
        if module is not None and not module.startswith("absl"):
            values[name] = f[name].value
    return values


def session(f, command, settings, length, trains, tpu=False):
    """The run's `albert_tf.training.sessions.Session` from the flags.

    Args:
        f: the parsed flags.
        command: the command's name.
        settings: names of the flags that change a training's result (dtype_policy is
            recorded resolved for this machine, `tpu`: on TPUs; paths absolute).
        length: the name of the flag of the training's length (allowed to change).
        trains: whether this run trains.
    """
    from albert_tf.training.sessions import Session, resolve_policy

    values = {}
    for name in settings:
        value = f[name].value
        if name == "dtype_policy":
            value = resolve_policy(value, tpu=tpu)
        elif name in PATH_SETTINGS and value:
            value = os.path.abspath(value)
        values[name] = value
    return Session(command=command, flags=given_flags(f), settings=values, length={length: f[length].value},
                   trains=bool(trains), allow_changed_settings=bool(f.allow_changed_settings))


def define_tpu_flags(flag_values):
    """The release's TPU flags (use_tpu, tpu_name, tpu_zone, gcp_project, master,
    num_tpu_cores) and --strategy, for the fine-tuning commands: --use_tpu maps to the
    driver's tpu strategy (tasks take `strategy="tpu"` and `tpu_name`)."""
    from absl import flags

    fv = {"flag_values": flag_values}
    flags.DEFINE_bool("use_tpu", False, "Train on a TPU (--tpu_name): the driver's tpu strategy.", **fv)
    flags.DEFINE_string("tpu_name", None, "The TPU name or grpc:// address (with --use_tpu).", **fv)
    flags.DEFINE_string("tpu_zone", None, "Accepted for compatibility; unused (the TPU resolver finds it).", **fv)
    flags.DEFINE_string("gcp_project", None, "Accepted for compatibility; unused.", **fv)
    flags.DEFINE_string("master", None, "Accepted for compatibility; with --use_tpu and no --tpu_name, the TPU "
                        "address.", **fv)
    flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility; the strategy counts the cores.", **fv)
    flags.DEFINE_string("strategy", "default", "mirrored | one_device | default (ignored with --use_tpu).", **fv)


# --- what the fine-tuning commands (run_classifier, run_race, run_squad_v1/_v2) share ---

FINE_TUNING_STRATEGIES = ("mirrored", "one_device", "default")


def check_fine_tuning_flags(f, positive, warmup=True, tpu=True):
    """A fine-tuning command's checks of flag values alone (its task checks the inputs):
    --dtype_policy, the `positive` flags, --gradient_accumulation_steps (which must divide
    --train_batch_size; the Trainer checks the per-replica batch), --warmup_step in [0, --train_step] (`warmup`),
    --learning_rate, --strategy and (`tpu`: the flags of define_tpu_flags) --use_tpu's
    address. Raises ValueError naming the flag."""
    from albert_tf.tasks.common import check_positive
    from albert_tf.training.accumulation import check_accumulation
    from albert_tf.training.precision import check_policy

    check_policy(f.dtype_policy)
    check_positive(f, positive)
    check_accumulation(f.gradient_accumulation_steps, f.train_batch_size)
    if warmup and not 0 <= f.warmup_step <= f.train_step:
        raise ValueError(f"--warmup_step must be in [0, --train_step={f.train_step}], got {f.warmup_step}.")
    if f.learning_rate <= 0:
        raise ValueError(f"--learning_rate must be positive, got {f.learning_rate}.")
    if f.strategy not in FINE_TUNING_STRATEGIES:
        raise ValueError(f"--strategy must be one of {', '.join(FINE_TUNING_STRATEGIES)}, got {f.strategy!r}.")
    if tpu and f.use_tpu and not (f.tpu_name or f.master):
        raise ValueError("--use_tpu needs --tpu_name (or --master).")


def tpu_strategy(f):
    """{"strategy", "tpu_name"} of a task's options from --use_tpu (the driver's tpu
    strategy on --tpu_name, else --master) or --strategy."""
    if f.use_tpu:
        return {"strategy": "tpu", "tpu_name": f.tpu_name or f.master}
    return {"strategy": f.strategy, "tpu_name": None}


def task_options(cls, f, **given):
    """A task's options (the dataclass `cls`) from the flags: `given` fields as given, every
    other from the flag of the same name; a field without one keeps its default (e.g.
    start_n_top, which only run_squad_v2 defines)."""
    import dataclasses

    values = {field.name: getattr(f, field.name) for field in dataclasses.fields(cls)
              if field.init and field.name not in given and field.name in f}
    return cls(**values, **given)


def training_options(f, **given):
    """The driver's TrainingOptions from the flags every fine-tuning command has
    (--output_dir, --train_batch_size, --learning_rate, --save_checkpoints_steps,
    --iterations_per_loop, --dtype_policy, --gradient_accumulation_steps, --remat) and `given`."""
    from albert_tf.training.driver import TrainingOptions

    return TrainingOptions(output_dir=f.output_dir, train_batch_size=f.train_batch_size,
                           learning_rate=f.learning_rate, save_checkpoints_steps=f.save_checkpoints_steps,
                           iterations_per_loop=f.iterations_per_loop, dtype_policy=f.dtype_policy,
                           gradient_accumulation_steps=f.gradient_accumulation_steps, remat=f.remat, **given)


def run_task(task_module, task, training, stream):
    """Checks a task's options (`task_module.check_options`, e.g. albert_tf.tasks.race's:
    bad input fails before any work) and a training's settings against the run's previous
    training (albert_tf.training.sessions.check_settings, training.session), then runs it;
    returns its results."""
    from albert_tf.training.sessions import check_settings

    task_module.check_options(task)
    check_settings(task.output_dir, training.session)
    return task_module.run(task, training, stream=stream)
