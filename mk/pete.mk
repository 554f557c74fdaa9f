##@ PETE
# PETE vs the standard encoder (pete.md Table 2; docs/methods_pete.md). Included by the top-level Makefile.
#   make pete_table                    parameters, STS-B Spearman, seconds per step/epoch; dropout off and on; both encoders
#   make pete_table DRY_RUN=1          print the exact commands only (and the training recipe they use)
#   make pete_table PETE_RECIPE=cpu    the short recipe instead of the paper's (below)
#   make pete_table EXTRA="debug=smoke"                       offline end-to-end check (tiny ModernBERT, fixtures, 4 steps)
#   make pete_table PETE_RECIPE=cpu PETE_DATA="task.data_dir=../shared/data task.datasets=[snli] task.train_split=validation+test" PETE_STEPS=300
# Training recipe, PETE_RECIPE (a trainer preset, conf/trainer/pete_<recipe>.yaml):
#   paper (default)  the paper's: batch 128, 122,700 steps, AdamW lr 2e-5, 1,000 warm-up steps, linear decay, fp16
#                    (the decay, fp16, weight decay 0.01 and no clipping from the authors' code). Sized for a GPU.
#   cpu              ours: one epoch, lr 5e-4, 1,000 warm-up steps, cosine decay, batch 128 (what this target ran
#                    before the paper's recipe became its default); with PETE_DATA/PETE_STEPS small enough for a CPU. Not the paper's cells.
# PETE_STEPS=N overrides the recipe's step count (unset: the recipe's). debug=smoke replaces the recipe's budget
# (steps, batch, warm-up) with its own. Default data: SNLI + MNLI train from the hub (the paper).
# Dropout: both encoders run at 0 and at PETE_DROPOUT (0.1: the paper's baseline; PETE's cell is the dropout-0 run).
# Runs use trainer.resume=true: finished runs are skipped.
# Each target runs python -m embexp.sweep pete/<table> (src/embexp/sweep/papers/pete.py; the Makefile's SWEEP).
PETE_RECIPE ?=
PETE_STEPS ?=
PETE_DROPOUT ?=
PETE_DATA ?=
PETE_OUT ?=
PETE_VARS = $(if $(PETE_RECIPE),recipe="$(PETE_RECIPE)") $(if $(PETE_STEPS),steps=$(PETE_STEPS)) \
  $(if $(PETE_DROPOUT),dropout=$(PETE_DROPOUT)) $(if $(PETE_DATA),data_args="$(PETE_DATA)") $(if $(PETE_OUT),out=$(PETE_OUT))

.PHONY: pete_table pete_tables
pete_table: install  ## PETE vs the standard 2L/2H d=512 encoder: parameters, STS-B Spearman, time per step/epoch, dropout off/on (PETE_RECIPE=paper|cpu)
	$(if $(DRY_RUN),@)$(SWEEP) $(sweep_seeds) $(PETE_VARS) pete/table2

pete_tables: install  ## render the PETE table from the runs that exist (never trains)
	$(DRY)$(PY) -m embexp.report paper=pete table=table2 $(filter debug=%,$(EXTRA))

tables:: pete_tables
