# The two commands, on a fresh clone as on a working one:
#   make run    # the embedded default, end to end -> results/tables/mini/
#   make test   # the test suite's fast tier; `make test-all` runs every test, as CI does
# Each first makes sure the virtual environment .venv is there and current: it is created when
# missing, reinstalled when pyproject.toml or constraints.txt changed since it was installed
# (their checksum is kept in .venv/.codyra-env) and created again when it is another checkout's
# (a copied or moved project; a link to another checkout's .venv, or to nothing, is replaced by a
# new one, never cleared through, which would empty the other checkout's); otherwise nothing is
# installed.
#   make run SNAKEMAKE_ARGS="--configfile config/mini_trace.yaml"    # another config, more options
#   make test PYTEST_ARGS="tests/experiment/test_config.py -x"                   # a part of the fast tier
#   make test-all PYTEST_ARGS="tests/workflow"                        # a part of the whole suite
# torch comes from the machine's wheels (pip's find-links on the reference machine); the rest is
# pinned by constraints.txt. A cluster uses conda instead: environment.yml (docs/cluster.md).

PYTHON ?= python3
VENV ?= .venv
PIP ?= $(VENV)/bin/python -m pip
TORCH ?= torch==2.14.1 torchvision==0.29.1
EXTRAS ?= dev,docs
CORES ?= 2
TARGET ?= all_tables
SNAKEMAKE_ARGS ?=
PYTEST_ARGS ?=
# the fast tier leaves out the tests marked slow (Snakemake grids, several trained tasks, SLURM,
# QEMU, DeepSpeed): pyproject.toml's markers
FAST_TIER ?= not slow

STAMP := $(VENV)/.codyra-env
ENV_KEY = $(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1-2) [$(EXTRAS)] $(TORCH)
BIN := $(abspath $(VENV))/bin
# The parts of .venv that would run another checkout's code, a line each (none: it is this
# checkout's). A copied or moved .venv keeps the original's editable install (its codyra imports
# from the original's src/) and launchers that start the original's python (their first line, or
# the second of a long path's sh trampoline). A reinstall would not rewrite the launchers of the
# packages already installed, so such a venv is created anew.
FOREIGN = $(VENV)/bin/python -c 'import codyra; print(codyra.__file__)' 2>/dev/null \
	| grep -vxF "$(CURDIR)/src/codyra/__init__.py" | sed 's/^/its codyra is /'; \
	for launcher in snakemake pytest; do [ ! -f $(VENV)/bin/$$launcher ] \
	|| head -n2 $(VENV)/bin/$$launcher | grep -qF -e "\#!$(BIN)/" -e "'exec' \"$(BIN)/" \
	|| echo "bin/$$launcher starts $$(head -n1 $(VENV)/bin/$$launcher | cut -c3-)"; done

.PHONY: env run test test-all

env:
	@foreign="$$($(FOREIGN))"; \
	if [ -z "$$foreign" ] && [ "$$(cat $(STAMP) 2>/dev/null)" = "$(ENV_KEY)" ]; then \
		echo "$(VENV): up to date with pyproject.toml and constraints.txt"; \
	else \
		set -e; \
		if [ -n "$$foreign" ]; then \
			echo "$(VENV) is another checkout's, whose code it would run:"; echo "$$foreign" | sed 's/^/  /'; \
		fi; \
		if [ -L $(VENV) ] && { [ -n "$$foreign" ] || [ ! -e $(VENV) ]; }; then \
			echo "the link to $$(readlink $(VENV)) is replaced by a new $(VENV); what it points to is left alone"; \
			rm $(VENV); \
		fi; \
		if [ ! -x $(VENV)/bin/python ]; then echo "creating $(VENV) for $(CURDIR)"; $(PYTHON) -m venv $(VENV); \
		elif [ -n "$$foreign" ]; then echo "creating it anew for $(CURDIR)"; $(PYTHON) -m venv --clear $(VENV); \
		fi; \
		echo "installing into $(VENV): $(TORCH), codyra[$(EXTRAS)] with constraints.txt"; \
		$(PIP) install -q $(TORCH); \
		$(PIP) install -q -e ".[$(EXTRAS)]" -c constraints.txt; \
		echo "$(ENV_KEY)" > $(STAMP); \
	fi

run: env
	PATH="$(BIN):$$PATH" snakemake --cores $(CORES) $(TARGET) $(SNAKEMAKE_ARGS)

test: env
	PATH="$(BIN):$$PATH" pytest -m "$(FAST_TIER)" $(PYTEST_ARGS)

test-all: env
	PATH="$(BIN):$$PATH" pytest $(PYTEST_ARGS)
