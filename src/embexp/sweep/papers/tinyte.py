"""TinyTE's tables (make table1 ... table11, tinyte_alpaca, tinyte_fig3, tinyte_ranking).

Every train cell is an experiment file conf/experiment/tinyte_<cell>_<task>.yaml. Zero-shot cells (base)
are deterministic: they run for the first seed only (ours). Tables 1, 2, 5 and 11 share their runs.
An ablation cell is python -m embexp.analyze ablation (the plain model's input embeddings with a portion p
of their dimensions zeroed; docs/reproduce_tinyte.md).
"""

from __future__ import annotations

from embexp.sweep.runner import Var, analyze, judge_run, report, switched_on, table, train

SEEDS = Var([0])
MODELS = Var(["gemma2", "qwen25", "llama31"])


def seeds_of(v, cell: str) -> list[str]:
    """A cell's seeds: zero-shot (base) is deterministic, the first seed only."""
    return v.seeds[:1] if cell == "base" else v.seeds


def _cells(v, tasks, cells):
    """The cells of Tables 1, 2 and 11: task x model x cell x seed."""
    for task in tasks:
        for model in v.models:
            for cell in cells:
                for seed in seeds_of(v, cell):
                    yield train(f"experiment=tinyte_{cell}_{task}", f"model={model}", f"seed={seed}")


def ablations(v, sorting: str, seeds, *args: str):
    """The embedding ablations of Tables 4, 9 and 10: model x task (WMT16, CNN/DM) x seed."""
    for model in v.models:
        for task in ["wmt16", "cnndm"]:
            for seed in seeds:
                yield analyze("ablation", f"model={model}", f"task={task}", f"sorting={sorting}", f"seed={seed}", *args)


@table(seeds=SEEDS, models=MODELS)
def table1(v):
    """Table 1: the TinyTE variants x 3 models on CNN/DM and WMT16."""
    yield from _cells(v, ["cnndm", "wmt16"], ["base", "full", "half", "gated", "hybrid"])
    yield report("table=1")


@table(seeds=SEEDS, models=MODELS)
def table2(v):
    """Table 2: against LoRA, embedding tuning and prompt tuning (1 and 2 tokens) on CNN/DM and WMT16."""
    yield from _cells(v, ["cnndm", "wmt16"], ["lora", "emb", "pt1", "pt2", "gated", "hybrid"])
    yield report("table=2")


@table(seeds=SEEDS, models=MODELS)
def table11(v):
    """Table 11: Tables 1 and 2 with prompt tuning of 20 tokens, with standard errors."""
    cells = ["base", "emb", "lora", "pt1", "pt2", "pt20", "full", "half", "gated", "hybrid"]
    yield from _cells(v, ["cnndm", "wmt16"], cells)
    yield report("table=11")


@table(seeds=SEEDS, models=MODELS)
def table3(v):
    """Table 3: SuperGLUE, each sub-task alone and all of them together (task.subset=all): zero-shot (first
    seed only: deterministic), TinyTE-full and 1-token prompt tuning. COPA has its own experiment files
    (tinyte_<cell>_copa.yaml: its two-choice prompt); zero-shot COPA is the plain SuperGLUE cell."""
    for model in v.models:
        for sub in ["boolq", "cb", "copa", "rte", "wic"]:
            yield train("experiment=tinyte_base_superglue", f"model={model}", f"task.subset={sub}",
                        f"seed={v.first_seed}")
        for cell in ["full", "pt1"]:
            for sub in ["boolq", "cb", "copa", "rte", "wic", "all"]:
                for seed in v.seeds:
                    if sub == "copa":
                        yield train(f"experiment=tinyte_{cell}_copa", f"model={model}", f"seed={seed}")
                    else:
                        yield train(f"experiment=tinyte_{cell}_superglue", f"model={model}", f"task.subset={sub}",
                                    f"seed={seed}")
    yield report("table=3")


@table(trains=False, seeds=SEEDS, models=MODELS)
def table4(v):
    """Table 4 + Fig. 5: the embedding ablation in a random dimension order (one permutation per seed),
    BLEU-4 against the unablated outputs."""
    yield from ablations(v, "random", v.seeds)
    yield report("table=4")


@table(trains=False, seeds=SEEDS, models=MODELS,
       nli_judge=Var("google/t5_xxl_true_nli_mixture", help="the entailment judge: TRUE (Honovich et al. 2022)"))
def table9(v):
    """Table 9 + Fig. 6: the random-order ablation scored by entailment (the share of ablated outputs the
    unablated one entails, judged by nli_judge)."""
    yield from ablations(v, "random", v.seeds, "metric=nli", f"judge.model={v.nli_judge}")
    yield report("table=9")


@table(trains=False, seeds=SEEDS, models=MODELS,
       nli_judge=Var("", help="set: Table 10 also scores entailment (metric=both)"))
