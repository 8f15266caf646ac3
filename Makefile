# The two commands of the README: `make demo` and `make test`.
# Each creates .venv from requirements.txt (and requirements-torch.txt) when it is missing or out of date.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements.txt
export TF_CPP_MIN_LOG_LEVEL ?= 3
JEMALLOC ?= $(firstword $(wildcard /usr/lib/*-linux-gnu/libjemalloc.so.2 /usr/lib64/libjemalloc.so.2))

.PHONY: venv test demo build clean

$(STAMP): requirements.txt requirements-torch.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "albert_tf needs Python 3.11 (found %s); set PYTHON=/path/to/python3.11" % sys.version.split()[0]'
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r requirements.txt
	$(VPY) -m pip install --quiet --no-deps -r requirements-torch.txt
	$(VPY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@cat requirements.txt requirements-torch.txt pyproject.toml > $(STAMP)

# .venv from requirements.txt, reinstalled when it or pyproject.toml changes.
venv: $(STAMP)

# The linter (pyproject.toml), then the suite on two workers, one intra-op thread each
# (why: benchmarks/README.md "The test suite"), with jemalloc where the system has it
# (Debian's libjemalloc2; .ci/run installs it): the same results, less time ("The allocator").
test: $(STAMP)
	$(VENV)/bin/ruff check --quiet .
	$(if $(JEMALLOC),LD_PRELOAD=$(JEMALLOC)) TF_NUM_INTRAOP_THREADS=1 $(VPY) -m pytest -n 2 --dist loadscope --no-loadscope-reorder tests

# The end-to-end demo on the built-in sample corpus (docs/demo.md).
demo: $(STAMP)
	$(VPY) tools/demo.py --output_dir=demo_output

# Regenerates BUILD from the tree.
build:
	$(VPY) tools/update_build.py

# Removes what demo and the tools' defaults write.
clean:
	rm -rf demo_output results .pytest_cache
