"""The extras of pyproject.toml: a command that needs a missing one stops naming it
(albert_tf/extras.py), each optional module is in the extra its message names, and both locks
(requirements.txt the newest, requirements-lower.txt the oldest) lie within the ranges."""

import os
import re
import sys
import tomllib

import pytest

from albert_tf import extras
from conftest import run_in_process

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RANGE = re.compile(r"([A-Za-z0-9_.-]+)>=([0-9.]+),<([0-9.]+)")  # pyproject.toml: >=OLDEST_TESTED,<NEXT_UNTESTED


def _name(text):
    return re.sub(r"[-_.]+", "-", text).lower()


def _version(text):
    return tuple(int(part) for part in text.split("."))


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _ranges():
    """package -> [(extra or None for the core, lower, upper)] of pyproject.toml."""
    project = _project()
    found = {}
    for extra, lines in [(None, project["dependencies"]), *project["optional-dependencies"].items()]:
        for line in lines:
            if _name(line.split("[")[0]) == _name(project["name"]):
                continue  # an extra that takes others (`test`)
            match = RANGE.fullmatch(line)
            assert match, f"pyproject.toml: {line!r} (extra {extra}) is not NAME>=OLDEST,<NEXT"
            found.setdefault(_name(match[1]), []).append((extra, match[2], match[3]))
    return found


def _pins(name):
    """package -> [version] pinned in requirements file `name` (a package may have one a marker)."""
    pins = {}
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].split(";", 1)[0].strip()
            if line:
                package, equals, version = line.partition("==")
                assert equals and re.fullmatch(r"[0-9.]+", version), f"{name}: {line} is not an exact pin"
                pins.setdefault(_name(package), []).append(version)
    return pins


def test_a_missing_extra_names_its_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "keras_hub", None)  # as when it is not installed
    with pytest.raises(extras.MissingExtraError) as caught:
        extras.require("keras_hub", "--from=keras_hub")
    assert str(caught.value) == ("--from=keras_hub needs keras-hub, which is not installed: "
                                 "pip install 'albert_tf[convert]'.")
    assert isinstance(caught.value, ImportError) and isinstance(caught.value, ValueError)
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)
    with pytest.raises(extras.MissingExtraError, match=re.escape("pip install 'albert_tf[litert]'")):
        extras.require("ai_edge_litert.interpreter", "run_litert")


def test_each_optional_module_is_in_the_extra_its_message_names():
    ranges = _ranges()
    for module, (package, extra) in extras.EXTRAS.items():
        assert extra in [e for e, _, _ in ranges.get(_name(package), [])], (module, package, extra)
    assert set(_project()["optional-dependencies"]) == {"hub", "beam", "litert", "convert", "test"}


def test_the_locks_lie_within_the_ranges():
    """Every pin of requirements.txt lies in each range pyproject.toml gives its package;
    requirements-lower.txt pins each range's lower bound; both pin every core dependency."""
    ranges = _ranges()
    core = {name for name, uses in ranges.items() if any(e is None for e, _, _ in uses)}
    for lock in ("requirements.txt", "requirements-lower.txt"):
        pins = _pins(lock)
        assert core <= set(pins), f"{lock} lacks {sorted(core - set(pins))}"
        for name, versions in pins.items():
            assert name in ranges, f"{lock}: {name} is in no range of pyproject.toml"
            for extra, lower, upper in ranges[name]:
                for version in versions:
                    where = f"{lock}: {name}=={version}, pyproject.toml's {name}>={lower},<{upper} ({extra or 'core'})"
                    assert _version(lower) <= _version(version) < _version(upper), where
                    assert lock == "requirements.txt" or version == lower, where + ": not its lower bound"


def test_commands_without_their_extra_exit_2_naming_it(monkeypatch, tmp_path):
    from albert_tf import create_pretraining_data, export_litert
    from albert_tf.convert import __main__ as convert
    from test_data_writer import write_fixed_corpus, write_fixed_model

    corpus = write_fixed_corpus(str(tmp_path / "corpus.txt"), documents=4)
    model = write_fixed_model(str(tmp_path / "fixed.model"))
    (tmp_path / "source").mkdir()
    cases = [
        ("keras_hub", convert, ["--from=keras_hub", "--to=albert_tf", f"--input={tmp_path}/source",
                                f"--output={tmp_path}/out"],
         "convert: error: --from=keras_hub needs keras-hub, which is not installed: pip install 'albert_tf[convert]'."),
        ("apache_beam", create_pretraining_data, [f"--input_file={corpus}", f"--output_file={tmp_path}/x.tfrecord",
                                                  f"--spm_model_file={model}", "--runner=DirectRunner"],
         "create_pretraining_data: error: --runner=DirectRunner needs apache-beam, which is not installed: "
         "pip install 'albert_tf[beam]'."),
        ("ai_edge_litert", export_litert, [f"--init_checkpoint={tmp_path}/source", f"--output={tmp_path}/m.tflite"],
         "export_litert: error: export_litert needs ai-edge-litert, which is not installed: "
         "pip install 'albert_tf[litert]'."),
    ]
    for module, command, args, message in cases:
        with monkeypatch.context() as patch:
            patch.setitem(sys.modules, module, None)
            result = run_in_process(command, args)
        assert result.returncode == 2, (module, result.stderr[-1500:])
        assert result.stderr.strip().splitlines()[-1] == message
        assert "Traceback" not in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "fixed.model", "source"]
