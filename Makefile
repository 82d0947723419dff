# Bootstraps .venv, then runs the main job (`make run`) or the tests (`make test`).
# torch first, so that pip does not pull a multi-GB CUDA build onto a machine without a GPU:
# - a torch already in .venv (e.g. a CUDA build chosen by hand) is kept;
# - with a GPU (nvidia-smi present), the registry's default (CUDA) build;
# - without one, torch==2.13.0 where it resolves to a CPU build (a local wheel, or the
#   registry's own build on macOS and Windows): pip's dry run lists what it would
#   install, and a plan with nvidia-* packages is a CUDA build; otherwise, or where
#   2.13.0 cannot be had, the latest CPU build from PyTorch's CPU index.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH_CPU_VERSION := 2.13.0
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
TORCH_PLAN := $(VENV)/torch-plan.json
# pip byte-compiles what it installs one file at a time (about 18,000 files); compiled
# after the installs by one worker per core instead, as pip would (a file that does not
# compile is left to Python, as pip leaves it); measured: docs/performance.md, "Test tiers"
PIP_INSTALL := $(BIN)/pip install --quiet --no-compile
define COMPILE_SITE_PACKAGES
import compileall, sysconfig
compileall.compile_dir(sysconfig.get_paths()["purelib"], quiet=2, workers=0)
endef
export COMPILE_SITE_PACKAGES

.PHONY: setup run test lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	if $(BIN)/python -c 'import torch' >/dev/null 2>&1; then \
		echo "keeping torch $$($(BIN)/python -c 'import torch; print(torch.__version__)') in $(VENV)"; \
	elif command -v nvidia-smi >/dev/null 2>&1; then \
		$(PIP_INSTALL) torch; \
	elif $(BIN)/pip install --quiet --dry-run --report $(TORCH_PLAN) torch==$(TORCH_CPU_VERSION) 2>/dev/null \
			&& ! grep -Eq '"name": *"nvidia-' $(TORCH_PLAN); then \
		$(PIP_INSTALL) torch==$(TORCH_CPU_VERSION); \
	else \
		echo "torch==$(TORCH_CPU_VERSION) is no CPU build here: installing torch from $(TORCH_CPU_INDEX)"; \
		$(PIP_INSTALL) torch --index-url $(TORCH_CPU_INDEX); \
	fi
	rm -f $(TORCH_PLAN)
	$(PIP_INSTALL) -e '.[dev]'
	$(BIN)/python -c "$$COMPILE_SITE_PACKAGES"
	touch $(STAMP)

run: setup
	$(BIN)/lg-study run studies/quickstart.yaml

# two pytest workers, each given whole test files (their module fixtures run once): the
# tests are single-threaded, so a second worker uses the second core
TEST_WORKERS ?= 2
#: more pytest options, e.g. `make test PYTEST_FLAGS=--durations=10` (the ten slowest tests)
PYTEST_FLAGS ?=

# with bytecode written even where the environment sets PYTHONDONTWRITEBYTECODE: each
# pytest worker, and each Ray worker and `lg-study` process the tests start, otherwise
# compiles every module of the repository afresh and pytest rewrites every test
# file's asserts again (about 12 s of each worker's collection: docs/performance.md)
test: setup
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile $(PYTEST_FLAGS)

lint: setup
	$(BIN)/ruff check lengthgen orchestrator analysis results_contract tests

clean:
	rm -rf $(VENV) results
