"""PETE (papers/pete.md): Table 2's parameter counts on the meta device; its STS-B scores need a GPU."""

from __future__ import annotations

from embexp.report.ledger import measure
from embexp.report.ledger.core import Row

CMD = "python -m embexp.analyze params models=[scratch_encoder] methods=[full_ft,pete] num_labels=0 breakdown=true"
POOLER = (
    "ours has no pooler: the authors' encoders end in Linear(512, 512) + tanh on the mean (262,656 parameters), "
    "ours pools by the masked mean; with it, {with_} (docs/methods_pete.md)"
)
INTRO = "Table 2 (Table 1 and the training-time and dropout rows of Table 2 are qualitative)."
NOTES = {
    "Table 2": "The 2-layer/2-head d=512 encoders of conf/model/scratch_encoder.yaml, without a task head "
    "(num_labels=0: the sentence encoder STS-B reads)."
}


def total(method: str) -> int:
    return measure.tp("scratch_encoder", f"method={method}", num_labels=0)


def rows() -> list[Row]:
    out = [
        Row(
            "pete.t2.pete.params",
            "Table 2",
            "PETE (2L/2H, d=512): Total Parameters",
            "8.9 million",
            CMD,
            lambda _d: total("pete"),
            POOLER.format(with_="8,930,048 = 8.9M"),
            "8.7 million",
        ),
        Row(
            "pete.t2.baseline.params",
            "Table 2",
            "Standard Transformer (baseline): Total Parameters",
            "24.3 million",
            CMD,
            lambda _d: total("full_ft"),
            POOLER.format(with_="24,294,400 = 24.3M"),
            "24.0 million",
        ),
        Row(
            "pete.t2.reduction",
            "Table 2",
            "% Param. Reduction",
            "~63.4%",
            CMD,
            lambda _d: 100 * (1 - total("pete") / total("full_ft")),
            "of the missing pooler on both sides (with it, 1 − 8,930,048 / 24,294,400 = 63.2%); the paper's 63.4% is "
            "1 − 8.9 / 24.3, from its rounded counts",
            "~63.9%",
        ),
    ]
    return out + gpu_rows()


# SNLI + MNLI training pairs (550,152 + 392,702), make pete_table's paper recipe: 122,700 steps × batch 128 pairs,
# two sentences of ≈ 32 tokens each as batches pad them (ours), fp16; STS-B validation 1,500 pairs
STEPS, BATCH, TOKENS = 122_700, 128, 64


def pete_run(method: str, label: str):
    from embexp.report.ledger.gpu import Run, Work
    from embexp.report.ledger.runs import encoder_arch

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

    from embexp.report.ledger.runs import estimate

    return estimate(
        f"pete.{method}", build, "Data: SNLI + MNLI training pairs from the hub (MNLI is not in ../shared/data)."
    )


def gpu_rows() -> list[Row]:
    from embexp.report.ledger.runs import estimate

    pete, base = pete_run("pete", "PETE (dropout 0), trained from scratch"), pete_run(
        "full_ft", "standard encoder (dropout 0.1)"
    )
    return [
        Row("pete.t2.pete.stsb", "Table 2", "PETE: STS-B (Spearman-R)", "77.40", "make pete_table", gpu=pete),
        Row(
            "pete.t2.baseline.stsb",
            "Table 2",
            "Standard Transformer: STS-B (Spearman-R)",
            "77.54",
            "make pete_table",
            gpu=base,
        ),
        Row(
            "pete.t2.retained",
            "Table 2",
            "% Perf. Retained",
            "~99.8%",
            "make pete_table",
            gpu=estimate("pete.retained", lambda: [], "no run of its own: the ratio of the two scores above"),
        ),
    ]
