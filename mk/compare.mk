##@ comparison
# Every method side by side by learning curves (python -m embexp.report paper=compare table=curves).
#   make compare                       MiniLM on the real train splits of SST-2, MRPC, RTE, CoLA (a seeded sample;
#                                      selection on held-out train rows, the whole validation split reported):
#                                      the 5 headline methods x 3 seeds on each, every other encoder method on SST-2
#   make compare DRY_RUN=1             print the exact commands only
#   make compare EXTRA="debug=smoke"   tiny models and fixtures, offline
#   make compare KINDS=decoder         SmolLM2 on SST-2: zero-shot, LoRA, prompt tuning, TinyTE-full/-gated, K-Token K=2;
#                                      2 seeds (more: the spec's dec_tasks="sst2 rte", ktoken_check=1)
#   make compare ONLY="lora full_ft"   only these methods
# Runs python -m embexp.sweep compare/curves (src/embexp/sweep/papers/compare.py: its docstring has the sizing; the
# Makefile's SWEEP). Its data: $EMBEXP_DATA/glue/<task>/{train,validation}.jsonl. It resumes where it stopped
# (finished cells are skipped, a cut one continues: trainer.resume), so it can span sessions.
# The snapshot table of any finished runs: python -m embexp.report table=compare runs=...
COMPARE_STEPS ?=
KINDS ?=
TASKS ?=
ONLY ?=

.PHONY: compare
compare: install  ## every method by learning curves: lr chosen on held-out rows, quality at the chosen budget, #TP, memory, speed (outputs/compare/tables)
	$(if $(DRY_RUN),@)$(SWEEP) $(sweep_seeds) $(if $(COMPARE_STEPS),steps=$(COMPARE_STEPS)) $(if $(KINDS),kinds="$(KINDS)") $(if $(TASKS),tasks="$(TASKS)") $(if $(ONLY),only="$(ONLY)") compare/curves
