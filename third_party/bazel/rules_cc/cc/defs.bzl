"""rules_cc's names for Bazel's native C++ rules, which @bazel_tools loads (third_party/bazel/README.md)."""

cc_binary = native.cc_binary
cc_library = native.cc_library
cc_test = native.cc_test
cc_toolchain = native.cc_toolchain
cc_toolchain_suite = native.cc_toolchain_suite
