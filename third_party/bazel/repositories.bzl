"""The checkout's `.venv` as Bazel's Python (third_party/bazel/README.md): nothing is downloaded."""

def _checkout(ctx):
    """The checkout's root folder: where WORKSPACE is."""
    return ctx.path(Label("@//:WORKSPACE")).dirname

def _venv_python_impl(ctx):
    venv = _checkout(ctx).get_child(".venv")
    if not venv.get_child("bin").get_child("python").exists:
        fail("%s/bin/python is missing: run `make venv` first (README), then Bazel" % venv)

    # .venv may be a link to a venv elsewhere: the folder, not bin/python (itself a link to the
    # interpreter the venv was made from, which would leave the venv's packages behind).
    python = "%s/bin/python" % venv.realpath
    ctx.file("BUILD", "\n".join([
        'load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")',
        "",
        'py_runtime(name = "python3", interpreter_path = "%s", python_version = "PY3", stub_shebang = "#!%s")' % (
            python,
            python,
        ),
        "",
        'py_runtime_pair(name = "pair", py3_runtime = ":python3")',
        "",
        'toolchain(name = "toolchain", toolchain = ":pair", toolchain_type = "@bazel_tools//tools/python:toolchain_type")',
        "",
    ]))

venv_python = repository_rule(
    implementation = _venv_python_impl,
    local = True,  # found anew at each Bazel server start: .venv may have been made anew or moved
    doc = "The Python toolchain at the checkout's .venv/bin/python (`make venv`).",
)

def _venv_requirements_impl(ctx):
    names = []
    for line in ctx.read(ctx.path(Label("@//:requirements.txt"))).splitlines():
        name = line.split("#")[0]
        for end in ("=", "<", ">", "!", "~", ";", "[", " "):
            name = name.split(end)[0]
        if name and name not in names:
            names.append(name)
    targets = ['py_library(name = "%s")' % name for name in names]
    ctx.file("BUILD", "\n".join(['package(default_visibility = ["//visibility:public"])', ""] + targets) + "\n")
    ctx.file("requirements.bzl", "\n".join([
        '"""requirement(NAME): the package NAME of requirements.txt, which .venv holds."""',
        "",
        "def requirement(name):",
        '    return "@pip//:" + name',
        "",
    ]))

venv_requirements = repository_rule(
    implementation = _venv_requirements_impl,
    doc = "@pip: an empty py_library per package of requirements.txt (the packages are .venv's).",
)
