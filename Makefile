# Set-up is idempotent: every target that needs the environment makes it first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup vendor demo test lint unit e2e bench bench-startup clean

$(BIN)/asup: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(BIN)/asup

setup: $(BIN)/asup
	bash scripts/install-system.sh

vendor: setup
	bash scripts/install-vendors.sh
	bash scripts/install-acp-vendors.sh
	bash scripts/install-gemini.sh
	bash scripts/install-opencode.sh

demo: vendor
	$(BIN)/python -m supervisor.lab.demo

lint: setup
	$(BIN)/ruff check supervisor tests
	$(BIN)/ruff format --check supervisor tests
	$(BIN)/mypy --strict supervisor

unit: setup
	$(BIN)/pytest -m 'not e2e' tests

e2e: vendor
	$(BIN)/pytest -m e2e tests

test: vendor lint
	$(BIN)/pytest tests

bench: vendor
	$(BIN)/python -m benchmarks.decode_throughput
	$(BIN)/python -m benchmarks.run_startup

bench-startup: setup
	$(BIN)/python -m benchmarks.run_startup

clean:
	rm -rf $(VENV) .vendor vendor/node_modules .mypy_cache .ruff_cache .pytest_cache
