# PETE vs the standard encoder (pete.md Table 2; docs/methods_pete.md). Included by the top-level Makefile.
#   make pete_table                    parameters, STS-B Spearman, seconds per step/epoch; dropout off and on; both encoders
#   make pete_table DRY_RUN=1          print the exact commands only
#   make pete_table EXTRA="debug=smoke"                       offline end-to-end check (tiny ModernBERT, fixtures)
#   make pete_table PETE_DATA="task.data_dir=../shared/data task.datasets=[snli] task.train_split=validation+test" PETE_STEPS=300
# Default data: SNLI + MNLI train from the hub (the paper). Runs use trainer.resume=true: finished runs are skipped.
PETE_SEEDS ?= $(if $(SEEDS),$(SEEDS),0)
PETE_STEPS ?= -1
PETE_DROPOUT ?= 0.2
PETE_DATA ?=
PETE_TRAIN ?= trainer.batch_size=128 trainer.lr=5e-4 trainer.warmup_steps=1000
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
define pete_sweep
$(PETE_DO)$(PY) -m embexp.train -m method=pete,full_ft model=scratch_encoder task=nli_pairs seed=$(call _pete_csv,$(PETE_SEEDS)) tag=drop$(1) trainer.max_steps=$(PETE_STEPS) trainer.resume=true $(call pete_dropout,$(1)) $(PETE_TRAIN) $(PETE_DATA) $(EXTRA)
endef

.PHONY: pete_table
pete_table: install  ## PETE vs the standard 2L/2H d=512 encoder: parameters, STS-B Spearman, time per step/epoch, dropout off/on
	$(PETE_DO)$(PY) -m embexp.analyze params models=[scratch_encoder] methods=[full_ft,pete] num_labels=0 breakdown=true out=$(PETE_OUT)/params
	$(call pete_sweep,0)
	$(call pete_sweep,$(PETE_DROPOUT))
	$(PETE_DO)$(PY) -m embexp.analyze pete runs=$(PETE_RUNS) out=$(PETE_OUT)/comparison

tables:: pete_table
