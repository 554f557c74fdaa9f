"""Tiny-Attention (papers/tiny-attention.md): the score cells, which need a GPU: roberta-large (and
-base) frozen with tiny-attention adapters, 20 epochs, batch 16, fp32 (conf/trainer/tinyattn_paper.yaml).
The printed cells are ledger/printed/tinyattn.csv."""

from __future__ import annotations

from embexp.report.ledger import lookups, measure
from embexp.report.ledger.core import Compute
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
# MNLI, QQP and MRPC print two metrics ("89.3/89.6"): the report keeps one (METRIC), so their rows read no runs
TWO_METRICS = ("mnli", "qqp", "mrpc")
FOUR_H = ("cola", "rte", "mrpc", "qnli")  # the tasks 4H was trained on (Table 5); the other 4H cells are 1H's
PLACE = {"sequential": "seq", "parallel": "para"}  # Table 10's run tags: 1h_seq, 1h_para
# the run tags (report/tinyattn.py cells) of Tables 11 and 12's rows, by (heads, the estimate's tag)
SETTING = {(4, "-noavg"): "4h_noavg", (4, ""): "4h", (1, "-4d"): "1h4d", (1, ""): "1h"}
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


def t8_computes() -> dict:
    out = {}
    for heads in ("1h", "4h"):
        for task in TASKS:
            trained = heads == "1h" or task in FOUR_H
            est = glue("roberta", task, int(heads[0])) if trained else glue("roberta", task, 1)
            look = None if task in TWO_METRICS else lookups.tinyattn("table8", heads, "roberta", (task,))
            out[f"tinyattn.t8.{heads}.{task}"] = Compute(gpu=est, measure=look)
        note = "no run of its own: the mean of the row's cells"
        out[f"tinyattn.t8.{heads}.avg"] = Compute(gpu=derived(f"tinyattn.t8.{heads.upper()}.avg", note))
    return out


def spec_seeds(spec: str) -> list:
    """The seeds a paper table's sweep runs by default (its ``seeds`` variable, embexp/sweep/papers/)."""
    from embexp.sweep.runner import get_table

    return list(get_table(spec).vars["seeds"].default)


def fewglue_computes() -> dict:
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
    look = lookups.tinyattn("table1", "fewglue", "albert_xxlarge", ("cb", "rte"))
    return {"tinyattn.t1.1h": Compute(gpu=few, measure=look)}


def drop_computes() -> dict:
    note = "no run of its own: the mean of the two drops above (and Table 8's runs)"
    return {
        "tinyattn.t2.mnli": Compute(gpu=glue("roberta_base", "mnli")),
        "tinyattn.t2.sst2": Compute(gpu=glue("roberta_base", "sst2")),
        "tinyattn.t2.avg": Compute(gpu=derived("tinyattn.t2.avg", note)),
    }


def placement_computes() -> dict:
    out = {}
    for place in ("sequential", "parallel"):
        tag = "" if place == "sequential" else "-para"
        est = estimate(
            f"tinyattn.t10.{place}",
            lambda tg=tag: glue("roberta_base", "sst2", 1, tg).runs + glue("roberta_base", "mnli", 1, tg).runs,
        )
        look = lookups.tinyattn("table10", f"1h_{PLACE[place]}", "roberta_base", ("sst2", "mnli"))
        out[f"tinyattn.t10.{place}"] = Compute(gpu=est, measure=look)
    for table, tag, heads in (("11", "-noavg", 4), ("11", "", 4), ("12", "-4d", 1), ("12", "", 1)):
        est = estimate(
            f"tinyattn.{heads}{tag}.cola+rte",
            lambda tg=tag, h=heads: glue("roberta", "cola", h, tg).runs + glue("roberta", "rte", h, tg).runs,
        )
        look = lookups.tinyattn(f"table{table}", SETTING[(heads, tag)], "roberta", ("cola", "rte"))
        out[f"tinyattn.t{table}.{heads}h{tag}"] = Compute(gpu=est, measure=look)
    return out


def t13_computes() -> dict:
    out = {}
    for i in range(1, 6):
        est = (
            estimate("tinyattn.t13.seed1", lambda: glue("roberta", "sst2").runs + glue("roberta", "mnli").runs)
            if i == 1
            else estimate(
                f"tinyattn.t13.seed{i}",
                lambda s=i: glue("roberta", "sst2", tag=f" seed {s}").runs
                + glue("roberta", "mnli", tag=f" seed {s}").runs,
            )
        )
        look = lookups.tinyattn("table8", "1h", "roberta", ("sst2", "mnli"), (i,))
        out[f"tinyattn.t13.seed{i}"] = Compute(gpu=est, measure=look)
    for stat in ("avg", "stdev"):
        note = "no run of its own: over the five seeds above"
        out[f"tinyattn.t13.{stat}"] = Compute(gpu=derived(f"tinyattn.t13.{stat}", note))
    return out


def computes() -> dict:
    return {**t8_computes(), **fewglue_computes(), **drop_computes(), **placement_computes(), **t13_computes()}
