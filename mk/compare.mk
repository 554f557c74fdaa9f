# Every method side by side (issue #14; python -m embexp.report table=compare). Included by the top-level Makefile.
#   make compare                       SmolLM2 (decoder methods) and MiniLM (encoder methods) on 600 real SST-2 rows, then the tables
#   make compare DRY_RUN=1             print the exact commands only
#   make compare EXTRA="debug=smoke"   tiny models and fixtures, offline, seconds per run
COMPARE_SEEDS ?= $(if $(SEEDS),$(SEEDS),0)
COMPARE_STEPS ?= 100
EXTRA ?=

.PHONY: compare
compare: install  ## every method on the same footing: quality, #TP, memory, speed, export (tables/compare, Pareto PNG)
	$(if $(DRY_RUN),@)$(PY) scripts/compare_sweep.py $(if $(DRY_RUN),--dry-run) --py $(PY) --seeds "$(COMPARE_SEEDS)" --steps $(COMPARE_STEPS) --extra "$(EXTRA)"
