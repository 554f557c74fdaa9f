##@ Tiny-Attention
# Tiny-Attention paper tables (tiny-attention.md; docs/methods_tinyattn.md). Included by the top-level Makefile.
#   make tinyattn_table8                       run the missing cells of Table 8 (GLUE dev, roberta-large, 1H and 4H), print the table
#   make tinyattn_table8 DRY_RUN=1             print the exact commands only
#   make tinyattn_table8 EXTRA="debug=smoke"   append overrides to every command (offline end-to-end check)
#   make tinyattn_table1                       FewGLUE CB/RTE on ALBERT-xxlarge, PET cloze prompts, 4 seeds (1-4)
#                                              (FEWGLUE_DATA=folder with super_glue/)
# Not here: Table 9 (GLUE test set: GLUE server).
# Each target runs python -m embexp.sweep tinyattn/<table> (src/embexp/sweep/papers/tinyattn.py; the Makefile's SWEEP).
# SELECT_ON=heldout|reported|both (default both): the GLUE tables' held-out cells (ours), the paper's
# protocol (the best dev metric kept, selected on the reported dev split, marked in the table), or both
SELECT_ON ?=
FEWGLUE_DATA ?=
TINYATTN_SWEEP = $(SWEEP) $(sweep_seeds) $(if $(SELECT_ON),select_on=$(SELECT_ON))

.PHONY: tinyattn_table1 tinyattn_table2 tinyattn_table8 tinyattn_table10 tinyattn_table11 tinyattn_table12 tinyattn_params
.PHONY: tinyattn_tables
tinyattn_table1: install  ## Tiny-Attention Table 1: FewGLUE CB and RTE (32 rows), ALBERT-xxlarge, PET cloze prompts scored by the masked-LM head
	$(if $(DRY_RUN),@)$(SWEEP) $(sweep_seeds) $(if $(FEWGLUE_DATA),fewglue_data="$(FEWGLUE_DATA)") tinyattn/table1
tinyattn_table8: install  ## Tiny-Attention Table 8: GLUE dev, roberta-large, 1H (8 tasks) and 4H warm-started (CoLA RTE MRPC QNLI)
	$(if $(DRY_RUN),@)$(TINYATTN_SWEEP) tinyattn/table8
tinyattn_table2: install  ## Tiny-Attention Table 2 + Fig. 4: roberta-base vs roberta-large drop on MNLI and SST-2
	$(if $(DRY_RUN),@)$(TINYATTN_SWEEP) tinyattn/table2
tinyattn_table10: install  ## Tiny-Attention Table 10: sequential vs parallel placement (roberta-base, SST-2 and MNLI)
	$(if $(DRY_RUN),@)$(TINYATTN_SWEEP) tinyattn/table10
tinyattn_table11: install  ## Tiny-Attention Table 11: 4H with and without parameter averaging (CoLA, RTE)
	$(if $(DRY_RUN),@)$(TINYATTN_SWEEP) tinyattn/table11
tinyattn_table12: install  ## Tiny-Attention Table 12: 1H4D (head_dim 4) vs 1H (CoLA, RTE)
	$(if $(DRY_RUN),@)$(TINYATTN_SWEEP) tinyattn/table12
tinyattn_params: install  ## Tiny-Attention trainable parameters (1H, 4H, authors' MHA) on roberta(-base), ALBERT-xxlarge, MiniLM
	$(DRY)$(PY) -m embexp.analyze params "models=[roberta,roberta_base,albert_xxlarge,minilm]" "methods=[tinyattn]"
tinyattn_tables: install  ## render every Tiny-Attention table from the runs that exist (never trains)
	$(DRY)$(PY) -m embexp.report paper=tinyattn table=all $(filter debug=%,$(EXTRA))

tables:: tinyattn_tables
