"""PETE (papers/pete.md): Table 2's parameter counts on the meta device; its STS-B scores need a GPU.
The printed cells are ledger/printed/pete.csv."""

from __future__ import annotations

from embexp.report.ledger import sources
from embexp.report.ledger.core import Compute
from embexp.report.ledger.runs import Run, Work, derived, encoder_arch, estimate

INTRO = "Table 2 (Table 1 and the training-time and dropout rows of Table 2 are qualitative)."
NOTES = {
    "Table 2": "The 2-layer/2-head d=512 encoders of conf/model/scratch_encoder.yaml, without a task head "
    "(num_labels=0: the sentence encoder STS-B reads)."
}


def total(method: str) -> int:
    return sources.tp("scratch_encoder", f"method={method}", num_labels=0)


def computes() -> dict:
    pete, base = pete_run("pete", "PETE (dropout 0), trained from scratch"), pete_run(
        "full_ft", "standard encoder (dropout 0.1)"
    )
    retained = derived("pete.retained", "no run of its own: the ratio of the two scores above")
    return {
        "pete.t2.pete.params": Compute(lambda _d: total("pete")),
        "pete.t2.baseline.params": Compute(lambda _d: total("full_ft")),
        "pete.t2.reduction": Compute(lambda _d: 100 * (1 - total("pete") / total("full_ft"))),
        "pete.t2.pete.stsb": Compute(gpu=pete),
        "pete.t2.baseline.stsb": Compute(gpu=base),
        "pete.t2.retained": Compute(gpu=retained),
    }


# SNLI + MNLI training pairs (550,152 + 392,702), make pete_table's paper recipe: 122,700 steps × batch 128 pairs,
# two sentences of ≈ 32 tokens each as batches pad them (ours), fp16; STS-B validation 1,500 pairs
STEPS, BATCH, TOKENS = 122_700, 128, 64


def pete_run(method: str, label: str):
    def build():
        n = total(method)
        table = 0 if method == "pete" else 30_522 * 512
        a = encoder_arch(f"scratch_encoder ({method})", n, table, 512, 2)
        return [
            Run(
                label,
                a,
                "fp16",
                n,
                True,
                (Work("train (pairs)", STEPS * BATCH, TOKENS),),
                (Work("STS-B validation pairs", 1_500, TOKENS),),
                seq=TOKENS,
                batch=BATCH,
            )
        ]

    return estimate(
        f"pete.{method}", build, "Data: SNLI + MNLI training pairs from the hub (MNLI is not in ../shared/data)."
    )
