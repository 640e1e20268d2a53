# Busbar developer entry points. GNU make; recipes are POSIX sh.
#   make run    start the Service Bus emulator (data under .data/)
#   make test   bootstrap .venv, lint, type-check and run every test

SHELL := /bin/sh
.DEFAULT_GOAL := help

# Interpreter used to create the virtualenv: python3.11 if it is on PATH, else python3
# (whose version check-python then verifies). Override with `make PYTHON=/path/to/python3.11 ...`.
PYTHON ?= $(if $(shell command -v python3.11 2>/dev/null),python3.11,python3)
VENV := .venv
STAMP := $(VENV)/.installed
VPY := $(VENV)/bin/python

AMQP_PORT ?= 5672
MANAGEMENT_PORT ?= 5300
PYTEST_ARGS ?= -n 4

# $(call require_py311,<interpreter>,<hint>): fail with a clear message unless the
# interpreter runs and is Python 3.11.x.
define require_py311
found=$$($(1) -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) \
  || { echo "error: cannot run '$(1)'. Busbar needs Python 3.11.x." >&2; \
       echo "  fix: $(2)" >&2; exit 1; }; \
case "$$found" in \
  3.11.*) ;; \
  *) echo "error: '$(1)' is Python $$found, but Busbar needs Python 3.11.x." >&2; \
     echo "  fix: $(2)" >&2; exit 1 ;; \
esac
endef

PY_HINT := install Python 3.11 (e.g. 'pyenv install 3.11' or 'apt-get install python3.11 python3.11-venv'), then re-run, or point at one with 'make PYTHON=/path/to/python3.11 <target>'.
VENV_HINT := remove the old virtualenv with 'make distclean' and re-run with Python 3.11 available.

.PHONY: help check-python install test lint typecheck format run bench clean distclean

help: ## List the targets
	@echo "Busbar targets:"
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z_-]+:.*## / { printf "  %-13s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
	@echo "Variables: PYTHON=$(PYTHON) AMQP_PORT=$(AMQP_PORT) MANAGEMENT_PORT=$(MANAGEMENT_PORT) PYTEST_ARGS=..."

check-python: ## Fail unless the interpreter (PYTHON=...) is Python 3.11.x
	@$(call require_py311,$(PYTHON),$(PY_HINT))
	@echo "ok: $(PYTHON) is Python 3.11"

install: $(STAMP) ## Create .venv and install requirements-dev.txt

# Re-runs whenever a requirements file changes; a failed install leaves the stamp out of date, so the
# next make retries. An existing .venv is reused, but only if it is Python 3.11.
$(STAMP): requirements.txt requirements-dev.txt
	@if [ ! -x $(VPY) ]; then \
	  $(call require_py311,$(PYTHON),$(PY_HINT)); \
	  echo "creating $(VENV) with $(PYTHON)"; \
	  $(PYTHON) -m venv $(VENV); \
	fi
	@$(call require_py311,$(VPY),$(VENV_HINT))
	$(VPY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(VPY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@touch $@

test: $(STAMP) ## Lint, format-check, type-check, then pytest (PYTEST_ARGS=... passes through)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VPY) -m mypy
	$(VPY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP) ## ruff check + ruff format --check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP) ## mypy --strict over the packages listed in pyproject.toml
	$(VPY) -m mypy

format: $(STAMP) ## Reformat and apply safe lint fixes
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Later `run` also starts the Functions dev host (devhost/) and the app against the emulator.
run: $(STAMP) ## Start the Service Bus emulator (AMQP_PORT, MANAGEMENT_PORT), data under .data/
	@mkdir -p .data/emulator
	$(VPY) -m emulator --config emulator/sample-config.json --data-dir .data/emulator \
	  --amqp-port $(AMQP_PORT) --management-port $(MANAGEMENT_PORT)

bench: $(STAMP) ## Run the emulator throughput benchmark
	$(VPY) bench/emulator_throughput.py

clean: ## Remove .data/ and tool caches (keeps .venv)
	rm -rf .data .mypy_cache .ruff_cache .pytest_cache .hypothesis
	rm -f bench/results/*.tmp
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} +

distclean: clean ## clean, and remove .venv too
	rm -rf $(VENV)
