"""PEMA (papers/pema.md): Table 9's fine-tuning column and Table 10, which need a GPU: full fine-tuning
of each model on each GLUE task, 3 epochs, batch 32, fp32 (conf/trainer/pema_paper.yaml), 5 seeds. The
printed cells are ledger/printed/pema.csv."""

from __future__ import annotations

from functools import lru_cache

from embexp.report.ledger import lookups
from embexp.report.ledger.core import Compute
from embexp.report.ledger.runs import encoder_arch, estimate, glue_run

MODELS = {
    "distilbert": "DistilBERT",
    "distilroberta": "DistilRoBERTa",
    "distilmbert": "DistilmBERT",
    "bert": "BERT",
    "roberta_base": "RoBERTa",
    "deberta": "DeBERTaV3",
    "mbert": "mBERT",
    "xlmr": "XLM-RoBERTa",
    "xlmv": "XLM-V",
}
ORDER = ("cola", "mnli", "mrpc", "qnli", "qqp", "rte", "sst2", "stsb", "wnli")
SEEDS = 5
NOTES = {
    "Table 10": "Each row: 9 tasks × 5 seeds of full fine-tuning (with PEMA: the same FLOPs on a smaller embedding "
    "matrix; memory counted without the removal, an upper bound). Table 8: 3 epochs, batch 32, "
    "sequences padded per batch (≈ tokens per row in ledger/runs.py GLUE)."
}


@lru_cache(maxsize=None)
def arch(model: str):
    from embexp.report.ledger.pema import shape
    from embexp.studies import vocab

    rows, dim, n = shape(model)
    c = vocab.model_config(model, 2)
    layers = getattr(c, "num_hidden_layers", None) or c.n_layers
    return encoder_arch(vocab.MODELS[model].tokenizer, n, rows * dim, dim, layers)


def run(model: str, task: str, pema: bool):
    a = arch(model)
    name = f"{MODELS[model]} {'+ PEMA' if pema else 'full FT'}, {task}"
    return glue_run(name, a, task, "fp32", a.n, True, 3, 32, SEEDS, key=f"pema.{model}.{pema}.{task}")


def computes() -> dict:
    out = {
        f"pema.t9.{task}.finetune_s": Compute(
            gpu=estimate(
                f"pema.t9.{task}",
                lambda t=task: [run("roberta_base", t, True)],
                "The paper's V100 took the printed seconds; the estimate is for an H100.",
            )
        )
        for task in ORDER
    }
    for model in MODELS:
        for pema in (False, True):
            out[f"pema.t10.{model}.{'pema' if pema else 'ft'}"] = Compute(
                gpu=estimate(f"pema.t10.{model}.{pema}", lambda m=model, p=pema: [run(m, t, p) for t in ORDER]),
                measure=lookups.pema_t10(model, pema),
            )
    return out
