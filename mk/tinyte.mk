# TinyTE paper tables (tinyte.md; docs/reproduce_tinyte.md). Included by the top-level Makefile.
#   make table1                       run the missing cells of Table 1, then render tables/tinyte/table1.{md,csv}
#   make table1 DRY_RUN=1             print the exact commands only
#   make table1 EXTRA="debug=smoke"   append overrides to every command (offline end-to-end check)
#   make table3 SEEDS="0 1 2" MODELS="gemma2 llama31"
#   make tables                       render every table from the runs that exist (never trains)
TINYTE_SEEDS ?= $(if $(SEEDS),$(SEEDS),0)
TINYTE_MODELS ?= $(if $(MODELS),$(MODELS),gemma2 qwen25 llama31)
EXTRA ?=
TINYTE_SWEEP = $(PY) scripts/tinyte_sweep.py $(if $(DRY_RUN),--dry-run) --py $(PY) --seeds "$(TINYTE_SEEDS)" --models "$(TINYTE_MODELS)" --extra "$(EXTRA)"

.PHONY: table1 table2 table3 table4 table5 table10 table11 tinyte_alpaca tinyte_params tinyte_tables
.PHONY: tinyte_ranking table8 tinyte_fig4
table1: install  ## TinyTE Table 1: TinyTE variants x 3 models on CNN/DM + WMT16 (DRY_RUN=1 prints the commands)
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) table1
table2: install  ## TinyTE Table 2: vs LoRA, embedding tuning, prompt tuning (1, 2 tokens)
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) table2
table3: install  ## TinyTE Table 3: SuperGLUE, individual vs multitask (TinyTE-full, prompt tuning, zero-shot)
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) table3
table4: install  ## TinyTE Table 4 + Fig. 5: embedding ablation, random dimension order
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) table4
table10: install  ## TinyTE Table 10 + Fig. 7: embedding ablation, lowest-variance dimensions first
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) table10
table5: install  ## TinyTE Table 5: ROUGE-L by input length on CNN/DM (Gemma-2)
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) table5
table11: install  ## TinyTE Table 11: Tables 1+2 with PT 20 tokens and standard errors
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) table11
tinyte_alpaca: install  ## TinyTE Fig. 3 runs: Alpaca on Llama-2-7b (ROUGE only; no GPT-4 judge)
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) tinyte_alpaca
tinyte_ranking: install  ## TinyTE §4.2 ranking table: TinyTE-half (Gemma-2, CNN/DM) with variance low/high, random, integrated gradients low/high
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) tinyte_ranking
table8: install  ## TinyTE Table 8: TinyTE-full on Alpaca (Llama-2, GPT-J, Qwen-2.5-0.5B), p=30% ablations, repeat-the-question (Est. AUC: make tinyte_fig4 first)
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) table8
tinyte_fig4: install  ## TinyTE Figs. 4 + 8: Pearson r of the value at p vs. the AUC over the Table 4/10 ablations that exist (never trains)
	$(if $(DRY_RUN),@echo )$(PY) -m embexp.analyze correlation 'tasks=[wmt16,cnndm]' $(filter debug=%,$(EXTRA)) $(patsubst output_root=%,runs=%/analysis/ablation,$(filter output_root=%,$(EXTRA)))
tinyte_params: install  ## trainable parameters of every method x model, offline (meta device)
	$(PY) -m embexp.analyze params out=tables/tinyte/params
tinyte_tables: install  ## render every TinyTE table from existing runs (missing cells empty)
	$(PY) -m embexp.report table=all $(filter debug=%,$(EXTRA))

# `make tables` renders every paper's tables; double-colon so each mk/<paper>.mk can add its own.
tables:: tinyte_tables
