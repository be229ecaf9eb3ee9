# The two set-up commands: `make demo` and `make test`. Each creates .venv and
# installs the pinned dependencies (pyproject.toml) the first time it runs.

VENV      := .venv
BIN       := $(VENV)/bin
STAMP     := $(VENV)/.installed
JOBS      ?= auto
PYTEST    := PYTHONWARNINGS=error $(BIN)/python -m pytest
# The suite and a regression start hundreds of Python processes (seeds, CLI runs, cocotb's):
# without bytecode each compiles the package's modules again, a fifth of their CPU. They
# write it under build/pycache, even where PYTHONDONTWRITEBYTECODE is set: no __pycache__
# in the checkout.
RUN_ENV   := env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(CURDIR)/build/pycache

# The first interpreter on PATH that is new enough (softfloatpy and
# cocotb-coverage need >= 3.11); override with `make PYTHON=/path/to/python3`.
PYTHON ?= $(shell for p in python3 python3.14 python3.13 python3.12 python3.11; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& { command -v $$p; break; }; done)

.PHONY: demo test test-slow regress bench clean distclean

demo: $(STAMP)
	$(BIN)/tpu-rtl demo

# The layers first (import-linter's contracts in pyproject.toml; docs/architecture.md), then
# the suite. A test file runs in one worker, so its tests reuse the Amaranth simulations it
# compiles; the 40 longest tests are listed at the end (docs/regress.md keeps a run's).
test: $(STAMP)
	$(BIN)/lint-imports
	$(RUN_ENV) $(PYTEST) -n $(JOBS) --dist loadfile --durations=40 tests

# The tests marked slow: larger, longer and repeated checks kept out of `make test`.
test-slow: $(STAMP)
	$(RUN_ENV) $(PYTEST) -n $(JOBS) --dist loadfile -m slow tests

# The coverage-driven regression of every suite (docs/regress.md): never part of `make test`.
regress: $(STAMP)
	$(RUN_ENV) $(BIN)/tpu-rtl regress all --seeds 8 --until-covered -j 2 --sim verilator \
		--cover-goal 100 --timeout 7200

bench: $(STAMP)
	$(BIN)/tpu-rtl bench --update-docs

# --no-compile: byte-compiling every installed package took half the install (26 s of
# 53 s on a fresh clone); Python compiles the modules a run imports when it first imports
# them, and the suite keeps them under build/pycache (RUN_ENV).
$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: tpu-rtl needs Python >= 3.11 on PATH (or make PYTHON=...)" >&2; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[test,sim,fpga,cluster,fusesoc]'
	touch $@

clean:
	rm -rf build .pytest_cache

distclean: clean
	rm -rf $(VENV) *.egg-info
