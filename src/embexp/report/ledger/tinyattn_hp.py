"""Tiny-Attention (papers/tiny-attention.md) Tables 4–7: the hyper-parameters of the paper's best runs
against the experiment configs embexp runs them with (conf/experiment/tinyattn_*.yaml). The printed
cells are ledger/printed/tinyattn.csv."""

from __future__ import annotations

from embexp.report.ledger import measure
from embexp.report.ledger.core import Compute

# each table's experiments (conf/experiment/<name>.yaml); Table 6 prints no warm-up column
TABLES = {
    "t4": ("tinyattn_1h_sst2", "tinyattn_1h_cola", "tinyattn_1h_mnli", "tinyattn_1h_qqp", "tinyattn_1h_rte",
           "tinyattn_1h_mrpc", "tinyattn_1h_qnli", "tinyattn_1h_stsb"),
    "t5": ("tinyattn_4h_cola", "tinyattn_4h_rte", "tinyattn_4h_mrpc", "tinyattn_4h_qnli"),
    "t6": ("tinyattn_base_seq_sst2", "tinyattn_base_para_sst2", "tinyattn_base_seq_mnli", "tinyattn_base_para_mnli"),
    "t7": ("tinyattn_4h_noavg_cola", "tinyattn_4h_noavg_rte"),
}
NOTES = {"Table 6 (roberta-base)": "The paper: warm-up in every roberta-base run (ours: warmup_steps > 0 in each)."}


def sci(x: float) -> str:
    mant, exp = f"{x:e}".split("e")
    return f"{float(mant):g}E{int(exp)}"


def hp(experiment: str, warmup_column: bool) -> str:
    """'lr / dec / warmup / scheduler' of the composed experiment, written as the paper's tables."""
    model = "roberta_base" if "_base_" in experiment else "roberta"
    t = measure.composed(f"experiment={experiment}", f"model={model}").trainer
    cells = [sci(t.lr), f"{t.weight_decay:g}"] + (["yes" if t.warmup_steps > 0 else "no"] if warmup_column else [])
    return " / ".join(cells + [str(t.scheduler)])


def computes() -> dict:
    return {
        f"tinyattn.{t}.{exp}": Compute(lambda _d, e=exp, w=t != "t6": hp(e, w))
        for t, experiments in TABLES.items()
        for exp in experiments
    }
