# Busbar developer entry points. GNU make; recipes are POSIX sh.
#   make run    start the Service Bus emulator and Azurite (data under .data/) and devhost with function_app.py
#   make test   bootstrap .venv, lint, type-check and run every test
#   make redrive-plan / replay-dry-run ARCHIVE=...   the runbooks' command lines against the running app
#   make host-key / master-key   print the running app's keys (KEY=$$(make host-key))

SHELL := /bin/sh
.DEFAULT_GOAL := help

# Interpreters: $(call find_python,X.Y) is pythonX.Y from PATH when it runs (a pyenv shim for a version
# pyenv has not selected does not), else pyenv's newest X.Y.* (under PYENV_ROOT, `pyenv root` or ~/.pyenv),
# else python3 (whose version the require_python checks then verify). The app, emulator, devhost and tests
# run on Python 3.13 (Flex Consumption's, and azure-functions-runtime's minimum); the Spark replay job is
# also checked on 3.12, Databricks Runtime 17.3 LTS's. Override with `make PYTHON=/path/to/python3.13 ...`.
find_python = $(shell if python$(1) -c '' 2>/dev/null; then echo python$(1); else \
  root=$${PYENV_ROOT:-$$(pyenv root 2>/dev/null || echo "$$HOME/.pyenv")}; \
  p=$$(ls -d "$$root"/versions/$(1).*/bin/python$(1) 2>/dev/null | sort -V | tail -n 1); \
  echo "$${p:-python3}"; fi)
ifeq ($(origin PYTHON),undefined)
PYTHON := $(call find_python,3.13)
endif
ifeq ($(origin REPLAY_PYTHON),undefined)
REPLAY_PYTHON := $(call find_python,3.12)
endif
VENV := .venv
STAMP := $(VENV)/.installed
VPY := $(VENV)/bin/python

AMQP_PORT ?= 5672
MANAGEMENT_PORT ?= 5300
# HTTPS management port (ServiceBusAdministrationClient only speaks HTTPS); its CA file: $(DATA_DIR)/emulator.
MANAGEMENT_TLS_PORT ?= 5301
# The namespace's TLS port: the admin API (HTTPS) and AMQP over TLS on one port, as
# SERVICEBUS_FULLY_QUALIFIED_NAMESPACE=localhost:$(AMQPS_PORT) (the SDK's AMQP client always uses 5671 there).
AMQPS_PORT ?= 5671
HTTP_PORT ?= 7071
# Azurite (the Azure Storage emulator, the app's AzureWebJobsStorage under make run): its three services.
AZURITE_BLOB_PORT ?= 10000
AZURITE_QUEUE_PORT ?= 10001
AZURITE_TABLE_PORT ?= 10002
DATA_DIR ?= .data
# The settings file `make run` reads (created from local.settings.sample.json when missing).
SETTINGS ?= local.settings.json
# Entity-path prefix for `make run` (BUSBAR_HIERARCHY_NAMESPACE, overriding local.settings.json): queues
# and topics are provisioned, published to and listened on as <prefix>/<name>. Empty: the settings file's.
HIERARCHY_NAMESPACE ?=
# An emulator Config.json whose entities `make run` creates besides the app's (none by default: the namespace
# holds the app's topology only), e.g. EMULATOR_CONFIG=emulator/sample-config.json for the emulator's sample
# queues and topic (orders, orders-errors, wallet-transactions, bundle-1).
EMULATOR_CONFIG ?=
PYTEST_ARGS ?= -n 4
# Replay runbook: the archive to read (a directory or abfs:// URL, the app's BUSBAR_ARCHIVE_URL) and extra
# job parameters, e.g. REPLAY_ARGS="--reasons MaxDeliveryCountExceeded".
ARCHIVE ?=
REPLAY_ARGS ?=
# Re-drive runbook: extra options of `python -m shared.redrive`, e.g. REDRIVE_ARGS=--verbose (the Azure SDK's
# HTTP request and AMQP logging, quiet by default).
REDRIVE_ARGS ?=

# $(call require_python,<interpreter>,<X.Y>,<hint>): fail with a clear message unless the
# interpreter runs and is Python X.Y.x.
define require_python
found=$$($(1) -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) \
  || { echo "error: cannot run '$(1)'. Busbar needs Python $(2).x." >&2; \
       echo "  fix: $(3)" >&2; exit 1; }; \
