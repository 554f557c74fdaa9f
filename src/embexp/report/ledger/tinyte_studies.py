"""TinyTE (papers/tinyte.md): the GPU cells of Tables 4–6, 8–10 and the §4.2 ranking study. The printed
cells are ledger/printed/tinyte.csv."""

from __future__ import annotations

from embexp.report.ledger import measure
from embexp.report.ledger.core import Compute
from embexp.report.ledger.gpu import Run, Work
from embexp.report.ledger.runs import DECODE_BATCH, TASKS, estimate, judge_run, tinyte_run
from embexp.report.ledger.tinyte import NAMES

GRID, SAMPLES = 12, 250  # studies/ablation.py: p in 0 (the reference), .01, .05, .1, .2, ..., .9; 250 rows
ORDER = ("gemma2", "llama31", "qwen25")  # the ablation tables' row order
T5 = ("LoRA (r=8)", "PT (1 tok)", "TinyTE-full", "TinyTE-half", "TinyTE-hybrid", "TinyTE-gated")  # its rows
# the §4.2 study's orders of Gemma-2's dimensions (the first is Table 1's TinyTE-half)
RANKING = (
    "variance, lowest half (Table 1's TinyTE-half)",
    "variance, highest half",
    "random",
    "integrated gradients, lowest half",
    "integrated gradients, highest half",
)
NOTES = {
    "Table 4": f"One ablation run per model and dataset: {GRID} values of p (0, the reference outputs, and the paper's "
    f"grid) × {SAMPLES} rows, greedy decoding; no training.",
    "Table 6": "The paper prints the vanilla ASRs as fractions (0.02) and the tuned ones as percentages (86.9).",
    "Table 9": "The judge (google/t5_xxl_true_nli_mixture) reads Table 4's generations: no new decoding.",
}


def ablation(model: str, task: str, sorting: str, points: int = GRID, samples: int = SAMPLES):
    t = TASKS[task]

    def build():
        a = measure.arch(model)
        rows = points * samples
        return [
            Run(
                f"{NAMES[model]} ablation ({sorting}), {t.name}",
                a,
                "tf32",
                evals=(Work(f"prompts × {points} values of p", rows, t.prompt),),
                decode=(Work("decode", rows, t.new, DECODE_BATCH),),
                seq=t.prompt + t.new,
            )
        ]

    return estimate(f"tinyte.ablation.{model}.{task}.{sorting}.{points}", build)


def nli(model: str, task: str, sorting: str):
    rows = (GRID - 1) * SAMPLES
    return estimate(
        f"tinyte.nli.{model}.{task}.{sorting}",
        lambda: [judge_run(f"NLI judge on {NAMES[model]}'s ablated outputs, {TASKS[task].name}", "nli", rows, 2 * 128)],
        "Reuses the generations of the BLEU-4 rows' run.",
    )


def curve_computes(t: str, metric: str, est) -> dict:
    return {
        f"tinyte.{t}.{model}.{task}.{metric}": Compute(gpu=est(model, task))
        for model in ORDER
        for task in ("wmt16", "cnndm")
    }


def ablation_computes() -> dict:
    return {
        **curve_computes("t4", "bleu-4", lambda m, t: ablation(m, t, "random")),
        **curve_computes("t9", "nli", lambda m, t: nli(m, t, "random")),
        **curve_computes("t10", "bleu-4", lambda m, t: ablation(m, t, "variance")),
        **curve_computes("t10", "nli", lambda m, t: nli(m, t, "variance")),
    }


def t5_t6_computes() -> dict:
    from embexp.report.ledger.tinyte_scores import nlg_estimate

    slug = {"LoRA (r=8)": "lorar8", "PT (1 tok)": "pt1tok"}
    out = {f"tinyte.t5.{slug.get(m, m.lower())}": Compute(gpu=nlg_estimate("gemma2", m, "cnndm")) for m in T5}
    for model in ORDER:
        out[f"tinyte.t6.{model}.vanilla"] = Compute(gpu=safety(model, False))
        out[f"tinyte.t6.{model}.gated"] = Compute(gpu=safety(model, True))
    gold = estimate("tinyte.bsd.gold", lambda: [judge_run("HarmBench judge on BSD's gold responses", "harmbench",
                                                          1_000, 600)])
    out["tinyte.t6.gold"] = Compute(gpu=gold)
    return out


def safety(model: str, tuned: bool):
    def build():
        if not tuned:
            return [
                tinyte_run(f"{NAMES[model]} zero-shot, BSD", model, "bsd", 0, train=False),
                judge_run("HarmBench judge, BSD", "harmbench", 1_000, 600),
            ]
        tp = measure.tp(model, "method=tinyte_gated")
        return [
            tinyte_run(f"{NAMES[model]} + TinyTE-gated, BSD (20 epochs)", model, "bsd", tp, 20),
            tinyte_run(f"{NAMES[model]} + TinyTE-gated, AdvBench", model, "advbench", 0, train=False),
            judge_run("HarmBench judge, BSD + AdvBench", "harmbench", 1_520, 600),
        ]

    return estimate(f"tinyte.safety.{model}.{tuned}", build)


def alpaca(model: str):
    return estimate(
        f"tinyte.alpaca.{model}",
        lambda: [
            tinyte_run(
                f"{NAMES[model]} + TinyTE-full, Alpaca (5 epochs)",
                model,
                "alpaca",
                measure.tp(model, "method=tinyte_full"),
                5,
            )
        ],
    )


def t8_computes() -> dict:
    out = {}
    for model in ("llama2", "gptj", "qwen25_05b"):
        out[f"tinyte.t8.{model}.ablation"] = Compute(gpu=ablation(model, "alpaca", "variance", points=2))
        out[f"tinyte.t8.{model}.rl"] = Compute(gpu=alpaca(model))
    return out


def ranking_computes() -> dict:
    from embexp.report.ledger.tinyte_scores import nlg_estimate

    out = {"tinyte.s42.ranking.0": Compute(gpu=nlg_estimate("gemma2", "TinyTE-half", "cnndm"))}
    for i, label in enumerate(RANKING[1:], start=1):
        out[f"tinyte.s42.ranking.{i}"] = Compute(
            gpu=estimate(
                f"tinyte.ranking.{i}",
                lambda lb=label: [
                    tinyte_run(
                        f"Gemma-2 + TinyTE-half ({lb}), CNN/DM",
                        "gemma2",
                        "cnndm",
                        measure.tp("gemma2", "method=tinyte_half"),
                    )
                ],
            )
        )
    return out


def computes() -> dict:
    return {**ablation_computes(), **t5_t6_computes(), **t8_computes(), **ranking_computes()}
