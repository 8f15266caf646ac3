"""albert_tf/cli.py's flag parsing as the real `python -m` entry points see it: a flag
absl cannot parse (a --flagfile that cannot be read, an unknown flag, a bad value) is a
one-line `name: error: ...` with exit status 2, like every other bad input."""

import os
import subprocess
import sys

import pytest

from conftest import entry_point_cases

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)


def _run(module, *args):
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=ENV, cwd=ROOT,
                          timeout=300)


def _error_lines(result, name):
    return [line for line in result.stderr.splitlines() if line.startswith(f"{name}: error: ")]


def test_missing_flagfiles_unknown_flags_and_bad_values_exit_2(tmp_path):
    """A missing --flagfile (or one named inside another) is named, an unknown flag and a bad
    value too: one `name: error:` line, exit 2 (all cases in one process: tests/entry_point_cases.py,
    which parses as `python -m` does: cli.parse_flags and cli.run_entry_point)."""
    missing = tmp_path / "nonexistent.flags"
    outer = tmp_path / "outer.flags"
    outer.write_text(f"--flagfile={tmp_path / 'inner.flags'}\n", encoding="utf-8")
    cases = [("albert_tf.run_pretraining", [f"--flagfile={missing}"]),
             ("albert_tf.run_classifier", [f"--flagfile={missing}"]),
             ("albert_tf.run_pretraining", [f"--flagfile={outer}"]),
             ("albert_tf.run_pretraining", ["--no_such_flag=1"]),
             ("albert_tf.run_classifier", ["--train_batch_size=many"])]
    results = entry_point_cases(None, cases, tmp_path)
    assert all(r.returncode == 2 and "Traceback" not in r.stderr and "FATAL" not in r.stderr for r in results), \
        [r.stderr[-2000:] for r in results]
    for (module, _), result in zip(cases[:2], results):
        name = module.split(".")[-1]
        assert _error_lines(result, name) == [
            f"{name}: error: --flagfile={missing}: No such file or directory. Check the flag file's path "
            f"(a relative path is read from the current directory, {ROOT})."], result.stderr[-2000:]
    [line] = _error_lines(results[2], "run_pretraining")
    assert line.startswith(f"run_pretraining: error: --flagfile={tmp_path / 'inner.flags'}: No such file")
    assert _error_lines(results[3], "run_pretraining") == [
        "run_pretraining: error: Unknown command line flag 'no_such_flag' (see --helpfull)."]
    [line] = _error_lines(results[4], "run_classifier")
    assert "--train_batch_size" in line and "many" in line


def _flags(module, *args):
    from absl import flags

    values = flags.FlagValues()
    module.define_flags(values)
    values([module.__name__, "--output_dir=x", *args])
    return values


def test_the_fine_tuning_commands_check_their_flags_alike():
    import pytest

    from albert_tf import run_classifier, run_race, run_squad_v1, run_squad_v2

    # (module defining the flags, its check_flags)
    for module, check in ((run_classifier, run_classifier.check_flags), (run_race, run_race.check_flags),
                          (run_squad_v1, run_squad_v1.check_flags), (run_squad_v2, run_squad_v1.check_flags)):
        for args, message in ((["--strategy=tpu"], "--strategy must be one of mirrored, one_device, default"),
                              (["--learning_rate=0"], "--learning_rate must be positive, got 0.0."),
                              (["--train_batch_size=0"], "--train_batch_size must be positive, got 0."),
                              (["--dtype_policy=float16"], "--dtype_policy")):
            with pytest.raises(ValueError, match=message):
                check(_flags(module, *args))
        if module in (run_classifier, run_race):
            with pytest.raises(ValueError, match=r"--warmup_step must be in \[0, --train_step=10\], got 11."):
                check(_flags(module, "--train_step=10", "--warmup_step=11"))
        if module is not run_classifier:  # the TPU flags
            with pytest.raises(ValueError, match="--use_tpu needs --tpu_name"):
                check(_flags(module, "--use_tpu"))


def test_task_options_take_every_field_from_the_flag_of_its_name():
    import dataclasses

    from albert_tf import run_classifier, run_race, run_squad_v1
    from albert_tf.tasks.squad import SquadOptions

    v1, _ = run_squad_v1.options_from_flags(_flags(run_squad_v1, "--doc_stride=7", "--use_tpu", "--master=m"), "v1")
    defaults = SquadOptions(version="v1", output_dir="x")
    assert (v1.doc_stride, v1.strategy, v1.tpu_name) == (7, "tpu", "m")
    # run_squad_v1 has no --start_n_top, --end_n_top, --dropout_prob: SquadOptions' defaults
    assert (v1.start_n_top, v1.end_n_top, v1.dropout_prob) == (defaults.start_n_top, defaults.end_n_top, 0.1)
    for module, args in ((run_race, ["--task_name=multiple_choice", "--max_qa_length=9", "--strategy=mirrored"]),
                         (run_classifier, ["--task_name=tsv", "--labels=a,b", "--classifier_dropout=0.2"])):
        f = _flags(module, *args)
        task, training = module.options_from_flags(f)
        for field in dataclasses.fields(task):
            if field.name != "tpu_name":
                assert getattr(task, field.name) == getattr(f, field.name), field.name
        assert (training.num_train_steps, training.num_warmup_steps) == (f.train_step, f.warmup_step)