case "$$found" in \
  $(2).*) ;; \
  *) echo "error: '$(1)' is Python $$found, but Busbar needs Python $(2).x." >&2; \
     echo "  fix: $(3)" >&2; exit 1 ;; \
esac
endef

PY_HINT := install Python 3.13 (e.g. 'pyenv install 3.13' or 'apt-get install python3.13 python3.13-venv'), then re-run, or point at one with 'make PYTHON=/path/to/python3.13 <target>'.
VENV_HINT := remove the old virtualenv with 'make distclean' and re-run with Python 3.13 available.
REPLAY_PY_HINT := install Python 3.12 (e.g. 'pyenv install 3.12' or 'apt-get install python3.12 python3.12-venv'), then re-run, or point at one with 'make REPLAY_PYTHON=/path/to/python3.12 <target>'.

# Java 17+ (Spark replay tests) and Node.js 18+ (Azurite, the Azure Storage emulator of make run and the tests).
define require_java17
ver=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -1); \
if [ -z "$$ver" ]; then \
  echo "error: Java not found. The Spark replay (spark/) and its tests need Java 17 or newer." >&2; \
  echo "  fix: install it (e.g. 'apt-get install openjdk-17-jre-headless') and make sure 'java' is on PATH." >&2; exit 1; \
elif [ "$$ver" -lt 17 ]; then \
  echo "error: $$(java -version 2>&1 | head -1) found, but the Spark replay needs Java 17 or newer." >&2; \
  echo "  fix: install Java 17 (e.g. 'apt-get install openjdk-17-jre-headless') and put it first on PATH." >&2; exit 1; \
fi
endef

define require_node18
ver=$$(node --version 2>/dev/null | sed -n 's/^v\([0-9][0-9]*\).*/\1/p'); \
if [ -z "$$ver" ] || ! command -v npm >/dev/null 2>&1; then \
  echo "error: Node.js/npm not found. make run and the tests run Azurite (npm package) as the local Azure Storage." >&2; \
  echo "  fix: install Node.js 18 or newer with npm (e.g. 'apt-get install nodejs npm')." >&2; exit 1; \
elif [ "$$ver" -lt 18 ]; then \
  echo "error: Node.js $$ver found, but Azurite needs Node.js 18 or newer." >&2; exit 1; \
fi
endef

# Chromium (Debian's package) for the console's browser tests, driven by Playwright through executable_path
# (Playwright's own browser download needs a network this project does not have). As root with apt-get,
# a missing Chromium is installed; otherwise the check says how to get one.
BUSBAR_CHROMIUM ?= $(shell command -v chromium 2>/dev/null)
define require_chromium
if [ -z "$(BUSBAR_CHROMIUM)" ] && ! command -v chromium >/dev/null 2>&1; then \
  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
    echo "Chromium not found: installing Debian's chromium package (the console's browser tests need it)"; \
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null \
      || { echo "error: 'apt-get install chromium' failed; install Chromium and re-run." >&2; exit 1; }; \
  else \
    echo "error: Chromium not found. The console's browser tests drive Debian's chromium with Playwright." >&2; \
    echo "  fix: install it (e.g. 'apt-get install chromium') or point BUSBAR_CHROMIUM at a Chromium binary." >&2; exit 1; \
  fi; \
fi
endef

AZURITE_STAMP := tools/azurite/node_modules/.installed
CHECKOV_VENV := tools/checkov/.venv
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
DEPLOY_SITE := $(VENV)/deploy-site
DEPLOY_STAMP := $(DEPLOY_SITE)/.installed
REPLAY_VENV := tools/replay312/.venv
REPLAY_STAMP := $(REPLAY_VENV)/.installed
# The replay's tests run again on 3.12 (Databricks Runtime 17.3 LTS's Python): every module of the wheel, the
# pure tests and one end-to-end replay of a small archive (about a minute beside the suite's Spark tests).
REPLAY_TESTS := tests/spark/test_wheel_modules.py tests/spark/test_params.py tests/spark/test_sender.py \
  tests/spark/test_transforms.py tests/spark/test_archive_in_spark.py \
  tests/spark/test_replay.py::test_a_replay_delivers_each_message_once_to_its_target_with_properties_and_sessions_in_order
REPLAY_PYTEST := $(REPLAY_VENV)/bin/python -m pytest $(REPLAY_TESTS)