def table10(v):
    """Table 10 + Fig. 7: the ablation in order of lowest vocabulary variance first (deterministic: first
    seed only); with nli_judge set also its NLI rows."""
    nli = ["metric=both", f"judge.model={v.nli_judge}"] if switched_on(v.nli_judge) else []
    yield from ablations(v, "variance", [v.first_seed], *nli)
    yield report("table=10")


@table(seeds=SEEDS)
def table5(v):
    """Table 5: ROUGE-L by input length on CNN/DM, Gemma-2 (the report buckets the Table 1/2 runs'
    predictions)."""
    for cell in ["lora", "pt1", "full", "half", "hybrid", "gated"]:
        for seed in v.seeds:
            yield train(f"experiment=tinyte_{cell}_cnndm", "model=gemma2", f"seed={seed}")
    yield report("table=5")


@table(seeds=SEEDS, models=MODELS,
       judge=Var("cais/HarmBench-Llama-2-13b-cls",
                 help="judge.model: a hub id, a local folder or a conf/model name (tiny_llama)"))
def table6(v):
    """Table 6: attack success rate after safety tuning on BSD and its transfer to AdvBench (the vanilla model,
    TinyTE-gated, TinyTE-gated trained on BSD scored on AdvBench), then the Gold Labels row (reproduce_tinyte.md)."""
    for model in v.models:
        for cell, task in [("base", "bsd"), ("gated", "bsd"), ("gated", "advbench")]:
            for seed in seeds_of(v, cell):
                yield train(f"experiment=tinyte_{cell}_{task}", f"model={model}", f"judge.model={v.judge}",
                            f"seed={seed}")
    first_model = v.models[0] if v.models else ""
    yield judge_run(["experiment=tinyte_base_bsd", f"model={first_model}", f"seed={v.first_seed}",
                     f"judge.model={v.judge}"],
                    lambda run_dir: [f"run_dir={run_dir}", "what=reference", f"judge.model={v.judge}"])
    yield report("table=6")


def alpaca(v, when_complete: list[str] | None = None):
    """The Alpaca cells of Fig. 3 on Llama-2-7b."""
    for cell in ["base", "full", "gated", "lora", "pt1"]:
        for seed in seeds_of(v, cell):
            yield train(f"experiment=tinyte_{cell}_alpaca", "model=llama2", f"seed={seed}", when_complete=when_complete)


@table(seeds=SEEDS)
def tinyte_alpaca(v):
    """Fig. 3's runs: Alpaca on Llama-2-7b (ROUGE). The judged figure: tinyte/fig3."""
    yield from alpaca(v)
    yield report("table=alpaca")


@table(seeds=SEEDS)
def fig3(v):
    """Fig. 3: the Alpaca runs judged (Instruct Score): --extra 'judge.model=... judge.backend=...' reaches
    every run; a run that is already complete is judged instead (python -m embexp.judge run_dir=...;
    cached verdicts cost nothing)."""
    yield from alpaca(v, when_complete=[])  # the judge gets the judge.* overrides of --extra
    yield report("table=fig3")


@table(seeds=SEEDS)
def ranking(v):
    """§4.2: the dimension-sorting heuristics of TinyTE-half on Gemma-2 CNN/DM. var_low is the Table 1 cell
    itself (lowest vocabulary variance; no tag); random draws its dimensions with rank_seed = seed (ours)."""
    for rank in ["var_low", "var_high", "random", "ig_low", "ig_high"]:
        for seed in v.seeds:
            args = ["experiment=tinyte_half_cnndm", "model=gemma2"]
            if rank == "random":
                args += ["method.ranking=random", f"method.rank_seed={seed}"]
            if rank in ("ig_low", "ig_high"):
                args += ["method.ranking=integrated_gradients"]
            if rank in ("var_high", "ig_high"):
                args += ["method.select=highest"]
            if rank != "var_low":
                args += [f"tag=rank_{rank}"]
            yield train(*args, f"seed={seed}")
    yield report("table=ranking")


@table(seeds=SEEDS)
def table8(v):
    """Table 8 (App. E): TinyTE-full on Alpaca for Llama-2 (the robust baseline), GPT-J and Qwen-2.5-0.5B,
    the variance ablation at p = 30% of each plain model (deterministic: first seed), and the
    repeat-the-question baseline (deterministic). Est. AUC needs tinyte_fig4's correlation fit first."""
    for model in ["llama2", "gptj", "qwen25_05b"]:
        for seed in v.seeds:
            yield train("experiment=tinyte_full_alpaca", f"model={model}", f"seed={seed}")
        yield analyze("ablation", f"model={model}", "task=alpaca", "sorting=variance", "ps=[0,0.3]",
                      f"seed={v.first_seed}")
    yield train("experiment=tinyte_base_alpaca", "model=llama2", "method=repeat_prompt", f"seed={v.first_seed}")
    yield report("table=8")
