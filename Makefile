# The two set-up commands of the README: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CAMPAIGN ?= campaigns/h200-decoder-layer

.PHONY: demo test venv browser lint docs clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

venv: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'

# The browser test drives Debian's chromium through playwright (never `playwright install`). Idempotent; as root.
browser:
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

demo: venv
	$(BIN)/perftunereport demo --campaign $(CAMPAIGN)

# ruff and mypy; lint-imports holds the stages' import contract (pyproject.toml [tool.importlinter]); deptry fails on a
# dependency declared but never imported, or imported but not declared.
lint: venv
	$(BIN)/ruff check perfreport tests benchmarks device
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/deptry .

test: venv browser lint
	$(BIN)/pytest

# The kernel item of ncu_kernels.schema.json, the README tour output, docs/cli.md and docs/capture.md tables are
# generated from the code; a test fails when any is stale.
docs: venv
	$(BIN)/python -m perfreport.ncu.row --write
	$(BIN)/cog -r README.md docs/cli.md docs/capture.md

clean:
	rm -rf $(VENV) site .pytest_cache .mypy_cache .ruff_cache