.PHONY: help check-python check-replay-python check-java check-node check-chromium check-prereqs install test \
	test-replay lint typecheck format run host-key master-key redrive-plan redrive-run replay-dry-run replay \
	bench bench-all chaos clean distclean

help: ## List the targets
	@echo "Busbar targets:"
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z_-]+:.*## / { printf "  %-15s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
	@echo "Variables: PYTHON=$(PYTHON) AMQP_PORT=$(AMQP_PORT) MANAGEMENT_PORT=$(MANAGEMENT_PORT) MANAGEMENT_TLS_PORT=$(MANAGEMENT_TLS_PORT) AMQPS_PORT=$(AMQPS_PORT) HTTP_PORT=$(HTTP_PORT) AZURITE_BLOB_PORT=$(AZURITE_BLOB_PORT) AZURITE_QUEUE_PORT=$(AZURITE_QUEUE_PORT) AZURITE_TABLE_PORT=$(AZURITE_TABLE_PORT) DATA_DIR=$(DATA_DIR) SETTINGS=$(SETTINGS) HIERARCHY_NAMESPACE=$(HIERARCHY_NAMESPACE) ARCHIVE=$(ARCHIVE) REPLAY_ARGS=... REDRIVE_ARGS=... PYTEST_ARGS=..."

check-python: ## Fail unless the interpreter (PYTHON=...) is Python 3.13.x
	@$(call require_python,$(PYTHON),3.13,$(PY_HINT))
	@echo "ok: $(PYTHON) is Python 3.13"

check-replay-python: ## Fail unless REPLAY_PYTHON=... is Python 3.12.x (the replay job's check, Databricks' Python)
	@$(call require_python,$(REPLAY_PYTHON),3.12,$(REPLAY_PY_HINT))
	@echo "ok: $(REPLAY_PYTHON) is Python 3.12"

check-java: ## Fail unless Java 17+ is on PATH (Spark replay)
	@$(require_java17)

check-node: ## Fail unless Node.js 18+ and npm are on PATH (Azurite)
	@$(require_node18)

check-chromium: ## Fail unless Chromium is available (installs Debian's package when root)
	@$(require_chromium)

check-prereqs: check-python check-replay-python check-java check-node check-chromium ## All prerequisites beyond Python 3.13

install: $(STAMP) ## Create .venv and install requirements-dev.txt

