"""Model selection: which rows choose the kept state, and by what signal.

The periodic evaluation loss, ``trainer.select_best`` and a curriculum's gate read the task's
selection rows (``task.select_split``: a split, or ``train_holdout``, a seeded carve of the training
split), never the reported split, so a reported number is never chosen on itself;
``run.checks.check_selection`` refuses the rest before anything loads. A paper's protocol that selects
on the reported rows (Tiny-Attention's GLUE dev cells) is asked for by name,
``trainer.select_on=reported``, and recorded. ``run.loop.Trainer`` selects on :func:`rows` by
:func:`metric` (``trainer.select_metric``: the lowest loss, or the best value of a task metric).
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
