"""Entry point of every py_test in BUILD: runs pytest on the file given as argument."""

import sys

import pytest

if __name__ == "__main__":
    sys.exit(pytest.main(["-q", *sys.argv[1:]]))
