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

from embexp import EmbexpError

LOWER_IS_BETTER = ("ter", "perplexity", "nll", "invalid")  # metrics trainer.select_metric cannot maximise


def on_reported(cfg) -> bool:
    """Whether this run's selection reads the reported split (``trainer.select_on=reported``)."""
    return cfg.trainer.get("select_on", "heldout") == "reported"


def check(cfg, task=None) -> None:
    """Refuse a run whose model selection would read the split it reports (``trainer.select_best=true``
    with ``task.select_split`` equal to the evaluation split, or with no selection split at all). Runs
    that train nothing select nothing and pass. ``task``: the run's task (built from ``cfg.task``
    when not given).

    ``trainer.select_on=reported`` is a paper's protocol, asked for by name: selection (select_best,
    the periodic loss, a curriculum's gate) reads the reported split itself, which the run records
    (``select_on`` in metrics.json) and the tables mark. It needs ``task.select_split`` '' (or the
    evaluation split's name), so no training rows are held out, and something to select.

    A ``trainer.curriculum``'s gate is selection too (it decides when a stage is done): by default it
    reads the task's selection rows (e.g. tree's train_holdout trees), and a curriculum whose gate
    would read the reported split (select_split '' or the eval split) is refused unless
    ``trainer.select_on=reported`` (the K-Token authors' gate on the test split)."""
    from embexp.methods import METHODS
    from embexp.tasks import build_task

    t = cfg.trainer
    if not cfg.do_train or not METHODS.get_class(cfg.method.name).trains:
        return
    if t.get("select_metric", "loss") != "loss":
        task = task if task is not None else build_task(cfg.task)
        check_metric(cfg, task)
    if not (on_reported(cfg) or t.get("curriculum") or t.select_best):
        return
    task = task if task is not None else build_task(cfg.task)
    sel, ev = task.split_name("select"), task.split_name("eval")
    if on_reported(cfg):
        if sel not in ("", ev):
            raise EmbexpError(f"trainer.select_on=reported selects on the reported split '{ev}', but task.select_split="
                              f"'{sel}' names other selection rows (set task.select_split='' or trainer.select_on=heldout)")
        if not t.select_best and not t.get("curriculum"):
            raise EmbexpError("trainer.select_on=reported but nothing is selected (set trainer.select_best=true or "
                              "trainer.curriculum=[...], or trainer.select_on=heldout)")
        return
    if t.get("curriculum") and sel in ("", ev):  # each stage's gate reads the stage's selection rows (curriculum.py)
        raise EmbexpError(f"trainer.curriculum's gate would read the reported split '{ev}' (task.select_split="
                          f"'{sel}'): set task.select_split=train_holdout (with task.select_size) or another split; "
                          f"the authors' gate on the reported split: trainer.select_on=reported task.select_split=''")
    if not t.select_best:
        return
    if not sel:
        raise EmbexpError(f"trainer.select_best=true needs selection rows, but task.select_split is '' (set a split other "
                          f"than the reported '{ev}', or train_holdout; or trainer.select_best=false)")
    if sel == ev:
        raise EmbexpError(f"trainer.select_best=true would select on the reported split: task.select_split='{sel}' is "
                          f"task.eval_split (choose another split, train_holdout, or trainer.select_best=false; a paper's "
                          f"protocol: trainer.select_on=reported)")


def metric(cfg, task) -> str:
    """What ``select_best`` keeps the state by: ``loss`` (the lowest selection loss) or the name of a metric of
    the task's evaluation, maximised (``trainer.select_metric``; ``task``: the task's ``validation_metric``)."""
    name = cfg.trainer.get("select_metric", "loss")
    return task.validation_metric if name == "task" else name


def check_metric(cfg, task) -> None:
    """Refuse a ``trainer.select_metric`` that would choose nothing or choose wrongly, in one line."""
    t, name = cfg.trainer, cfg.trainer.select_metric
    if not t.select_best or t.get("curriculum"):
        raise EmbexpError(f"trainer.select_metric={name} chooses the kept state: it needs trainer.select_best=true "
                          f"(and no trainer.curriculum, whose gate reads trainer.curriculum_metric)")
    if not metric(cfg, task):
        raise EmbexpError(f"trainer.select_metric=task: task {task.display_name} names no validation metric "
                          f"(name one, e.g. trainer.select_metric=accuracy, or trainer.select_metric=loss)")
    if metric(cfg, task) in LOWER_IS_BETTER:
        raise EmbexpError(f"trainer.select_metric={name}: a metric is maximised, and lower {name} is better "
                          f"(trainer.select_metric=loss selects on the lowest loss)")


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
    if not (training and train and (cfg.trainer.select_best or cfg.trainer.eval_every > 0 or cfg.trainer.get("curve_select", False))):
        return []
    if on_reported(cfg):
        return reported
    return task.examples("select") if task.split_name("select") else []


def split(cfg, task) -> str:
    """metrics.json's ``select_split``: the split the selection rows come from."""
    return task.split_name("eval") if on_reported(cfg) else task.split_name("select")
