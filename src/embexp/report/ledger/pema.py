"""PEMA (papers/pema.md): the ledger's rows of the paper, whose printed cells are ledger/printed/pema.csv.
Tables 5 and 6 on the meta device, Table 2's BERT and DistilBERT cells and Table 7's split sizes from
EMBEXP_DATA, Table 8's hyper-parameters against conf/, Table 10 from finished runs (a GPU each: ledger/runs.py);
each table's note says how (``NOTES``). The rows that need the hub's tokenizers compute nothing here."""

from __future__ import annotations

from functools import lru_cache, partial

from embexp.report.ledger import measured, sources
from embexp.report.ledger.core import Compute
from embexp.studies import vocab
from embexp.studies.vocab import GLUE

# the registry models of Tables 5 and 6 (Table 10's rows are Table 5's)
T5 = ("distilbert", "distilroberta", "distilmbert", "bert", "roberta_base", "deberta", "mbert", "xlmr", "xlmv")
T6 = ("deberta_v3_xsmall", "deberta_v3_small", "deberta", "deberta_v3_large")
SPLITS = {"train": ("train",), "validation": ("validation",), "test": ("test",)}  # Table 7's columns: the files
MNLI_SPLITS = {
    "train": ("train",),
    "validation": ("validation_matched", "validation_mismatched"),
    "test": ("test_matched", "test_mismatched"),
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
    "Table 10": "Each row: 9 tasks × 5 seeds of full fine-tuning (with PEMA: the same FLOPs on a smaller embedding "
    "matrix; memory counted without the removal, an upper bound). Table 8: 3 epochs, batch 32, "
    "sequences padded per batch (≈ tokens per row in ledger/runs.py GLUE).",
}


def t5_value(model: str, col: int) -> float:
    rows, dim, n = sources.shape(model)
    return (rows, rows * dim, n, 100 * rows * dim / n)[col]


def t5_computes() -> dict:
    cols = ("v", "n_emb", "n", "n_emb_n")
    out = {f"pema.t5.{m}.{col}": Compute(lambda _d, m=m, i=i: t5_value(m, i)) for m in T5 for i, col in enumerate(cols)}
    for m in T6:
        out.update({f"pema.t6.{m}.{col}": Compute(lambda _d, m=m, i=i: t5_value(m, i)) for i, col in enumerate(cols)
                    if i})
    return out


def splits(subset: str) -> dict:
    return MNLI_SPLITS if subset == "mnli" else SPLITS


def glue_files(subset: str) -> tuple:
    return tuple(sources.glue_file(subset, s) for s in sum(splits(subset).values(), ()))


@lru_cache(maxsize=None)
def table2_cells(subset: str, data_dir: str) -> dict:
    """{model: record} of Table 2 for BERT and DistilBERT on one GLUE task, counted as the paper counts
    (``studies.vocab.table_cells``: train + validation + test, what occurs plus pad) with the BERT uncased
    WordPiece (minilm) on the local files."""
    recs = vocab.table_cells(what="table2", models=["bert", "distilbert"], subsets=[subset], source="local",
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


def split_count(subset: str, names: tuple, d) -> int:
    return sum(len(sources.rows("glue", subset, s, d)) for s in names)


def t7_computes() -> dict:
    out = {}
    for subset in GLUE:
        groups = splits(subset)
        for col, names in list(groups.items()) + [("total", sum(groups.values(), ()))]:
            out[f"pema.t7.{subset}.{col}"] = Compute(
                lambda d, s=subset, sp=names: split_count(s, sp, d),
                data=tuple(sources.glue_file(subset, x) for x in names),
            )
    return out


# Table 8: how ours is read from each experiment's composed config (the BERT dropouts: from its model config)
T8 = {
    "adam_ε.pema_glue": lambda c: c.trainer.eps,
    "adam_β1.pema_glue": lambda c: c.trainer.betas[0],
    "adam_β2.pema_glue": lambda c: c.trainer.betas[1],
    "batch_size.pema_glue": lambda c: c.trainer.batch_size * c.trainer.grad_accum,
    "learning_rate_peak.pema_glue": lambda c: c.trainer.lr,
    "learning_rate_peak.pema_glue_xlm": lambda c: c.trainer.lr,
    # XNLI's cell is blank in the paper; the ledger once read it as merged with GLUE's: an inference, not a print
    "learning_rate_peak.pema_xnli": lambda c: c.trainer.lr,
    "learning_rate_schedule.pema_glue": lambda c: c.trainer.scheduler,
    "sequence_length.pema_glue": lambda c: c.task.max_source_tokens,
    "training_epochs.pema_glue": lambda c: c.trainer.epochs,
    "training_epochs.pema_xnli": lambda c: c.trainer.epochs,
}
DROPOUT = ("attention_probs_dropout_prob", "hidden_dropout_prob")


def config_value(experiment: str, read):
    v = read(sources.composed(f"experiment={experiment}", "model=xlmr" if "xlm" in experiment else "model=bert"))
    return v if isinstance(v, str) else float(v)


def t8_computes() -> dict:
    out = {}
    for key, read in T8.items():  # <cell>.<experiment>
        out[f"pema.t8.{key}"] = Compute(lambda _d, e=key.split(".")[1], r=read: config_value(e, r))
    for field in DROPOUT:
        out[f"pema.t8.{field}"] = Compute(lambda _d, fl=field: getattr(vocab.model_config("bert", 2), fl))
    return out


def computes() -> dict:
    out = {**t5_computes(), **t2_computes(), **t7_computes(), **t8_computes()}
    for model in T5:
        for pema, name in ((False, "ft"), (True, "pema")):
            out[f"pema.t10.{model}.{name}"] = Compute(measure=partial(measured.pema_t10, model, pema))
    return out
