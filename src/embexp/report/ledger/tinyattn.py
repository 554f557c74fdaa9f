"""Tiny-Attention (papers/tiny-attention.md): the ledger's rows of the paper, whose printed cells are
ledger/printed/tinyattn.csv. Trainable-parameter counts and shares on roberta-large and roberta-base,
the PLMs' sizes (§4.1), the GLUE training-set sizes (Table 3) and label balance (App. B.1) from the real
data; Tables 4–7, the hyper-parameters of the paper's best runs, against the experiment configs embexp
runs them with (conf/experiment/tinyattn_*.yaml). Every score needs a GPU (its recipe: ledger/runs.py); the
scores of one run set are read from finished runs (ledger/measured.py)."""

from __future__ import annotations

from functools import partial

from embexp.report import tinyattn as report
from embexp.report.ledger import measured, sources
from embexp.report.ledger.core import Compute

HEAD = "model.head=linear"  # the authors' Linear(d, n) head on <s>, every tinyattn GLUE experiment
TASKS = ("sst2", "cola", "mnli", "qqp", "rte", "mrpc", "qnli", "stsb")  # Tables 3 and 8's tasks
# MNLI, QQP and MRPC print two metrics ("89.3/89.6"): the report keeps one (METRIC), so their rows read no runs
TWO_METRICS = ("mnli", "qqp", "mrpc")
# the rows of Tables 11 and 12 that repeat Table 8's settings on CoLA and RTE: (row id, the setting's tag)
REPEATS = (("tinyattn.t11.4h", "4h"), ("tinyattn.t12.1h", "1h"))
# each hyper-parameter table's experiments (conf/experiment/<name>.yaml); Table 6 prints no warm-up column
HP_TABLES = {
    "t4": tuple(f"tinyattn_1h_{task}" for task in TASKS),
    "t5": ("tinyattn_4h_cola", "tinyattn_4h_rte", "tinyattn_4h_mrpc", "tinyattn_4h_qnli"),
    "t6": ("tinyattn_base_seq_sst2", "tinyattn_base_para_sst2", "tinyattn_base_seq_mnli", "tinyattn_base_para_mnli"),
    "t7": ("tinyattn_4h_noavg_cola", "tinyattn_4h_noavg_rte"),
}
INTRO = (
    "Tables 1–14 and the numbers of §4. Not listed: the rows of other methods that the paper quotes from other "
    "papers (AdaMix, AdapterH/P, LoRA, WARP, fine-tuning, PET, GPT-3, human baselines, Prefix-Tuning), and Figs. 1–4 "
    "(diagrams, and plots of Tables 8 and 2)."
)
NOTES = {
    "Table 8": "Counts on a binary task with the authors' head (model.head=linear); shares of roberta-large's "
    "355,359,744 parameters. One run per task at the paper's chosen hyper-parameters (the paper ran about 80 per "
    "task in its search). 4H is warm-started from the 1H run and trained on CoLA, RTE, MRPC and QNLI; its other "
    "cells are 1H's.",
    "Table 3 (App. B.1)": "Rows of the training split the task reads (task.data_dir=$EMBEXP_DATA).",
    "Table 6 (roberta-base)": "The paper: warm-up in every roberta-base run (ours: warmup_steps > 0 in each).",
    "Table 9": "GLUE test-server scores: embexp cannot submit to the GLUE server.",
}


def plm(model: str) -> int:
    """Parameters of the pretrained model (the base class with its pooler, no task head)."""
    return sources.count(model, "method=full_ft", num_labels=0)["total"]


def one_h(model: str, heads: int = 1) -> int:
    """Tiny-Attention's trainable parameters with the authors' head, `heads` heads per module."""
    return sources.tp(model, "method=tinyattn", HEAD, *((f"method.heads={heads}",) if heads > 1 else ()))


