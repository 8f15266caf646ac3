"""Writes BUILD: one Bazel target per module and test, deps taken from the imports.

    python tools/update_build.py          # rewrite BUILD
    python tools/update_build.py --check  # exit 1 if BUILD is stale

`bazel test //...` runs it offline on the checkout's .venv (WORKSPACE, third_party/bazel/README.md);
tests/test_build.py keeps BUILD equal to what this tool generates and checks every module and test has its target.

Targets: `py_library` per module under albert_tf/ (named by path, e.g.
`albert_tf_modeling_config`; `data`: the package data it reads, DATA) and `tools` (tools/__init__.py),
`py_binary` per script in tools/ and benchmarks/ and per albert_tf module with a `__main__` block
(`<library>_main`), `py_test` per tests/test_*.py (run through tests/bazel_pytest_main.py),
`tests_support` for the shared test helpers, `tests_data` for the files the tests read (TESTS_DATA).
"""

import ast
import dataclasses
import os
import sys

from albert_tf.storage.options import Command, option

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
if ROOT not in sys.path:  # run as a script: this checkout's albert_tf
    sys.path.insert(0, ROOT)

from albert_tf import entry_points  # light: albert_tf.cli is imported when main runs

# import name -> requirements.txt name
THIRD_PARTY = {
    "absl": "absl-py",
    "ai_edge_litert": "ai-edge-litert",
    "apache_beam": "apache-beam",
    "filelock": "filelock",
    "gcp_storage_emulator": "gcp-storage-emulator",
    "google": "protobuf",  # google.protobuf (albert_tf/data/spm_model_proto.py)
    "google_crc32c": "google-crc32c",
    "h5py": "h5py",
    "jax": "jax",
    "keras": "keras",
    "keras_hub": "keras-hub",
    "matplotlib": "matplotlib",
    "nbclient": "nbclient",
    "nbformat": "nbformat",
    "numpy": "numpy",
    "pytest": "pytest",
    "safetensors": "safetensors",
    "sentencepiece": "sentencepiece",
    "tensorflow": "tensorflow",
    "tensorflow_hub": "tensorflow-hub",
    "tensorflow_text": "tensorflow-text",
    "tf_keras": "tf-keras",
    "tokenizers": "tokenizers",
}
# packages needed at run time beside an import: nbclient starts an ipykernel kernel
RUNTIME_EXTRAS = {"nbclient": ("ipykernel",)}
# the package data a library reads beside it (pyproject.toml's package-data)
DATA = {"albert_tf/data/sample_corpus.py": ("albert_tf/data/sample_corpus.jsonl.gz",),
        "albert_tf/data/unicode_tables.py": ("albert_tf/data/unicode_*.json",),
        "albert_tf/data/spm_model_proto.py": ("albert_tf/data/sentencepiece_model.json",)}
# what the tests read beside their modules: the checkout's files but for .bazelignore's
TESTS_DATA = ("*", ".ci/**", "albert_tf/**", "benchmarks/**", "configs/**", "docs/**", "notebooks/**", "tests/**",
              "tools/**")
SUPPORT = ("tests/conftest.py", "tests/harness.py", "tests/convert_helpers.py", "tests/squad_official.py",
           "tests/bazel_pytest_main.py", "tests/real_data.py", "tests/made_by.py", "tests/gcs_emulator.py")


def _python_files(folder, root=ROOT):
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__"))
                             and os.path.relpath(os.path.join(dirpath, d), root) != os.path.join("tests", "data"))
        out += [os.path.relpath(os.path.join(dirpath, f), root) for f in sorted(filenames) if f.endswith(".py")]
    return out


def target_name(path):
    return path[: -len(".py")].replace("/", "_").replace("___init__", "")


def _module_of(path):
    module = path[: -len(".py")].replace("/", ".")
    return module[: -len(".__init__")] if module.endswith(".__init__") else module


def _imports(path, root=ROOT):
    tree = ast.parse(open(os.path.join(root, path), encoding="utf-8").read(), path)
    names, has_main = set(), False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            has_main = True
    return names, has_main


def _local_modules(root=ROOT):
    """Script modules imported by their siblings (tools/, tests/, benchmarks/ are on sys.path there),
    and the package `tools` (the tests import `tools.NAME`)."""
    return {"tools"} | {os.path.basename(p)[: -len(".py")] for folder in ("tools", "tests", "benchmarks")
                        for p in _python_files(folder, root)}


