"""Tiny-Attention (papers/tiny-attention.md) Tables 4–7: the hyper-parameters of the paper's best runs
against the experiment configs embexp runs them with (conf/experiment/tinyattn_*.yaml)."""

from __future__ import annotations

from embexp.report.ledger import measure
from embexp.report.ledger.core import Row

# table: [(experiment, row label, printed "lr / dec / warmup / scheduler" or, Table 6, "lr / dec / scheduler")]
TABLES = {
    "Table 4 (1H)": [
        ("tinyattn_1h_sst2", "SST-2", "8E-4 / 0.01 / yes / cosine"),
        ("tinyattn_1h_cola", "CoLA", "5E-4 / 0.04 / no / linear"),
        ("tinyattn_1h_mnli", "MNLI", "1E-3 / 0 / yes / linear"),
        ("tinyattn_1h_qqp", "QQP", "5E-4 / 0.01 / no / linear"),
        ("tinyattn_1h_rte", "RTE", "2E-3 / 0.05 / no / linear"),
        ("tinyattn_1h_mrpc", "MRPC", "3E-3 / 0.3 / yes / cosine"),
        ("tinyattn_1h_qnli", "QNLI", "8E-4 / 0.02 / no / linear"),
        ("tinyattn_1h_stsb", "STS-B", "1.5E-3 / 0 / no / cosine"),
    ],
    "Table 5 (4H)": [
        ("tinyattn_4h_cola", "CoLA", "8E-4 / 0.05 / yes / cosine"),
        ("tinyattn_4h_rte", "RTE", "1E-5 / 0.3 / no / linear"),
        ("tinyattn_4h_mrpc", "MRPC", "3E-3 / 0.3 / no / linear"),
        ("tinyattn_4h_qnli", "QNLI", "1E-6 / 0.4 / no / cosine"),
    ],
    "Table 6 (roberta-base)": [
        ("tinyattn_base_seq_sst2", "SST-2 seq", "1E-3 / 0.02 / cosine"),
        ("tinyattn_base_para_sst2", "SST-2 para", "1E-3 / 0.01 / cosine"),
        ("tinyattn_base_seq_mnli", "MNLI seq", "1E-4 / 0.01 / linear"),
        ("tinyattn_base_para_mnli", "MNLI para", "1E-3 / 0.01 / linear"),
    ],
    "Table 7 (4H, no averaging)": [
        ("tinyattn_4h_noavg_cola", "CoLA", "8E-4 / 0 / no / cosine"),
        ("tinyattn_4h_noavg_rte", "RTE", "7E-3 / 0.5 / yes / cosine"),
    ],
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


def rows() -> list[Row]:
    out = []
    for table, entries in TABLES.items():
        head = "lr / dec / scheduler" if "Table 6" in table else "lr / dec / warmup / scheduler"
        for exp, label, printed in entries:
            model = "roberta_base" if "_base_" in exp else "roberta"
            out.append(
                Row(
                    f"tinyattn.t{table.split()[1]}.{exp}",
                    table,
                    f"{label}: {head}",
                    printed,
                    f"python -m embexp.train experiment={exp} model={model} --cfg job",
                    lambda _d, e=exp, w="Table 6" not in table: hp(e, w),
                    kind="config",
                )
            )
    return out
