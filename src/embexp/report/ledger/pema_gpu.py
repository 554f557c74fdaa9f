"""PEMA (papers/pema.md): Table 9's fine-tuning column and Table 10, which need a GPU: full fine-tuning
of each model on each GLUE task, 3 epochs, batch 32, fp32 (conf/trainer/pema_paper.yaml), 5 seeds."""

from __future__ import annotations

from functools import lru_cache

from embexp.report.ledger import lookups
from embexp.report.ledger.core import Row
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
T10 = {  # (without PEMA, with PEMA): CoLA MNLI MRPC QNLI QQP RTE SST-2 STS-B WNLI Mean, as printed
    "distilbert": (
        "49.3 82.2 84.2 88.5 86.7 59.6 90.5 86.5 49.3 75.2₁.₅",
        "49.3 82.2 84.2 88.6 86.7 59.6 90.5 86.5 49.3 75.2₁.₅",
    ),
    "distilroberta": (
        "56.4 84.2 85.0 90.9 87.2 65.7 92.3 87.2 53.0 78.0₀.₉",
        "56.4 84.2 85.0 90.9 87.2 65.7 92.3 87.2 53.0 78.0₀.₉",
    ),
    "distilmbert": (
        "29.7 78.3 81.8 86.7 85.8 60.9 89.1 84.4 48.2 71.6₀.₃",
        "29.6 78.3 81.8 86.7 85.8 60.9 89.2 84.4 48.2 71.6₀.₄",
    ),
    "bert": (
        "56.4 84.3 84.3 91.1 87.9 64.4 92.6 88.1 37.7 76.3₀.₇",
        "56.7 84.3 84.3 91.3 87.8 64.4 92.5 88.1 37.7 76.3₀.₈",
    ),
    "roberta_base": (
        "57.6 87.8 88.4 92.8 88.4 71.1 94.2 89.9 52.1 80.3₁.₂",
        "57.6 87.8 88.4 92.7 88.4 71.1 94.2 89.9 52.1 80.3₁.₂",
    ),
    "deberta": (
        "67.4 90.2 88.5 93.9 89.9 79.8 95.6 90.9 53.0 83.2₀.₈",
        "67.4 90.2 88.3 93.9 89.9 79.8 95.5 90.9 53.0 83.2₀.₈",
    ),
    "mbert": (
        "35.3 82.3 85.8 91.1 87.1 69.0 91.0 88.0 53.0 75.8₂.₀",
        "35.4 82.2 85.8 91.1 87.2 69.0 90.8 88.0 53.0 75.8₂.₀",
    ),
    "xlmr": (
        "22.6 83.9 76.9 89.5 86.9 57.3 92.2 84.2 52.1 71.7₂.₀",
        "22.4 84.0 76.8 89.5 86.8 57.3 92.0 84.2 52.1 71.7₂.₀",
    ),
    "xlmv": (
        "0.0 84.5 68.8 89.6 86.7 54.1 91.8 80.8 55.2 68.0₀.₆",
        "0.0 84.5 68.8 89.6 86.7 54.1 91.6 80.8 55.2 67.9₀.₆",
    ),
}
T9_FT = {
    "cola": "172.7",
    "mnli": "7817.8",
    "mrpc": "78.7",
    "qnli": "2092.8",
    "qqp": "7235.5",
    "rte": "55.4",
    "sst2": "1329.2",
    "stsb": "118.7",
    "wnli": "18.3",
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


def rows() -> list[Row]:
    from embexp.report.ledger.pema import LABEL

    out = []
    for task, v in T9_FT.items():
        out.append(
            Row(
                f"pema.t9.{task}.finetune_s",
                "Table 9",
                f"{LABEL[task]}: fine-tuning RoBERTa with PEMA (s, mean " "of 5)",
                v,
                f"make pema_table9 PEMA_GLUE={task}",
                gpu=estimate(
                    f"pema.t9.{task}",
                    lambda t=task: [run("roberta_base", t, True)],
                    "The paper's V100 took the printed seconds; the estimate is for an H100.",
                ),
            )
        )
    for model, label in MODELS.items():
        for pema, printed in zip((False, True), T10[model]):
            cells = printed.split()
            out.append(
                Row(
                    f"pema.t10.{model}.{'pema' if pema else 'ft'}",
                    "Table 10",
                    f"{label} {'with' if pema else 'without'} PEMA: CoLA … WNLI, Mean (5 seeds)",
                    " / ".join(cells),
                    f"make pema_table10 PEMA_MODELS={model}",
                    gpu=estimate(f"pema.t10.{model}.{pema}", lambda m=model, p=pema: [run(m, t, p) for t in ORDER]),
                    measure=lookups.pema_t10(model, pema),
                )
            )
    return out
