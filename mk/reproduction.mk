##@ ledger
# The reproduction ledger, docs/reproduction.md (src/embexp/report/ledger/). Included by the top-level Makefile.
#   make reproduction                                  every table cell of the five papers; the data rows say what they need
#   make reproduction EMBEXP_DATA=../shared/data       + the rows computed from the real data (Table 2, 7, ... splits)
#   make reproduction LEDGER_RUNS=/data/runs           the GPU rows read from these finished runs (default: outputs)
# The file is generated: tests/test_reproduction.py fails when its data-free rows are not what the code renders.
.PHONY: reproduction
reproduction: install  ## the reproduction ledger docs/reproduction.md: every cell of the papers' tables, computed where a CPU can, else its GPU estimate, or the value of its finished runs (EMBEXP_DATA=... adds the data rows; LEDGER_RUNS=... where the runs are, default outputs)
	$(DRY)$(PY) -m embexp.report paper=ledger $(if $(EMBEXP_DATA),data_dir=$(EMBEXP_DATA)) $(if $(LEDGER_RUNS),runs=$(LEDGER_RUNS))

# Each paper's central claim, checked with a verdict (docs/claims.md; src/embexp/report/claims.yaml holds the quotes and rules).
#   make claims                    render docs/claims.md from the comparison's tables (docs/compare) and the claims' runs,
#                                  and write their records into docs/claims/<runs>.jsonl (write_digests=true; commit them:
#                                  outputs/ stays behind), naming each line it adds, replaces or removes; a run that is not
#                                  of its check's protocol (claims.yaml run_config: another model, debug=smoke) is skipped
#                                  and named. python -m embexp.report paper=claims alone (the sweep's last step) writes no
#                                  digest: it names the lines the runs would change.
#   make claims_runs               the claims' own runs: PEMA paired with full FT, PETE, K-Token's gap against training rows
#   make claims_runs PARTS=pema    one part (pema, pete, ktoken, amazon); they resume where they stopped
CLAIMS_RUNS ?=
PARTS ?=
.PHONY: claims claims_runs
claims: install  ## each paper's central claim with a verdict: docs/claims.md from the comparison's tables and the claims' runs (CLAIMS_RUNS=..., default outputs/claims)
	$(DRY)$(PY) -m embexp.report paper=claims write_digests=true $(if $(CLAIMS_RUNS),runs=$(CLAIMS_RUNS))
claims_runs: install  ## the runs the claims page needs beyond the comparison (hours on a CPU; PARTS="pema pete ktoken amazon"), then make claims
	$(if $(DRY_RUN),@)$(SWEEP) $(sweep_seeds) $(if $(PARTS),parts="$(PARTS)") claims/runs
