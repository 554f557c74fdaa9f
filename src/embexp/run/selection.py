"""Model selection: which rows choose the kept state, and by what signal. Every stage of a run reads the
options through :class:`Selection`, built once from the config.

The options (``trainer.select_best``, ``select_on``, ``select_metric``, ``eval_every``, ``curve_select``,
``curve_patience``, and a ``trainer.curriculum``'s gate, ``curriculum_metric``) are explained by their help
text in ``core.config.TrainerConfig`` (docs/config.md). ``run.preflight`` refuses what cannot select (or would
select on the reported split) before anything loads; ``run.loop.Trainer`` selects on :meth:`Selection.rows` by
:meth:`Selection.metric`.
"""

from __future__ import annotations

from dataclasses import dataclass

LOWER_IS_BETTER = ("ter", "perplexity", "nll", "invalid")  # metrics trainer.select_metric cannot maximise


@dataclass(frozen=True)
class Selection:
    """The selection options of one run, read once from its config (:meth:`of`)."""

    best: bool  # trainer.select_best
    on: str  # trainer.select_on: heldout or reported
    metric_name: str  # trainer.select_metric as given: loss, task or a metric's name
    eval_every: int  # trainer.eval_every
    curve_at: tuple  # trainer.curve_at
    curve_select: bool  # trainer.curve_select
    curve_patience: int  # trainer.curve_patience
    curriculum: tuple  # trainer.curriculum's stages
    curriculum_metric: str  # the gate's metric
    trains: bool  # do_train and the method trains: without training nothing is selected

    @classmethod
    def of(cls, t, trains: bool = True) -> Selection:
        """From the trainer config ``t`` (``cfg.trainer``); ``trains``: the run trains (do_train and the method)."""
        return cls(bool(t.select_best), str(t.select_on), str(t.select_metric), int(t.eval_every),
                   tuple(t.curve_at), bool(t.curve_select), int(t.curve_patience), tuple(t.curriculum),
                   str(t.curriculum_metric), bool(trains))

    @property
    def reported(self) -> bool:
        return self.on == "reported"

    @property
    def staged(self) -> bool:
        return self.trains and bool(self.curriculum)

    def metric(self, task) -> str:
        """What ``select_best`` keeps the state by: ``loss`` or a metric's name (``task``: its validation metric)."""
        return task.validation_metric if self.metric_name == "task" else self.metric_name

    def recorded(self, task, trained: bool) -> str:
        """metrics.json's ``select_metric``: what chose the kept state, or ``none`` (the last state is kept: no
        select_best, a curriculum, or nothing trained)."""
        return self.metric(task) if trained and self.best and not self.curriculum else "none"

    def split(self, task) -> str:
        """metrics.json's ``select_split``: the split the selection rows come from."""
        return task.split_name("eval") if self.reported else task.split_name("select")

    def gate_rows(self) -> str:
        """The row set a curriculum stage's gate reads: ``select``, or ``eval`` under ``select_on=reported``."""
        return "eval" if self.reported else "select"

    def rows(self, task, train: list, reported: list, training: bool = True) -> list:
        """The selection rows behind the periodic loss and ``select_best``: none unless something is selected
        while training on ``train``; under ``select_on=reported`` the ``reported`` rows themselves, else the
        task's ``select`` split (read here)."""
        if not (training and train and (self.best or self.eval_every > 0 or self.curve_select)):
            return []
        if self.reported:
            return reported
        return task.examples("select") if task.split_name("select") else []
