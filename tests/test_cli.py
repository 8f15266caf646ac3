"""albert_tf/cli.py: every command's `main(argv)` as a call and as a process.

In this process (each module's `main(argv)`): a flag absl cannot parse (a --flagfile that
cannot be read, an unknown flag, a bad value) is a one-line `name: error: ...` with exit
status 2 like every other bad input; --help prints the command's docstring and flags; two
calls with different arguments give what two processes give and put the process back.

As real processes (what only a process shows; marked real_process): every entry point's
exit status and message for a bad flag, --help's exit status, a closed stderr, a child
process started while TensorFlow imports, logging while TensorFlow imports, --verbosity.
A real process prints TensorFlow's loading lines on stderr (README, "TensorFlow's loading
lines"): `_shown` leaves out exactly those.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import run_in_process, write_tiny_config

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)

# the lines TensorFlow 2.21 prints while its libraries load, before it reads TF_CPP_MIN_LOG_LEVEL
LOADING_LINE = re.compile(r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$"
                          r"|I\d{4} \d\d:\d\d:\d+(?:\.\d+)?\s+\d+ (?:cudart_stub|port)\.cc:\d+\] ")


def _shown(text):
    """The lines of a real process's stderr, less TensorFlow's loading lines."""
    return [line for line in text.splitlines() if not LOADING_LINE.match(line)]


def _error_lines(result, name):
    return [line for line in result.stderr.splitlines() if line.startswith(f"{name}: error: ")]


def test_missing_flagfiles_unknown_flags_bad_values_and_arguments_exit_2(tmp_path):
    """A missing --flagfile (or one named inside another) is named, an unknown flag, a bad
    value and a positional argument too: one `name: error:` line, exit 2, nothing else printed
    (each module's main(argv), in this process)."""
    from albert_tf import run_classifier, run_pretraining

    missing = tmp_path / "nonexistent.flags"
    outer = tmp_path / "outer.flags"
    outer.write_text(f"--flagfile={tmp_path / 'inner.flags'}\n", encoding="utf-8")
    cases = [(run_pretraining, [f"--flagfile={missing}"]), (run_classifier, [f"--flagfile={missing}"]),
             (run_pretraining, [f"--flagfile={outer}"]), (run_pretraining, ["--no_such_flag=1"]),
             (run_classifier, ["--train_batch_size=many"]), (run_pretraining, ["--do_train", "extra"])]
    results = [run_in_process(module, args) for module, args in cases]
    for result in results:
        assert result.returncode == 2 and result.stdout == "" and len(result.stderr.splitlines()) == 1, result
    for (module, _), result in zip(cases[:2], results):
        name = module.__name__.split(".")[-1]
        assert _error_lines(result, name) == [
            f"{name}: error: --flagfile={missing}: No such file or directory. Check the flag file's path "
            f"(a relative path is read from the current directory, {os.getcwd()})."], result.stderr
    [line] = _error_lines(results[2], "run_pretraining")
    assert line.startswith(f"run_pretraining: error: --flagfile={tmp_path / 'inner.flags'}: No such file")
    assert _error_lines(results[3], "run_pretraining") == [
        "run_pretraining: error: Unknown command line flag 'no_such_flag' (see --helpfull)."]
    [line] = _error_lines(results[4], "run_classifier")
    assert "--train_batch_size" in line and "many" in line
    assert _error_lines(results[5], "run_pretraining") == [
        "run_pretraining: error: unexpected arguments ['extra']; every option is a --flag (see --helpfull)."]


def test_a_corrupt_json_input_exits_2_naming_the_file_line_and_column(tmp_path):
    """A corrupt albert_config_file (pretraining, fine-tuning, export), a corrupt run_info.json
    of the --output_dir (pretraining, fine-tuning) and a corrupt config.json to convert: each
    command's one `name: error:` line from the one JSON reader (storage/json_files.py), exit
    2, no traceback, nothing written (each module's main(argv), in this process)."""
    import albert_tf.convert.__main__ as convert
    from albert_tf import export_tfhub, run_classifier, run_pretraining
    from albert_tf.storage import outputs

    bad_config = tmp_path / "bad_config.json"
    bad_config.write_text('{\n  "vocab_size": 30000,\n  oops\n}\n', encoding="utf-8")
    config = write_tiny_config(tmp_path)
    spm, data = tmp_path / "spm.model", tmp_path / "data"
    spm.write_bytes(b"a stand-in: the model is not read before the config")
    data.mkdir()
    (data / "train.tsv").write_text("src\t1\t\tfine\n", encoding="utf-8")
    run = tmp_path / "run"
    outputs.claim_run(str(run))  # an albert_tf run directory whose run_info.json is damaged
    (run / "run_info.json").write_text('{"sessions": [}', encoding="utf-8")
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text('{"model_type": "albert",,}', encoding="utf-8")
    classifier = ["--task_name=cola", f"--data_dir={data}", f"--spm_model_file={spm}", "--do_train",
                  "--max_seq_length=64"]
    config_error = (f"{bad_config}:3:3: not valid JSON (Expecting property name enclosed in double quotes): oops; "
                    "expected an albert_config.json (the model's settings): fix or replace the file.")
    run_info_error = (f"{run / 'run_info.json'}:1:15: not valid JSON (Expecting value): {{\"sessions\": [}}; expected "
                      "albert_tf's record of the run (run_info.json): it was damaged: restore it, or start anew in "
                      "another --output_dir.")
    cases = [
        (run_pretraining, [f"--albert_config_file={bad_config}", f"--input_file={spm}",
                           f"--output_dir={tmp_path / 'out1'}", "--do_train"], config_error),
        (run_pretraining, [f"--albert_config_file={config}", f"--input_file={spm}", f"--output_dir={run}",
                           "--do_train", "--max_seq_length=64"], run_info_error),
        (run_classifier, [*classifier, f"--albert_config_file={bad_config}", f"--output_dir={tmp_path / 'out2'}"],
         config_error),
        (run_classifier, [*classifier, f"--albert_config_file={config}", f"--output_dir={run}"], run_info_error),
        (export_tfhub, [f"--albert_config_file={bad_config}", f"--checkpoint={tmp_path / 'ckpt'}",
                        f"--spm_model_file={spm}", f"--export_path={tmp_path / 'out3'}"], config_error),
        (convert, ["--from=hf", f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'out4'}"],
         f"{tmp_path / 'hf' / 'config.json'}:1:25: not valid JSON (Expecting property name enclosed in double "
         "quotes): {\"model_type\": \"albert\",,}; expected a Hugging Face config.json: fix or replace the file."),
    ]
    for module, args, message in cases:
        result = run_in_process(module, args)
        name = "convert" if module is convert else module.__name__.split(".")[-1]
        assert result.returncode == 2 and "Traceback" not in result.stderr, (args, result.stderr[-2000:])
        assert _error_lines(result, name) == [f"{name}: error: {message}"], (args, result.stderr[-2000:])
    assert sorted(os.listdir(tmp_path)) == ["albert_config.json", "bad_config.json", "data", "hf", "run",
                                            "spm.model"]  # no output of any case
    assert sorted(os.listdir(run)) == [outputs.MARKER, "run_info.json"]


def test_help_shows_the_commands_docstring_and_flags_and_helpfull_the_process_flags():
    """--help (and -?): the module's docstring, then its flags, exit status 1 as absl's
    --help; --helpfull adds absl's own (--flagfile, --undefok)."""
    from albert_tf import run_classifier

    for flag in ("--help", "-?"):
        short = run_in_process(run_classifier, [flag])
        assert short.returncode == 1 and short.stderr == "", short
        assert short.stdout.startswith(run_classifier.__doc__ + "\nflags:\n"), short.stdout[:500]
        assert "--data_dir" in short.stdout and "--[no]do_train" in short.stdout
        assert "absl.flags:" not in short.stdout  # --flagfile and --undefok: --helpfull's
        assert short.stdout.endswith("\nTry --helpfull to get a list of all flags.\n")
    full = run_in_process(run_classifier, ["--helpfull"])
    assert full.returncode == 1 and full.stdout.startswith(run_classifier.__doc__ + "\nflags:\n")
    for flag in ("--data_dir", "--flagfile", "--undefok", "-v,--verbosity", "--[no]helpfull"):
        assert flag in full.stdout, flag


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
    from albert_tf.tasks.squad.task import SquadOptions

    v1, _ = run_squad_v1.options_from_flags(_flags(run_squad_v1, "--doc_stride=7", "--use_tpu", "--master=m"), "v1")
    defaults = SquadOptions(version="v1", output_dir="x")
    assert (v1.doc_stride, v1.strategy_and_tpu()) == (7, ("tpu", "m"))
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


# --- main twice in one process --------------------------------------------------------------

def _process_state():
    """What a command changes in the process and `cli.main` puts back."""
    import logging
    import random

    import keras
    import numpy as np
    from absl import flags
    from absl import logging as absl_logging
    from keras.src.backend.common import global_state
    from tensorflow.python.eager import context

    kind, keys, position, has_gauss, gauss = np.random.get_state()
    return {"dtype_policy": keras.config.dtype_policy().name, "absl_verbosity": absl_logging.get_verbosity(),
            "root_handlers": list(logging.root.handlers), "root_level": logging.root.level,
            "absl_level": logging.getLogger("absl").level, "global_flags_parsed": flags.FLAGS.is_parsed(),
            "python_random": random.getstate(), "numpy_random": (kind, keys.tolist(), position, has_gauss, gauss),
            "keras_seed": global_state.get_global_attribute("global_random_seed"), "tf_seed": context.global_seed()}


def _evaluation_args(records, config, output_dir, seed, policy):
    """run_pretraining's evaluation of its randomly initialised model (seeded by --random_seed)
    on 2 batches of `records`, read in file order: its results depend on the seed and policy."""
    return [f"--input_file={','.join(records)}", f"--output_dir={output_dir}", f"--albert_config_file={config}",
            "--max_seq_length=128", "--max_predictions_per_seq=20", "--eval_batch_size=8", "--max_eval_steps=2",
            "--nodo_train", "--do_eval", f"--random_seed={seed}", f"--dtype_policy={policy}"]


def _metrics(output_dir):
    with open(os.path.join(output_dir, "metrics.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.mark.real_process
def test_a_command_called_twice_in_one_process_gives_what_a_process_gives(pretraining_records, tmp_path):
    """run_pretraining A (seed 1, float32), B (seed 2, mixed_bfloat16), A again through
    main(argv) in this process, then A as a real process: A's metrics are the same all three
    times (and B's differ: the results depend on the seed and policy), and after each call
    Keras' dtype policy, the absl verbosity, Python's root logging handlers and levels, the
    global flags' state and the Python, NumPy, Keras and TensorFlow seeds are what they were."""
    import logging
    import random

    import numpy as np

    from albert_tf import run_pretraining

    records, _ = pretraining_records
    config = write_tiny_config(tmp_path, num_hidden_layers=2)
    random.seed(7)
    np.random.seed(7)
    level = logging.root.level
    logging.root.setLevel(logging.ERROR)  # neither absl's level nor Python's default: put back as it is
    try:
        before = _process_state()
        for run, seed, policy in (("a1", 1, "float32"), ("b", 2, "mixed_bfloat16"), ("a2", 1, "float32")):
            result = run_in_process(run_pretraining, _evaluation_args(records, config, tmp_path / run, seed, policy))
            assert result.returncode == 0, result.stderr[-3000:]
            assert _process_state() == before, run
    finally:
        logging.root.setLevel(level)
    process = subprocess.run([sys.executable, "-m", "albert_tf.run_pretraining",
                              *_evaluation_args(records, config, tmp_path / "a3", 1, "float32")],
                             capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    a1, b, a2, a3 = (_metrics(tmp_path / run) for run in ("a1", "b", "a2", "a3"))
    assert len(a1) == 1 and a1[0]["split"] == "eval" and a1[0]["examples"] == 16, a1
    assert a1 == a2 == a3
    assert b[0]["loss"] != a1[0]["loss"]


# --- real processes ---------------------------------------------------------------------------

# every entry point as a user starts it: (its name in messages, the command after `python`)
ENTRY_POINTS = [(name, ["-m", f"albert_tf.{name}"]) for name in (
    "run_pretraining", "run_classifier", "run_squad_v1", "run_squad_v2", "run_race", "export_tfhub", "export_litert",
    "param_table", "create_pretraining_data", "convert")] + [
    ("create_pretraining_data", [os.path.join("tools", "create_pretraining_data.py")])]


def _stand_in_tensorflow(directory, body):
    """A `tensorflow` package of `body` first on the path: the environment of a process."""
    (directory / "tensorflow").mkdir()
    (directory / "tensorflow" / "__init__.py").write_text(textwrap.dedent(body), encoding="utf-8")
    return dict(ENV, PYTHONPATH=f"{directory}{os.pathsep}{ROOT}")


def _start(argv, env, **kwargs):
    return subprocess.Popen([sys.executable, *argv], env=env, cwd=ROOT, text=True, **kwargs)


@pytest.mark.real_process
def test_every_entry_point_refuses_a_bad_flag_as_a_process(tmp_path):
    """`python -m albert_tf.X --no_such_flag=1` for every entry point (and the data tool's
    script, and a console script where installed): exit status 2 and exactly its one
    `name: error:` line, no traceback, without importing TensorFlow (a stand-in that would
    say so is first on the path)."""
    env = _stand_in_tensorflow(tmp_path, """
        import os
        os.write(2, b"the stand-in tensorflow was imported\\n")
        raise ImportError("the stand-in tensorflow")
        """)
    commands = list(ENTRY_POINTS)
    script = os.path.join(os.path.dirname(sys.executable), "albert-param-table")
    if os.path.exists(script):
        commands.append(("param_table", [script]))
    processes = [_start([*argv, "--no_such_flag=1"], env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _, argv in commands]
    for (name, argv), process in zip(commands, processes):
        out, err = process.communicate(timeout=120)
        assert (process.returncode, out, err) == (
            2, "", f"{name}: error: Unknown command line flag 'no_such_flag' (see --helpfull).\n"), argv


@pytest.mark.real_process
def test_help_exits_1_as_a_process(tmp_path):
    """--help as absl's: the command's docstring and flags on stdout, exit status 1 (no
    TensorFlow imported: the stand-in of the test above)."""
    from albert_tf import run_squad_v1

    env = _stand_in_tensorflow(tmp_path, """
        import os
        os.write(2, b"the stand-in tensorflow was imported\\n")
        raise ImportError("the stand-in tensorflow")
        """)
    done = subprocess.run([sys.executable, "-m", "albert_tf.run_squad_v1", "--help"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 1 and done.stderr == "", done.stderr
    assert done.stdout.startswith(run_squad_v1.__doc__ + "\nflags:\n") and "--predict_file" in done.stdout


@pytest.mark.real_process
def test_with_stderr_closed_a_command_that_loads_tensorflow_exits_with_its_status(tmp_path):
    """File descriptor 2 closed (`2>&-`): run_classifier loads TensorFlow (which writes its
    loading lines to fd 2) and refuses its input with exit status 2, promptly; Python has no
    sys.stderr then, so the message goes to stdout."""
    # the shell closes it (a preexec_fn would run Python in a fork of this threaded process)
    done = subprocess.run(["/bin/sh", "-c", 'exec "$0" "$@" 2>&-', sys.executable, "-m", "albert_tf.run_classifier",
                           "--task_name=tsv", f"--data_dir={tmp_path / 'missing'}", f"--output_dir={tmp_path / 'out'}",
                           "--do_train"], stdout=subprocess.PIPE, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert done.returncode == 2 and done.stdout == (
        "run_classifier: error: --spm_model_file is required without --albert_hub_module_handle.\n"), done.stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.real_process
def test_a_child_process_started_while_tensorflow_imports_does_not_hold_the_command(tmp_path):
    """A `tensorflow` whose import starts a process that outlives it (inheriting stdin,
    stdout and stderr, as a helper TensorFlow starts would) and then fails: the command
    reports the failure and exits at once, not when that process ends (60 s later; a
    filter of its stderr would wait for it)."""
    pid_file = tmp_path / "child.pid"
    env = _stand_in_tensorflow(tmp_path, f"""
        import subprocess
        child = subprocess.Popen(["sleep", "60"])
        with open({str(pid_file)!r}, "w") as f:
            f.write(str(child.pid))
        raise ValueError("the stand-in tensorflow stops here")
        """)
    start = time.monotonic()
    with open(tmp_path / "out.txt", "w") as out, open(tmp_path / "err.txt", "w") as err:
        process = _start(["-m", "albert_tf.run_classifier", "--task_name=tsv", f"--data_dir={tmp_path}",
                          f"--output_dir={tmp_path / 'out'}", "--do_train"], env, stdout=out, stderr=err)
    try:
        status = process.wait(timeout=50)
        seconds = time.monotonic() - start
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), 9)  # the stand-in's `sleep 60`, this test's own
    assert status == 2 and seconds < 30, seconds
    assert (tmp_path / "err.txt").read_text() == "run_classifier: error: the stand-in tensorflow stops here\n"


@pytest.mark.real_process
def test_logging_while_tensorflow_imports_is_shown_at_the_verbosity(tmp_path):
    """Python's and absl's logging.error while TensorFlow imports reach stderr at the default
    verbosity (a filter of TensorFlow's loading lines would take them for TensorFlow's
    own), their logging.info lines not; with -v 0 or --verbosity=0 those show too."""
    env = _stand_in_tensorflow(tmp_path, """
        import logging
        from absl import logging as absl_logging
        logging.error("Python logging: an error while TensorFlow imports")
        absl_logging.error("absl logging: an error while TensorFlow imports")
        logging.info("Python logging: information while TensorFlow imports")
        absl_logging.info("absl logging: information while TensorFlow imports")
        raise ValueError("the stand-in tensorflow stops here")
        """)
    command = ["-m", "albert_tf.run_classifier", "--task_name=tsv", f"--data_dir={tmp_path}",
               f"--output_dir={tmp_path / 'out'}", "--do_train"]
    runs = {verbosity: _start([*command, *verbosity], env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for verbosity in ((), ("-v", "0"), ("--verbosity=0",))}
    errors = [r"E\d{4} [\d:.]+ +\d+ __init__\.py:\d+\] Python logging: an error while TensorFlow imports",
              r"E\d{4} [\d:.]+ +\d+ __init__\.py:\d+\] absl logging: an error while TensorFlow imports"]
    infos = [r"I\d{4} [\d:.]+ +\d+ __init__\.py:\d+\] Python logging: information while TensorFlow imports",
             r"I\d{4} [\d:.]+ +\d+ __init__\.py:\d+\] absl logging: information while TensorFlow imports"]
    for verbosity, process in runs.items():
        out, err = process.communicate(timeout=120)
        expected = errors + (infos if verbosity else []) + [re.escape("run_classifier: error: the stand-in "
                                                                      "tensorflow stops here")]
        lines = err.splitlines()
        assert process.returncode == 2 and len(lines) == len(expected), (verbosity, err)
        for line, pattern in zip(lines, expected):
            assert re.fullmatch(pattern, line), (verbosity, line, pattern)


def test_absl_lines_of_a_command_called_in_process_reach_the_callers_stderr(capsys):
    """absl's handler writes to the stderr of absl's import; while a command runs through
    cli.main its lines go to the sys.stderr of the call (what capsys or redirect_stderr
    captures), and afterwards the handler is as it was."""
    from absl import logging

    from albert_tf import cli

    stream = logging.get_absl_handler().python_handler.stream
    assert cli.main("cmd", lambda fv: None, lambda f: logging.warning("hello from the command"), []) == 0
    err = capsys.readouterr().err
    assert err.startswith("W") and err.endswith("] hello from the command\n"), err
    assert logging.get_absl_handler().python_handler.stream is stream
