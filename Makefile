# presk: make demo | make test. Everything installs into .venv from the pinned pyproject.
PY        ?= python3
VENV      := .venv
BIN       := $(VENV)/bin
STAMP     := $(VENV)/.installed
JOBS      ?= 2

.PHONY: help setup cc cc-install demo test test-all lint conformance c-conformance clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 12

setup: cc $(STAMP)  ## create .venv and install presk with its test and lint tools
	@# presk's C libraries (replay runtime, MLIR printer), built once here (quick if built)
	@$(BIN)/python -m presk.backends.install >/dev/null

# Every native kernel is linked by the system C compiler: installed here with apt-get where
# it can (as root), else set-up stops with one line naming what to install. (`cc`'s check
# is expanded after `cc-install` has run: make expands a recipe just before running it.)
FIND_CC := command -v cc || command -v gcc || command -v clang
cc-install:
	@{ $(FIND_CC); } >/dev/null || { [ "$$(id -u 2>/dev/null)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev \
	  >/dev/null; } || true

cc: cc-install  ## check for the system C compiler (installing gcc with apt-get where it can)
	$(if $(shell $(FIND_CC)),,$(error setup: no C compiler (cc, gcc or clang), which presk \
	  links native code with: install one (Debian, Ubuntu: apt-get install gcc; Fedora: dnf \
	  install gcc; macOS: xcode-select --install)))

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
	$(BIN)/ruff check presk tools tests bench test/lit/lit.cfg.py
	$(BIN)/ruff format --check presk tools tests bench test/lit/lit.cfg.py

clean:  ## remove the virtualenv, caches and the C libraries set-up built
	rm -rf $(VENV) .pytest_cache build *.egg-info presk/backends/built
