"""export_tfhub, convert and param_table as entry points: cli.main style, exit 2 with a message."""

import csv
import importlib
import os

import pytest
from conftest import run_in_process

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SCRIPTS = {"albert-export-tfhub": "albert_tf.export_tfhub:entry", "albert-convert": "albert_tf.convert.__main__:entry",
           "albert-export-litert": "albert_tf.export_litert:entry",
           "albert-param-table": "albert_tf.param_table:entry"}


def _run(module, *args):
    """`python -m MODULE ARGS` in this process (the module's main(argv))."""
    if module == "albert_tf.convert":
        module += ".__main__"
    return run_in_process(importlib.import_module(module), args)


def test_console_scripts_point_at_entry_functions(monkeypatch):
    from albert_tf import cli

    calls = []
    monkeypatch.setattr(cli, "main", lambda name, define_flags, run, argv: calls.append((name, define_flags, run, argv))
                        or 3)
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    for script, target in SCRIPTS.items():
        assert f'{script} = "{target}"' in text
        module, name = target.split(":")
        mod = importlib.import_module(module)
        with pytest.raises(SystemExit) as exit_:  # the console script exits with main's status
            getattr(mod, name)()
        assert exit_.value.code == 3
        assert calls.pop() == (module.split(".")[1] if "__main__" in module else module.split(".")[-1],
                               mod.define_flags, mod.run, None)  # argv None: sys.argv[1:]


def test_bad_input_exits_2_with_the_path(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    result = _run("albert_tf.param_table", f"--output_dir={afile}")
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"param_table: error: --output_dir={afile} exists and is not a directory" in result.stderr
    assert "Traceback" not in result.stderr and afile.read_text() == "keep me"

    result = _run("albert_tf.convert", "--from=hf")
    assert result.returncode == 2 and "convert: error: --from, --input and --output are required." in result.stderr

    result = _run("albert_tf.export_tfhub", f"--albert_config_file={afile}")
    assert result.returncode == 2 and "export_tfhub: error: --checkpoint is required." in result.stderr

    result = _run("albert_tf.convert", "--from=hf", f"--input={tmp_path}", f"--output={tmp_path}/out", "stray")
    assert result.returncode == 2 and "convert: error: unexpected arguments ['stray']" in result.stderr


def _pending_variables():
    """Ids of the variables Keras will initialize when the next top-level StatelessScope ends."""
    from keras.src.backend.common import global_state

    return [id(v) for v in global_state.get_global_attribute("uninitialized_variables") or []]


def test_param_table_writes_the_rows_it_prints(tmp_path):
    from albert_tf import param_table

    out = tmp_path / "nested" / "results"
    pending = _pending_variables()
    assert param_table.write_table(str(out), stream=open(os.devnull, "w")) == 0
    # the 15 encoders it counted (2.5 billion weights) are not left for Keras to initialize at the
    # process's next model build (albert_tf.modeling.count_parameters)
    assert _pending_variables() == pending
    with open(out / "param_table.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["model"] for r in rows[:2]] == ["albert_base", "albert_large"]
    assert {r["model"]: int(r["built"]) for r in rows}["albert_base E=768 none"] == 109_081_344
    # no temporary left beside it; its marker (albert_tf.storage.outputs) lets a second run replace it
    assert sorted(os.listdir(out)) == [".param_table.csv.albert_tf_output.json", "param_table.csv"]
