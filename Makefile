# The two commands of the README: `make demo` and `make test`.
# Each creates .venv from requirements.txt (and requirements-torch.txt) when it is missing or out of date.

# The interpreter of .venv: the system's /usr/bin/python3.11 where it can make a venv (Debian's and
# Ubuntu's builds are optimized with profiles; why: benchmarks/README.md "The interpreter"), else
# python3.11 on PATH; PYTHON=/path/to/python3.11 chooses another. .venv is made anew when it changes.
PYTHON ?= $(shell for p in /usr/bin/python3.11 "$$(command -v python3.11)" "$$(command -v python3)"; do \
	[ -x "$$p" ] && "$$p" -c 'import ensurepip, venv' 2>/dev/null && { echo "$$p"; break; }; done)
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements.txt
export TF_CPP_MIN_LOG_LEVEL ?= 3

.PHONY: venv test demo build clean interpreter-changed

ifneq ($(shell cat $(VENV)/.interpreter 2>/dev/null),$(PYTHON))
$(STAMP): interpreter-changed
endif

$(STAMP): requirements.txt requirements-torch.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "albert_tf needs Python 3.11 (found %s); set PYTHON=/path/to/python3.11" % sys.version.split()[0]'
	@test "$$(cat $(VENV)/.interpreter 2>/dev/null)" = "$(PYTHON)" && test -x $(VPY) || $(PYTHON) -m venv --clear $(VENV)
	@echo "$(PYTHON)" > $(VENV)/.interpreter
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r requirements.txt
	$(VPY) -m pip install --quiet --no-deps -r requirements-torch.txt
	$(VPY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@cat requirements.txt requirements-torch.txt pyproject.toml > $(STAMP)

# .venv from requirements.txt, reinstalled when it or pyproject.toml changes.
venv: $(STAMP)

# The linter (pyproject.toml), then the suite on two workers, one intra-op thread each
# (why: benchmarks/README.md "The test suite").
test: $(STAMP)
	$(VENV)/bin/ruff check --quiet .
	TF_NUM_INTRAOP_THREADS=1 $(VPY) -m pytest -n 2 --dist loadscope --no-loadscope-reorder tests

# The end-to-end demo on the built-in sample corpus (docs/demo.md).
demo: $(STAMP)
	$(VPY) tools/demo.py --output_dir=demo_output

# Regenerates BUILD from the tree.
build:
	$(VPY) tools/update_build.py

# Removes what demo and the tools' defaults write.
clean:
	rm -rf demo_output results .pytest_cache
