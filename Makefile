# The two commands of the README: `make demo` and `make test`; also `make test-quick` (a few tests of each
# module) and `make venv` (the environment alone). Each creates .venv from requirements.txt (and
# requirements-torch.txt) when it is missing, out of date, or was made by another interpreter.
#
# The interpreter: CPython 3.11 to 3.13 (pyproject.toml's requires-python). `make ... PYTHON=/path/to/python`
# picks one; without PYTHON, the first of these that runs and is supported (README "The two commands"):
# the interpreter that made .venv (its stamp's first line), python3.11, python3.12, python3.13, python3.
# VENV and REQUIREMENTS pick another venv and lock: `make test-quick VENV=.venv-lower
# REQUIREMENTS=requirements-lower.txt` runs the quick tier on the oldest versions of pyproject.toml's ranges.

VENV ?= .venv
REQUIREMENTS ?= requirements.txt
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements.txt
SUPPORTED := CPython 3.11 to 3.13
IS_SUPPORTED := import sys; sys.exit(not (sys.implementation.name == "cpython" and (3, 11) <= sys.version_info[:2] <= (3, 13)))
MADE_BY := $(shell sed -n '1s/^interpreter: //p' $(STAMP) 2>/dev/null)
ifeq ($(origin PYTHON),undefined)
PYTHON := $(or $(shell for p in $(firstword $(MADE_BY)) python3.11 python3.12 python3.13 python3; do \
    $$p -c '$(IS_SUPPORTED)' 2>/dev/null && command -v $$p && break; done),python3)
NONE_FOUND := , and no python3.11, python3.12 or python3.13 on PATH runs
endif
# The interpreter itself (a venv's base, links resolved) and its version: "PATH VERSION", what the stamp records.
PY_ID := $(shell $(PYTHON) -c 'import os, platform, sys; \
    print(os.path.realpath(getattr(sys, "_base_executable", sys.executable)), platform.python_version())' 2>/dev/null)
ifneq ($(PY_ID),$(MADE_BY))
NEW_INTERPRETER := new-interpreter
endif
# Where pip's configured indexes lack requirements-torch.txt's +cpu build (PyPI has none).
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
export TF_CPP_MIN_LOG_LEVEL ?= 3
JEMALLOC ?= $(firstword $(wildcard /usr/lib/*-linux-gnu/libjemalloc.so.2 /usr/lib64/libjemalloc.so.2))

.PHONY: venv test test-quick demo which-python build clean new-interpreter

# The stamp is out of date when the interpreter is not the one that made .venv: .venv is removed
# and made anew (never reused by another interpreter); and when albert_tf/__init__.py (its
# __version__, which the editable install's metadata records) changes.
$(STAMP): $(REQUIREMENTS) requirements-torch.txt pyproject.toml albert_tf/__init__.py $(NEW_INTERPRETER)
	@$(PYTHON) -c '$(IS_SUPPORTED)' 2>/dev/null || { echo "albert_tf needs $(SUPPORTED) (pyproject.toml's requires-python);" \
	    "PYTHON=$(PYTHON) is $$($(PYTHON) -c 'import platform; print(platform.python_implementation(), platform.python_version())' 2>/dev/null || echo 'not a Python that runs')$(NONE_FOUND)." \
	    "Set PYTHON=/path/to/python3.11, 3.12 or 3.13 (README \"The two commands\")." >&2; exit 1; }
	@if [ -e $(VENV) ] && [ "$(MADE_BY)" != "$(PY_ID)" ]; then \
	    test -f $(VENV)/pyvenv.cfg || { echo "$(VENV) is not a virtual environment: remove it, or set VENV=" >&2; exit 1; }; \
	    echo "$(VENV) was made by $(or $(MADE_BY),another interpreter or an unfinished build); making it anew with $(PY_ID)"; \
	    rm -rf $(VENV); fi
	@test -x $(VPY) || $(firstword $(PY_ID)) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r $(REQUIREMENTS)
	@$(VPY) -m pip install --quiet --no-deps -r requirements-torch.txt 2>/dev/null || { \
	    echo "requirements-torch.txt: the CPU build of PyTorch from $(TORCH_INDEX)"; \
	    $(VPY) -m pip install --quiet --no-deps --extra-index-url $(TORCH_INDEX) -r requirements-torch.txt; }
	$(VPY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@{ echo "interpreter: $(PY_ID)"; cat $(REQUIREMENTS) requirements-torch.txt pyproject.toml; } > $(STAMP)

new-interpreter:

# VENV from REQUIREMENTS (.venv from requirements.txt), reinstalled when it or pyproject.toml changes, made anew
# for another interpreter.
venv: $(STAMP)

# The linter (pyproject.toml), then the suite on two workers, one intra-op thread each
# (why: docs/testing.md), with jemalloc where the system has it
# (Debian's libjemalloc2; .ci/run installs it): the same results, less time.
PYTEST := $(if $(JEMALLOC),LD_PRELOAD=$(JEMALLOC)) TF_NUM_INTRAOP_THREADS=1 $(VPY) -m pytest -n 2 --dist loadscope \
    --no-loadscope-reorder
test: $(STAMP)
	$(VENV)/bin/ruff check --quiet .
	$(PYTEST) tests

# The same, on the tests tests/quick_tests.txt names (at least one of each module; docs/testing.md).
test-quick: $(STAMP)
	$(VENV)/bin/ruff check --quiet .
	$(PYTEST) -m quick tests

# The end-to-end demo on the built-in sample corpus (docs/demo.md).
demo: $(STAMP)
	$(VPY) tools/demo.py --output_dir=demo_output

# The interpreter the targets above use, "PATH VERSION" (.ci/run asks).
which-python:
	@echo "$(PY_ID)"

# Regenerates BUILD from the tree.
build:
	$(VPY) tools/update_build.py

# Removes what demo and the tools' defaults write.
clean:
	rm -rf demo_output results .pytest_cache
