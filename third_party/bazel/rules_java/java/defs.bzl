"""rules_java's names for Bazel's native Java rules, which @bazel_tools loads (third_party/bazel/README.md)."""

java_binary = native.java_binary
java_import = native.java_import
java_runtime = native.java_runtime
java_toolchain = native.java_toolchain
