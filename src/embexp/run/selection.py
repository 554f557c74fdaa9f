"""Model selection: which rows choose the kept state, and the configurations refused for it.

The periodic evaluation loss, ``trainer.select_best`` and a curriculum's gate read the task's
selection rows (``task.select_split``: a split, or ``train_holdout``, a seeded carve of the training
split), never the reported split: :func:`check` refuses, before any data or model loads, a
configuration that would, unless a paper's protocol is asked for by name
(``trainer.select_on=reported``: the selection rows are then the reported rows, and the run records
it). The training loop (``loop.Trainer``) selects on the rows :func:`rows` gives it, by the signal
:func:`metric` names (``trainer.select_metric``: the lowest loss by default, or the best value of a
metric of the task's own evaluation, e.g. Tiny-Attention's paper protocol: the GLUE task's metric).
"""

from __future__ import annotations

LOWER_IS_BETTER = ("ter", "perplexity", "nll", "invalid")  # metrics trainer.select_metric cannot maximise


def on_reported(cfg) -> bool:
    """Whether this run's selection reads the reported split (``trainer.select_on=reported``)."""
    return cfg.trainer.get("select_on", "heldout") == "reported"


def metric(cfg, task) -> str:
    """What ``select_best`` keeps the state by: ``loss`` (the lowest selection loss) or the name of a metric of
    the task's evaluation, maximised (``trainer.select_metric``; ``task``: the task's ``validation_metric``)."""
    name = cfg.trainer.get("select_metric", "loss")
    return task.validation_metric if name == "task" else name


def recorded(cfg, task, trained: bool) -> str:
    """metrics.json's ``select_metric``: what chose the kept state (``loss``, a metric's name), or ``none`` (the
    last state is kept: no select_best, a curriculum, or nothing trained)."""
    if not (trained and cfg.trainer.select_best and not cfg.trainer.get("curriculum")):
        return "none"
    return metric(cfg, task)


def rows(cfg, task, train: list, reported: list, training: bool = True) -> list:
    """The selection rows (examples) behind the periodic loss and ``select_best``: none unless
    something is selected while training on ``train``; under ``trainer.select_on=reported`` the
    ``reported`` rows themselves, else the task's ``select`` split (read here)."""
    if not (training and train and (cfg.trainer.select_best or cfg.trainer.eval_every > 0
                                    or cfg.trainer.get("curve_select", False))):
        return []
    if on_reported(cfg):
        return reported
    return task.examples("select") if task.split_name("select") else []


def split(cfg, task) -> str:
    """metrics.json's ``select_split``: the split the selection rows come from."""
    return task.split_name("eval") if on_reported(cfg) else task.split_name("select")