def test_the_shipped_flag_files_parse_and_single_device_ones_reach_the_papers_batch():
    """configs/*.flags parse with run_pretraining's flags (relative paths from the project
    root, as the README runs them); each paper-size file keeps batch 4096 at T 512 with LAMB,
    and each single_device_*.flags is its size's file plus --remat and accumulation: K
    micro-batches of 4096 / K on one device."""
    from absl import flags

    from albert_tf import run_pretraining

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        parsed = {}
        for name in sorted(os.listdir(os.path.join(ROOT, "configs"))):
            if name.endswith(".flags"):
                values = flags.FlagValues()
                run_pretraining.define_flags(values)
                values(["run_pretraining", f"--flagfile=configs/{name}"])
                assert os.path.exists(values.albert_config_file), (name, values.albert_config_file)
                parsed[name[:-len(".flags")]] = values
    finally:
        os.chdir(here)
    singles = [name for name in parsed if name.startswith("single_device_")]
    assert sorted(singles) == ["single_device_base", "single_device_large", "single_device_xxlarge"]
    for size in ("base", "large", "xlarge", "xxlarge"):
        paper = parsed[size]
        assert (paper.train_batch_size, paper.max_seq_length, paper.optimizer) == (4096, 512, "lamb")
        assert not paper.remat and paper.gradient_accumulation_steps == 1
    for name in singles:
        single, paper = parsed[name], parsed[name[len("single_device_"):]]
        assert single.remat and single.strategy == "one_device"
        k = single.gradient_accumulation_steps
        assert k > 1 and single.train_batch_size == 4096 and 4096 % k == 0, name
        for flag in ("albert_config_file", "max_seq_length", "learning_rate", "num_train_steps", "num_warmup_steps"):
            assert single[flag].value == paper[flag].value, (name, flag)


def test_no_default_stream_is_bound_at_import():
    """A `stream=sys.stdout` default is the stream of import time: a command run in-process
    under redirect_stdout (tools/reproduce.py runs every command that way) would print to a
    closed log ever after. Every function of albert_tf takes None (or writer.STDERR) and
    looks the console up when it is called."""
    import importlib
    import inspect
    import pkgutil

    import albert_tf

    bound = []
    for info in pkgutil.walk_packages(albert_tf.__path__, "albert_tf."):
        module = importlib.import_module(info.name)
        for owner in [module] + [c for _, c in inspect.getmembers(module, inspect.isclass)
                                 if c.__module__ == info.name]:
            for name, fn in inspect.getmembers(owner, inspect.isfunction):
                if fn.__module__ != info.name:
                    continue
                for parameter in inspect.signature(fn).parameters.values():
                    default = parameter.default  # a file-like default: a stream bound at import
                    if not isinstance(default, type) and callable(getattr(default, "write", None)):
                        where = f"{owner.__name__}." if owner is not module else ""
                        bound.append(f"{info.name}.{where}{name}({parameter.name})")
    assert not bound, bound


# --- the lines TensorFlow prints while it loads (cli.quiet_tensorflow_loading) -------------------

HEADER = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
# as TensorFlow 2.21 prints them while loading (absl's pre-initialisation time stamp) and as
# absl prints them later
INFO = "I0000 00:00:1795758206.439373    5191 port.cc:153] oneDNN custom operations are on."
WARNING = "W1127 05:30:12.123456   77 gpu_device.cc:2341] Cannot dlopen some GPU libraries."
ERROR = "E0000 00:00:1795758455.288861   15033 cuda_platform.cc:52] failed call to cuInit"
FATAL = "F0000 00:00:1795758455.3   15033 cpu_feature_guard.cc:1] The TensorFlow library was compiled to use AVX"


def test_tensorflows_loading_lines_follow_tf_cpp_min_log_level():
    from albert_tf.cli import hidden_loading_line

    others = ["Traceback (most recent call last):", "I0000 not a log line", "a Python warning", ""]
    for level, hidden in ((0, set()), (1, {HEADER, INFO}), (2, {HEADER, INFO, WARNING}),
                          (3, {HEADER, INFO, WARNING, ERROR}), (4, {HEADER, INFO, WARNING, ERROR})):
        for line in (HEADER, INFO, WARNING, ERROR, FATAL, *others):
            for ending in ("", "\n", "\r\n"):
                assert hidden_loading_line(line + ending, level) == (line in hidden), (level, line, ending)


