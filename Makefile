# The two commands, on a fresh clone as on a working one:
#   make run    # the embedded default, end to end -> results/tables/mini/
#   make test   # the test suite
# Each first makes sure the virtual environment .venv is there and current: it is created when
# missing and reinstalled when pyproject.toml or constraints.txt changed since it was installed
# (their checksum is kept in .venv/.codyra-env); otherwise nothing is installed.
#   make run SNAKEMAKE_ARGS="--configfile config/mini_trace.yaml"    # another config, more options
#   make test PYTEST_ARGS="tests/test_config.py -x"                   # a part of the suite
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

STAMP := $(VENV)/.codyra-env
ENV_KEY = $(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1-2) [$(EXTRAS)] $(TORCH)
BIN := $(abspath $(VENV))/bin

.PHONY: env run test

env:
	@if [ "$$(cat $(STAMP) 2>/dev/null)" = "$(ENV_KEY)" ]; then \
		echo "$(VENV): up to date with pyproject.toml and constraints.txt"; \
	else \
		set -e; \
		[ -x $(VENV)/bin/python ] || { echo "creating $(VENV)"; $(PYTHON) -m venv $(VENV); }; \
		echo "installing into $(VENV): $(TORCH), codyra[$(EXTRAS)] with constraints.txt"; \
		$(PIP) install -q $(TORCH); \
		$(PIP) install -q -e ".[$(EXTRAS)]" -c constraints.txt; \
		echo "$(ENV_KEY)" > $(STAMP); \
	fi

run: env
	PATH="$(BIN):$$PATH" snakemake --cores $(CORES) $(TARGET) $(SNAKEMAKE_ARGS)

test: env
	PATH="$(BIN):$$PATH" pytest $(PYTEST_ARGS)
