# Every method side by side by learning curves (issue #26; python -m embexp.report paper=compare table=curves).
#   make compare                       MiniLM (the encoder methods) on real SST-2 and MRPC rows: lr grid, 3 seeds, curves
#   make compare DRY_RUN=1             print the exact commands only
#   make compare EXTRA="debug=smoke"   tiny models and fixtures, offline
#   make compare KINDS="encoder decoder"   also every decoder method on SmolLM2 (sized for a GPU)
#   make compare ONLY="lora full_ft"   only these methods (the README's measured table: ONLY="lora full_ft tinyattn tinyte_full head_only")
# Runs python -m embexp.sweep compare/curves (conf/sweep/compare/curves.yaml; the Makefile's SWEEP). Its data:
# $EMBEXP_DATA/glue/<task>/validation.jsonl (the real rows), split once into outputs/compare/<task>.
# The snapshot table of any finished runs: python -m embexp.report table=compare runs=...
COMPARE_STEPS ?=
KINDS ?=
TASKS ?=
ONLY ?=

.PHONY: compare
compare: install  ## every method by learning curves: lr chosen on held-out rows, quality at the chosen budget, #TP, memory, speed (outputs/compare/tables)
	$(if $(DRY_RUN),@)$(SWEEP) $(sweep_seeds) $(if $(COMPARE_STEPS),steps=$(COMPARE_STEPS)) $(if $(KINDS),kinds="$(KINDS)") $(if $(TASKS),tasks="$(TASKS)") $(if $(ONLY),only="$(ONLY)") compare/curves
