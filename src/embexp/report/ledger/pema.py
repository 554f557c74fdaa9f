"""PEMA (papers/pema.md), part 1 (part 2: pema_tables.py; the GPU rows: pema_gpu.py): Tables 5 and 6
(vocabulary and parameters of the registry's models, on the meta device) and Table 2's BERT and
DistilBERT cells on the GLUE tasks whose splits are in EMBEXP_DATA (the uncased WordPiece of
all-MiniLM-L6-v2 = bert-base-uncased's); Table 2's other models need the hub's tokenizers."""

from __future__ import annotations

from functools import lru_cache

from embexp.report.ledger import data
from embexp.report.ledger.core import Row
from embexp.studies.vocab import GLUE, GLUE_LABELS

T5 = {  # registry name: (row label, |V|, N_emb, N, N_emb/N) as printed
    "distilbert": ("DistilBERT", "28,996", "22.3M", "65.8M", "33.9%"),
    "distilroberta": ("DistilRoBERTa", "50,265", "38.6M", "82.1M", "47.0%"),
    "distilmbert": ("DistilmBERT", "119,547", "91.8M", "135.3M", "67.8%"),
    "bert": ("BERT", "28,996", "22.3M", "108.3M", "20.6%"),
    "roberta_base": ("RoBERTa", "50,265", "38.6M", "124.6M", "31.0%"),
    "deberta": ("DeBERTaV3", "128,100", "98.4M", "184.4M", "53.3%"),
    "mbert": ("mBERT", "119,547", "91.8M", "177.9M", "51.6%"),
    "xlmr": ("XLNet-RoBERTa (sic: XLM-RoBERTa)", "250,002", "192.0M", "278.0M", "69.1%"),
    "xlmv": ("XLNet-V (sic: XLM-V)", "901,629", "692.5M", "778.5M", "88.9%"),
}
T6 = {
    "deberta_v3_xsmall": ("XSmall", "49.2M", "70.8M", "69.4%"),
    "deberta_v3_small": ("Small", "98.4M", "141.9M", "69.3%"),
    "deberta": ("Base", "98.4M", "184.4M", "53.3%"),
    "deberta_v3_large": ("Large", "131.2M", "435.1M", "30.2%"),
}
CASED = (
    "Table 5 prints the cased checkpoint (28,996 rows); every BERT/DistilBERT cell of Table 2 needs the uncased "
    "vocabulary (30,522 rows), which the registry holds (studies/vocab.py, tests/test_pema.py)"
)
T5_DIFFERS = {
    ("bert", 0): "30,522",
    ("bert", 1): "23.4M",
    ("bert", 2): "109.5M",
    ("bert", 3): "21.4%",
    ("distilbert", 0): "30,522",
    ("distilbert", 1): "23.4M",
    ("distilbert", 2): "67.0M",
    ("distilbert", 3): "35.0%",
}
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


def t5_rows() -> list[Row]:
    out, cols = [], ("|V|", "N_emb", "N", "N_emb/N")
    cmd = (
        "python -c 'from embexp.studies.vocab import model_config, shape_of; print(shape_of(model_config(\"{m}\", 2)))'"
    )
    for m, (label, *printed) in T5.items():
        for i, (col, p) in enumerate(zip(cols, printed)):
            exp = T5_DIFFERS.get((m, i), "")
            out.append(
                Row(
                    f"pema.t5.{m}.{col.lower().replace('/', '_').replace('|', '')}",
                    "Table 5",
                    f"{label}: {col}",
                    p,
                    cmd.format(m=m),
                    lambda _d, m=m, i=i: t5_value(m, i),
                    CASED if exp else "",
                    exp,
                )
            )
    for m, (label, *printed) in T6.items():
        for i, (col, p) in enumerate(zip(cols[1:], printed), start=1):
            out.append(
                Row(
                    f"pema.t6.{m}.{col.lower().replace('/', '_')}",
                    "Table 6",
                    f"{label}: {col}",
                    p,
                    cmd.format(m=m),
                    lambda _d, m=m, i=i: t5_value(m, i),
                )
            )
    return out


