"""BUILD stays consistent with the tree: every module, script and test has a target."""

import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import update_build  # noqa: E402


def _parse_build():
    """Evaluates BUILD with stub rule functions; returns {name: (kind, attrs)}."""
    targets = {}

    def rule(kind):
        def add(**attrs):
            assert attrs["name"] not in targets, f"duplicate target {attrs['name']}"
            targets[attrs["name"]] = (kind, attrs)
        return add

    env = {
        "load": lambda *a: None,
        "package": lambda **k: None,
        "exports_files": lambda *a, **k: None,
        "glob": lambda *a, **k: [],
        "requirement": lambda name: f"@pip//{name}",
        "py_library": rule("py_library"),
        "py_binary": rule("py_binary"),
        "py_test": rule("py_test"),
    }
    exec(compile(open(os.path.join(ROOT, "BUILD")).read(), "BUILD", "exec"), env)
    return targets


def test_every_module_and_test_has_a_target():
    targets = _parse_build()
    srcs = {s: kind for kind, attrs in targets.values() for s in attrs["srcs"]}
    files = update_build._python_files("albert_tf") + update_build._python_files("tools") + update_build._python_files("benchmarks")
    missing = [f for f in files if f not in srcs]
    tests = [f for f in update_build._python_files("tests") if os.path.basename(f).startswith("test_")]
    missing += [f for f in tests if srcs.get(f) != "py_test"]
    assert not missing, f"not in BUILD (run python tools/update_build.py): {missing}"
    for kind, attrs in targets.values():
        for src in attrs["srcs"]:
            assert os.path.exists(os.path.join(ROOT, src)), f"BUILD names a missing file {src}"
        for dep in attrs.get("deps", []):
            if dep.startswith(":"):
                assert dep[1:] in targets, f"{attrs['name']} depends on unknown {dep}"
            else:
                name = dep.split("//")[1]
                assert name in open(os.path.join(ROOT, "requirements.txt")).read(), dep


def test_build_is_what_the_generator_writes():
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "update_build.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_missing_module_is_detected(tmp_path, monkeypatch):
    """The check above would fail for a module BUILD does not know."""
    extra = os.path.join(ROOT, "albert_tf", "modeling", "zz_probe_for_build_test.py")
    with open(extra, "w") as f:
        f.write("import numpy\n")
    try:
        assert "albert_tf/modeling/zz_probe_for_build_test.py" in update_build.generate()
        with __import__("pytest").raises(AssertionError, match="zz_probe_for_build_test"):
            test_every_module_and_test_has_a_target()
    finally:
        os.remove(extra)


# Data flows one way; a room may import only the rooms listed for it.
ALLOWED_ROOMS = {
    "storage": set(),
    "modeling": {"storage"},
    "data": {"storage"},
    "training": {"storage", "modeling", "data"},
    "convert": {"storage", "modeling"},
    "export": {"storage", "modeling", "data"},
    "tasks": {"storage", "modeling", "data", "training", "export"},
}


def test_rooms_import_only_upstream_and_modeling_is_backend_neutral():
    problems = []
    for room, allowed in ALLOWED_ROOMS.items():
        for path in update_build._python_files(f"albert_tf/{room}"):
            names, _ = update_build._imports(path)
            for name in names:
                parts = name.split(".")
                if parts[0] == "albert_tf" and len(parts) > 1 and parts[1] in ALLOWED_ROOMS:
                    if parts[1] != room and parts[1] not in allowed:
                        problems.append(f"{path} imports {name}")
                if room == "modeling" and parts[0] in ("tensorflow", "tf_keras", "tensorflow_text"):
                    problems.append(f"{path} imports {name} (modeling uses keras and keras.ops only)")
    assert not problems, problems
