# Every method side by side (issue #14; python -m embexp.report table=compare). Included by the top-level Makefile.
#   make compare                       SmolLM2 (decoder methods) and MiniLM (encoder methods) on 600 real SST-2 rows, then the tables
#   make compare DRY_RUN=1             print the exact commands only
#   make compare EXTRA="debug=smoke"   tiny models and fixtures, offline, seconds per run
# Runs python -m embexp.sweep compare/sst2 (conf/sweep/compare/sst2.yaml; the Makefile's SWEEP). Its data:
# $EMBEXP_DATA/glue/sst2/validation.jsonl (the real rows), split once into outputs/compare/sst2.
COMPARE_STEPS ?=

.PHONY: compare
compare: install  ## every method on the same footing: quality, #TP, memory, speed, export (tables/compare, Pareto PNG)
	$(if $(DRY_RUN),@)$(SWEEP) $(sweep_seeds) $(if $(COMPARE_STEPS),steps=$(COMPARE_STEPS)) compare/sst2
