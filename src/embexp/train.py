"""Train and evaluate one configuration: ``python -m embexp.train method=... model=... task=...``.

:func:`run` is the spine, read top to bottom; each step is a stage of ``embexp.run`` (docs/architecture.md,
"The path of one run"). ``embexp.eval`` rebuilds and evaluates a saved run with the same pieces.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

import hydra
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from hydra.core.hydra_config import HydraConfig

from embexp import EmbexpError, judge
from embexp.core import cli
from embexp.core.config import register_core_schemas, validate
from embexp.core.records import METRICS, RunRecord, atomic_path
from embexp.run import accelerate_compat, curriculum, lock, sharding, stops
from embexp.run.adapter import save_adapter
from embexp.run.build import Components, build
from embexp.run.checkpoint import only_folders
from embexp.run.loop import Trainer, TrainInputs, TrainResult
from embexp.run.ownership import CONTINUE, DONE, check, claim, read_object
from embexp.run.predict import curve_point, select_point, select_score
from embexp.run.preflight import Plan, check_tracker, preflight, probe
from embexp.run.results import metrics_record, numeric_fields, parameter_counts, recording

register_core_schemas()
import embexp.methods  # noqa: E402,F401  (register method schemas)
import embexp.tasks  # noqa: E402,F401  (register task schemas)

log = logging.getLogger("embexp")


def run(cfg, run_dir: Path) -> dict:
    """Train and evaluate ``cfg`` into ``run_dir``; returns metrics.json's content ({} on the other processes)."""
    acc = make_accelerator(cfg, run_dir)
    plan = preflight(cfg, world_size=acc.num_processes)  # what cannot run: one line, before the rows and the model
    if acc.is_main_process and lock.live_owner(run_dir) is None:
        check(cfg, run_dir)  # no run of embexp's there, or one it cannot read: one line, before the lock's files
    with lock.owning(run_dir, acc.is_main_process) as previous:  # one owner: another live one is one line
        cli.setup_logging(run_dir, acc.is_main_process)
        # another config's run there, what is no readable run, a resume whose checkpoint is gone: one line
        verdict = claim(cfg, run_dir, acc.is_main_process)  # (run/ownership.py)
        acc.wait_for_everyone()  # every process has read the directory before the main one writes the run's record
        if previous:  # its process died while running: marked interrupted, now continued or started again
            log.warning("run %s: the previous run's process (%s) stopped without updating its status (killed?): "
                        "marked interrupted, now %s", run_dir, lock.describe(previous["previous_owner"]),
                        "resumed" if cfg.trainer.resume and verdict == CONTINUE else
                        "started again" + ("" if cfg.trainer.resume else " (trainer.resume=true continues it)"))
        if verdict == DONE:  # the same config's complete run: its metrics, nothing trained or written
            metrics = read_object(Path(run_dir) / METRICS)
            log.info("run %s is already complete; nothing to %s (trainer.overwrite=true trains it again)", run_dir,
                     "resume" if cfg.trainer.resume else "be done")
            log.info("metrics: %s", json.dumps(metrics.get("metrics", {})))
            return metrics
        return run_owned(cfg, run_dir, acc, plan, previous)


def run_owned(cfg, run_dir: Path, acc: Accelerator, plan: Plan, previous: dict | None = None) -> dict:
    """Build, fit and finish under the run's record (the caller owns ``run_dir``), and under its stop signals
    (``run.stops``: before training they stop it at once, in the steps after the step with a checkpoint,
    after the last step they are held until the record is complete)."""
    record = RunRecord(run_dir, acc.is_main_process)
    with recording(cfg, record, acc, previous), stops.run_signals():
        only_folders(run_dir / "checkpoint")  # a file at a checkpoint's name: one line, before the model loads
        set_seed(cfg.seed)
        c = build(cfg, acc.device, plan=plan)
        log.info("run %s: method=%s model=%s task=%s seed=%d (%d process%s on %s)", run_dir, cfg.method.name,
                 cfg.model.name, c.task.display_name, cfg.seed, acc.num_processes,
                 "es" if acc.num_processes > 1 else "", acc.device)
        sizes = parameter_counts(c)  # as trained, before finalize
        probe(cfg, c, acc.device)  # the selection and curriculum metrics, on two rows: one line, before training
        res, c = fit(cfg, c, acc, run_dir, plan)
        stops.phase("hold")  # from here the run finishes first (a curriculum's rounds, or no training, left "now")
        if acc.is_main_process or not sharding.wants(cfg.trainer):
            c.method.finalize()  # e.g. parameter averaging, before the adapter is saved and evaluated
        acc.wait_for_everyone()
        out = finish(cfg, c, acc, record, res, sizes) if acc.is_main_process else {}
        acc.wait_for_everyone()
    return out


def fit(cfg, c: Components, acc: Accelerator, run_dir: Path, plan: Plan) -> tuple[TrainResult | None, Components]:
    """Train the method: through a trainer.curriculum's stages, else one Trainer on the training rows
    (None when nothing is trained). Under trainer.strategy=fsdp the trained tensors are gathered, and the
    main process builds an unsharded copy of the run and loads them; it finalises, saves and evaluates
    (returned in place of ``c``)."""
    if c.selection.staged:  # do_train, a method that trains, and trainer.curriculum's stages
        return curriculum.fit(cfg, c, acc), c
    if not c.train_features:
        return None, c
    inputs = TrainInputs(c.train_features, c.backbone.tokenizer.pad_token_id, cfg.seed, c.eval_features,
                         c.select_features, run_dir, curve_point(cfg, c, acc.device), select_score(cfg, c, acc.device))
    trainer = Trainer(c.method, cfg.trainer, acc, inputs)
    res = trainer.fit()
    if trainer.sharded:
        state = sharding.gather(trainer)  # every process takes part; the main one keeps the tensors
        if acc.is_main_process:
            set_seed(cfg.seed)
            c = build(cfg, acc.device, plan=plan)  # as embexp.eval rebuilds a run
            sharding.load_whole(c.method, state)
    return res, c


