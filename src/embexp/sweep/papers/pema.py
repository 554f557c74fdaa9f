"""PEMA's tables (make pema_table2, pema_table3, pema_table4, pema_table9, pema_table10, pema_tables).

Tables 2-4 are counted from the tokenizers and the stored model configs over train + validation + test,
as the paper counts (docs/pema.md; python -m embexp.analyze vocab; needs the hub unless vocab_args names
offline models and sources). The notes name the checkpoint behind each model config name (BERT and
DistilBERT are the uncased ones: docs/pema.md). Tables 9 and 10 train: one Hydra multirun per
(experiment, method); finished runs are skipped (trainer.resume=true), so Tables 9 and 10 share runs.
"""

from __future__ import annotations

from embexp.judge.backends import model_config
from embexp.studies.vocab import DEFAULT_MODELS, GLUE
from embexp.sweep.runner import Var, analyze, note, report, table, train

SEEDS = Var([0, 1, 2, 3, 4])
VOCAB_ARGS = Var([], help='overrides of python -m embexp.analyze vocab, e.g. "models=[minilm] source=fixture"')
OUT = Var("tables/pema")
XLM = ("xlmr", "xlmv")  # their own experiment file: pema_glue_xlm (the paper's settings for them)
COUNT = "method.count_splits=[train,eval,test]"


def notes(models):
    for model in models:
        yield note(f"model={model}: {model_config(model).id}")  # the checkpoint behind the config name


def vocab(v, what: str):
    return analyze("vocab", f"what={what}", "splits=[train,eval,test]", f"out={v.out}", *v.vocab_args, extra=False)


@table(trains=False, models=Var(DEFAULT_MODELS["table2"]), vocab_args=VOCAB_ARGS, out=OUT)
def table2(v):
    """Table 2: the % of embedding and model parameters PEMA removes, model x GLUE task (no training)."""
    yield from notes(v.models)
    yield vocab(v, "table2")


@table(trains=False, models=Var(DEFAULT_MODELS["table3"]), vocab_args=VOCAB_ARGS, out=OUT)
def table3(v):
    """Table 3: millions of parameters removed, DeBERTaV3 xsmall/small/base/large x GLUE task."""
    yield from notes(v.models)
    yield vocab(v, "table3")


@table(trains=False, models=Var(DEFAULT_MODELS["table4"]), vocab_args=VOCAB_ARGS, out=OUT)
def table4(v):
    """Table 4: multilingual models x XNLI en, en-de, en-zh, all."""
    yield from notes(v.models)
    yield vocab(v, "table4")


@table(seeds=SEEDS, glue=Var(list(GLUE)), out=OUT)
def table9(v):
    """Table 9: PEMA's preprocessing time against fine-tuning time on RoBERTa-base x GLUE (and the measured
    memory against full fine-tuning). One Hydra multirun per method over every sub-task x seed."""
    yield from notes(["roberta_base"])
    for method in ["pema", "full_ft"]:
        yield train("-m", "experiment=pema_glue", "model=roberta_base", f"method={method}",
                    f"task.subset={','.join(v.glue)}", f"seed={','.join(v.seeds)}", "trainer.resume=true",
                    COUNT if method == "pema" else "")
    yield report("paper=pema", "table=table9", "model=roberta_base", f"out={v.out}")


@table(seeds=SEEDS, glue=Var(list(GLUE), choices=list(GLUE)),
       models=Var(DEFAULT_MODELS["table2"], choices="model"), out=OUT)
def table10(v):
    """Table 10: GLUE validation results with and without PEMA (full fine-tuning), every model, 5 seeds. One
    Hydra multirun per (experiment, method) over the models x sub-tasks x seeds; XLM-R and XLM-V use their
    own experiment file (pema_glue_xlm: the paper's settings for them)."""
    yield from notes(v.models)
    for exp, models in [("pema_glue", [m for m in v.models if m not in XLM]),
                        ("pema_glue_xlm", [m for m in v.models if m in XLM])]:
        for method in ["pema", "full_ft"]:
            if models:
                yield train("-m", f"experiment={exp}", f"model={','.join(models)}", f"method={method}",
                            f"task.subset={','.join(v.glue)}", f"seed={','.join(v.seeds)}", "trainer.resume=true",
                            COUNT if method == "pema" else "")
    yield report("paper=pema", "table=table10", f"out={v.out}")


@table(trains=False, models=Var(sorted({m for models in DEFAULT_MODELS.values() for m in models})),
       vocab_args=VOCAB_ARGS, out=OUT)
def tables(v):
    """Every PEMA table from what exists: Tables 9 and 10 rendered from the runs, Tables 2-4 computed from
    the tokenizers and configs (never trains)."""
    yield from notes(v.models)
    yield report("paper=pema", "table=table9", "model=roberta_base", f"out={v.out}")
    yield report("paper=pema", "table=table10", f"out={v.out}")
    for what in ["table2", "table3", "table4"]:
        yield vocab(v, what)
