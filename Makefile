# presk: make demo | make test. Everything installs into .venv from the pinned pyproject.
PY        ?= python3
VENV      := .venv
BIN       := $(VENV)/bin
STAMP     := $(VENV)/.installed
JOBS      ?= 2

.PHONY: help setup demo test test-all lint conformance c-conformance clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 12

setup: $(STAMP)  ## create .venv and install presk with its test and lint tools
	@# presk's C libraries (replay runtime, MLIR printer), built once here (quick if built)
	@$(BIN)/python -m presk.backends.install >/dev/null || echo "setup: a C library was not built (the replay runtime is then built at first use)"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test,lint]'
	@# Debian's chromium for the explain page's browser test, where apt-get can install it
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
	  >/dev/null; } || echo "setup: no chromium; tests/test_explain.py's browser test will skip"
	touch $@

demo: setup  ## train MiniGPT natively on the shipped corpus, check one step exactly, solve a budget
	@$(BIN)/python tools/demo.py

test: setup  ## pytest (fast tests, on JOBS workers) and the lit suite
	$(BIN)/python -m pytest -q -n $(JOBS)
	$(BIN)/lit -sv test/lit

test-all: setup  ## everything, tests marked slow included
	$(BIN)/python -m pytest -q -n $(JOBS) -m ''
	$(BIN)/lit -sv test/lit

conformance: setup  ## measure the machine backends against the reference into docs/conformance.md
	$(BIN)/python tools/conformance.py

c-conformance: setup  ## export every conformance case and tutorial entry to C, build, compare bits with --backend mlir
	$(BIN)/python tools/c_conformance.py

lint: setup  ## ruff lint and format check
	$(BIN)/ruff check presk passes tools tests test/lit/lit.cfg.py
	$(BIN)/ruff format --check presk passes tools tests test/lit/lit.cfg.py

clean:  ## remove the virtualenv, caches and the C libraries set-up built
	rm -rf $(VENV) .pytest_cache build *.egg-info presk/backends/built
