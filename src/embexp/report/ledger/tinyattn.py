"""Tiny-Attention (papers/tiny-attention.md): trainable-parameter counts and shares on roberta-large and
roberta-base, the PLMs' sizes (§4.1), the GLUE training-set sizes (Table 3) and label balance (App. B.1)
from the real data; every score needs a GPU (ledger/tinyattn_gpu.py). The printed cells are
ledger/printed/tinyattn.csv."""

from __future__ import annotations

from embexp.report.ledger import data, measure
from embexp.report.ledger.core import Compute

HEAD = "model.head=linear"  # the authors' Linear(d, n) head on <s>, every tinyattn GLUE experiment
INTRO = (
    "Tables 1–14 and the numbers of §4. Not listed: the rows of other methods that the paper quotes from other "
    "papers (AdaMix, AdapterH/P, LoRA, WARP, fine-tuning, PET, GPT-3, human baselines, Prefix-Tuning), and Figs. 1–4 "
    "(diagrams, and plots of Tables 8 and 2)."
)
NOTES = {
    "Table 8": "Counts on a binary task with the authors' head (model.head=linear); shares of roberta-large's "
    "355,359,744 "
    "parameters.",
    "Table 3 (App. B.1)": "Rows of the training split the task reads (task.data_dir=$EMBEXP_DATA).",
}


def plm(model: str) -> int:
    """Parameters of the pretrained model (the base class with its pooler, no task head)."""
    return measure.count(model, "method=full_ft", num_labels=0)["total"]


def one_h(model: str, heads: int = 1) -> int:
    return measure.tp(model, "method=tinyattn", HEAD, *((f"method.heads={heads}",) if heads > 1 else ()))


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


TRAIN = ("sst2", "cola", "mnli", "qqp", "rte", "mrpc", "qnli", "stsb")  # Table 3's tasks


def share(subset: str, split: str, label: int, d) -> float:
    rows = data.rows("glue", subset, split, d)
    return 100 * sum(r["label"] == label for r in rows) / len(rows)


def data_computes() -> dict:
    out = {
        f"tinyattn.t3.{s}.train": Compute(
            lambda d, s=s: data.n_rows("glue", s, "train", d), data=(data.glue_file(s, "train"),)
        )
        for s in TRAIN
    }
    out["tinyattn.b1.mrpc.positive"] = Compute(
        lambda d: share("mrpc", "train", 1, d), data=(data.glue_file("mrpc", "train"),)
    )
    out["tinyattn.b1.qqp.negative"] = Compute(
        lambda d: share("qqp", "train", 0, d), data=(data.glue_file("qqp", "train"),)
    )
    for sub in ("cb", "rte"):
        out[f"tinyattn.t1.{sub}.fewglue"] = Compute(
            lambda d, s=sub: data.n_rows("superglue", s, "train_fewglue32", d),
            data=(f"super_glue/{sub}/train_fewglue32.jsonl",),
        )
    return out


def computes() -> dict:
    return {**param_computes(), **data_computes()}