def _deps(path, libraries, root=ROOT):
    names, _ = _imports(path, root)
    internal, external = set(), set()
    local = _local_modules(root)
    for name in names:
        top = name.split(".")[0]
        if top in THIRD_PARTY:
            external.add(THIRD_PARTY[top])
            external.update(RUNTIME_EXTRAS.get(top, ()))
        elif top not in sys.stdlib_module_names and top not in local and top != "albert_tf":
            raise ValueError(f"{path} imports {top!r}, which is neither the standard library, albert_tf nor a "
                             "package in THIRD_PARTY: add it to requirements.txt and THIRD_PARTY.")
        elif top == "albert_tf":
            # the longest module prefix that is a library of ours
            parts = name.split(".")
            for n in range(len(parts), 0, -1):
                module = ".".join(parts[:n])
                if module in libraries:
                    internal.add(":" + target_name(libraries[module]))
                    break
        elif top in ("conftest", "harness") and not path.startswith("tests/"):
            raise ValueError(f"{path} imports test helpers")
    if path.startswith("tests/") and path not in SUPPORT:
        internal.add(":tests_support")
    own = ":" + target_name(path)
    internal.discard(own)
    return sorted(internal) + [f'requirement("{e}")' for e in sorted(external)]


def _rule(kind, name, srcs, deps, extra=()):
    lines = [f"{kind}(", f'    name = "{name}",']
    lines.append("    srcs = [" + ", ".join(f'"{s}"' for s in srcs) + "],")
    lines += [f"    {e}," for e in extra]
    if deps:
        lines.append("    deps = [")
        lines += [f"        {d}," if d.startswith("requirement") else f'        "{d}",' for d in deps]
        lines.append("    ],")
    lines.append(")")
    return "\n".join(lines)


def generate(root=ROOT):
    """The BUILD text for the tree at `root`."""
    library_files = _python_files("albert_tf", root)
    libraries = {_module_of(p): p for p in library_files}
    blocks = [
        "# Generated by tools/update_build.py from the imports; tests/test_build.py keeps it current.",
        'load("@rules_python//python:defs.bzl", "py_binary", "py_library", "py_test")',
        'load("@pip//:requirements.bzl", "requirement")',
        "",
        'package(default_visibility = ["//visibility:public"])',
        "",
        'exports_files(["requirements.txt"])',
    ]
    for path in library_files:
        data = ["data = glob([" + ", ".join(f'"{d}"' for d in DATA[path]) + "])"] if path in DATA else []
        blocks += ["", _rule("py_library", target_name(path), [path], _deps(path, libraries, root), data)]
        if _imports(path, root)[1]:
            blocks += ["", _rule("py_binary", target_name(path) + "_main", [path], [":" + target_name(path)],
                                 [f'main = "{path}"'])]
    for folder in ("tools", "benchmarks"):
        for path in _python_files(folder, root):
            if os.path.basename(path) == "__init__.py":  # tools/ as a package: no script of its own
                blocks += ["", _rule("py_library", target_name(path), [path], _deps(path, libraries, root))]
                continue
            blocks += ["", _rule("py_binary", target_name(path), [path], _deps(path, libraries, root),
                                 [f'main = "{path}"'])]
    support = [p for p in SUPPORT if os.path.exists(os.path.join(root, p))]
    support_deps = sorted({d for p in support for d in _deps(p, libraries, root)} - {":tests_support"})
    blocks += ["", _rule("py_library", "tests_support", support, support_deps)]
    globs = ", ".join(f'"{g}"' for g in TESTS_DATA)
    blocks += ["", "filegroup(", '    name = "tests_data",',
               f'    srcs = glob([{globs}], exclude = ["**/__pycache__/**"]),', ")"]
    for path in _python_files("tests", root):
        name = os.path.basename(path)
        if not name.startswith("test_"):
            continue
        blocks += ["", _rule(
            "py_test", target_name(path)[len("tests_"):], [path, "tests/bazel_pytest_main.py"],
            _deps(path, libraries, root),
            ['main = "tests/bazel_pytest_main.py"', f'args = ["$(location {path})"]',
             'data = [":tests_data"]'],
        )]
    return "\n".join(blocks) + "\n"


@dataclasses.dataclass(kw_only=True)
class UpdateBuildOptions:
    """update_build's one flag."""

    check: bool = option(False, "Exit 1 when BUILD is stale instead of rewriting it.")


RECORD = Command("update_build", ((UpdateBuildOptions, None),))


def define_flags(flag_values):
    from albert_tf import option_flags

    option_flags.define_command(flag_values, RECORD)


def run(f):
    text = generate()
    path = os.path.join(ROOT, "BUILD")
    if f.check:
        current = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        if current != text:
            print("BUILD is stale: run `python tools/update_build.py`", file=sys.stderr)
            return 1
        return 0
    from albert_tf.storage import atomic

    atomic.write_text(path, text)
    print(f"wrote {path}")
    return 0


main, entry = entry_points.command("update_build", define_flags, run)


if __name__ == "__main__":
    entry()
