# paimon_meta developer entry points. `make test` is what CI runs (.ci/run calls it).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed-stamp

export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: venv run stop test test-fast checks deps suite lint typecheck unit interop-venv rust-venv java-env browser bench clean \
	spark-cluster-test console-assets

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[s3,embedded,spark,service,dev]'
	touch $(STAMP)

venv: $(STAMP) console-assets

## The console's browser assets (htmx, uPlot): `npm ci` from the pinned lock file, the dist files copied
## into the package's static/vendor/ (not committed), served by the service itself (never a CDN).
CONSOLE := paimon_meta/service/console
CONSOLE_VENDOR := $(CONSOLE)/static/vendor
$(CONSOLE_VENDOR)/.stamp: $(CONSOLE)/package.json $(CONSOLE)/package-lock.json
	cd $(CONSOLE) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	mkdir -p $(CONSOLE_VENDOR)
	cp $(CONSOLE)/node_modules/htmx.org/dist/htmx.min.js $(CONSOLE_VENDOR)/
	cp $(CONSOLE)/node_modules/uplot/dist/uPlot.iife.min.js $(CONSOLE)/node_modules/uplot/dist/uPlot.min.css \
	  $(CONSOLE_VENDOR)/
	touch $@

console-assets: $(CONSOLE_VENDOR)/.stamp

## The main job: embedded Postgres, a local warehouse, the Spark demo. Both under this checkout's own
## .paimon-meta/ (not ~/.paimon-meta, which another checkout's `make run` may be using); `make stop` stops
## that Postgres (its data stays for the next `make run`).
run stop: export PAIMON_META_HOME ?= $(CURDIR)/.paimon-meta
run: venv
	$(PY) -m paimon_meta.cli demo

stop: venv
	$(PY) -m paimon_meta.cli db embedded stop

## ruff, and the layering: import-linter's contracts in pyproject.toml (imports point down the layers).
lint: venv
	$(VENV)/bin/ruff check paimon_meta spark_jobs tests bench migrations
	$(VENV)/bin/ruff format --check paimon_meta spark_jobs tests bench migrations
	$(VENV)/bin/lint-imports

typecheck: venv
	$(VENV)/bin/mypy

interop-venv:
	$(PY) tests/interop/pypaimon_env.py

## paimon-rust (pypaimon-rust 0.4.0) in its own venv, for the interop tests.
rust-venv:
	$(PY) tests/interop/rust_env.py

## Java Paimon 0.9 and 1.0 (jars from PyPI packages, into ~/.cache/paimon-meta/java) and the test harness.
java-env:
	$(PY) tests/interop/java_env.py

## Debian's Chromium and ChromeDriver for tests/browser (Playwright drives /usr/bin/chromium; it downloads no
## browser of its own). Nothing to do when $(CHROMIUM) exists; installed with apt-get when run as root (the package
## lists refreshed only if the first install fails); otherwise it prints what to install.
CHROMIUM ?= /usr/bin/chromium
APT_GET ?= apt-get
AS_UID ?= $(shell id -u)
browser:
	@if [ -x "$(CHROMIUM)" ]; then \
	  echo "browser: $(CHROMIUM) is there"; \
	elif [ "$(AS_UID)" = 0 ]; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $(APT_GET) install -y chromium chromium-driver \
	    || { $(APT_GET) update && $(APT_GET) install -y chromium chromium-driver; }; \
	else \
	  echo "browser: $(CHROMIUM) is missing; as root: apt-get install -y chromium chromium-driver" \
	    "(tests/browser is skipped without it, and fails under CI=true)"; \
	fi

## pytest-xdist: XDIST workers (default 2, one per core of the CI machine; `XDIST=0` runs in one process).
## `--dist loadscope` keeps a module's (and a class's) tests on one worker, so module-scoped servers, Spark
## sessions and private Postgres clusters are started once per module; session-scoped fixtures are per worker.
XDIST ?= 2
PYTEST_PARALLEL := $(if $(filter 0,$(XDIST)),,-n $(XDIST) --dist loadscope)

## Lint, type-check and the whole test suite (interop, Postgres, S3, Spark and browser tests included), the 40
## slowest tests printed at the end. The checks (CPU) run while the other engines install (network and disk),
## each target's output kept together (-O).
test: venv
	$(MAKE) -j6 -O checks deps
	$(MAKE) suite

## What the suite needs beside the venv: the other engines' venvs, Java Paimon and the browser.
deps: interop-venv rust-venv java-env browser

## ruff, import-linter and mypy: independent of each other (`make -j3 checks` runs them side by side).
checks: lint typecheck

suite: venv deps
	$(VENV)/bin/pytest tests -q $(PYTEST_PARALLEL) --durations=40

## The iteration tier: no other engines, no Spark, no browser, no torture or chaos runs (under 5 minutes on the
## CI machine); `make test` is what CI runs.
test-fast: venv
	$(VENV)/bin/pytest tests -q $(PYTEST_PARALLEL) --durations=15 \
	  -m "not interop and not spark and not browser and not slow and not heavy" \
	  --ignore=tests/torture --ignore=tests/chaos --ignore=tests/interop --ignore=tests/spark \
	  --ignore=tests/browser --ignore=tests/bench

## tests/spark on a Spark standalone cluster (a master and two workers, stopped at the end) instead of local[2,2].
spark-cluster-test: venv
	$(PY) -m tests.spark.cluster run -- $(VENV)/bin/pytest tests/spark -q

## The demo (make run) on a Spark standalone cluster (a master and two workers, stopped at the end).
run-cluster: venv
	$(PY) -m tests.spark.cluster run -- $(PY) -m paimon_meta.cli demo --rows-per-writer 200000

unit: venv
	$(VENV)/bin/pytest tests -q -m "not interop and not spark"

bench: venv
	$(PY) bench/run_all.py

clean:
	rm -rf $(CONSOLE)/node_modules $(CONSOLE_VENDOR)
	rm -rf $(VENV) .venv-pypaimon .venv-rust .mypy_cache .ruff_cache .pytest_cache
