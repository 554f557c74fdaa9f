"""PEMA (papers/pema.md): Table 7's split sizes (EMBEXP_DATA) and Table 8's hyper-parameters against conf/.
Tables 1, 3 and 4, the §3 / Fig. 2 claims and Table 9's PEMA column need the hub's tokenizers: they are
rows of ledger/printed/pema.csv with nothing to compute here."""

from __future__ import annotations

from embexp.report.ledger import data, measure
from embexp.report.ledger.core import Compute
from embexp.studies.vocab import GLUE, model_config

T7_SPLITS = {"train": ("train",), "validation": ("validation",), "test": ("test",)}
MNLI_SPLITS = {
    "train": ("train",),
    "validation": ("validation_matched", "validation_mismatched"),
    "test": ("test_matched", "test_mismatched"),
}


def split_count(subset: str, splits: tuple, d) -> int:
    return sum(data.n_rows("glue", subset, s, d) for s in splits)


def t7_computes() -> dict:
    out = {}
    for subset in GLUE:
        groups = MNLI_SPLITS if subset == "mnli" else T7_SPLITS
        for col, splits in list(groups.items()) + [("total", sum(groups.values(), ()))]:
            out[f"pema.t7.{subset}.{col}"] = Compute(
                lambda d, s=subset, sp=splits: split_count(s, sp, d),
                data=tuple(data.glue_file(subset, x) for x in splits),
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


def composed(experiment: str):
    return measure.composed(f"experiment={experiment}", "model=xlmr" if "xlm" in experiment else "model=bert")


def config_value(experiment: str, read):
    v = read(composed(experiment))
    return v if isinstance(v, str) else float(v)


def t8_computes() -> dict:
    out = {}
    for key, read in T8.items():  # <cell>.<experiment>
        out[f"pema.t8.{key}"] = Compute(lambda _d, e=key.split(".")[1], r=read: config_value(e, r))
    for field in DROPOUT:
        out[f"pema.t8.{field}"] = Compute(lambda _d, fl=field: getattr(model_config("bert", 2), fl))
    return out


def computes() -> dict:
    return {**t7_computes(), **t8_computes()}
