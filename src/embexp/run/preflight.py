"""Every pre-flight check of a run, in one place: what cannot run stops in one line naming the value and
what is valid, before any training.

The config arrives validated once, where it was composed (``embexp.eval.rebuild_run`` validates a finished run's
config the same way). :func:`preflight` runs once, after the accelerator exists and before the rows or the model
load, and checks what spans fields and what the files a config names hold (docs/architecture.md, "The path of one
run", step 2); model selection never reads the reported split unless a paper's protocol asks for it by name.
Three checks need more than the config and files and run where that is first there, from this module:
:func:`check_tracker` (asked by ``train.make_accelerator`` before Accelerate opens a tracker),
:func:`check_rows` (``run.build.read_rows``: the selection rows, read before the model) and
:func:`probe` (after the model is built, before training: the selection and curriculum metrics,
scored on two rows, so a misspelled name stops the run now and not after a stage has trained).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass

import torch
from omegaconf import OmegaConf

from embexp import EmbexpError, judge
from embexp.methods import METHODS
from embexp.run import sharding
from embexp.run.predict import score_rows
from embexp.run.selection import LOWER_IS_BETTER, Selection
from embexp.tasks import build_task


@dataclass(frozen=True)
class Plan:
    """What a run is, settled by :func:`preflight` before the rows and the model."""

    task: object
    fits: bool  # do_train and the method trains (Method.trains): the training rows are read and the method is fitted
    selection: Selection  # trainer.select_* / eval_every / curve_select / the curriculum's gate, read once


def preflight(cfg, training: bool = True, world_size: int | None = None) -> Plan:
    """Check the validated config and the files it names, build the task, and ask each part what it needs, once.

    ``training=False`` (re-evaluating a finished run) checks the method and the model and builds the task only;
    ``world_size`` (the accelerator's processes; train passes it) adds what cannot run sharded."""
    METHODS.get_class(cfg.method.name).check_run(cfg)  # the method's own checks (Method.check_run)
    check_random_weights(cfg, world_size)
    task = build_task(cfg.task)  # an unknown task fails before any model loads
    fits = bool(cfg.do_train) and METHODS.get_class(cfg.method.name).trains
    plan = Plan(task, fits, Selection.of(cfg.trainer, fits))
    if training:
        task.fixture_holdout()  # a fixture's selection rows, before any row is made
        check_selection(cfg, task, plan.selection)
        check_curve(cfg)
        judge.check(cfg, task)  # judge.model on a task without generations
        check_curriculum(cfg, task)
        check_export(cfg)
        if world_size is not None:
            check_sharding(cfg, world_size)
    return plan


TRACKER_PACKAGES = {"tensorboard": "tensorboardX", "wandb": "wandb", "mlflow": "mlflow", "trackio": "trackio"}


def check_tracker(cfg) -> None:
    """trainer.log_with: the tracker's package is installed (Accelerate's list of available trackers)."""
    name = cfg.trainer.log_with
    if name == "none":
        return
    from accelerate.tracking import get_available_trackers

    if name not in {str(t) for t in get_available_trackers()}:
        raise EmbexpError(f"trainer.log_with={name} needs the {TRACKER_PACKAGES[name]} package (pip install "
                          f"{TRACKER_PACKAGES[name]}), or trainer.log_with=none")


def check_export(cfg) -> None:
    """export=true on a method that cannot give a plain transformers model (its ``export_blocker``): refused before
    hours of training, not after."""
    cls = METHODS.get_class(cfg.method.name)
    if cfg.export and cls.export_blocker:
        raise EmbexpError(f"method {cfg.method.name} cannot be exported to a plain model: {cls.export_blocker} "
                          "(set export=false)")


def check_random_weights(cfg, world_size: int | None = None) -> None:
    """model.init=random: a stored architecture of the model's kind, a model.spec of its fields in their domains,
    weights that fit the memory free (counted on the meta device), and no export (a random model with a
    synthetic tokenizer is no model to publish). model.spec with pretrained weights is refused: it would change
    nothing."""
    if cfg.model.init != "random":
        if cfg.model.get("spec"):
            raise EmbexpError(f"model.spec={dict(cfg.model.spec)} replaces fields of a stored architecture, which only "
                              f"model.init=random builds; model.init={cfg.model.init} loads {cfg.model.name}'s weights "
                              f"with their own shapes (drop model.spec, or set model.init=random)")
        return
    from embexp.models.random_weights import check_fits, check_random

    check_random(cfg.model)
    if cfg.export:
        raise EmbexpError("export=true with model.init=random: a model with random weights and a synthetic "
                          "tokenizer is not exported (set export=false)")
    on_cpu = cfg.trainer.cpu or not torch.cuda.is_available()
    check_fits(cfg, "cpu" if on_cpu else "cuda", (world_size or 1) if on_cpu else 1)


def check_selection(cfg, task=None, sel: Selection | None = None) -> None:
    """The one check of :class:`run.selection.Selection`: refuse, in one line, a run whose model selection would
    read the split it reports (unless ``trainer.select_on=reported`` asks for it), or would choose nothing or choose
    wrongly (each case: its error line below). Runs that train nothing select nothing and pass. ``task``, ``sel``:
    the run's task and selection (built from ``cfg`` when not given)."""
    sel = sel or Selection.of(cfg.trainer, bool(cfg.do_train) and METHODS.get_class(cfg.method.name).trains)
    if not sel.trains:
        return
    if sel.metric_name != "loss":
        task = task if task is not None else build_task(cfg.task)
        check_select_metric(sel, task)
    if not (sel.reported or sel.curriculum or sel.best):
        return
    task = task if task is not None else build_task(cfg.task)
    split, ev = task.split_name("select"), task.split_name("eval")
    if sel.reported:
        if split not in ("", ev):
            raise EmbexpError(f"trainer.select_on=reported selects on the reported split '{ev}', but task.select_split="
                              f"'{split}' names other selection rows (set task.select_split='' or "
                              "trainer.select_on=heldout)")
        if not sel.best and not sel.curriculum:
            raise EmbexpError("trainer.select_on=reported but nothing is selected (set trainer.select_best=true or "
                              "trainer.curriculum=[...], or trainer.select_on=heldout)")
        return
    if sel.curriculum and split in ("", ev):  # each stage's gate reads the stage's selection rows (curriculum.py)
        raise EmbexpError(f"trainer.curriculum's gate would read the reported split '{ev}' (task.select_split="
                          f"'{split}'): set task.select_split=train_holdout (with task.select_size) or another split; "
                          f"the authors' gate on the reported split: trainer.select_on=reported task.select_split=''")
    if not sel.best:
        return
    if not split:
        raise EmbexpError("trainer.select_best=true needs selection rows, but task.select_split is '' (set a split "
                          f"other than the reported '{ev}', or train_holdout; or trainer.select_best=false)")
    if split == ev:
        raise EmbexpError(f"trainer.select_best=true would select on the reported split: task.select_split='{split}' "
                          "is task.eval_split (choose another split, train_holdout, or trainer.select_best=false; a "
                          "paper's protocol: trainer.select_on=reported)")


def check_select_metric(sel: Selection, task) -> None:
    """Refuse a ``trainer.select_metric`` that would choose nothing or choose wrongly, in one line."""
    name = sel.metric_name
    if not sel.best or sel.curriculum:
        raise EmbexpError(f"trainer.select_metric={name} chooses the kept state: it needs trainer.select_best=true "
                          f"(and no trainer.curriculum, whose gate reads trainer.curriculum_metric)")
    if not sel.metric(task):
        raise EmbexpError(f"trainer.select_metric=task: task {task.display_name} names no validation metric "
                          f"(name one, e.g. trainer.select_metric=accuracy, or trainer.select_metric=loss)")
    if sel.metric(task) in LOWER_IS_BETTER:
        raise EmbexpError(f"trainer.select_metric={name}: a metric is maximised, and lower {name} is better "
                          f"(trainer.select_metric=loss selects on the lowest loss)")


def check_rows(plan: Plan, rows: dict, training: bool) -> None:
    """The rows read (``run.build.read_rows``, before the model): select_best has selection rows to choose on."""
    if training and plan.fits and plan.selection.best and not rows["select"]:
        raise EmbexpError(f"trainer.select_best=true needs selection rows; task.select_split="
                          f"'{plan.task.split_name('select')}' gave none")


def check_curve(cfg) -> None:
    """trainer.curve_at holds optimizer steps: positive integers (refused in one line otherwise)."""
    bad = [x for x in cfg.trainer.curve_at if isinstance(x, bool) or not isinstance(x, int) or x < 1]
    if bad:
        raise EmbexpError(f"trainer.curve_at must list optimizer steps (integers >= 1); got {bad[0]!r}")
    if cfg.trainer.curve_select and (not cfg.trainer.curve_at or cfg.trainer.select_on == "reported"
                                     or not cfg.task.select_split):
        raise EmbexpError("trainer.curve_select scores held-out selection rows at the points of trainer.curve_at: it "
                          "needs trainer.curve_at=[...], task.select_split (e.g. train_holdout) and "
                          "trainer.select_on=heldout")
    if cfg.trainer.curve_patience and not cfg.trainer.curve_select:
        raise EmbexpError(f"trainer.curve_patience={cfg.trainer.curve_patience} stops on the held-out rows' curve: it "
                          "needs trainer.curve_select=true (with trainer.curve_at=[...] and task.select_split)")
    if cfg.trainer.curve_at and cfg.trainer.curriculum:
        raise EmbexpError("trainer.curve_at is not drawn across a trainer.curriculum's stages (each stage reports its "
                          "gate metric in the history); set trainer.curve_at=[]")


def check_curriculum(cfg, task) -> None:
    t = cfg.trainer
    stages = list(t.curriculum)
    sizes = list(t.curriculum_batch_size)
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
    t = cfg.trainer
    if not sharding.wants(t) and os.environ.get(sharding.FSDP_ENV, "false").lower() == "true":
        raise EmbexpError("accelerate launch was configured for FSDP (ACCELERATE_USE_FSDP=true), but "
                          "trainer.strategy=ddp: embexp shards with trainer.strategy=fsdp and a plain multi-GPU "
                          "accelerate config")
    if not sharding.wants(t):
        if t.activation_checkpointing:
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
    if t.curriculum:
        raise EmbexpError("trainer.curriculum evaluates its gates on the main process mid-run, which a sharded model "
                          "cannot do alone: use trainer.strategy=ddp")
    if t.curve_at:
        raise EmbexpError("trainer.curve_at evaluates on the main process mid-run, which a sharded model cannot do "
                          "alone: set trainer.curve_at=[] or trainer.strategy=ddp")
    if t.select_metric != "loss":
        raise EmbexpError(f"trainer.select_metric={t.select_metric} scores the selection rows on the main process "
                          f"mid-run, which a sharded model cannot do alone: use trainer.strategy=ddp "
                          f"(or trainer.select_metric=loss)")


# ---- after the model is built, before any training: the metrics that select, scored on two rows ----

def probe(cfg, c, device) -> None:
    """The metric ``select_best`` keeps by (``trainer.select_metric``, when not the loss) and a curriculum's gate
    metric (``trainer.curriculum_metric``), each scored by the final evaluation's code on the first two rows it
    will read: a name the evaluation does not give stops the run in one line now, not at the first selection
    point or after a whole curriculum stage has trained. ``c``: the built run (``run.build.Components``)."""
    sel = c.selection
    name = sel.metric(c.task)
    if sel.trains and sel.best and name != "loss" and c.select_examples:
        metric_value(metrics_on_two_rows(cfg, c, c.task, c.select_examples, device), "select_metric",
                     sel.metric_name, name, c.task)
    if sel.staged:
        task = stage_task(cfg, sel.curriculum[0])
        metric_value(metrics_on_two_rows(cfg, c, task, task.examples(sel.gate_rows()), device), "curriculum_metric",
                     sel.curriculum_metric, sel.curriculum_metric, task)


def metrics_on_two_rows(cfg, c, task, examples: list, device) -> dict:
    was_training = c.method.training
    metrics = score_rows(c.method, task, examples[:2], c.featurizer, cfg.trainer.eval_batch_size, device,
                         progress=False)[0]
    c.method.train(was_training)
    return metrics


def stage_task(cfg, stage: str):
    tcfg = copy.deepcopy(cfg.task)
    OmegaConf.update(tcfg, "subset", stage)
    return build_task(tcfg)


def metric_value(metrics: dict, option: str, given: str, name: str, task) -> float:
    """``metrics[name]``, the value of ``trainer.<option>=<given>``; one line naming the metrics the evaluation of
    ``task`` gives when it has none by that name."""
    if name not in metrics:
        gives = ", ".join(k for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
        raise EmbexpError(f"trainer.{option}={given}: the evaluation of {task.display_name} gives no '{name}' "
                          f"(it gives: {gives})")
    return float(metrics[name])
