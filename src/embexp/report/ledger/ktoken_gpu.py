"""K-Token Merging (papers/k-token-merging.md): accuracy, perplexity and the measured length reduction of
Tables 1–3 and Fig. 6, which need a GPU: Qwen2.5-0.5B with LoRA (r=4, on every projection and lm_head),
one epoch, AdamW 1e-4, bf16, three seeds per column (the paper reports the best of three). The printed
cells are ledger/printed/ktoken.csv."""

from __future__ import annotations

from embexp.report.ledger import lookups, measure
from embexp.report.ledger.core import Compute
from embexp.report.ledger.gpu import Run, Work
from embexp.report.ledger.runs import estimate

# each column's label and the prompt compression its run gets (None: a token-dropping baseline's rate, below)
COLS = {
    "uncompressed": ("Uncompressed", 1.0),
    "selective_context": ("SelectiveContext", None),
    "llmlingua2": ("LLMLingua2", None),
    "k2": ("2-Token", 2.0),
    "k3": ("3-Token", 3.0),
    "k4": ("4-Token", 4.0),
}
# the rate embexp sets for the two token-dropping baselines (src/embexp/sweep/papers/ktoken.py: the paper's measured
# reduction)
RATES = {
    "Table 1": {"selective_context": 0.525, "llmlingua2": 0.27},
    "Table 2": {"selective_context": 0.446, "llmlingua2": 0.51},
    "Table 3": {"selective_context": 0.399, "llmlingua2": 0.30},
}
# (training rows, prompt tokens, answer tokens, evaluation rows) per table (ours, ≈): the tree curriculum's
# questions (the paper's 19.6–34.6M auxiliary samples, the upper end, at ≈100 tokens, + x3large's 2.45M at ≈600),
# Amazon Fashion (10% of the 2.45M training reviews, the authors' sample, ≈100 tokens; 50k test), CommitPackFT
# python (50.4k, old code + message ≈800 tokens compressed, new code ≈700 not; 5.6k test)
DATA = {
    "Table 1": ((34_600_000, 100, 1), (2_450_000, 600, 1), 50_000, 600),
    "Table 2": ((245_000, 100, 1), None, 50_000, 100),
    "Table 3": ((50_400, 800, 700), None, 5_600, 800),
}
SEEDS = 3
NOTES = {
    "Table 1": "The accuracy and length-reduction cells need the runs; the merging encoder adds 6·E FLOPs per merged "
    "position (E = 14.5M / 31.3M / 41.8M parameters for K = 2 / 3 / 4), under 13% more, not counted.",
    "Table 2": (
        "Not a cell of this table, but the nearest this CPU gets to it (`make compare KINDS=decoder`, "
        "docs/compare/README.md): SmolLM2-135M on 2,190 rows of SST-2's train "
        "split, 300 steps, the whole validation split. K=2 scores 70.7 over 2 seeds, uncompressed LoRA 88.2 "
        "(2 seeds): a 17.5-point gap where the paper prints 1.0 (92.51 against 93.54). The runs show K=2's "
        "loss leaving a coin flip's only after step 100 and still falling at 300, with the merging encoder "
        "and the merged rows at the token rows' scale: we read the gap as budget and data (the paper had "
        "245,000 reviews and Qwen2.5-0.5B), not a fault. On a second sentiment set one of K=2's two seeds did "
        "not learn in 300 steps (docs/methods_ktoken.md). Tested since (docs/claims.md, `make claims_runs "
        "PARTS=ktoken`): trained until the held-out curve is flat or a 2–3-epoch cap on 2,000, 8,000 and 32,000 "
        "SST-2 rows, the gap is 12.6, 7.0 and 8.1 points, so budget and data explain part of it, not all."
    ),
}


def run(table: str, col: str) -> list[Run]:
    a = measure.arch("qwen25_05b")
    lora = measure.tp(
        "qwen25_05b",
        "method=lora",
        "method.r=4",
        "method.target_modules=[q_proj,k_proj,v_proj,o_proj," "gate_proj,up_proj,down_proj,lm_head]",
    )
    k = COLS[col][1] or 1 / (1 - RATES[table][col])  # a token-dropping baseline keeps (1 - rate) of the prompt
    parts, second, n_eval, eval_tokens = DATA[table]
    works = [Work(f"train, prompts / {k:.3g} + answers", parts[0], parts[1] / k + parts[2])]
    if second:
        works.append(Work(f"train x3large, prompts / {k:.3g} + answers", second[0], second[1] / k + second[2]))
    seq = int(max(p[1] for p in (parts, second) if p) / k + parts[2])
    return [
        Run(
            f"Qwen2.5-0.5B {COLS[col][0]}, {table}",
            a,
            "bf16",
            lora,
            False,
            tuple(works),
            (Work("test rows", n_eval, eval_tokens / k + parts[2]),),
            seq=seq,
            batch=16 if table == "Table 1" else 3,
            copies=SEEDS,
        )
    ]


def computes() -> dict:
    out = {
        f"ktoken.t{table[-1]}.{col}.run": Compute(
            gpu=estimate(f"ktoken.{table}.{col}", lambda t=table, c=col: run(t, c)),
            measure=lookups.ktoken(f"table{table[-1]}", col),
        )
        for table in DATA
        for col in COLS
    }
    out["ktoken.s44.aux"] = Compute(
        gpu=estimate(
            "ktoken.Table 1.k4",
            lambda: run("Table 1", "k4"),
            "How often each stage repeats until its gate passes is a training outcome.",
        )
    )
    out["ktoken.fig6.init"] = Compute(
        gpu=estimate(
            "ktoken.fig6",
            lambda: [
                Run(
                    f"Qwen2.5-0.5B 4-Token ({init} init), x3large, up to 10 epochs",
                    measure.arch("qwen25_05b"),
                    "bf16",
                    0,
                    False,
                    (Work("train x3large, prompts / 4 + answers", 2_450_000, 151, 10),),
                    (Work("gate trees' questions", 50_000, 151, 10),),
                    seq=151,
                    batch=16,
                    copies=SEEDS,
                )
                for init in ("average", "random")
            ],
        )
    )
    return out
