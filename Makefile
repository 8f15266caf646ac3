# The two commands of the README: `make demo` and `make test`.
# Each creates .venv from requirements.txt when it is missing or out of date.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements.txt
export TF_CPP_MIN_LOG_LEVEL ?= 3

.PHONY: venv test demo build clean

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "albert_tf needs Python 3.11 (found %s); set PYTHON=/path/to/python3.11" % sys.version.split()[0]'
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r requirements.txt
	$(VPY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@cat requirements.txt pyproject.toml > $(STAMP)

venv: $(STAMP)

# Two workers on CI's two cores, one per core. Three were faster on 2026-11-23 (396 tests in
# 933 s against 1195 s with two), when each TensorFlow process ran an intra-op thread per core
# and modules went out in xdist's order; with one intra-op thread per process and the slowest
# modules first, a third worker only contends:
# measured 2026-11-26 on the 2-core EPYC, 574 tests in 696 to 775 s with two (median of five
# 717 s) against 808 and 808 s with three; 1,305 to 1,448 CPU-seconds (median 1,323) against
# 1,538 and 1,550 for the same tests (ALBERT_TF_TEST_TIMELINE). Since then the tests' subprocesses
# are forked from a server that imported TensorFlow once (tests/forkserver.py): median of five
# runs 724.0 s (2026-11-26, against 761.7 s and 1,450 CPU-seconds without it that afternoon);
# with exports tracing once and two-layer models in the equivalence tests, 669.1 s (581 tests) and
# at the final code 768.8 s (582 tests) in a phase where the same in-process tests took 14% more.
# Three workers again on 2026-11-27 (fork server, 582 tests): 690.8 s and 1,314 test CPU-seconds,
# in a phase between those runs': no clear gain, so two.
# One intra-op thread per TensorFlow process: workers (and their subprocesses) on two cores
# otherwise contend for them (measured on the 2-core EPYC, the four slowest modules: 240 s
# against 253 s, 6.2 against 7.0 CPU-minutes). Modules go to workers in collection order
# (--no-loadscope-reorder; xdist's default hands out the modules with most tests first), and
# tests/conftest.py collects the slowest first, so that no slow module runs alone at the end.
test: $(STAMP)
	TF_NUM_INTRAOP_THREADS=1 $(VPY) -m pytest -n 2 --dist loadscope --no-loadscope-reorder tests

demo: $(STAMP)
	$(VPY) tools/demo.py --output_dir=demo_output

build:
	$(VPY) tools/update_build.py

clean:
	rm -rf demo_output results .pytest_cache