def param_computes() -> dict:
    plms = ("roberta", "albert_xxlarge", "roberta_base")
    return {
        **{f"tinyattn.s41.{m}.size": Compute(lambda _d, m=m: plm(m)) for m in plms},
        "tinyattn.t8.1h.tp": Compute(lambda _d: one_h("roberta")),
        "tinyattn.t8.1h.pct": Compute(lambda _d: 100 * one_h("roberta") / plm("roberta")),
        "tinyattn.t8.4h.tp": Compute(lambda _d: one_h("roberta", 4)),
        "tinyattn.t8.4h.pct": Compute(lambda _d: 100 * one_h("roberta", 4) / plm("roberta")),
        "tinyattn.t9.1h.tp": Compute(lambda _d: one_h("roberta")),
        "tinyattn.fig4.1h.pct": Compute(lambda _d: 100 * one_h("roberta_base") / plm("roberta_base")),
    }


def share(subset: str, split: str, label: int, d) -> float:
    rows = sources.rows("glue", subset, split, d)
    return 100 * sum(r["label"] == label for r in rows) / len(rows)


def data_computes() -> dict:
    out = {
        f"tinyattn.t3.{s}.train": Compute(
            lambda d, s=s: len(sources.rows("glue", s, "train", d)), data=(sources.glue_file(s, "train"),)
        )
        for s in TASKS
    }
    for subset, label, name in (("mrpc", 1, "positive"), ("qqp", 0, "negative")):
        out[f"tinyattn.b1.{subset}.{name}"] = Compute(lambda d, s=subset, y=label: share(s, "train", y, d),
                                                     data=(sources.glue_file(subset, "train"),))
    for sub in ("cb", "rte"):
        out[f"tinyattn.t1.{sub}.fewglue"] = Compute(
            lambda d, s=sub: len(sources.rows("superglue", s, "train_fewglue32", d)),
            data=(f"super_glue/{sub}/train_fewglue32.jsonl",),
        )
    return out


def sci(x: float) -> str:
    mant, exp = f"{x:e}".split("e")
    return f"{float(mant):g}E{int(exp)}"


def hp(experiment: str, warmup_column: bool) -> str:
    """'lr / dec / warmup / scheduler' of the composed experiment, written as the paper's tables."""
    model = "roberta_base" if "_base_" in experiment else "roberta"
    t = sources.composed(f"experiment={experiment}", f"model={model}").trainer
    cells = [sci(t.lr), f"{t.weight_decay:g}"] + (["yes" if t.warmup_steps > 0 else "no"] if warmup_column else [])
    return " / ".join(cells + [str(t.scheduler)])


def hp_computes() -> dict:
    return {
        f"tinyattn.{t}.{exp}": Compute(lambda _d, e=exp, w=t != "t6": hp(e, w))
        for t, experiments in HP_TABLES.items()
        for exp in experiments
    }


def measure_computes() -> dict:
    """The lookups of the GPU rows whose cells are one setting's metrics (Tables 1, 8, 10–13)."""
    look = measured.tinyattn
    out = {
        f"tinyattn.t8.{heads}.{task}": Compute(measure=partial(look, "table8", heads, "roberta", (task,), ()))
        for heads in ("1h", "4h")
        for task in TASKS
        if task not in TWO_METRICS
    }
    # the rows that are one setting's runs on two tasks: those the report prints one row for, and REPEATS
    sets = [(rid, tag, model, tasks) for (tag, model), (rid, tasks) in report.PRINTED.items() if tasks]
    for rid, tag, model, tasks in sets + [(rid, tag, "roberta", ("cola", "rte")) for rid, tag in REPEATS]:
        out[rid] = Compute(measure=partial(look, "table" + rid.split(".")[1][1:], tag, model, tasks, ()))
    for i in range(1, 6):
        out[f"tinyattn.t13.seed{i}"] = Compute(measure=partial(look, "table8", "1h", "roberta", ("sst2", "mnli"), (i,)))
    return out


def computes() -> dict:
    return {**param_computes(), **data_computes(), **hp_computes(), **measure_computes()}