LABEL = GLUE_LABELS  # the paper's task names
T2 = {  # label: (embedding %, model %) per GLUE task + mean, as printed
    "DistilBERT": (
        "80.1 14.8 54.9 13.1 11.5 41.5 57.9 57.2 94.3 47.3",
        "28.0 5.2 19.2 4.6 4.0 14.5 20.3 20.0 33.0 16.5",
    ),
    "DistilRoBERTa": (
        "86.1 14.8 64.0 17.7 5.9 51.6 68.6 64.4 96.0 52.1",
        "40.5 7.0 30.1 8.3 2.8 24.3 32.3 30.3 45.1 24.5",
    ),
    "DistilmBERT": (
        "94.9 76.9 88.2 73.8 72.7 85.0 91.9 88.8 98.4 85.6",
        "64.4 52.2 59.9 50.1 49.3 57.7 62.3 60.2 66.8 58.1",
    ),
    "BERT": ("80.1 14.8 54.9 13.1 11.5 41.5 57.9 57.2 94.3 47.3", "17.1 3.2 11.8 2.8 2.5 8.9 12.4 12.2 20.2 10.1"),
    "RoBERTa": ("86.1 14.8 64.0 17.7 5.9 51.6 68.6 64.4 96.0 52.1", "26.7 4.6 19.8 5.5 1.8 16.0 21.2 19.9 29.7 16.1"),
    "DeBERTaV3": (
        "95.0 44.3 85.7 47.1 28.5 79.0 87.5 85.9 98.6 72.4",
        "50.7 23.6 45.7 25.1 15.2 42.1 46.7 45.8 52.6 38.6",
    ),
    "mBERT": ("94.9 76.9 88.2 73.8 72.7 85.0 91.9 88.8 98.4 85.6", "49.0 39.7 45.5 38.1 37.5 43.9 47.4 45.8 50.8 44.2"),
    "XLM-RoBERTa": (
        "97.8 88.8 94.9 87.6 85.4 93.3 96.3 94.9 99.3 93.1",
        "67.5 61.3 65.5 60.5 59.0 64.4 66.5 65.5 68.5 64.3",
    ),
    "XLM-V": ("99.3 93.2 98.0 92.8 90.5 97.1 98.3 98.0 99.8 96.3", "88.3 82.9 87.2 82.6 80.5 86.4 87.5 87.2 88.8 85.7"),
}
REGISTRY = {
    "DistilRoBERTa": "distilroberta",
    "DistilmBERT": "distilmbert",
    "RoBERTa": "roberta_base",
    "DeBERTaV3": "deberta",
    "mBERT": "mbert",
    "XLM-RoBERTa": "xlmr",
    "XLM-V": "xlmv",
}
TOKENIZERS = {
    "DistilRoBERTa": "distilbert/distilroberta-base",
    "DistilmBERT": "distilbert/distilbert-base-multilingual-cased",
    "RoBERTa": "FacebookAI/roberta-base",
    "DeBERTaV3": "microsoft/deberta-v3-base",
    "mBERT": "google-bert/bert-base-multilingual-cased",
    "XLM-RoBERTa": "FacebookAI/xlm-roberta-base",
    "XLM-V": "facebook/xlm-v-base",
}
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


def t2_rows() -> list[Row]:
    cmd = (
        "python -m embexp.analyze vocab what=table2 models=[bert,distilbert] tokenizer_override=minilm source=local "
        "data_dir=$EMBEXP_DATA subsets=[{s}]"
    )
    out = []
    for model, label in (("distilbert", "DistilBERT"), ("bert", "BERT")):
        for kind, key, printed in (("embedding", "embedding_pct", T2[label][0]), ("model", "model_pct", T2[label][1])):
            vals = printed.split()
            for s, v in zip(GLUE, vals):
                files = glue_files(s)
                out.append(
                    Row(
                        f"pema.t2.{model}.{s}.{kind}",
                        "Table 2",
                        f"{label}, {LABEL[s]}: reduction in {kind} parameters (%)",
                        v,
                        cmd.format(s=s),
                        lambda d, m=model, s=s, k=key: table2_cells(s, str(d))[m][k],
                        data=files,
                    )
                )
            out.append(
                Row(
                    f"pema.t2.{model}.mean.{kind}",
                    "Table 2",
                    f"{label}, Mean: reduction in {kind} parameters (%)",
                    vals[-1],
                    cmd.format(s=",".join(GLUE)),
                    lambda d, m=model, k=key: sum(table2_cells(s, str(d))[m][k] for s in GLUE) / len(GLUE),
                    data=tuple(f for s in GLUE for f in glue_files(s)),
                )
            )
    for label, tok in TOKENIZERS.items():
        for kind, printed in (("embedding", T2[label][0]), ("model", T2[label][1])):
            out.append(
                Row(
                    f"pema.t2.{label.lower()}.{kind}",
                    "Table 2",
                    f"{label}: reduction in {kind} parameters (%), " "CoLA … WNLI, Mean",
                    " / ".join(printed.split()),
                    f"python -m embexp.analyze vocab what=table2 models=[{REGISTRY[label]}]",
                    hub=f"{tok}'s tokenizer (and MNLI, QNLI, QQP, STS-B train/test from the hub)",
                )
            )
    return out


def rows() -> list[Row]:
    return t5_rows() + t2_rows()
