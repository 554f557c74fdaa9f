# K-Token Merging paper tables (k-token-merging.md; docs/methods_ktoken.md). Included by the top-level Makefile.
#   make ktoken_table1                       run the missing cells of Table 1 (Textualized Tree), print the table
#   make ktoken_table1 DRY_RUN=1             print the exact commands only
#   make ktoken_table1 EXTRA="debug=smoke"   append overrides to every command (offline end-to-end check)
# Not here: the LTSC column (another paper's method). LLMLingua-2 cells need pip install '.[compress]' and the network once.
KTOKEN_SEEDS ?= $(if $(SEEDS),$(SEEDS),42)
EXTRA ?=
KTOKEN_SWEEP = $(PY) scripts/ktoken_sweep.py $(if $(DRY_RUN),--dry-run) --py $(PY) --seeds "$(KTOKEN_SEEDS)" --extra "$(EXTRA)"

.PHONY: ktoken_table1 ktoken_table2 ktoken_table3 ktoken_ablation ktoken_prefill
ktoken_table1: install  ## K-Token Table 1: Textualized Tree (curriculum to x3large), Qwen2.5-0.5B, uncompressed / SelectiveContext / LLMLingua-2 / K=2,3,4
	$(if $(DRY_RUN),@)$(KTOKEN_SWEEP) table1
ktoken_table2: install  ## K-Token Table 2: Amazon Reviews (Fashion) sentiment, the same columns
	$(if $(DRY_RUN),@)$(KTOKEN_SWEEP) table2
ktoken_table3: install  ## K-Token Table 3: CommitPackFT python perplexity, the same columns, P-L by Eq. 4
	$(if $(DRY_RUN),@)$(KTOKEN_SWEEP) table3
ktoken_ablation: install  ## K-Token Fig. 6: average vs random encoder init, tree accuracy per epoch (K=4)
	$(if $(DRY_RUN),@)$(KTOKEN_SWEEP) ablation
ktoken_prefill: install  ## K-Token prefill time of a 2,048-token prompt, K=4 vs uncompressed (docs/benchmarks.md)
	$(if $(DRY_RUN),@echo )$(PY) scripts/bench_ktoken_prefill.py
