"""BUILD stays consistent with the tree: every module, script and test has a target."""

import ast
import os

from tools import update_build

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _parse_build(text):
    """Evaluates BUILD text with stub rule functions; returns {name: (kind, attrs)}."""
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
        "filegroup": rule("filegroup"),
        "glob": lambda *a, **k: [],
        "requirement": lambda name: f"@pip//{name}",
        "py_library": rule("py_library"),
        "py_binary": rule("py_binary"),
        "py_test": rule("py_test"),
    }
    exec(compile(text, "BUILD", "exec"), env)
    return targets


def _problems(root, text):
    """What BUILD `text` gets wrong about the tree at `root`."""
    targets = _parse_build(text)
    srcs = {s: kind for kind, attrs in targets.values() for s in attrs["srcs"]}
    files = sum((update_build._python_files(d, root) for d in ("albert_tf", "tools", "benchmarks")), [])
    problems = [f"not in BUILD: {f}" for f in files if f not in srcs]
    tests = [f for f in update_build._python_files("tests", root) if os.path.basename(f).startswith("test_")]
    problems += [f"no py_test: {f}" for f in tests if srcs.get(f) != "py_test"]
    requirements = _requirement_names()
    for kind, attrs in targets.values():
        for src in attrs["srcs"]:
            if not os.path.exists(os.path.join(root, src)):
                problems.append(f"BUILD names a missing file {src}")
        for dep in attrs.get("deps", []):
            if dep.startswith(":"):
                if dep[1:] not in targets:
                    problems.append(f"{attrs['name']} depends on unknown {dep}")
            elif dep.split("//")[1] not in requirements:
                problems.append(f"{attrs['name']} needs {dep}, which requirements.txt lacks")
    return problems + _cycles(targets)