def finish(cfg, c: Components, acc: Accelerator, record: RunRecord, res: TrainResult | None, sizes: dict) -> dict:
    """The main process's end of a run: the adapter, the evaluation (judged), the export, metrics.json."""
    if cfg.save_adapter and c.method.trains:
        save_adapter(cfg, c, record.dir)
    random_weights = cfg.model.init == "random"
    if random_weights and cfg.do_eval:
        log.warning("model.init=random: no evaluation (random weights have no quality to measure; the run "
                    "records memory, speed and losses)")
    metrics, preds = final_scores(cfg, c, acc.device, record) if cfg.do_eval and not random_weights else ({}, [])
    if cfg.export:  # the folder whole or not at all: written beside it, then renamed
        with atomic_path(record.dir / "export") as tmp:
            c.method.export().save_pretrained(tmp)
            c.backbone.tokenizer.save_pretrained(tmp)
    curve_end = select_point(cfg, c, acc.device) if cfg.trainer.curve_at and cfg.do_eval else None
    out = metrics_record(cfg, c, acc, res, metrics, preds, sizes, curve_end)
    acc.log(numeric_fields(metrics, "eval/"), step=res.steps if res is not None else 0)
    record.finish(out)
    log.info("metrics: %s", json.dumps(metrics))
    return out


def final_scores(cfg, c: Components, device, record: RunRecord) -> tuple[dict, list[dict]]:
    """The final evaluation: the task's metrics, the judge's scores of the generations (judge.model),
    predictions.jsonl."""
    t0 = time.perf_counter()
    metrics, preds = c.score(cfg.trainer.eval_batch_size, device, cfg.trainer.progress)
    metrics["eval_seconds"] = time.perf_counter() - t0
    metrics.update(judge.score_run(cfg, c.eval_examples, preds, record.dir, device))
    record.write_jsonl("predictions.jsonl", preds)
    return metrics, preds


def make_accelerator(cfg, run_dir: Path | None = None) -> Accelerator:
    mp = cfg.trainer.mixed_precision  # the schema's choices: auto, no, bf16, fp16
    cuda = torch.cuda.is_available() and not cfg.trainer.cpu
    if mp == "auto":
        mp = "bf16" if cuda and torch.cuda.is_bf16_supported() else "no"
    if cuda and cfg.trainer.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    check_tracker(cfg)  # its package: one line, before Accelerate would open the tracker
    kw = {}
    if cfg.trainer.log_with != "none":
        kw = dict(log_with=cfg.trainer.log_with, project_dir=str(Path(run_dir or ".") / "trackers"))
    plugin = sharding.make_plugin(cfg.trainer) if sharding.wants(cfg.trainer) else None  # trainer.strategy=fsdp
    env = os.environ.get(sharding.FSDP_ENV)
    acc = Accelerator(mixed_precision=mp, cpu=not cuda, fsdp_plugin=plugin, **kw)
    if plugin is not None:
        accelerate_compat.shard_on_cpu(acc, plugin, env)
    return acc


@hydra.main(config_path=None, config_name="train", version_base=None)
@cli.one_line_errors
def main(cfg) -> None:
    """A run that Hydra's app starts (a multirun's job, a Hydra launcher's): its config, composed by Hydra, is
    validated once here (a bad value: one line, exit 2, as :func:`entry` gives it)."""
    try:
        validate(cfg)
    except EmbexpError as e:
        cli.die(str(e))
    start(cfg, Path(HydraConfig.get().runtime.output_dir))


def start(cfg, run_dir: Path) -> dict:
    """:func:`run`, with the libraries' own logging quietened (a command's run, not a library call's)."""
    cli.quiet_libraries()
    return run(cfg, run_dir)


def entry() -> None:
    """``python -m embexp.train``: one run is composed and validated once (``core.cli.train_config``: a bad
    value, key or run directory is one line, exit 2), and run; a multirun and Hydra's own flags go to Hydra's
    app (:func:`main`). ``accelerate launch --cpu`` without MPI, which starts one process however many it is
    asked for, is one line naming torchrun (``run.accelerate_compat``)."""
    argv = sys.argv[1:]
    hydra_app = cli.hydra_launches(argv)
    try:
        if line := accelerate_compat.single_process_cpu_launch(os.environ):
            raise EmbexpError(line)
        if hydra_app:
            cli.check_groups(argv)  # Hydra composes each job; main validates it
        else:
            cfg, run_dir = cli.train_config(argv)
    except EmbexpError as e:
        cli.die(str(e))
    if hydra_app:
        sys.argv.insert(1, f"--config-dir={cli.conf_dir()}")
        main()
        return
    cli.one_line_errors(start)(cfg, run_dir)  # the run directory is made once the pre-flight has passed


if __name__ == "__main__":
    # Run the importable module's copy, not __main__'s: launchers that pickle the task function
    # (hydra/launcher=submitit_slurm|submitit_local) then find it by name on the other side.
    import embexp.train

    embexp.train.entry()
