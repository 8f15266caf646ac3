"""albert_tf/cli.py's flag parsing as the real `python -m` entry points see it: a flag
absl cannot parse (a --flagfile that cannot be read, an unknown flag, a bad value) is a
one-line `name: error: ...` with exit status 2, like every other bad input."""

import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)


def _run(module, *args):
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=ENV, cwd=ROOT,
                          timeout=300)


def _error_lines(result, name):
    return [line for line in result.stderr.splitlines() if line.startswith(f"{name}: error: ")]


def test_a_missing_flagfile_exits_2_naming_it(tmp_path):
    missing = tmp_path / "nonexistent.flags"
    for name in ("run_pretraining", "run_classifier"):
        result = _run(f"albert_tf.{name}", f"--flagfile={missing}")
        assert result.returncode == 2, result.stderr[-2000:]
        assert _error_lines(result, name) == [
            f"{name}: error: --flagfile={missing}: No such file or directory. Check the flag file's path "
            f"(a relative path is read from the current directory, {ROOT})."], result.stderr[-2000:]
        assert "Traceback" not in result.stderr and "FATAL" not in result.stderr


def test_a_missing_nested_flagfile_is_the_one_named(tmp_path):
    outer = tmp_path / "outer.flags"
    outer.write_text(f"--flagfile={tmp_path / 'inner.flags'}\n", encoding="utf-8")
    result = _run("albert_tf.run_pretraining", f"--flagfile={outer}")
    assert result.returncode == 2, result.stderr[-2000:]
    [line] = _error_lines(result, "run_pretraining")
    assert line.startswith(f"run_pretraining: error: --flagfile={tmp_path / 'inner.flags'}: No such file")


def test_unknown_flags_and_bad_values_exit_2():
    result = _run("albert_tf.run_pretraining", "--no_such_flag=1")
    assert result.returncode == 2, result.stderr[-2000:]
    assert _error_lines(result, "run_pretraining") == [
        "run_pretraining: error: Unknown command line flag 'no_such_flag' (see --helpfull)."]
    result = _run("albert_tf.run_classifier", "--train_batch_size=many")
    assert result.returncode == 2, result.stderr[-2000:]
    [line] = _error_lines(result, "run_classifier")
    assert "--train_batch_size" in line and "many" in line and "Traceback" not in result.stderr
