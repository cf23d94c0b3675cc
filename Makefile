# The two set-up commands of the README: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CAMPAIGN ?= campaigns/h200-decoder-layer

.PHONY: demo test runtime venv browser postgres lint docs clean

$(BIN)/python:
	@echo "creating $(VENV) ($(PY) -m venv)..."
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# `make demo` installs the runtime only; `make test` (venv) adds the test tools (pytest, playwright, mypy, ruff, ...).
runtime: $(BIN)/python
	@echo "installing perftunereport's runtime dependencies (about a minute on a fresh machine)..."
	$(BIN)/python -m pip install -q -e .

venv: $(BIN)/python
	@echo "installing perftunereport with its test tools (a minute or more)..."
	$(BIN)/python -m pip install -q -e '.[test,team]'

# The browser test drives Debian's chromium through playwright (never `playwright install`). Idempotent; as root.
browser:
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# The team-lake tests start Debian's PostgreSQL server (initdb, pg_ctl as user postgres). Idempotent; as root.
postgres:
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql)

demo: runtime
	$(BIN)/perftunereport demo --campaign $(CAMPAIGN)

# ruff and mypy; lint-imports holds the stages' import contract (pyproject.toml [tool.importlinter]); deptry fails on a
# dependency declared but never imported, or imported but not declared.
lint: venv
	$(BIN)/ruff check perfreport tests benchmarks device
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/deptry .

test: venv browser postgres lint
	$(BIN)/pytest

# The kernel item of ncu_kernels.schema.json, the README tour output, docs/cli.md and docs/capture.md tables are
# generated from the code; a test fails when any is stale.
docs: venv
	$(BIN)/python -m perfreport.kernels.row --write
	$(BIN)/cog -r README.md docs/cli.md docs/capture.md

clean:
	rm -rf $(VENV) site .pytest_cache .mypy_cache .ruff_cache