def test_the_lines_real_tensorflow_prints_while_loading_are_those_hidden():
    """What `import tensorflow` prints at TF_CPP_MIN_LOG_LEVEL=3 (under the fork server, its
    import's own output, replayed) is absl's header and log lines (INFO on this CPU: oneDNN's
    and the CUDA stub's), all left out at level 3, the entry points' default; if a TensorFlow
    stops printing them, the filter has nothing left to do and this says so."""
    from albert_tf.cli import hidden_loading_line

    result = subprocess.run([sys.executable, "-c", "import tensorflow"], capture_output=True, text=True, env=ENV,
                            cwd=ROOT, timeout=300)  # TF_CPP_MIN_LOG_LEVEL=3: TensorFlow prints them even so
    lines = result.stderr.splitlines()
    assert result.returncode == 0 and HEADER in lines and len(lines) > 1, lines
    assert [x for x in lines if not hidden_loading_line(x, 3)] == [], lines


FAKE_TENSORFLOW = f'''
import os, sys
os.write(2, b"{HEADER}\\n{INFO}\\n")
sys.stderr.write("a Python warning while loading\\n")
sys.stderr.flush()
os.write(2, b"{WARNING}\\n{ERROR}\\n")
if os.environ.get("FAKE_ABORT"):
    os.write(2, b"{FATAL}\\n")
    os.abort()
'''
LOADER = ("import sys; from albert_tf import cli; cli.quiet_tensorflow_loading(); import tensorflow; "
          "print('loaded by', type(tensorflow.__loader__).__name__, type(tensorflow.__spec__.loader).__name__, "
          "file=sys.stderr)")


@pytest.mark.real_process
def test_an_entry_points_first_tensorflow_import_applies_the_level_and_passes_a_crash_message(tmp_path):
    """A stand-in `tensorflow` package that prints like TensorFlow while it loads: at each
    level only the lines at or above it reach stderr, in order, with Python's own writes;
    the module keeps its own loader; and a process that aborts while loading still shows
    what it printed (the filter is a process of its own)."""
    (tmp_path / "tensorflow").mkdir()
    (tmp_path / "tensorflow" / "__init__.py").write_text(FAKE_TENSORFLOW, encoding="utf-8")

    def load(level, **env):
        env = dict(ENV, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}", TF_CPP_MIN_LOG_LEVEL=level, **env)
        return subprocess.run([sys.executable, "-c", LOADER], capture_output=True, text=True, cwd=ROOT, timeout=60,
                              env=env)

    python = "a Python warning while loading"
    expected = {"0": [HEADER, INFO, python, WARNING, ERROR], "2": [python, ERROR], "3": [python]}
    for level, lines in expected.items():
        result = load(level)
        assert result.returncode == 0, result.stderr
        assert result.stderr.splitlines() == lines + ["loaded by SourceFileLoader SourceFileLoader"], (level, result)
    aborted = load("3", FAKE_ABORT="1")
    assert aborted.returncode != 0 and aborted.stderr.splitlines() == [python, FATAL], aborted


ENTRY_MODULES = ("albert_tf.run_pretraining", "albert_tf.run_classifier", "albert_tf.run_squad_v1",
                 "albert_tf.run_squad_v2", "albert_tf.run_race", "albert_tf.export_tfhub", "albert_tf.export_litert",
                 "albert_tf.param_table", "albert_tf.create_pretraining_data", "albert_tf.convert.__main__")


@pytest.mark.real_process
def test_no_entry_point_imports_tensorflow_before_it_runs():
    """Importing an entry point's module (its flags' definitions included) loads no
    TensorFlow: a bad flag is refused without paying for it, and `main` has installed
    quiet_tensorflow_loading before TensorFlow's first import."""
    code = ("import importlib, sys\n"
            "from absl import flags\n"
            f"for name in {ENTRY_MODULES!r}:\n"
            "    module = importlib.import_module(name)\n"
            "    try:\n"
            "        module.define_flags(flags.FlagValues())\n"
            "    except TypeError:  # param_table: flags.FLAGS only\n"
            "        module.define_flags()\n"
            "    if 'tensorflow' in sys.modules or 'keras' in sys.modules:\n"
            "        sys.exit('imported TensorFlow or Keras: ' + name)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, cwd=ROOT,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]


def test_a_tensorflow_error_that_is_no_lost_worker_exits_1_with_its_message(capsys):
    """An UnavailableError from storage (no peer named) reaches the user as itself: one
    line naming the error and what TensorFlow said, exit status 1 (not "worker lost", 3)."""
    import tensorflow as tf
    from absl import flags

    from albert_tf import cli

    def run(_):
        raise tf.errors.UnavailableError(None, None, "Error executing an HTTP request: libcurl code 6\n\t when "
                                         "reading gs://bucket/train.tfrecord")

    assert cli.run_entry_point("cmd", run, flags.FlagValues()) == 1
    err = capsys.readouterr().err
    assert err == ("cmd: failed: UnavailableError: Error executing an HTTP request: libcurl code 6 when reading "
                   "gs://bucket/train.tfrecord\n")


def test_the_version_has_one_place():
    """pyproject.toml reads the version from albert_tf.__version__ (one place), and the
    installed distribution's metadata agrees with it."""
    import importlib.metadata
    import tomllib

    import albert_tf

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "albert_tf.__version__"}
    assert importlib.metadata.version("albert_tf") == albert_tf.__version__
