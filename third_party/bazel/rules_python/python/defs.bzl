"""rules_python's names for Bazel's native Python rules (third_party/bazel/README.md)."""

py_library = native.py_library
py_binary = native.py_binary
py_test = native.py_test
