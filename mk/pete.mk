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
#                    before issue #21); with PETE_DATA/PETE_STEPS small enough for a CPU. Not the paper's cells.
# PETE_STEPS=N overrides the recipe's step count (unset: the recipe's). debug=smoke replaces the recipe's budget
# (steps, batch, warm-up) with its own. Default data: SNLI + MNLI train from the hub (the paper).
# Dropout: both encoders run at 0 and at PETE_DROPOUT (0.1: the paper's baseline; PETE's cell is the dropout-0 run).
# Runs use trainer.resume=true: finished runs are skipped.
PETE_SEEDS ?= $(if $(SEEDS),$(SEEDS),0)
PETE_RECIPE ?= paper
PETE_RECIPES := paper cpu
PETE_STEPS ?=
PETE_DROPOUT ?= 0.1
PETE_DATA ?=
PETE_TRAIN ?= trainer=pete_$(PETE_RECIPE)$(if $(PETE_STEPS), trainer.max_steps=$(PETE_STEPS))
PETE_OUT ?= tables/pete
EXTRA ?=
PETE_RUNS = $(if $(findstring debug=smoke,$(EXTRA)),outputs/smoke,outputs)
PETE_DO = $(if $(DRY_RUN),@echo ,)
# dropout p on every ModernBERT dropout, for the from-scratch model and its debug=smoke twin
pete_dropout = $(foreach k,attention_dropout mlp_dropout embedding_dropout,++model.scratch.$(k)=$(1) ++model.tiny.$(k)=$(1))
pete_comma := ,
pete_empty :=
pete_space := $(pete_empty) $(pete_empty)
_pete_csv = $(subst $(pete_space),$(pete_comma),$(strip $(1)))
pete_recipe_ok = $(if $(filter 1,$(words $(PETE_RECIPE))),$(filter $(PETE_RECIPE),$(PETE_RECIPES)))
# DRY_RUN=1 also prints the recipe: the settings of conf/trainer/pete_<recipe>.yaml, as the runs get them
define pete_recipe_note
$(if $(pete_recipe_ok),,$(error PETE_RECIPE='$(PETE_RECIPE)' is not a PETE recipe (choose from: $(PETE_RECIPES))))
$(if $(DRY_RUN),@printf '# PETE_RECIPE=%s$(pete_comma) trainer=pete_%s: %s%s\n' "$(PETE_RECIPE)" "$(PETE_RECIPE)" "$$(sed -n 's/^\([a-z_0-9]*\): *\([^#]*[^# ]\).*/\1=\2/p' conf/trainer/pete_$(PETE_RECIPE).yaml | tr '\n' ' ' | sed 's/ $$//')" "$(if $(PETE_STEPS),; PETE_STEPS: max_steps=$(PETE_STEPS))$(if $(findstring debug=smoke,$(EXTRA)),; debug=smoke replaces the budget (steps$(pete_comma) batch$(pete_comma) warm-up))")
endef
define pete_sweep
$(PETE_DO)$(PY) -m embexp.train -m method=pete,full_ft model=scratch_encoder task=nli_pairs seed=$(call _pete_csv,$(PETE_SEEDS)) tag=drop$(1) $(PETE_TRAIN) trainer.resume=true $(call pete_dropout,$(1)) $(PETE_DATA) $(EXTRA)
endef

.PHONY: pete_table
pete_table: install  ## PETE vs the standard 2L/2H d=512 encoder: parameters, STS-B Spearman, time per step/epoch, dropout off/on (PETE_RECIPE=paper|cpu)
	$(pete_recipe_note)
	$(PETE_DO)$(PY) -m embexp.analyze params models=[scratch_encoder] methods=[full_ft,pete] num_labels=0 breakdown=true out=$(PETE_OUT)/params
	$(call pete_sweep,0)
	$(call pete_sweep,$(PETE_DROPOUT))
	$(PETE_DO)$(PY) -m embexp.report paper=pete table=table2 runs=$(PETE_RUNS) out=$(PETE_OUT)

tables:: pete_table
