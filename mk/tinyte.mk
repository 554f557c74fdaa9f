##@ TinyTE
# TinyTE paper tables (tinyte.md; docs/reproduce_tinyte.md). Included by the top-level Makefile.
#   make tinyte_table1                       run the missing cells of Table 1, then render tables/tinyte/table1.{md,csv}
#   make tinyte_table1 DRY_RUN=1             print the exact commands only
#   make tinyte_table1 EXTRA="debug=smoke"   append overrides to every command (offline end-to-end check)
#   make tinyte_table3 SEEDS="0 1 2" MODELS="gemma2 llama31"
#   make tinyte_table6 HARMBENCH_JUDGE=tiny_llama EXTRA="debug=smoke"   Table 6 offline (a tiny random judge)
#   make tinyte_table9 NLI_JUDGE=smollm2     Table 9 (entailment) with another judge (default google/t5_xxl_true_nli_mixture)
#   make tinyte_table10 NLI_JUDGE=...        Table 10 with its NLI rows (metric=both); without NLI_JUDGE, BLEU-4 only
#   make tinyte_tables                       render every TinyTE table from the runs that exist (never trains)
#   make tinyte_fig3 EXTRA="debug=smoke" JUDGE=tiny_llama   Figure 3 end to end offline
# Each target runs python -m embexp.sweep tinyte/<spec> (src/embexp/sweep/papers/tinyte.py; the Makefile's SWEEP).
HARMBENCH_JUDGE ?=
NLI_JUDGE ?=
TINYTE_SWEEP = $(SWEEP) $(sweep_seeds)

.PHONY: tinyte_table1 tinyte_table2 tinyte_table3 tinyte_table4 tinyte_table5 tinyte_table6 tinyte_table9 tinyte_table10
.PHONY: tinyte_table11 tinyte_alpaca tinyte_fig3 tinyte_params tinyte_tables tinyte_ranking tinyte_table8 tinyte_fig4
tinyte_table1: install  ## TinyTE Table 1: TinyTE variants x 3 models on CNN/DM + WMT16 (DRY_RUN=1 prints the commands)
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) tinyte/table1 $(sweep_models)
tinyte_table2: install  ## TinyTE Table 2: vs LoRA, embedding tuning, prompt tuning (1, 2 tokens)
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) tinyte/table2 $(sweep_models)
tinyte_table3: install  ## TinyTE Table 3: SuperGLUE, individual vs multitask (TinyTE-full, prompt tuning, zero-shot)
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) tinyte/table3 $(sweep_models)
tinyte_table4: install  ## TinyTE Table 4 + Fig. 5: embedding ablation, random dimension order
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) tinyte/table4 $(sweep_models)
tinyte_table5: install  ## TinyTE Table 5: ROUGE-L by input length on CNN/DM (Gemma-2)
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) tinyte/table5
tinyte_table6: install  ## TinyTE Table 6: ASR after safety tuning on BSD, transfer to AdvBench (HarmBench judge: HARMBENCH_JUDGE=...)
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) tinyte/table6 $(sweep_models) $(if $(HARMBENCH_JUDGE),judge="$(HARMBENCH_JUDGE)")
tinyte_table8: install  ## TinyTE Table 8: TinyTE-full on Alpaca (Llama-2, GPT-J, Qwen-2.5-0.5B), p=30% ablations, repeat-the-question (Est. AUC: make tinyte_fig4 first)
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) tinyte/table8
tinyte_table9: install  ## TinyTE Table 9 + Fig. 6: embedding ablation scored by entailment (NLI_JUDGE, default google/t5_xxl_true_nli_mixture), random order
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) tinyte/table9 $(sweep_models) $(if $(NLI_JUDGE),nli_judge="$(NLI_JUDGE)")
tinyte_table10: install  ## TinyTE Table 10 + Fig. 7: embedding ablation, lowest-variance dimensions first (+ NLI rows when NLI_JUDGE is set)
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) tinyte/table10 $(sweep_models) $(if $(NLI_JUDGE),nli_judge="$(NLI_JUDGE)")
tinyte_table11: install  ## TinyTE Table 11: Tables 1+2 with PT 20 tokens and standard errors
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) tinyte/table11 $(sweep_models)
tinyte_alpaca: install  ## TinyTE Fig. 3 runs: Alpaca on Llama-2-7b (ROUGE; the judged figure: make tinyte_fig3)
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) tinyte/tinyte_alpaca
# Figure 3's judge (ours: a local judge by default; the paper's gpt-4o needs a paid API:
#   make tinyte_fig3 JUDGE=gpt-4o-2024-08-06 JUDGE_BACKEND=openai   with OPENAI_API_KEY set)
JUDGE ?= meta-llama/Llama-3.1-8B-Instruct
JUDGE_BACKEND ?= transformers
tinyte_fig3: install  ## TinyTE Fig. 3: Alpaca runs judged (Instruct Score, JUDGE=..., docs/judge.md) -> figure3.png/.md
	$(if $(DRY_RUN),@)$(PY) -m embexp.sweep --py $(PY) $(if $(DRY_RUN),--dry-run) --extra "$(EXTRA) judge.model=$(JUDGE) judge.backend=$(JUDGE_BACKEND)" $(sweep_seeds) tinyte/fig3
tinyte_ranking: install  ## TinyTE §4.2 ranking table: TinyTE-half (Gemma-2, CNN/DM) with variance low/high, random, integrated gradients low/high
	$(if $(DRY_RUN),@)$(TINYTE_SWEEP) tinyte/ranking
tinyte_fig4: install  ## TinyTE Figs. 4 + 8: Pearson r of the value at p vs. the AUC over the Table 4/10 ablations that exist (never trains)
	$(if $(DRY_RUN),@echo )$(PY) -m embexp.analyze correlation 'tasks=[wmt16,cnndm]' $(filter debug=%,$(EXTRA)) $(patsubst output_root=%,runs=%/analysis/ablation,$(filter output_root=%,$(EXTRA)))
tinyte_params: install  ## trainable parameters of every method x model, offline (meta device)
	$(DRY)$(PY) -m embexp.analyze params out=tables/tinyte/params
tinyte_tables: install  ## render every TinyTE table from existing runs (missing cells empty)
	$(DRY)$(PY) -m embexp.report table=all $(filter debug=%,$(EXTRA))

tables:: tinyte_tables
