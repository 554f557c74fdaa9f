"""PEMA (papers/pema.md), part 1 (part 2: pema_tables.py; the GPU rows: pema_gpu.py): Tables 5 and 6
(vocabulary and parameters of the registry's models, on the meta device) and Table 2's BERT and
DistilBERT cells on the GLUE tasks whose splits are in EMBEXP_DATA (the uncased WordPiece of
all-MiniLM-L6-v2 = bert-base-uncased's); Table 2's other models need the hub's tokenizers. The printed
cells are ledger/printed/pema.csv."""

from __future__ import annotations

from functools import lru_cache

from embexp.report.ledger import data
from embexp.report.ledger.core import Compute
from embexp.studies.vocab import GLUE

# the registry models of Tables 5 and 6
T5 = ("distilbert", "distilroberta", "distilmbert", "bert", "roberta_base", "deberta", "mbert", "xlmr", "xlmv")
T6 = ("deberta_v3_xsmall", "deberta_v3_small", "deberta", "deberta_v3_large")

INTRO = (
    "Tables 1–10 and the numbers of §3 and §6. Not listed: Fig. 1 (a diagram), Fig. 2's curves (its claims "
    "are rows), Table 6's l, h and d_model (stored config fields) and Table 9's % column (the ratio of its two "
    "other columns)."
)
NOTES = {
    "Table 5": "The registry's stored config fields (studies/vocab.py MODELS) built on the meta device with a 2-class "
    "sequence-classification head.",
    "Table 2": "Counting as the authors' run_glue_pema.py (docs/pema.md): train + validation + test, the ids that "
    "occur "
    "plus pad, inputs truncated at 128; BERT WordPiece = all-MiniLM-L6-v2's tokenizer (tokenizer_override=minilm), "
    "offline.",
    "Table 7": "Rows of each split's file as the task reads it (`task.data_dir=$EMBEXP_DATA`).",
}


@lru_cache(maxsize=None)
def shape(model: str) -> tuple[int, int, int]:
    """(embedding rows, dim, parameters) of a registry model with a 2-class head, on the meta device."""
    from embexp.studies import vocab

    return vocab.shape_of(vocab.model_config(model, 2))


def t5_value(model: str, col: int) -> float:
    rows, dim, n = shape(model)
    return (rows, rows * dim, n, 100 * rows * dim / n)[col]


def t5_computes() -> dict:
    cols = ("v", "n_emb", "n", "n_emb_n")
    out = {f"pema.t5.{m}.{col}": Compute(lambda _d, m=m, i=i: t5_value(m, i)) for m in T5 for i, col in enumerate(cols)}
    for m in T6:
        out.update({f"pema.t6.{m}.{col}": Compute(lambda _d, m=m, i=i: t5_value(m, i)) for i, col in enumerate(cols)
                    if i})
    return out


SPLIT_FILES = {"mnli": ("train", "validation_matched", "validation_mismatched", "test_matched", "test_mismatched")}


def glue_files(subset: str) -> tuple:
    return tuple(data.glue_file(subset, s) for s in SPLIT_FILES.get(subset, ("train", "validation", "test")))


@lru_cache(maxsize=None)
def table2_cells(subset: str, data_dir: str) -> dict:
    """{model: record} of Table 2 for BERT and DistilBERT on one GLUE task, counted as the paper counts
    (``studies.vocab.table_cells``: train + validation + test, what occurs plus pad) with the BERT uncased
    WordPiece (minilm) on the local files."""
    from embexp.studies.vocab import table_cells

    recs = table_cells(what="table2", models=["bert", "distilbert"], subsets=[subset], source="local",
                       data_dir=data_dir, tokenizer_override="minilm")
    return {r["model"]: r for r in recs}


def t2_computes() -> dict:
    out = {}
    for model in ("distilbert", "bert"):
        for kind, key in (("embedding", "embedding_pct"), ("model", "model_pct")):
            for s in GLUE:
                out[f"pema.t2.{model}.{s}.{kind}"] = Compute(
                    lambda d, m=model, s=s, k=key: table2_cells(s, str(d))[m][k], data=glue_files(s)
                )
            out[f"pema.t2.{model}.mean.{kind}"] = Compute(
                lambda d, m=model, k=key: sum(table2_cells(s, str(d))[m][k] for s in GLUE) / len(GLUE),
                data=tuple(f for s in GLUE for f in glue_files(s)),
            )
    return out


def computes() -> dict:
    return {**t5_computes(), **t2_computes()}
