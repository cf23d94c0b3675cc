# The two set-up commands of the README: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CAMPAIGN ?= campaigns/h200-decoder-layer

.PHONY: demo test venv lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

venv: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'

demo: venv
	$(BIN)/perftunereport demo --campaign $(CAMPAIGN)

lint: venv
	$(BIN)/ruff check perfreport tests benchmarks
	$(BIN)/mypy

test: venv lint
	$(BIN)/pytest

clean:
	rm -rf $(VENV) site .pytest_cache .mypy_cache .ruff_cache
