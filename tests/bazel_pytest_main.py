"""Entry point of every py_test in BUILD: pytest on the test file given as argument, its quick
tier only (`-m quick`, tests/quick_tests.txt), so `bazel test //...` runs what `make test-quick`
runs (docs/testing.md "Bazel") but for NOT_UNDER_BAZEL.

Bazel's sandbox mounts the checkout read-only and leaves HOME the user's: pytest's tmp_path and
HOME are under the target's own $TEST_TMPDIR, and pytest keeps no cache in the tree. TMPDIR stays
as outside Bazel (/tmp): a notebook kernel's Unix sockets need a path shorter than $TEST_TMPDIR's.
"""

import os
import sys

import pytest

# Quick tests that cannot hold under Bazel, and why: each runs in `make test-quick` and `make test`.
NOT_UNDER_BAZEL = {
    "tests/test_tool_outputs.py::test_the_shipped_files_a_tool_regenerates_are_its_own":
        "Bazel gives a test the checkout's files as links, which the output rule takes for no file of albert_tf's",
}

if __name__ == "__main__":
    args = ["-q", "-m", "quick", "-p", "no:cacheprovider"]
    scratch = os.environ.get("TEST_TMPDIR")
    if scratch:
        os.environ["HOME"] = scratch
        args.append("--basetemp=" + os.path.join(scratch, "pytest"))
    left_out = [test for test in NOT_UNDER_BAZEL if test.split("::")[0] in sys.argv[1:]]
    for test in left_out:
        print(f"bazel_pytest_main: {test} runs outside Bazel only: {NOT_UNDER_BAZEL[test]}")
        args += ["--deselect", test]
    status = pytest.main([*args, *sys.argv[1:]])
    # a module whose quick tests are all left out collects none
    sys.exit(0 if left_out and status == pytest.ExitCode.NO_TESTS_COLLECTED else status)
