# vq — the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

unexport PYTHONDONTWRITEBYTECODE

.PHONY: help venv demo check lint types contracts test test-fast soak bench clean

help:
	@echo "make demo    create the venv, start a daemon on a temp state root, run real jobs"
	@echo "make test    lint + types + import contracts + the whole test suite (bounded chaos),"
	@echo "             with the SSH/Slurm testbed up as root (docs/testbed.md)"
	@echo "make test-fast  the unit, architecture, contract, fuzz and in-process tiers only"
	@echo "             (needs no testbed and no root; minutes, not the whole suite)"
	@echo "make soak    the long chaos/soak runs, and the property tests with fresh examples"
	@echo "make bench   benchmarks against task-spooler and the physical floor"
	@echo "make check   ruff, mypy --strict, import-linter"

$(STAMP): pyproject.toml scripts/ensure-python.sh
	@scripts/ensure-python.sh $(PYTHON) $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m compileall -q src > /dev/null
	@touch $@

venv: $(STAMP)

demo: $(STAMP)
	@scripts/demo.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

types: $(STAMP)
	$(VENV)/bin/mypy

contracts: $(STAMP)
	$(VENV)/bin/lint-imports

check: lint types contracts

test: check
	@scripts/install-test-deps.sh
	@scripts/testbed/with-testbed.sh scripts/run-tests.sh $(PY) -m "not slow" $(PYTEST_ARGS)

# The tiers that need no testbed and start no `vq` process per command: unit,
# architecture, contract, fuzz, and tests/inprocess (the daemon on a thread, the CLI through
# Click's runner, the web app through an in-process ASGI client; docs: README "Development").
# VQ_TEST_WORKERS=<n> sets the pytest-xdist workers (default one per CPU; 0: no workers).
FAST_TIERS := tests/unit tests/architecture tests/contract tests/fuzz tests/inprocess

test-fast: $(STAMP)
	$(PY) -m pytest -n $${VQ_TEST_WORKERS:-$$(nproc)} -m "not slow" --suite-phase=hermetic \
	  $(FAST_TIERS) $(PYTEST_ARGS)

# The slow runs, and every property test with fresh examples (tests/hypothesis_profiles.py):
# `make test` draws the same ones every time. VQ_HYPOTHESIS_SEED=<seed> replays a soak's draws.
soak: $(STAMP)
	@scripts/install-test-deps.sh
	@seed=$${VQ_HYPOTHESIS_SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; \
	echo "make soak: hypothesis seed $$seed (replay: make soak VQ_HYPOTHESIS_SEED=$$seed)"; \
	scripts/run-tests.sh $(PY) -m "slow or hypothesis" --hypothesis-profile=vq-soak \
	  --hypothesis-seed=$$seed $(PYTEST_ARGS)

bench: $(STAMP)
	@scripts/install-bench-deps.sh
	$(PY) -m compileall -q src > /dev/null
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache .hypothesis bench/results.json
