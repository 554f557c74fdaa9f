##@ K-Token
# K-Token Merging paper tables (k-token-merging.md; docs/methods_ktoken.md). Included by the top-level Makefile.
#   make ktoken_table1                       run the missing cells of Table 1 (Textualized Tree), print the table
#   make ktoken_table1 DRY_RUN=1             print the exact commands only
#   make ktoken_table1 EXTRA="debug=smoke"   append overrides to every command (offline end-to-end check)
#   make ktoken_table1 KTOKEN_TREE=small     1% of the paper's tree set per stage (ours; default: paper, 2.45M questions)
#   make ktoken_table1 KTOKEN_SELECT_ON=reported   the authors' curriculum gate on each stage's test split (marked cells)
#   make ktoken_table1 KTOKEN_QUESTIONS=random     the released code's uniform pairs (~99.5% 'false' at x3large;
#                                                  default: balanced, as many 'true' as 'false' per tree)
#   make ktoken_table2 SEEDS=42              one run per cell (default: 42 43 44, the paper's best of three runs)
# Each table shows best of N (the paper's protocol) and mean +- s.e. over the N runs, N, and each cell's
# effective batch (per-device x grad_accum x devices: the authors' per-GPU sizes x 4 GPUs x accumulation 4,
# as one device with accumulation 16; DRY_RUN=1 prints it). debug=smoke replaces batch and tree size.
# Not here: the LTSC column (another paper's method). LLMLingua-2 cells need pip install '.[compress]' and the network once.
# Each target runs python -m embexp.sweep ktoken/<table> (src/embexp/sweep/papers/ktoken.py; the Makefile's SWEEP).
KTOKEN_TREE ?=
KTOKEN_SELECT_ON ?=
KTOKEN_QUESTIONS ?=
KTOKEN_SWEEP = $(SWEEP) $(sweep_seeds)
KTOKEN_TREE_SWEEP = $(KTOKEN_SWEEP) $(if $(KTOKEN_TREE),tree=$(KTOKEN_TREE)) $(if $(KTOKEN_SELECT_ON),select_on=$(KTOKEN_SELECT_ON))

.PHONY: ktoken_table1 ktoken_table2 ktoken_table3 ktoken_ablation ktoken_prefill
ktoken_table1: install  ## K-Token Table 1: Textualized Tree (curriculum to x3large), Qwen2.5-0.5B, uncompressed / SelectiveContext / LLMLingua-2 / K=2,3,4
	$(if $(DRY_RUN),@)$(KTOKEN_TREE_SWEEP) $(if $(KTOKEN_QUESTIONS),questions=$(KTOKEN_QUESTIONS)) ktoken/table1
ktoken_table2: install  ## K-Token Table 2: Amazon Reviews (Fashion) sentiment, the same columns
	$(if $(DRY_RUN),@)$(KTOKEN_SWEEP) ktoken/table2
ktoken_table3: install  ## K-Token Table 3: CommitPackFT python perplexity, the same columns, P-L by Eq. 4
	$(if $(DRY_RUN),@)$(KTOKEN_SWEEP) ktoken/table3
ktoken_ablation: install  ## K-Token Fig. 6: average vs random encoder init, tree accuracy per epoch (K=4)
	$(if $(DRY_RUN),@)$(KTOKEN_TREE_SWEEP) ktoken/ablation
ktoken_prefill: install  ## K-Token prefill time of a 2,048-token prompt, K=4 vs uncompressed (docs/benchmarks.md)
	$(if $(DRY_RUN),@echo )$(PY) scripts/bench.py ktoken_prefill

# Does K-Token learn on real rows? (src/embexp/sweep/papers/ktoken.py, `learning`) K=2, K=4 and uncompressed LoRA
# on the comparison's 600/272 split of the real SST-2 validation rows, SmolLM2, accuracy curves to 300 steps.
.PHONY: ktoken_learning
ktoken_learning: install  ## K-Token on real rows: K=2, K=4 and LoRA on 600 real SST-2 rows (SmolLM2), accuracy curves to 300 steps (K=2 also to 600)
	$(if $(DRY_RUN),@)$(SWEEP) ktoken/learning

.PHONY: ktoken_tables
ktoken_tables: install  ## render every K-Token table from the runs that exist (never trains)
	$(DRY)$(PY) -m embexp.report paper=ktoken table=all $(filter debug=%,$(EXTRA))

tables:: ktoken_tables
