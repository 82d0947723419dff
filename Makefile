# Bootstraps .venv, then runs the main job (`make run`) or the tests (`make test`).
# On a machine without a GPU, the CPU build of torch 2.13.0 is installed first so that
# pip does not pull a multi-GB CUDA build; with a GPU (nvidia-smi present) a CUDA build
# of torch is installed from the registry instead.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	if command -v nvidia-smi >/dev/null 2>&1; then \
		$(BIN)/pip install --quiet torch; \
	else \
		$(BIN)/pip install --quiet torch==2.13.0; \
	fi
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: setup
	$(BIN)/lg-study run studies/quickstart.yaml

test: setup
	$(BIN)/pytest -q

lint: setup
	$(BIN)/ruff check lengthgen orchestrator analysis tests

clean:
	rm -rf $(VENV) results
