"""Tiny-Attention (papers/tiny-attention.md): the ledger's rows of the paper, whose printed cells are
ledger/printed/tinyattn.csv. Trainable-parameter counts and shares on roberta-large and roberta-base,
the PLMs' sizes (§4.1), the GLUE training-set sizes (Table 3) and label balance (App. B.1) from the real
data; Tables 4–7, the hyper-parameters of the paper's best runs, against the experiment configs embexp
runs them with (conf/experiment/tinyattn_*.yaml). Every score needs a GPU: roberta-large (and -base)
frozen with tiny-attention adapters, 20 epochs, batch 16, fp32 (conf/trainer/tinyattn_paper.yaml)."""

from __future__ import annotations

from embexp.report.ledger import measured, sources
from embexp.report.ledger.core import Compute
from embexp.report.ledger.runs import GLUE, Run, Work, arch, derived, estimate, glue_run
from embexp.studies.vocab import GLUE_LABELS

HEAD = "model.head=linear"  # the authors' Linear(d, n) head on <s>, every tinyattn GLUE experiment
TASKS = ("sst2", "cola", "mnli", "qqp", "rte", "mrpc", "qnli", "stsb")  # Tables 3 and 8's tasks
# MNLI, QQP and MRPC print two metrics ("89.3/89.6"): the report keeps one (METRIC), so their rows read no runs
TWO_METRICS = ("mnli", "qqp", "mrpc")
FOUR_H = ("cola", "rte", "mrpc", "qnli")  # the tasks 4H was trained on (Table 5); the other 4H cells are 1H's
PLACE = {"sequential": "seq", "parallel": "para"}  # Table 10's run tags: 1h_seq, 1h_para
# the run tags (report/tinyattn.py cells) of Tables 11 and 12's rows, by (heads, the estimate's tag)
SETTING = {(4, "-noavg"): "4h_noavg", (4, ""): "4h", (1, "-4d"): "1h4d", (1, ""): "1h"}
# each hyper-parameter table's experiments (conf/experiment/<name>.yaml); Table 6 prints no warm-up column
HP_TABLES = {
    "t4": ("tinyattn_1h_sst2", "tinyattn_1h_cola", "tinyattn_1h_mnli", "tinyattn_1h_qqp", "tinyattn_1h_rte",
           "tinyattn_1h_mrpc", "tinyattn_1h_qnli", "tinyattn_1h_stsb"),
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
            lambda d, s=s: sources.n_rows("glue", s, "train", d), data=(sources.glue_file(s, "train"),)
        )
        for s in TASKS
    }
    out["tinyattn.b1.mrpc.positive"] = Compute(
        lambda d: share("mrpc", "train", 1, d), data=(sources.glue_file("mrpc", "train"),)
    )
    out["tinyattn.b1.qqp.negative"] = Compute(
        lambda d: share("qqp", "train", 0, d), data=(sources.glue_file("qqp", "train"),)
    )
    for sub in ("cb", "rte"):
        out[f"tinyattn.t1.{sub}.fewglue"] = Compute(
            lambda d, s=sub: sources.n_rows("superglue", s, "train_fewglue32", d),
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
def glue(model: str, task: str, heads: int = 1, tag: str = "", copies: int = 1):
    """One adapter run on a GLUE task (selection: 10% of the training rows, at most 1,000, twice per epoch)."""

    def build():
        sel = (min(1_000, GLUE[task][0] // 10), 40)
        name = f"{model} Tiny-Attn-{heads}H{tag}, {GLUE_LABELS[task]}"
        return [
            glue_run(
                name,
                arch(model),
                task,
                "fp32",
                one_h(model, heads),
                False,
                20,
                16,
                copies,
                sel,
                key=f"tinyattn.{model}.{heads}{tag}.{task}.{copies}",
            )
        ]

    return estimate(f"tinyattn.{model}.{heads}H{tag}.{task}.{copies}", build)


def t8_computes() -> dict:
    out = {}
    for heads in ("1h", "4h"):
        for task in TASKS:
            trained = heads == "1h" or task in FOUR_H
            est = glue("roberta", task, int(heads[0])) if trained else glue("roberta", task, 1)
            look = None if task in TWO_METRICS else measured.tinyattn("table8", heads, "roberta", (task,))
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
                sources.tp("albert_xxlarge", "method=tinyattn"),
                False,
                (Work("train", 32, tok, 20),),
                (Work("validation", n_rows, tok),),
                seq=tok,
                copies=n,
            )
            for t, n_rows, tok in (("CB", 56, 90), ("RTE", 277, 80))
        ],
    )
    look = measured.tinyattn("table1", "fewglue", "albert_xxlarge", ("cb", "rte"))
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
        look = measured.tinyattn("table10", f"1h_{PLACE[place]}", "roberta_base", ("sst2", "mnli"))
        out[f"tinyattn.t10.{place}"] = Compute(gpu=est, measure=look)
    for table, tag, heads in (("11", "-noavg", 4), ("11", "", 4), ("12", "-4d", 1), ("12", "", 1)):
        est = estimate(
            f"tinyattn.{heads}{tag}.cola+rte",
            lambda tg=tag, h=heads: glue("roberta", "cola", h, tg).runs + glue("roberta", "rte", h, tg).runs,
        )
        look = measured.tinyattn(f"table{table}", SETTING[(heads, tag)], "roberta", ("cola", "rte"))
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
        look = measured.tinyattn("table8", "1h", "roberta", ("sst2", "mnli"), (i,))
        out[f"tinyattn.t13.seed{i}"] = Compute(gpu=est, measure=look)
    for stat in ("avg", "stdev"):
        note = "no run of its own: over the five seeds above"
        out[f"tinyattn.t13.{stat}"] = Compute(gpu=derived(f"tinyattn.t13.{stat}", note))
    return out


def computes() -> dict:
    return {**param_computes(), **data_computes(), **hp_computes(), **t8_computes(), **fewglue_computes(),
            **drop_computes(), **placement_computes(), **t13_computes()}
