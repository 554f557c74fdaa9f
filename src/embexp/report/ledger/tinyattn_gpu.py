"""Tiny-Attention (papers/tiny-attention.md): the score cells, which need a GPU: roberta-large (and
-base) frozen with tiny-attention adapters, 20 epochs, batch 16, fp32 (conf/trainer/tinyattn_paper.yaml)."""

from __future__ import annotations

from embexp.report.ledger import lookups, measure
from embexp.report.ledger.core import Row
from embexp.report.ledger.gpu import Run, Work
from embexp.report.ledger.runs import GLUE, estimate, glue_run

TASKS = ("sst2", "cola", "mnli", "qqp", "rte", "mrpc", "qnli", "stsb")
LABEL = {
    "sst2": "SST-2",
    "cola": "CoLA",
    "mnli": "MNLI",
    "qqp": "QQP",
    "rte": "RTE",
    "mrpc": "MRPC",
    "qnli": "QNLI",
    "stsb": "STS-B",
}
T8 = {
    "1H": "96.6 68.8 89.3/89.6 90.1/86.6 88.8 92.4/94.4 94.3 92.3 89.1/88.9",
    "4H": "96.6 69.4 89.3/89.6 90.1/86.6 89.2 92.6/94.6 94.5 92.3 89.3/89.1",
}
FOUR_H = ("cola", "rte", "mrpc", "qnli")  # the tasks 4H was trained on (Table 5); the other 4H cells are 1H's
PLACE = {"sequential": "seq", "parallel": "para"}  # Table 10's run tags: 1h_seq, 1h_para
# the run tags (report/tinyattn.py cells) of Tables 11 and 12's rows, by (heads, the estimate's tag)
SETTING = {(4, "-noavg"): "4h_noavg", (4, ""): "4h", (1, "-4d"): "1h4d", (1, ""): "1h"}
T13 = (("96.6", "89.6"), ("96.6", "89.5"), ("95.8", "89.6"), ("96.3", "89.8"), ("95.2", "89.6"))
NOTES = {
    "Table 8": "One run per task at the paper's chosen hyper-parameters (the paper ran about 80 per task in its "
    "search). "
    "4H is warm-started from the 1H run and trained on CoLA, RTE, MRPC and QNLI; its other cells are 1H's.",
    "Table 9": "GLUE test-server scores: embexp cannot submit to the GLUE server.",
}


def arch(model: str = "roberta"):
    return measure.arch(model)