# Re-runs whenever a requirements file changes; a failed install leaves the stamp out of date, so the
# next make retries. An existing .venv is reused, but only if it is Python 3.13.
$(STAMP): requirements.txt requirements-dev.txt
	@if [ ! -x $(VPY) ]; then \
	  $(call require_python,$(PYTHON),3.13,$(PY_HINT)); \
	  echo "creating $(VENV) with $(PYTHON)"; \
	  $(PYTHON) -m venv $(VENV); \
	fi
	@$(call require_python,$(VPY),3.13,$(VENV_HINT))
	$(VPY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(VPY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@touch $@

# Azurite (Azure Storage emulator) from the npm registry, pinned by tools/azurite/package-lock.json.
$(AZURITE_STAMP): tools/azurite/package.json tools/azurite/package-lock.json
	@$(require_node18)
	npm ci --prefix tools/azurite --no-audit --no-fund --loglevel=error
	@touch $@

# checkov in a virtualenv of its own (its dependencies would move packages .venv pins; see
# tools/checkov/requirements.txt): tests/infra/test_checkov.py runs it over infra/.
$(CHECKOV_STAMP): tools/checkov/requirements.txt $(STAMP)
	rm -rf $(CHECKOV_VENV)
	$(VPY) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r tools/checkov/requirements.txt
	@touch $@

# The replay job's own dependencies (spark/requirements.txt) and pytest on Python 3.12, apart from .venv: the
# wheel must work on Databricks Runtime 17.3 LTS, whose Python is 3.12 (`make test` runs REPLAY_TESTS there).
$(REPLAY_STAMP): tools/replay312/requirements.txt spark/requirements.txt
	@$(call require_python,$(REPLAY_PYTHON),3.12,$(REPLAY_PY_HINT))
	rm -rf $(REPLAY_VENV)
	$(REPLAY_PYTHON) -m venv $(REPLAY_VENV)
	$(REPLAY_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r tools/replay312/requirements.txt
	@touch $@

# requirements.txt alone, installed apart from .venv: the deployment-package test imports function_app.py
# with only this on sys.path, as the Functions host does after `func azure functionapp publish`.
$(DEPLOY_STAMP): requirements.txt $(STAMP)
	rm -rf $(DEPLOY_SITE)
	$(VPY) -m pip install --quiet --disable-pip-version-check --target $(DEPLOY_SITE) -r requirements.txt
	@touch $@

test: $(STAMP) $(AZURITE_STAMP) $(DEPLOY_STAMP) $(CHECKOV_STAMP) $(REPLAY_STAMP) ## Lint, format-check, type-check, pytest (PYTEST_ARGS=... passes through), the replay's tests on 3.12
	@$(require_java17)
	@$(require_chromium)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VPY) -m mypy
	$(VPY) -m pytest $(PYTEST_ARGS)
	$(REPLAY_PYTEST)

test-replay: $(REPLAY_STAMP) ## The Spark replay's tests on Python 3.12 (make test runs them too)
	@$(require_java17)
	$(REPLAY_PYTEST)

lint: $(STAMP) ## ruff check + ruff format --check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP) ## mypy --strict over the packages listed in pyproject.toml, tests/ included
	$(VPY) -m mypy

format: $(STAMP) ## Reformat and apply safe lint fixes
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Emulator (data under $(DATA_DIR)/emulator; with $(EMULATOR_CONFIG)'s entities, when set) + Azurite as
# AzureWebJobsStorage (data under $(DATA_DIR)/azurite, unless $(SETTINGS) names another storage account) +
# Busbar's topology (startup hook, when app/bootstrap.py exists) + devhost running function_app.py. Ctrl-C drains in-flight invocations and stops them all. devhost
# keeps the HTTP keys under $(DATA_DIR)/devhost/secrets and, while it runs, records the URLs and ports it
# listens on in $(DATA_DIR)/devhost/endpoints.json, where the command lines below read them.
run: $(STAMP) $(AZURITE_STAMP) ## Start emulator + Azurite + devhost with function_app.py (HTTP_PORT, AMQP_PORT, MANAGEMENT_PORT, MANAGEMENT_TLS_PORT, AMQPS_PORT, AZURITE_BLOB_PORT, AZURITE_QUEUE_PORT, AZURITE_TABLE_PORT, DATA_DIR, SETTINGS, HIERARCHY_NAMESPACE, EMULATOR_CONFIG)
	@$(require_node18)
	@mkdir -p $(DATA_DIR)/emulator
	@[ -f "$(SETTINGS)" ] || { cp local.settings.sample.json "$(SETTINGS)"; \
	  echo "created $(SETTINGS) from local.settings.sample.json"; }
	exec $(APP_ENV) \
	  $(VPY) -m devhost --app function_app.py --settings "$(SETTINGS)" --host-json host.json \
	  --port $(HTTP_PORT) --data-dir $(DATA_DIR)/devhost --with-emulator --emulator-data-dir $(DATA_DIR)/emulator \
	  $(if $(EMULATOR_CONFIG),--emulator-config "$(EMULATOR_CONFIG)") --amqp-port $(AMQP_PORT) \
	  --management-port $(MANAGEMENT_PORT) --management-tls-port $(MANAGEMENT_TLS_PORT) --amqps-port $(AMQPS_PORT) \
	  --with-azurite --azurite-data-dir $(DATA_DIR)/azurite --azurite-blob-port $(AZURITE_BLOB_PORT) \
	  --azurite-queue-port $(AZURITE_QUEUE_PORT) --azurite-table-port $(AZURITE_TABLE_PORT) \
	  --startup-hook app.bootstrap:provision --master-key-url ops_console

# The runbooks' command lines with the app's own settings: $(SETTINGS), the endpoints the running `make run`
# recorded under $(DATA_DIR) (its actual ports), and HIERARCHY_NAMESPACE as make run takes it.
APP_ENV = $(if $(HIERARCHY_NAMESPACE),env BUSBAR_HIERARCHY_NAMESPACE=$(HIERARCHY_NAMESPACE))
APP_SETTINGS = --settings "$(SETTINGS)" --data-dir "$(DATA_DIR)"
REPLAY_PATHS = --archive_path "$(ARCHIVE)" --ledger_path "$(DATA_DIR)/replay/ledger" \
  --report_path "$(DATA_DIR)/replay/reports"
define require_archive
[ -n "$(ARCHIVE)" ] || { echo "error: name the archive to replay: make $@ ARCHIVE=<directory or abfs:// URL>" >&2; \
  echo "  (the app's BUSBAR_ARCHIVE_URL; the sample's is .data/archive)" >&2; exit 2; }
endef

# The keys make run serves with (fixed in $(SETTINGS), else kept under $(DATA_DIR)/devhost/secrets), printed
# alone so a shell can take them: KEY=$$(make host-key). No prerequisite: nothing else may print first.
host-key: ## Print the host key of the app make run serves (function-level HTTP calls)
	@$(VPY) -m devhost.http.show_key host --settings "$(SETTINGS)" --data-dir "$(DATA_DIR)/devhost"

master-key: ## Print the master key (the console, admin endpoints) of the app make run serves
	@$(VPY) -m devhost.http.show_key master --settings "$(SETTINGS)" --data-dir "$(DATA_DIR)/devhost"

redrive-plan: $(STAMP) ## Dead-letter re-drive dry run against the running app: what a run would do (SETTINGS, DATA_DIR, REDRIVE_ARGS)
	$(APP_ENV) $(VPY) -m shared.redrive plan $(APP_SETTINGS) $(REDRIVE_ARGS)

redrive-run: $(STAMP) ## One dead-letter re-drive run against the running app (re-drives and archives; REDRIVE_ARGS=--verbose logs the SDK's requests)
	$(APP_ENV) $(VPY) -m shared.redrive run $(APP_SETTINGS) $(REDRIVE_ARGS)

replay-dry-run: $(STAMP) ## Replay plan for ARCHIVE=... (REPLAY_ARGS="--reasons ..." selects); sends nothing
	@$(require_archive)
	@$(require_java17)
	$(APP_ENV) $(VPY) -m spark.replay $(REPLAY_PATHS) $(REPLAY_ARGS) --dry_run $(APP_SETTINGS)

replay: $(STAMP) ## Replay ARCHIVE=... (REPLAY_ARGS as replay-dry-run) to the running app's Service Bus
	@$(require_archive)
	@$(require_java17)
	$(APP_ENV) $(VPY) -m spark.replay $(REPLAY_PATHS) $(REPLAY_ARGS) $(APP_SETTINGS)

bench: $(STAMP) ## Run the emulator throughput benchmark
	$(VPY) bench/emulator_throughput.py

# Each script writes its figures to bench/results/<name>.json. Spark's takes a few minutes and needs Java.
bench-all: $(STAMP) $(AZURITE_STAMP) ## Run every benchmark in bench/ (emulator, start-up, filters, topologies, admin API, host, ordered vs unordered, settlement gRPC, re-drive, replay, console, tracing)
	$(VPY) bench/emulator_throughput.py
	$(VPY) bench/emulator_startup.py
	$(VPY) bench/filters.py
	$(VPY) bench/sql_filter.py
	$(VPY) bench/topologies.py
	$(VPY) bench/admin_provisioning.py
	$(VPY) bench/host_throughput.py
	$(VPY) bench/ordered_throughput.py
	$(VPY) bench/settlement_grpc.py
	$(VPY) bench/redrive.py
	$(VPY) bench/ops_console.py
	$(VPY) bench/tracing_overhead.py
	@$(require_java17)
	$(VPY) bench/replay.py

# The whole app under faults (kill -9 of the worker and of `make run`, Azurite stopped, garbage input,
# re-drives while events flow), then every accepted event accounted for and the side effects counted from the
# endpoints' table; writes bench/results/chaos.json, fails on a loss or a duplicate side effect.
DURATION ?= 600
SEED ?= 29
chaos: $(STAMP) $(AZURITE_STAMP) ## Chaos run: load + faults for DURATION seconds (SEED=...), 0 events lost or it fails
	$(VPY) bench/chaos.py --duration $(DURATION) --seed $(SEED)

clean: ## Remove .data/ and tool caches (keeps .venv)
	rm -rf .data .mypy_cache .ruff_cache .pytest_cache .hypothesis
	rm -f bench/results/*.tmp
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} +

distclean: clean ## clean, and remove .venv, tools/azurite/node_modules, tools/checkov/.venv and tools/replay312/.venv too
	rm -rf $(VENV) tools/azurite/node_modules $(CHECKOV_VENV) $(REPLAY_VENV)
