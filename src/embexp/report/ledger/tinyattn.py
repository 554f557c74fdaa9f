"""Tiny-Attention (papers/tiny-attention.md): trainable-parameter counts and shares on roberta-large and
roberta-base, the PLMs' sizes (§4.1), the GLUE training-set sizes (Table 3) and label balance (App. B.1)
from the real data; every score needs a GPU (ledger/tinyattn_gpu.py)."""

from __future__ import annotations

from embexp.report.ledger import data, measure
from embexp.report.ledger.core import Row
from embexp.studies.vocab import GLUE_LABELS

HEAD = "model.head=linear"  # the authors' Linear(d, n) head on <s>, every tinyattn GLUE experiment
PARAMS = "python -m embexp.analyze params models=[{m}] methods=[tinyattn]"
MISSING = (
    "1,846 fewer than 176,000: 192 are torch MHA's in/out projections (method.mha_proj=true gives the authors' "
    "174,346), the other 1,654 are in no published code (docs/methods_tinyattn.md)"
)
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


def param_rows() -> list[Row]:
    total = "python -m embexp.analyze params models=[{m}] methods=[full_ft] num_labels=0"
    out = [
        Row(
            f"tinyattn.s41.{m}.size",
            "§4.1 (text)",
            f"{label}: parameters",
            v,
            total.format(m=m),
            lambda _d, m=m: plm(m),
        )
        for m, label, v in (
            ("roberta", "roberta-large", "355M"),
            ("albert_xxlarge", "albert-xxlarge-v2", "223M"),
            ("roberta_base", "roberta-base", "125M"),
        )
    ]
    out += [
        Row(
            "tinyattn.t8.1h.tp",
            "Table 8",
            "Tiny-Attn-1H: # trainable para",
            "176K",
            PARAMS.format(m="roberta"),
            lambda _d: one_h("roberta"),
            MISSING,
            "174K",
        ),
        Row(
            "tinyattn.t8.1h.pct",
            "Table 8",
            "Tiny-Attn-1H: percentage",
            "0.05%",
            PARAMS.format(m="roberta"),
            lambda _d: 100 * one_h("roberta") / plm("roberta"),
        ),
        Row(
            "tinyattn.t8.4h.tp",
            "Table 8",
            "Tiny-Attn-4H: # trainable para",
            "0.7M",
            PARAMS.format(m="roberta"),
            lambda _d: one_h("roberta", 4),
        ),
        Row(
            "tinyattn.t8.4h.pct",
            "Table 8",
            "Tiny-Attn-4H: percentage",
            "0.2%",
            PARAMS.format(m="roberta"),
            lambda _d: 100 * one_h("roberta", 4) / plm("roberta"),
        ),
        Row(
            "tinyattn.t9.1h.tp",
            "Table 9",
            "Tiny-Attn-1H: # trainable para",
            "176K",
            PARAMS.format(m="roberta"),
            lambda _d: one_h("roberta"),
            MISSING,
            "174K",
        ),
        Row(
            "tinyattn.fig4.1h.pct",
            "Fig. 4 (§4.2 text)",
            "Tiny-Attn-1H on roberta-base: share of the PLM",
            "0.05%",
            PARAMS.format(m="roberta_base"),
            lambda _d: 100 * one_h("roberta_base") / plm("roberta_base"),
        ),
        Row(
            "tinyattn.t14.tp",
            "Table 14",
            "Tiny-Attn on gpt2-medium: # trainable para",
            "0.1M",
            "",
            absent="embexp has no GPT-2 family (models/sites.py) nor the E2E NLG task",
        ),
    ]
    return out


LABEL = {k: v for k, v in GLUE_LABELS.items() if k != "wnli"}  # Table 8's tasks
TRAIN = {
    "sst2": "67k",
    "cola": "8.5k",
    "mnli": "393k",
    "qqp": "364k",
    "rte": "2.5k",
    "mrpc": "3.7k",
    "qnli": "105k",
    "stsb": "7k",
}
TRAIN_DIFFERS = {"cola": ("8.6k", "the paper truncates 8,551 to 8.5k")}


def size_row(subset: str, printed: str) -> Row:
    expected, reason = TRAIN_DIFFERS.get(subset, ("", ""))
    return Row(
        f"tinyattn.t3.{subset}.train",
        "Table 3 (App. B.1)",
        f"{LABEL[subset]}: |train|",
        printed,
        f"python -m embexp.train task=glue task.subset={subset} task.data_dir=$EMBEXP_DATA (n_train_examples)",
        lambda d, s=subset: data.n_rows("glue", s, "train", d),
        reason,
        expected,
        data=(data.glue_file(subset, "train"),),
    )


def share(subset: str, split: str, label: int, d) -> float:
    rows = data.rows("glue", subset, split, d)
    return 100 * sum(r["label"] == label for r in rows) / len(rows)


def data_rows() -> list[Row]:
    out = [size_row(s, v) for s, v in TRAIN.items()]
    mrpc = (
        "the training split has 2,474 of 3,668 positive (67.4%); 68% is the validation split's share (279 of 408, "
        "68.4%)"
    )
    out += [
        Row(
            "tinyattn.b1.mrpc.positive",
            "App. B.1 (text)",
            "MRPC training labels: positive share",
            "68%",
            "python -m embexp.analyze split source=$EMBEXP_DATA/glue/mrpc/train.jsonl (label counts)",
            lambda d: share("mrpc", "train", 1, d),
            mrpc,
            "67%",
            data=(data.glue_file("mrpc", "train"),),
        ),
        Row(
            "tinyattn.b1.qqp.negative",
            "App. B.1 (text)",
            "QQP training labels: negative share",
            "63%",
            "",
            lambda d: share("qqp", "train", 0, d),
            data=(data.glue_file("qqp", "train"),),
        ),
    ]
    for sub in ("cb", "rte"):
        out.append(
            Row(
                f"tinyattn.t1.{sub}.fewglue",
                "Table 1",
                f"FewGLUE {sub.upper()}: training examples",
                "32",
                f"python -m embexp.train task=superglue task.subset={sub} task.train_split=train_fewglue32",
                lambda d, s=sub: data.n_rows("superglue", s, "train_fewglue32", d),
                data=(f"super_glue/{sub}/train_fewglue32.jsonl",),
            )
        )
    return out


def rows() -> list[Row]:
    return param_rows() + data_rows()