def glue(model: str, task: str, heads: int = 1, tag: str = "", copies: int = 1):
    """One adapter run on a GLUE task (selection: 10% of the training rows, at most 1,000, twice per epoch)."""

    def build():
        a = arch(model)
        tp = measure.tp(
            model, "method=tinyattn", "model.head=linear", *((f"method.heads={heads}",) if heads > 1 else ())
        )
        sel = (min(1_000, GLUE[task][0] // 10), 40)
        name = f"{model} Tiny-Attn-{heads}H{tag}, {LABEL[task]}"
        return [
            glue_run(
                name,
                a,
                task,
                "fp32",
                tp,
                False,
                20,
                16,
                copies,
                sel,
                key=f"tinyattn.{model}.{heads}{tag}.{task}.{copies}",
            )
        ]

    return estimate(f"tinyattn.{model}.{heads}H{tag}.{task}.{copies}", build)


def derived(key: str, note: str):
    return estimate(key, lambda: [], note)


def t8_rows() -> list[Row]:
    out = []
    for heads in ("1H", "4H"):
        cells = T8[heads].split()
        for task, v in zip(TASKS, cells):
            trained = heads == "1H" or task in FOUR_H
            est = glue("roberta", task, int(heads[0])) if trained else glue("roberta", task, 1)
            out.append(
                Row(
                    f"tinyattn.t8.{heads.lower()}.{task}",
                    "Table 8",
                    f"Tiny-Attn-{heads}: {LABEL[task]}" + ("" if trained else " (the 1H run)"),
                    v,
                    "make tinyattn_table8",
                    gpu=est,
                    # MNLI, QQP, MRPC print two metrics ("89.3/89.6"): the report keeps one (METRIC), not wired
                    measure=lookups.tinyattn("table8", heads.lower(), "roberta", (task,)) if "/" not in v else None,
                )
            )
        out.append(
            Row(
                f"tinyattn.t8.{heads.lower()}.avg",
                "Table 8",
                f"Tiny-Attn-{heads}: average",
                cells[-1],
                "make tinyattn_table8",
                gpu=derived(f"tinyattn.t8.{heads}.avg", "no run of its own: the mean of " "the row's cells"),
            )
        )
    out.append(
        Row(
            "tinyattn.t9.1h",
            "Table 9",
            "Tiny-Attn-1H: GLUE test server, SST-2 … STS-B, score",
            "96.2 / 62.5 / 89.3/88.8 / 71.8/89.1 / 83.6 / 90.7/87.5 / 94.4 / 91.1/90.3 / 83.5",
            "",
            absent="the GLUE test server (hidden test labels)",
        )
    )
    return out


def spec_seeds(spec: str) -> list:
    """The seeds a paper table's sweep runs by default (its ``seeds`` variable, embexp/sweep/papers/)."""
    from embexp.sweep.runner import get_table

    return list(get_table(spec).vars["seeds"].default)


def fewglue_rows() -> list[Row]:
    seeds = spec_seeds("tinyattn/table1")  # the paper: "4 additional random seeds" (App. B.1)
    n = len(seeds)
    few = estimate(
        "tinyattn.fewglue",
        lambda: [
            Run(
                f"albert-xxlarge Tiny-Attn-1H, FewGLUE {t} ({n} seeds)",
                arch("albert_xxlarge"),
                "fp32",
                measure.tp("albert_xxlarge", "method=tinyattn"),
                False,
                (Work("train", 32, tok, 20),),
                (Work("validation", n_rows, tok),),
                seq=tok,
                copies=n,
            )
            for t, n_rows, tok in (("CB", 56, 90), ("RTE", 277, 80))
        ],
    )
    return [
        Row(
            "tinyattn.t1.1h",
            "Table 1",
            f"Tiny-Attn-1H (albert-xxlarge-v2): CB / RTE ({n} seeds: {', '.join(map(str, seeds))}, the spec's)",
            "88.57±2.99 / 68.38±2.53",
            "make tinyattn_table1",
            gpu=few,
            measure=lookups.tinyattn("table1", "fewglue", "albert_xxlarge", ("cb", "rte")),
        )
    ]


def drop_rows() -> list[Row]:
    out = []
    for task, drop in (("mnli", "3.2"), ("sst2", "2.1")):
        out.append(
            Row(
                f"tinyattn.t2.{task}",
                "Table 2",
                f"Tiny-Attn-1H: {LABEL[task]} drop, roberta-large − roberta-base",
                drop,
                "make tinyattn_table2",
                gpu=glue("roberta_base", task),
            )
        )
    out.append(
        Row(
            "tinyattn.t2.avg",
            "Table 2",
            "Tiny-Attn-1H: average drop",
            "2.65",
            "make tinyattn_table2",
            gpu=derived("tinyattn.t2.avg", "no run of its own: the mean of the two drops above (and Table 8's runs)"),
        )
    )
    return out


def placement_rows() -> list[Row]:
    out = []
    for place, vals in (("sequential", "94.5 / 86.1"), ("parallel", "94.4 / 86.1")):
        tag = "" if place == "sequential" else "-para"
        est = estimate(
            f"tinyattn.t10.{place}",
            lambda tg=tag: glue("roberta_base", "sst2", 1, tg).runs + glue("roberta_base", "mnli", 1, tg).runs,
        )
        out.append(
            Row(
                f"tinyattn.t10.{place}",
                "Table 10",
                f"Tiny-Attn-1H {place} (roberta-base): SST-2 / MNLI",
                vals,
                "make tinyattn_table10",
                gpu=est,
                measure=lookups.tinyattn("table10", f"1h_{PLACE[place]}", "roberta_base", ("sst2", "mnli")),
            )
        )
    for table, label, vals, tag, heads in (
        ("Table 11", "4H without parameter averaging", "68.8 / 88.8", "-noavg", 4),
        ("Table 11", "4H with parameter averaging (Table 8's)", "69.4 / 89.2", "", 4),
        ("Table 12", "1H4D (head dim 4)", "68.0 / 87.4", "-4d", 1),
        ("Table 12", "1H (Table 8's)", "68.8 / 88.8", "", 1),
    ):
        est = estimate(
            f"tinyattn.{heads}{tag}.cola+rte",
            lambda tg=tag, h=heads: glue("roberta", "cola", h, tg).runs + glue("roberta", "rte", h, tg).runs,
        )
        out.append(
            Row(
                f"tinyattn.t{table[-2:]}.{heads}h{tag}",
                table,
                f"Tiny-Attn-{label}: CoLA / RTE",
                vals,
                f"make tinyattn_table{table[-2:]}",
                gpu=est,
                measure=lookups.tinyattn(f"table{table[-2:]}", SETTING[(heads, tag)], "roberta", ("cola", "rte")),
            )
        )
    return out


def t13_rows() -> list[Row]:
    out = []
    for i, (sst2, mnli) in enumerate(T13, start=1):
        est = (
            estimate("tinyattn.t13.seed1", lambda: glue("roberta", "sst2").runs + glue("roberta", "mnli").runs)
            if i == 1
            else estimate(
                f"tinyattn.t13.seed{i}",
                lambda s=i: glue("roberta", "sst2", tag=f" seed {s}").runs
                + glue("roberta", "mnli", tag=f" seed {s}").runs,
            )
        )
        out.append(
            Row(
                f"tinyattn.t13.seed{i}",
                "Table 13",
                f"Tiny-Attn-1H seed-{i}" + (" (Table 8's runs)" if i == 1 else "") + ": SST-2 / MNLI",
                f"{sst2} / {mnli}",
                "make tinyattn_table8 SEEDS=\"1 2 3 4 5\"",
                gpu=est,
                measure=lookups.tinyattn("table8", "1h", "roberta", ("sst2", "mnli"), (i,)),
            )
        )
    for stat, vals in (("avg", "96.1 / 89.6"), ("stdev", "0.6 / 0.1")):
        out.append(
            Row(
                f"tinyattn.t13.{stat}",
                "Table 13",
                f"Tiny-Attn-1H {stat} over the 5 seeds: SST-2 / MNLI",
                vals,
                "make tinyattn_table8 SEEDS=\"1 2 3 4 5\"",
                gpu=derived(f"tinyattn.t13.{stat}", "no run of its own: over the five seeds above"),
            )
        )
    return out


def rows() -> list[Row]:
    return t8_rows() + fewglue_rows() + drop_rows() + placement_rows() + t13_rows()