def _cycles(targets):
    """Bazel refuses a dependency cycle between targets (e.g. a storage module importing
    `from albert_tf import X`, which depends on the package's __init__): one line per cycle found."""
    deps = {name: [d[1:] for d in attrs.get("deps", []) if d[1:] in targets] for name, (_, attrs) in targets.items()}
    found, state = [], {}  # state: 1 on the path, 2 done

    def visit(name, path):
        state[name] = 1
        for dep in deps[name]:
            if state.get(dep) == 1:
                found.append("dependency cycle: " + " -> ".join(path[path.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep, path + [dep])
        state[name] = 2

    for name in sorted(deps):
        if name not in state:
            visit(name, [name])
    return found


def _requirement_names():
    """The packages of requirements.txt, read as third_party/bazel/repositories.bzl reads them
    for `@pip` (one empty py_library each, what BUILD's `requirement(NAME)` names)."""
    import re

    with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as f:
        return {re.split(r"[=<>!~;\[ ]", line.split("#")[0])[0] for line in f.read().splitlines()} - {""}


def _workspace_repositories():
    """{name: rule} of the repositories WORKSPACE declares; local_repository as its path."""
    repositories = {}

    def rule(kind):
        return lambda name, path=None: repositories.update({name: path if kind == "local" else kind})

    env = {"workspace": lambda **k: None, "load": lambda *a: None, "register_toolchains": lambda *a: None,
           "local_repository": rule("local"), "venv_python": rule("venv_python"),
           "venv_requirements": rule("venv_requirements")}
    exec(compile(open(os.path.join(ROOT, "WORKSPACE"), encoding="utf-8").read(), "WORKSPACE", "exec"), env)
    return repositories


# What Bazel 4.2.3's own @bazel_tools loads beside BUILD's repositories (Debian's bazel-bootstrap).
BAZEL_TOOLS_REPOSITORIES = {"rules_cc", "rules_java", "remote_coverage_tools"}


def test_bazel_finds_every_repository_in_the_checkout():
    """`bazel build //...` downloads nothing (docs/testing.md "Bazel"): each repository BUILD
    loads from, and each Bazel's tools name, is a local stand-in under third_party/bazel/ or a rule
    of its repositories.bzl (@pip, @venv_python: the checkout's .venv); .venv, the outputs and
    Bazel's links are ignored by Bazel and git."""
    import re

    repositories = _workspace_repositories()
    loaded = set(re.findall(r'^load\("@(\w+)//', open(os.path.join(ROOT, "BUILD"), encoding="utf-8").read(), re.M))
    assert loaded | BAZEL_TOOLS_REPOSITORIES | {"venv_python"} <= set(repositories), repositories
    assert repositories["pip"] == "venv_requirements" and repositories["venv_python"] == "venv_python"
    for name, path in repositories.items():
        if name not in ("pip", "venv_python"):
            assert path == f"third_party/bazel/{name}" and os.path.exists(os.path.join(ROOT, path, "WORKSPACE")), name
    ignored = open(os.path.join(ROOT, ".bazelignore"), encoding="utf-8").read().split()
    assert {".venv", "demo_output", "results"} <= set(ignored), ignored
    assert "/bazel-*" in open(os.path.join(ROOT, ".gitignore"), encoding="utf-8").read().split()


def test_every_module_and_test_has_a_target():
    problems = _problems(ROOT, open(os.path.join(ROOT, "BUILD")).read())
    assert not problems, "run python tools/update_build.py: " + "; ".join(problems)


def test_build_is_what_the_generator_writes():
    from conftest import run_in_process

    result = run_in_process(update_build, ["--check"])  # `python tools/update_build.py --check`
    assert result.returncode == 0, result.stderr


def test_a_dependency_cycle_is_detected():
    text = """
py_library(name = "a", srcs = [], deps = [":b"])
py_library(name = "b", srcs = [], deps = [":c"])
py_library(name = "c", srcs = [], deps = [":a"])
"""
    assert _cycles(_parse_build(text)) == ["dependency cycle: a -> b -> c -> a"]


def test_a_missing_module_is_detected(tmp_path):
    """On a copy of the tree (the real package is never touched): a module BUILD does not
    know is reported, and the regenerated BUILD knows it."""
    import shutil

    for folder in ("albert_tf", "tools", "tests", "benchmarks"):
        shutil.copytree(os.path.join(ROOT, folder), tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*", "results"))
    (tmp_path / "albert_tf" / "modeling" / "zz_probe_for_build_test.py").write_text("import numpy\n")
    stale = open(os.path.join(ROOT, "BUILD")).read()
    assert _problems(str(tmp_path), stale) == ["not in BUILD: albert_tf/modeling/zz_probe_for_build_test.py"]
    fresh = update_build.generate(str(tmp_path))
    assert "albert_tf/modeling/zz_probe_for_build_test.py" in fresh and not _problems(str(tmp_path), fresh)
    assert not os.path.exists(os.path.join(ROOT, "albert_tf", "modeling", "zz_probe_for_build_test.py"))


# Data flows one way; a room may import only the rooms listed for it.
ALLOWED_ROOMS = {
    "storage": set(),
    "modeling": {"storage"},
    "data": {"storage"},
    "training": {"storage", "modeling", "data"},
    "convert": {"storage", "modeling", "data"},  # data: the tokenizer written with --to=hf / keras_hub
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


# json.loads of strings that are no file's text, by module ({relative path: count}); none now
JSON_LOADS_OF_STRINGS = {}


def test_every_json_file_is_read_by_the_one_reader():
    """Every JSON or JSON-lines file albert_tf and its tools read goes through
    albert_tf/storage/json_files.py (one wording for every error): no other module calls
    json.load or json.loads, but for the strings listed in JSON_LOADS_OF_STRINGS."""
    import re

    found = {}
    for folder in ("albert_tf", "tools"):
        for path in update_build._python_files(folder):
            text = open(os.path.join(ROOT, path), encoding="utf-8").read()
            count = len(re.findall(r"\bjson\.loads?\(|\bfrom json import\b", text))
            if count and path != "albert_tf/storage/json_files.py":
                found[path] = count
    assert found == JSON_LOADS_OF_STRINGS, (
        f"{found}: read a JSON file with albert_tf.storage.json_files.read_json (or read_json_lines)")


# File operations outside the file layer (albert_tf/storage/files.py), by module ({relative path:
# count}), on paths that are no user's input or output, or local by nature:
RAW_FILE_OPERATIONS = {
    "albert_tf/storage/provenance.py": 3,  # /proc/cpuinfo and albert_tf's own sources (the source hash)
    "albert_tf/storage/lock.py": 1,  # the lock file's identity (os.stat): flock is a local lock by nature
}
RAW_FILE_OPERATION = (r"(?<![\w.])open\(|\bos\.path\.(?:exists|isdir|isfile|lexists|getsize|getmtime|islink)\(|"
                      r"\bos\.(?:makedirs|mkdir|listdir|replace|remove|rename|unlink|walk|scandir|stat)\(|\bshutil\.|"
                      r"\bglob\.glob\(|\bgfile\.|\bpathlib\b")


def test_every_path_goes_through_the_one_file_layer():
    """Every input and output of albert_tf goes through albert_tf/storage/files.py (the
    standard library for a local path, tf.io.gfile for a URL: docs/outputs.md): no other
    module calls open(), os.path's or os's file operations, shutil, glob, pathlib or
    tf.io.gfile, but for the paths listed in RAW_FILE_OPERATIONS."""
    import re

    found = {}
    for path in update_build._python_files("albert_tf"):
        if path == "albert_tf/storage/files.py":
            continue
        count = len(re.findall(RAW_FILE_OPERATION, open(os.path.join(ROOT, path), encoding="utf-8").read()))
        if count:
            found[path] = count
    assert found == RAW_FILE_OPERATIONS, (
        f"{found}: read and write through albert_tf.storage.files (files.open, files.exists, ...), so that a "
        "gs:// path works like a local one")


README_MAX_LINES = 400


def _markdown_links(path):
    """The targets of [text](target) links in a Markdown file, outside code blocks and spans."""
    import re

    text = re.sub(r"^```.*?^```", "", open(path, encoding="utf-8").read(), flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\[[^\]\n]*\]\(([^)\s]+)\)", text)


def test_readme_is_short_and_every_relative_link_in_the_docs_exists():
    """README.md stays a user's guide (the depth lives in docs/); a link in README.md or
    docs/*.md that names a missing file (a page renamed, a passage moved) fails."""
    import glob

    readme = os.path.join(ROOT, "README.md")
    with open(readme, encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move the depth to a page in docs/")
    pages = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    broken, linked = [], set()
    for path in [readme] + pages:
        for target in _markdown_links(path):
            if "://" in target or target.startswith(("#", "mailto:")):
                continue
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), target.split("#")[0]))
            linked.add(resolved)
            if not os.path.exists(resolved):
                broken.append(f"{os.path.relpath(path, ROOT)}: {target}")
    assert not broken, "links to missing files: " + "; ".join(broken)
    unlinked = [os.path.relpath(p, ROOT) for p in pages if p not in linked]
    assert not unlinked, f"docs pages no page links to: {unlinked}"


def _quick_problems(root, entries):
    """What tests/quick_tests.txt's `entries` get wrong about the tests under `root`: a
    tests/test_*.py without an entry, an entry that names no test function of its module."""
    import ast
    import glob

    paths = glob.glob(os.path.join(root, "tests", "test_*.py"))
    modules = sorted(os.path.relpath(p, root).replace(os.sep, "/") for p in paths)
    problems = [f"{m} has no quick test" for m in modules if m not in {e.split("::")[0] for e in entries}]
    problems += [f"{e} is listed twice" for e in sorted({e for e in entries if entries.count(e) > 1})]
    for entry in entries:
        module, _, name = entry.partition("::")
        if module not in modules:
            problems.append(f"{entry}: {module} is not a tests/test_*.py")
            continue
        tree = ast.parse(open(os.path.join(root, module), encoding="utf-8").read())
        tests = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        tests |= {f"{c.name}::{n.name}" for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body
                  if isinstance(n, ast.FunctionDef)}
        function = name.split("[")[0]
        if function not in tests or not function.split("::")[-1].startswith("test_"):
            problems.append(f"{entry}: {module} has no test {function}")
    return problems


def test_every_test_module_has_a_quick_test(request):
    """tests/quick_tests.txt, what `make test-quick` runs: at least one test of each
    tests/test_*.py, each entry a test function of its module, and (of the modules this
    session collected: all of them under `make test` and `make test-quick`) one of its tests,
    parametrization id included."""
    from conftest import quick_tests

    problems = _quick_problems(ROOT, quick_tests())
    problems += [f"{e} names no collected test" for e in getattr(request.config, "quick_entries_naming_no_test", [])]
    assert not problems, "tests/quick_tests.txt: " + "; ".join(problems)


def test_a_module_without_a_quick_test_is_detected(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_one():\n    pass\n\n\ndef helper():\n    pass\n")
    (tmp_path / "tests" / "test_b.py").write_text("class TestB:\n    def test_two(self):\n        pass\n")
    assert _quick_problems(str(tmp_path), ["tests/test_a.py::test_one[x]", "tests/test_b.py::TestB::test_two"]) == []
    assert _quick_problems(str(tmp_path), ["tests/test_a.py::test_one", "tests/test_a.py::helper",
                                           "tests/test_a.py::test_one", "tests/test_c.py::test_three"]) == [
        "tests/test_b.py has no quick test", "tests/test_a.py::test_one is listed twice",
        "tests/test_a.py::helper: tests/test_a.py has no test helper",
        "tests/test_c.py::test_three: tests/test_c.py is not a tests/test_*.py"]


# How tests call a command (docs/testing.md): in this process through its `main(argv)`
# (conftest.run_in_process); a real process only in a test marked real_process. The tools are the
# package `tools` (`from tools import make_squad_data`), never loaded by path or through sys.path.
LOADING_BY_PATH = {"spec_from_file_location", "load_tool", "captured_main"}  # (the last two: the former helpers)
SYS_PATH_EDITS = {"sys.path.insert", "sys.path.append", "sys.path.extend"}
PROCESS_MODULES = ("subprocess", "multiprocessing")
PROCESS_CALLS = ("system", "popen", "fork", "forkpty", "execv", "execve", "execvp", "spawnv", "posix_spawn")


def _starts_a_process(function):
    """Whether the function's own code starts a process (subprocess, multiprocessing, os.system, ...)."""
    for node in ast.walk(function):
        if isinstance(node, ast.Import) and any(a.name in PROCESS_MODULES for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module in PROCESS_MODULES:
            return True
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
                node.value.id in PROCESS_MODULES or (node.value.id == "os" and node.attr in PROCESS_CALLS)):
            return True
    return False


def _loading_by_path(tree):
    """The names in `tree` that load a module by path or edit sys.path."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute, ast.FunctionDef, ast.alias)):
            ident = {ast.Name: "id", ast.Attribute: "attr", ast.FunctionDef: "name", ast.alias: "name"}[type(node)]
            if getattr(node, ident) in LOADING_BY_PATH:
                found.add(getattr(node, ident))
        if isinstance(node, ast.Attribute) and ast.unparse(node) in SYS_PATH_EDITS:
            found.add(ast.unparse(node))
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if ast.unparse(target).startswith("sys.path"):
                    found.add(f"{ast.unparse(target)} =")
    return sorted(found)


def _call_style_problems(root):
    """What the test files under `root` get wrong about calling commands: a module loaded by path
    or through sys.path edits (any tests/*.py), a test that starts a process (itself, through a
    function of its module or a fixture of its module) without the real_process marker (on the test,
    one of its parameters, or the module's pytestmark)."""
    import glob

    problems = []
    for path in sorted(glob.glob(os.path.join(root, "tests", "*.py"))):
        name = os.path.relpath(path, root).replace(os.sep, "/")
        tree = ast.parse(open(path, encoding="utf-8").read(), name)
        problems += [f"{name}: {word}" for word in _loading_by_path(tree)]
        if not os.path.basename(path).startswith("test_"):
            continue
        functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        functions += [m for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body
                      if isinstance(m, ast.FunctionDef)]
        # what each function uses: the names in its code and the fixtures it takes
        uses = {f: {a.arg for a in f.args.args} | {c.id for c in ast.walk(f) if isinstance(c, ast.Name)}
                for f in functions}
        starting = {f for f in functions if _starts_a_process(f)}
        while True:  # through the module's functions it calls and the module's fixtures it takes
            names = {f.name for f in starting}
            more = {f for f in functions if f not in starting and uses[f] & names}
            if not more:
                break
            starting |= more
        module_marked = any(isinstance(n, ast.Assign) and "pytestmark" in ast.unparse(n.targets[0])
                            and "real_process" in ast.unparse(n.value) for n in tree.body)
        for test in (f for f in functions if f.name.startswith("test_") and f in starting):
            if module_marked or any("real_process" in ast.unparse(d) for d in test.decorator_list):
                continue
            problems.append(f"{name}::{test.name} starts a process without the real_process marker")
    return problems


def test_tests_call_commands_in_process_and_mark_the_tests_that_start_processes():
    problems = _call_style_problems(ROOT)
    assert not problems, "tests/conftest.py run_in_process, docs/testing.md: " + "; ".join(problems)


def test_a_process_without_the_marker_and_a_tool_loaded_by_path_are_detected(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "helper.py").write_text(
        "import importlib.util\nimport sys\n\nsys.path.insert(0, 'tools')\nsys.path[:] = []\n"
        "spec = importlib.util.spec_from_file_location('x', 'tools/x.py')\n")
    (tmp_path / "tests" / "test_a.py").write_text(
        "import subprocess\nimport sys\n\nimport pytest\n\n\n"
        "def _run():\n    return subprocess.run([sys.executable, '-c', 'pass'])\n\n\n"
        "@pytest.fixture\ndef started():\n    return _run()\n\n\n"
        "def test_direct():\n    subprocess.run(['true'])\n\n\n"
        "def test_through_a_helper():\n    _run()\n\n\n"
        "def test_through_a_fixture(started):\n    pass\n\n\n"
        "@pytest.mark.real_process\ndef test_marked():\n    _run()\n\n\n"
        "@pytest.mark.parametrize('how', [pytest.param('process', marks=pytest.mark.real_process), 'main'])\n"
        "def test_one_parameter_marked(how):\n    _run()\n\n\n"
        "def test_in_process():\n    pass\n")
    (tmp_path / "tests" / "test_b.py").write_text(
        "import os\n\nimport pytest\n\npytestmark = pytest.mark.real_process\n\n\n"
        "def test_module_marked():\n    os.system('true')\n")
    assert _call_style_problems(str(tmp_path)) == [
        "tests/helper.py: spec_from_file_location", "tests/helper.py: sys.path.insert",
        "tests/helper.py: sys.path[:] =",
        "tests/test_a.py::test_direct starts a process without the real_process marker",
        "tests/test_a.py::test_through_a_helper starts a process without the real_process marker",
        "tests/test_a.py::test_through_a_fixture starts a process without the real_process marker"]


DOCSTRING_MAX_LINES = 40


def _long_docstrings(root, limit=DOCSTRING_MAX_LINES):
    """'path:line name (N lines)' for every module or class docstring under root/albert_tf
    longer than `limit` source lines (the literal's lines, its quotes included)."""
    import ast

    found = []
    for path in update_build._python_files("albert_tf", root):
        tree = ast.parse(open(os.path.join(root, path), encoding="utf-8").read(), filename=path)
        for node in [tree] + [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
            first = node.body[0] if node.body else None
            if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                continue
            lines = first.end_lineno - first.lineno + 1
            if lines > limit:
                name = "module" if node is tree else f"class {node.name}"
                found.append(f"{path}:{first.lineno} {name} ({lines} lines)")
    return found


def test_module_and_class_docstrings_are_contracts_of_at_most_40_lines():
    """A module or class docstring states the contract (arguments, inputs, outputs, shapes,
    errors, a short example) in at most 40 lines; design reasoning goes to a page in docs/
    (e.g. docs/design_encoder.md), measurements to benchmarks/README.md (issue 64)."""
    long = _long_docstrings(ROOT)
    assert not long, (f"docstrings over {DOCSTRING_MAX_LINES} lines (move the reasoning to docs/, "
                      "link it in one line): " + "; ".join(long))


def test_a_long_docstring_is_detected(tmp_path):
    package = tmp_path / "albert_tf"
    package.mkdir()
    body = "\n".join(f"line {i}" for i in range(40))
    (package / "a.py").write_text(f'"""{body}\n"""\n\n\nclass Short:\n    """One line."""\n\n\n'
                                  f'class Long:\n    """{body}\n    """\n\n    def f(self):\n        """{body}"""\n')
    (package / "b.py").write_text(f'"""{body}"""\n')  # 40 lines: within the limit
    assert _long_docstrings(str(tmp_path)) == ["albert_tf/a.py:1 module (41 lines)",
                                               "albert_tf/a.py:49 class Long (41 lines)"]


def test_the_package_neither_imports_nor_cites_benchmarks():
    """benchmarks/ sits on top of the package: no module of albert_tf imports it or names it
    (a figure or a script a package docstring cites would move with the benchmarks)."""
    found = [f"{path}:{n}" for path in update_build._python_files("albert_tf")
             for n, line in enumerate(open(os.path.join(ROOT, path), encoding="utf-8"), 1) if "benchmarks" in line]
    assert not found, f"the package names benchmarks/: {found}"
