# PEMA paper tables (pema.md; docs/pema.md). Included by the top-level Makefile.
#   make pema_table2                                          Table 2 from tokenizers + stored configs (needs the hub)
#   make pema_table2 PEMA_VOCAB_ARGS="models=[minilm] source=fixture"   offline: BERT WordPiece rows on the GLUE fixtures
#   make pema_table9 DRY_RUN=1                                print the exact commands only
#   make pema_table10 EXTRA="debug=smoke" PEMA_MODELS="bert roberta_base" PEMA_SEEDS=0 PEMA_GLUE="rte"   offline end-to-end check
#   make pema_tables                                          render 9 and 10 from the runs that exist, compute 2-4
#   make pema_fig2                                            Fig. 2 with GPT-2's tokenizer on the hub's GLUE (needs the hub)
#   make pema_fig2 PEMA_FIG2_ARGS="tokenizer=smollm2 source=local data_dir=../shared/data subsets=[cola,mrpc,rte,sst2,stsb] splits=[eval]"   offline (docs/pema.md)
# Training runs use trainer.resume=true: a run whose directory is complete is skipped, so 9 and 10 share runs.
PEMA_SEEDS ?= $(if $(SEEDS),$(SEEDS),0 1 2 3 4)
PEMA_GLUE ?= cola mnli mrpc qnli qqp rte sst2 stsb wnli
PEMA_MODELS ?= $(if $(MODELS),$(MODELS),distilbert distilroberta distilmbert bert roberta_base deberta mbert xlmr xlmv)
PEMA_XLM := xlmr xlmv
PEMA_OUT ?= tables/pema
PEMA_VOCAB_ARGS ?=
PEMA_FIG2_ARGS ?=
EXTRA ?=
PEMA_RUNS = $(if $(findstring debug=smoke,$(EXTRA)),outputs/smoke,outputs)
PEMA_DO = $(if $(DRY_RUN),@echo ,)
pema_comma := ,
pema_empty :=
pema_space := $(pema_empty) $(pema_empty)
_pema_csv = $(subst $(pema_space),$(pema_comma),$(strip $(1)))
PEMA_T2_MODELS := distilbert distilroberta distilmbert bert roberta_base deberta mbert xlmr xlmv
PEMA_T3_MODELS := deberta_v3_xsmall deberta_v3_small deberta deberta_v3_large
PEMA_T4_MODELS := distilmbert mbert xlmr xlmv
# DRY_RUN=1 also names the checkpoint behind every model config name: the id of conf/model/<name>.yaml
# (BERT and DistilBERT are the uncased ones: docs/pema.md)
define pema_ckpts
$(if $(DRY_RUN),@for m in $(1); do printf '# model=%s: %s\n' "$$m" "$$(sed -n 's/^id: *"\{0,1\}\([^"]*\)"\{0,1\}.*/\1/p' conf/model/$$m.yaml)"; done)
endef
# one Hydra multirun per (experiment, method): every sub-task x seed x model of the group
define pema_sweep
$(PEMA_DO)$(PY) -m embexp.train -m experiment=$(1) model=$(call _pema_csv,$(2)) method=$(3) task.subset=$(call _pema_csv,$(PEMA_GLUE)) seed=$(call _pema_csv,$(PEMA_SEEDS)) trainer.resume=true $(if $(filter pema,$(3)),'method.count_splits=[train$(pema_comma)eval]') $(EXTRA)
endef

.PHONY: pema_table2 pema_table3 pema_table4 pema_table9 pema_table10 pema_tables pema_bench
pema_table2: install  ## PEMA Table 2: % embedding/model parameters removed, model x GLUE task (tokenizers + configs; no training)
	$(call pema_ckpts,$(PEMA_T2_MODELS))
	$(PEMA_DO)$(PY) -m embexp.analyze vocab what=table2 out=$(PEMA_OUT) $(PEMA_VOCAB_ARGS)
pema_table3: install  ## PEMA Table 3: millions of parameters removed, DeBERTaV3 xsmall/small/base/large x GLUE task
	$(call pema_ckpts,$(PEMA_T3_MODELS))
	$(PEMA_DO)$(PY) -m embexp.analyze vocab what=table3 out=$(PEMA_OUT) $(PEMA_VOCAB_ARGS)
pema_table4: install  ## PEMA Table 4: multilingual models x XNLI en, en-de, en-zh, all
	$(call pema_ckpts,$(PEMA_T4_MODELS))
	$(PEMA_DO)$(PY) -m embexp.analyze vocab what=table4 out=$(PEMA_OUT) $(PEMA_VOCAB_ARGS)
pema_table9: install  ## PEMA Table 9: PEMA preprocessing vs fine-tuning time on RoBERTa-base x GLUE (+ measured memory vs full FT)
	$(call pema_ckpts,roberta_base)
	$(call pema_sweep,pema_glue,roberta_base,pema)
	$(call pema_sweep,pema_glue,roberta_base,full_ft)
	$(PEMA_DO)$(PY) -m embexp.report paper=pema table=table9 runs=$(PEMA_RUNS) model=roberta_base out=$(PEMA_OUT)
pema_table10: install  ## PEMA Table 10: GLUE validation results with and without PEMA, every model, 5 seeds
	$(call pema_ckpts,$(PEMA_MODELS))
	$(if $(filter-out $(PEMA_XLM),$(PEMA_MODELS)),$(call pema_sweep,pema_glue,$(filter-out $(PEMA_XLM),$(PEMA_MODELS)),pema))
	$(if $(filter-out $(PEMA_XLM),$(PEMA_MODELS)),$(call pema_sweep,pema_glue,$(filter-out $(PEMA_XLM),$(PEMA_MODELS)),full_ft))
	$(if $(filter $(PEMA_XLM),$(PEMA_MODELS)),$(call pema_sweep,pema_glue_xlm,$(filter $(PEMA_XLM),$(PEMA_MODELS)),pema))
	$(if $(filter $(PEMA_XLM),$(PEMA_MODELS)),$(call pema_sweep,pema_glue_xlm,$(filter $(PEMA_XLM),$(PEMA_MODELS)),full_ft))
	$(PEMA_DO)$(PY) -m embexp.report paper=pema table=table10 runs=$(PEMA_RUNS) out=$(PEMA_OUT)
pema_tables: install  ## render PEMA Tables 9 and 10 from existing runs and compute Tables 2-4 (never trains)
	$(call pema_ckpts,$(sort $(PEMA_T2_MODELS) $(PEMA_T3_MODELS)))
	-$(PEMA_DO)$(PY) -m embexp.report paper=pema table=table9 runs=$(PEMA_RUNS) model=roberta_base out=$(PEMA_OUT)
	-$(PEMA_DO)$(PY) -m embexp.report paper=pema table=table10 runs=$(PEMA_RUNS) out=$(PEMA_OUT)
	-$(PEMA_DO)$(PY) -m embexp.analyze vocab what=table2 out=$(PEMA_OUT) $(PEMA_VOCAB_ARGS)
	-$(PEMA_DO)$(PY) -m embexp.analyze vocab what=table3 out=$(PEMA_OUT) $(PEMA_VOCAB_ARGS)
	-$(PEMA_DO)$(PY) -m embexp.analyze vocab what=table4 out=$(PEMA_OUT) $(PEMA_VOCAB_ARGS)
.PHONY: pema_fig2
pema_fig2: install  ## PEMA Fig. 2: unique vs total tokens of each GLUE task with GPT-2's tokenizer, Heaps' law fit (PNG + md/json)
	$(PEMA_DO)$(PY) -m embexp.analyze vocab what=heaps tokenizer=openai-community/gpt2 out=$(PEMA_OUT) $(PEMA_FIG2_ARGS)
pema_bench: install  ## PEMA token-counting throughput (tokens/s) against collections.Counter
	$(PY) scripts/bench_pema_count.py

tables:: pema_tables
