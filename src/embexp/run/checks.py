"""Every pre-flight check of a run, in one place, run once by :func:`preflight` after the
accelerator exists and before the rows or the model load: what cannot run stops in one line naming
the value and what is valid. The schema bounds each field (``core.config.validate``, which also runs
the methods' checks); this module checks what spans fields: model selection never reads the reported
split unless a paper's protocol asks for it by name, learning-curve points, the judge, a
curriculum's stages, and what cannot run sharded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from embexp import EmbexpError, judge
from embexp.core.config import validate
from embexp.methods import METHODS
from embexp.run import selection, sharding
from embexp.tasks import build_task


@dataclass(frozen=True)
class Plan:
    """What a run is, settled by :func:`preflight` before the rows and the model."""

    task: object
    fits: bool  # do_train and the method trains (Method.trains): the training rows are read and the method is fitted


def preflight(cfg, training: bool = True, world_size: int | None = None) -> Plan:
    """Validate the config, build the task, and ask each part what it needs, once.

    ``training=False`` (re-evaluating a finished run) validates and builds the task only; ``world_size``
    (the accelerator's processes; train passes it) adds what cannot run sharded."""
    validate(cfg)
    check_random_weights(cfg)
    task = build_task(cfg.task)  # an unknown task fails before any model loads
    plan = Plan(task, bool(cfg.do_train) and METHODS.get_class(cfg.method.name).trains)
    if training:
        check_selection(cfg, task)
        check_curve(cfg)
        judge.check(cfg, task)  # judge.model on a task without generations
        check_curriculum(cfg, task)
        if world_size is not None:
            check_sharding(cfg, world_size)
    return plan


def check_random_weights(cfg) -> None:
    """model.init=random: a stored architecture of the model's kind, and no export (a random model with a
    synthetic tokenizer is no model to publish)."""
    if cfg.model.get("init", "pretrained") != "random":
        return
    from embexp.models.random_weights import check_random

    check_random(cfg.model)
    if cfg.export:
        raise EmbexpError("export=true with model.init=random: a model with random weights and a synthetic "
                          "tokenizer is not exported (set export=false)")


def check_selection(cfg, task=None) -> None:
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
    t = cfg.trainer
    if not cfg.do_train or not METHODS.get_class(cfg.method.name).trains:
        return
    if t.get("select_metric", "loss") != "loss":
        task = task if task is not None else build_task(cfg.task)
        check_select_metric(cfg, task)
    if not (selection.on_reported(cfg) or t.get("curriculum") or t.select_best):
        return
    task = task if task is not None else build_task(cfg.task)
    sel, ev = task.split_name("select"), task.split_name("eval")
    if selection.on_reported(cfg):
        if sel not in ("", ev):
            raise EmbexpError(f"trainer.select_on=reported selects on the reported split '{ev}', but task.select_split="
                              f"'{sel}' names other selection rows (set task.select_split='' or "
                              "trainer.select_on=heldout)")
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
        raise EmbexpError("trainer.select_best=true needs selection rows, but task.select_split is '' (set a split "
                          f"other than the reported '{ev}', or train_holdout; or trainer.select_best=false)")
    if sel == ev:
        raise EmbexpError(f"trainer.select_best=true would select on the reported split: task.select_split='{sel}' is "
                          "task.eval_split (choose another split, train_holdout, or trainer.select_best=false; a "
                          "paper's protocol: trainer.select_on=reported)")


def check_select_metric(cfg, task) -> None:
    """Refuse a ``trainer.select_metric`` that would choose nothing or choose wrongly, in one line."""
    t, name = cfg.trainer, cfg.trainer.select_metric
    if not t.select_best or t.get("curriculum"):
        raise EmbexpError(f"trainer.select_metric={name} chooses the kept state: it needs trainer.select_best=true "
                          f"(and no trainer.curriculum, whose gate reads trainer.curriculum_metric)")
    if not selection.metric(cfg, task):
        raise EmbexpError(f"trainer.select_metric=task: task {task.display_name} names no validation metric "
                          f"(name one, e.g. trainer.select_metric=accuracy, or trainer.select_metric=loss)")
    if selection.metric(cfg, task) in selection.LOWER_IS_BETTER:
        raise EmbexpError(f"trainer.select_metric={name}: a metric is maximised, and lower {name} is better "
                          f"(trainer.select_metric=loss selects on the lowest loss)")


def check_curve(cfg) -> None:
    """trainer.curve_at holds optimizer steps: positive integers (refused in one line otherwise)."""
    bad = [x for x in cfg.trainer.curve_at if isinstance(x, bool) or not isinstance(x, int) or x < 1]
    if bad:
        raise EmbexpError(f"trainer.curve_at must list optimizer steps (integers >= 1); got {bad[0]!r}")
    if cfg.trainer.get("curve_select") and (not cfg.trainer.curve_at or selection.on_reported(cfg)
                                            or not cfg.task.select_split):
        raise EmbexpError("trainer.curve_select scores held-out selection rows at the points of trainer.curve_at: it "
                          "needs trainer.curve_at=[...], task.select_split (e.g. train_holdout) and "
                          "trainer.select_on=heldout")
    if cfg.trainer.curve_at and cfg.trainer.curriculum:
        raise EmbexpError("trainer.curve_at is not drawn across a trainer.curriculum's stages (each stage reports its "
                          "gate metric in the history); set trainer.curve_at=[]")


def check_curriculum(cfg, task) -> None:
    """Reject a curriculum that cannot run, before any training."""
    t = cfg.trainer
    stages = list(t.curriculum)
    sizes = list(t.get("curriculum_batch_size") or [])
    if sizes and len(sizes) != len(stages):
        raise EmbexpError(f"trainer.curriculum_batch_size has {len(sizes)} entries for {len(stages)} "
                          "trainer.curriculum stages (give one per stage, or [])")
    bad = [b for b in sizes if isinstance(b, bool) or not isinstance(b, int)]  # the schema bounds them (>= 1)
    if bad:
        raise EmbexpError(f"trainer.curriculum_batch_size must list batch sizes (integers >= 1); got {bad[0]!r}")
    if not stages:
        return
    if not task.subsets:
        raise EmbexpError(f"trainer.curriculum needs a task with subsets; task {cfg.task.name} has none")
    bad = [s for s in stages if s not in task.subsets]
    if bad:
        raise EmbexpError(f"unknown trainer.curriculum stage '{bad[0]}' for task {cfg.task.name} (choose from: "
                          f"{', '.join(task.subsets)})")
    # trainer.resume=true is allowed: a complete run is skipped, any other starts at its first stage
    if t.save_every > 0:
        raise EmbexpError("trainer.curriculum keeps no checkpoints (set trainer.save_every=0; trainer.resume=true "
                          "only skips a complete run)")


def check_sharding(cfg, world_size: int) -> None:
    """Refuse, before any data or model loads, what cannot run sharded: one line each."""
    t = cfg.trainer
    if not sharding.wants(t) and os.environ.get(sharding.FSDP_ENV, "false").lower() == "true":
        raise EmbexpError("accelerate launch was configured for FSDP (ACCELERATE_USE_FSDP=true), but "
                          "trainer.strategy=ddp: embexp shards with trainer.strategy=fsdp and a plain multi-GPU "
                          "accelerate config")
    if not sharding.wants(t):
        if t.get("activation_checkpointing", False):
            raise EmbexpError("trainer.activation_checkpointing=true wraps FSDP units and needs trainer.strategy=fsdp "
                              "(under ddp: model.gradient_checkpointing=true)")
        return
    if not (cfg.do_train and METHODS.get_class(cfg.method.name).trains):
        return  # nothing is trained, nothing is sharded
    for name in (cfg.method.name, cfg.method.get("inner", None)):
        cls = METHODS.get_class(name) if name and name in METHODS else None
        if cls is not None and cls.shard_blocker:
            raise EmbexpError(f"method {name} cannot train under trainer.strategy=fsdp: {cls.shard_blocker} "
                              f"(use trainer.strategy=ddp)")
    if world_size < 2:
        raise EmbexpError(f"trainer.strategy=fsdp shards over processes, but this run has {world_size} (launch it with "
                          f"accelerate launch --num_processes N, N >= 2; or trainer.strategy=ddp)")
    if t.get("curriculum"):
        raise EmbexpError("trainer.curriculum evaluates its gates on the main process mid-run, which a sharded model "
                          "cannot do alone: use trainer.strategy=ddp")
    if t.get("curve_at"):
        raise EmbexpError("trainer.curve_at evaluates on the main process mid-run, which a sharded model cannot do "
                          "alone: set trainer.curve_at=[] or trainer.strategy=ddp")
    if t.get("select_metric", "loss") != "loss":
        raise EmbexpError(f"trainer.select_metric={t.select_metric} scores the selection rows on the main process "
                          f"mid-run, which a sharded model cannot do alone: use trainer.strategy=ddp "
                          f"(or trainer.select_metric=loss)")
