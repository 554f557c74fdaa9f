##@ PEMA
# PEMA paper tables (pema.md; docs/pema.md). Included by the top-level Makefile.
#   make pema_table2                                          Table 2 from tokenizers + stored configs (needs the hub)
#   make pema_table2 PEMA_VOCAB_ARGS="models=[minilm] source=fixture"   offline: BERT WordPiece rows on the GLUE fixtures
#   make pema_table9 DRY_RUN=1                                print the exact commands only
#   make pema_table10 EXTRA="debug=smoke" PEMA_MODELS="bert roberta_base" PEMA_SEEDS=0 PEMA_GLUE="rte"   offline end-to-end check
#   make pema_tables                                          render 9 and 10 from the runs that exist, compute 2-4
#   make pema_fig2                                            Fig. 2 with GPT-2's tokenizer on the hub's GLUE (needs the hub)
#   make pema_fig2 PEMA_FIG2_ARGS="tokenizer=smollm2 source=local data_dir=../shared/data subsets=[cola,mrpc,rte,sst2,stsb] splits=[eval]"   offline (docs/pema.md)
# Training runs use trainer.resume=true: a run whose directory is complete is skipped, so 9 and 10 share runs.
# Each table target runs python -m embexp.sweep pema/<table> (src/embexp/sweep/papers/pema.py; the Makefile's SWEEP).
# PEMA_SEEDS, PEMA_GLUE, PEMA_MODELS (or SEEDS, MODELS) replace the spec's seeds, GLUE sub-tasks, models.
PEMA_SEEDS ?= $(SEEDS)
PEMA_GLUE ?=
PEMA_MODELS ?= $(MODELS)
PEMA_OUT ?=
PEMA_VOCAB_ARGS ?=
PEMA_FIG2_ARGS ?=
PEMA_SWEEP = $(SWEEP) $(if $(PEMA_OUT),out=$(PEMA_OUT))
PEMA_RUN_VARS = $(if $(PEMA_SEEDS),seeds="$(PEMA_SEEDS)") $(if $(PEMA_GLUE),glue="$(PEMA_GLUE)")
PEMA_VOCAB = $(if $(PEMA_VOCAB_ARGS),vocab_args="$(PEMA_VOCAB_ARGS)")

.PHONY: pema_table2 pema_table3 pema_table4 pema_table9 pema_table10 pema_tables pema_bench
pema_table2: install  ## PEMA Table 2: % embedding/model parameters removed, model x GLUE task (tokenizers + configs; no training)
	$(if $(DRY_RUN),@)$(PEMA_SWEEP) $(PEMA_VOCAB) pema/table2
pema_table3: install  ## PEMA Table 3: millions of parameters removed, DeBERTaV3 xsmall/small/base/large x GLUE task
	$(if $(DRY_RUN),@)$(PEMA_SWEEP) $(PEMA_VOCAB) pema/table3
pema_table4: install  ## PEMA Table 4: multilingual models x XNLI en, en-de, en-zh, all
	$(if $(DRY_RUN),@)$(PEMA_SWEEP) $(PEMA_VOCAB) pema/table4
pema_table9: install  ## PEMA Table 9: PEMA preprocessing vs fine-tuning time on RoBERTa-base x GLUE (+ measured memory vs full FT)
	$(if $(DRY_RUN),@)$(PEMA_SWEEP) $(PEMA_RUN_VARS) pema/table9
pema_table10: install  ## PEMA Table 10: GLUE validation results with and without PEMA, every model, 5 seeds
	$(if $(DRY_RUN),@)$(PEMA_SWEEP) $(PEMA_RUN_VARS) $(if $(PEMA_MODELS),models="$(PEMA_MODELS)") pema/table10
pema_tables: install  ## render PEMA Tables 9 and 10 from existing runs and compute Tables 2-4 (never trains)
	$(if $(DRY_RUN),@)$(PEMA_SWEEP) $(PEMA_VOCAB) pema/tables
.PHONY: pema_fig2
pema_fig2: install  ## PEMA Fig. 2: unique vs total tokens of each GLUE task with GPT-2's tokenizer, Heaps' law fit (PNG + md/json)
	$(if $(DRY_RUN),@echo )$(PY) -m embexp.analyze vocab what=heaps tokenizer=openai-community/gpt2 out=$(or $(PEMA_OUT),tables/pema) $(PEMA_FIG2_ARGS)
pema_bench: install  ## PEMA token-counting throughput (tokens/s) against collections.Counter
	$(DRY)$(PY) scripts/bench.py pema_count

tables:: pema_tables
