"""Train and evaluate one configuration: ``python -m embexp.train method=... model=... task=...``.

:func:`run` reads top to bottom: pre-flight (the config validated, the task built, each part asked
what it needs) -> accelerator and run record -> build (rows, backbone, method, features) -> fit ->
evaluate -> record. ``embexp.eval`` rebuilds and evaluates a saved run with the same pieces
(``pipeline.build``, ``Components.evaluate``, ``pipeline.load_adapter``).
"""

from __future__ import annotations

import contextlib
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
from omegaconf import OmegaConf

from embexp import EmbexpError, RunInterrupted, __version__, judge

from embexp.core import cli

from embexp.run import curriculum, selection, sharding
from embexp.core.config import register_core_schemas
from embexp.run.loop import Trainer, TrainResult, peak_memory
from embexp.run.evaluate import evaluate as evaluate_rows
from embexp.run.build import Components, build, preflight, save_adapter
from embexp.core.records import METRICS, RunRecord, git_commit, is_complete

register_core_schemas()
import embexp.methods  # noqa: E402,F401  (register method schemas)
import embexp.tasks  # noqa: E402,F401  (register task schemas)

log = logging.getLogger("embexp")


def run(cfg, run_dir: Path) -> dict:
    """Train and evaluate ``cfg`` into ``run_dir``; returns metrics.json's content ({} on the other processes)."""
    plan = preflight(cfg)  # what cannot run is one line, before the run directory, the rows and the model
    acc = make_accelerator(cfg, run_dir)
    sharding.check(cfg, acc.num_processes)  # what cannot run sharded, in one line, before the data and the model
    cli.setup_logging(run_dir, acc.is_main_process)
    if cfg.trainer.resume and is_complete(run_dir):
        log.info("run %s is already complete; nothing to resume", run_dir)
        return json.loads((run_dir / METRICS).read_text())
    record = RunRecord(run_dir, acc.is_main_process)
    with recording(cfg, record, acc):
        set_seed(cfg.seed)
        c = build(cfg, acc.device, plan=plan)
        log.info("run %s: method=%s model=%s task=%s seed=%d (%d process%s on %s)", run_dir, cfg.method.name, cfg.model.name,
                 c.task.display_name, cfg.seed, acc.num_processes, "es" if acc.num_processes > 1 else "", acc.device)
        sizes = parameter_counts(c)  # as trained, before finalize
        res, c = fit(cfg, c, acc, run_dir)
        if acc.is_main_process or not cfg.trainer.get("strategy", "ddp") == "fsdp":
            c.method.finalize()  # e.g. parameter averaging, before the adapter is saved and evaluated
        acc.wait_for_everyone()
        out = finish(cfg, c, acc, record, res, sizes) if acc.is_main_process else {}
        acc.wait_for_everyone()
    return out


@contextlib.contextmanager
def recording(cfg, record: RunRecord, acc: Accelerator):
    """The run's status follows what happens inside: ``running``, then ``interrupted`` on a preemption
    notice or ``failed`` on any other error (crashes and Ctrl-C too); ``record.finish`` writes
    ``complete``. The trackers open here and close at the end either way."""
    record.start(cfg, resume=cfg.trainer.resume)
    if acc.log_with:
        acc.init_trackers("embexp", config=tracker_config(cfg))
    try:
        yield
    except RunInterrupted as e:
        record.interrupt(str(e))
        raise
    except EmbexpError as e:
        record.fail(str(e))
        raise
    except BaseException as e:  # keep the status honest for crashes and Ctrl-C too
        record.fail(f"{type(e).__name__}: {e}")
        raise
    finally:
        acc.end_training()  # closes the trackers' files/runs (a no-op without trackers)


def parameter_counts(c: Components) -> dict:
    """metrics.json's parameter counts: trainable (with an encoder's head), the method's own, the backbone's."""
    trains = c.method.trains
    sizes = {"n_trainable_params": c.method.n_trainable() if trains else 0,
             "n_method_params": c.method.n_trainable(include_head=False) if trains else 0,
             "n_total_params": c.n_backbone_params}
    log.info("trainable parameters: %d (method %d) of %d", *sizes.values())
    return sizes


def fit(cfg, c: Components, acc: Accelerator, run_dir: Path) -> tuple[TrainResult | None, Components]:
    """Train the method: through a trainer.curriculum's stages, else one Trainer on the training rows
    (None when nothing is trained). Under trainer.strategy=fsdp the trained tensors are gathered into
    an unsharded copy on the main process, which finalises, saves and evaluates (returned in place of ``c``)."""
    if cfg.do_train and c.method.trains and cfg.trainer.curriculum:
        return curriculum.fit(cfg, c, acc), c
    if not c.train_features:
        return None, c
    trainer = Trainer(c.method, cfg.trainer, acc, c.train_features, c.eval_features, c.backbone.tokenizer.pad_token_id, cfg.seed,
                      run_dir, c.select_features, curve_point(cfg, c, acc.device), select_score(cfg, c, acc.device))
    res = trainer.fit()
    if trainer.sharded:
        c = sharding.unsharded(cfg, trainer, acc) or c
    return res, c


def curve_point(cfg, c: Components, device):
    """trainer.curve_at's callback: step -> the final evaluation's metrics, mid-run (None without curve_at)."""
    if not (cfg.trainer.curve_at and cfg.do_eval):
        return None
    return lambda step: {**curve_metrics(c.task, *c.evaluate(cfg.trainer.eval_batch_size, device)), **select_point(cfg, c, device)}


def select_score(cfg, c: Components, device):
    """trainer.select_metric's signal, where select_best keeps the best metric rather than the lowest loss: (name,
    () -> the metric on the selection rows), scored by the final evaluation's code (``Components.evaluate``,
    rows="select"); None otherwise. The name is checked on the first two selection rows before training, so a
    metric the evaluation does not give stops the run in one line now, not at the first selection point."""
    name = selection.metric(cfg, c.task)
    if name == "loss" or not (cfg.trainer.select_best and c.select_features):
        return None

    def value(metrics: dict) -> float:
        if name not in metrics:
            given = ", ".join(k for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
            raise EmbexpError(f"trainer.select_metric={cfg.trainer.select_metric}: the evaluation of "
                              f"{c.task.display_name} gives no '{name}' (it gives: {given})")
        return float(metrics[name])

    was_training = c.method.training
    value(evaluate_rows(c.method, c.task, c.select_examples[:2], c.featurizer, cfg.trainer.eval_batch_size, device,
                        progress=False)[0])
    c.method.train(was_training)
    return name, lambda: value(c.evaluate(cfg.trainer.eval_batch_size, device, rows="select")[0])


def finish(cfg, c: Components, acc: Accelerator, record: RunRecord, res: TrainResult | None, sizes: dict) -> dict:
    """The main process's end of a run: the adapter, the evaluation (judged), the export, metrics.json."""
    if cfg.save_adapter and c.method.trains:
        save_adapter(cfg, c, record.dir)
    metrics, preds = evaluate(cfg, c, acc.device, record) if cfg.do_eval else ({}, [])
    if cfg.export:
        c.method.export().save_pretrained(record.dir / "export")
        c.backbone.tokenizer.save_pretrained(record.dir / "export")
    out = metrics_record(cfg, c, acc, res, metrics, preds, sizes)
    acc.log(numeric(metrics, "eval/"), step=res.steps if res is not None else 0)
    record.finish(out)
    log.info("metrics: %s", json.dumps(metrics))
    return out


def evaluate(cfg, c: Components, device, record: RunRecord) -> tuple[dict, list[dict]]:
    """The final evaluation: the task's metrics, the judge's scores of the generations (judge.model),
    predictions.jsonl."""
    t0 = time.perf_counter()
    metrics, preds = c.evaluate(cfg.trainer.eval_batch_size, device, cfg.trainer.progress)
    metrics["eval_seconds"] = time.perf_counter() - t0
    metrics.update(judge.score_run(cfg, c.eval_examples, preds, record.dir, device))
    record.write_jsonl("predictions.jsonl", preds)
    return metrics, preds


def metrics_record(cfg, c: Components, acc: Accelerator, res: TrainResult | None, metrics: dict, preds: list[dict],
                   sizes: dict) -> dict:
    """metrics.json: what ran, on which rows, what it scored, how it trained."""
    task, staged = c.task, bool(cfg.do_train and c.method.trains and cfg.trainer.curriculum)
    return {
        "method": cfg.method.name, "model": cfg.model.name, "task": task.display_name, "seed": cfg.seed,
        "git_commit": git_commit(), "embexp_version": __version__,
        **sizes,
        "n_train_examples": len(c.train_examples), "n_eval_examples": len(c.eval_examples),
        "n_select_examples": len(c.select_examples),
        "select_split": selection.split(cfg, task),
        "select_on": cfg.trainer.get("select_on", "heldout"),
        "select_metric": selection.recorded(cfg, task, res is not None),
        **({"curriculum_gate_split": curriculum.gate_split(cfg, task)} if staged else {}),
        "loss_on": task.loss_on if c.backbone.is_decoder else "",
        "metrics": metrics,
        "data": data_record(cfg, c),
        **({"curve": curve_record(res, task, metrics, preds, select_point(cfg, c, acc.device))}
           if cfg.trainer.curve_at and cfg.do_eval else {}),
        "train": {**_train_summary(res, acc.num_processes), "strategy": cfg.trainer.get("strategy", "ddp"),
                  "effective_batch": effective_batch(cfg.trainer, acc.num_processes)},
        "memory": peak_memory(),
        "method_values": c.method.log_values(),
        "notes": cfg.notes,
    }


TRACKER_PACKAGES = {"tensorboard": "tensorboardX", "wandb": "wandb", "mlflow": "mlflow", "trackio": "trackio"}


def make_accelerator(cfg, run_dir: Path | None = None) -> Accelerator:
    mp = cfg.trainer.mixed_precision
    if mp not in ("auto", "no", "bf16", "fp16"):
        raise EmbexpError(f"unknown trainer.mixed_precision '{mp}' (choose from: auto, no, bf16, fp16)")
    cuda = torch.cuda.is_available() and not cfg.trainer.cpu
    if mp == "auto":
        mp = "bf16" if cuda and torch.cuda.is_bf16_supported() else "no"
    if cuda and cfg.trainer.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    kw = {}
    if cfg.trainer.get("log_with", "none") != "none":
        from accelerate.tracking import get_available_trackers

        name = cfg.trainer.log_with
        if name not in {str(t) for t in get_available_trackers()}:
            raise EmbexpError(f"trainer.log_with={name} needs the {TRACKER_PACKAGES[name]} package (pip install {TRACKER_PACKAGES[name]}), "
                              f"or trainer.log_with=none")
        kw = dict(log_with=name, project_dir=str(Path(run_dir or ".") / "trackers"))
    plugin = sharding.make_plugin(cfg.trainer) if sharding.wants(cfg.trainer) else None  # trainer.strategy=fsdp
    env = os.environ.get(sharding.FSDP_ENV)
    acc = Accelerator(mixed_precision=mp, cpu=not cuda, fsdp_plugin=plugin, **kw)
    if plugin is not None:
        sharding.enable_on_cpu(acc, plugin, env)
    return acc


def tracker_config(cfg) -> dict:
    """The resolved config flattened to dotted keys with scalar values (what trackers accept)."""
    out = {}

    def walk(prefix, node):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            out[prefix] = node if isinstance(node, (int, float, str, bool)) else str(node)

    walk("", OmegaConf.to_container(cfg, resolve=True))
    return out


def numeric(d: dict, prefix: str) -> dict:
    return {f"{prefix}{k}": float(v) for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def curve_metrics(task, metrics: dict, records: list[dict]) -> dict:
    """A learning-curve point: the task's numeric metrics, and for decoder classification by
    log-likelihood the balanced accuracy and each answer's share of the predictions (a run that
    answers one class shows it here)."""
    out = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    preds = [r["ll_pred"] for r in records if "ll_pred" in r]
    if preds and task.kind == "classification":
        gold = [r["label"] for r in records]
        n = max(max(gold), max(preds)) + 1
        recalls = [sum(p == g for p, g in zip(preds, gold) if g == k) / gold.count(k) for k in range(n) if gold.count(k)]
        out["ll_balanced_accuracy"] = 100.0 * sum(recalls) / len(recalls)
        out["ll_answer_share"] = [100.0 * preds.count(k) / len(preds) for k in range(n)]
    return out


def select_point(cfg, c, device) -> dict:
    """trainer.curve_select: ``{"select": metrics}`` of the held-out selection rows at this step ({} without it)."""
    if not cfg.trainer.get("curve_select"):
        return {}
    m, recs = c.evaluate(cfg.trainer.eval_batch_size, device, rows="select")
    return {"select": curve_metrics(c.task, m, recs)}


def curve_record(res, task, metrics: dict, records: list[dict], final_select: dict | None = None) -> list[dict]:
    """metrics.json's ``curve``: the points of trainer.curve_at, then the final evaluation."""
    points = [{"step": h["step"], **h["curve"]} for h in (res.history if res is not None else []) if "curve" in h]
    return points + [{"step": res.steps if res is not None else 0, **curve_metrics(task, metrics, records), **(final_select or {})}]


def data_record(cfg, c) -> dict:
    """metrics.json's ``data``: what featurising cut (``pipeline.truncation``). A curriculum trains
    on each stage's rows, which curriculum.py featurises itself: those are not counted, so the
    task.subset training rows' counts are left out rather than shown for rows that were not trained on."""
    data = dict(c.data)
    if cfg.do_train and cfg.trainer.get("curriculum"):
        data.pop("truncated_train", None)
        data["curriculum_stages"] = "not counted (trainer.curriculum featurises each stage's training rows itself)"
    return data


def effective_batch(t, world_size: int):
    """Examples per optimizer step: per-device batch x trainer.grad_accum x devices; a list (one per
    stage) under trainer.curriculum_batch_size."""
    sizes = list(t.get("curriculum_batch_size") or []) if t.get("curriculum") else []
    eff = [int(b) * t.grad_accum * world_size for b in (sizes or [t.batch_size])]
    return eff if sizes else eff[0]


def _train_summary(res, world_size: int = 1) -> dict:
    if res is None:
        return {"steps": 0}
    keys = ("steps", "micro_batches", "examples", "tokens", "input_tokens", "wall_seconds", "tokens_per_second", "final_train_loss",
            "eval_loss", "select_loss", "select_metric", "select_score", "best_step", "best_select_loss",
            "best_select_score", "resumed_from_step", "state_memory")
    out = {k: getattr(res, k) for k in keys}
    out["world_size"] = world_size
    out["history"] = res.history
    return out


@hydra.main(config_path=None, config_name="train", version_base=None)
@cli.one_line_errors
def main(cfg) -> None:
    cli.quiet_libraries()
    run(cfg, Path(HydraConfig.get().runtime.output_dir))


def entry() -> None:
    cli.check_overrides(sys.argv[1:])
    cli.check_compose("train", sys.argv[1:])
    cli.relaunch_cpu_data_parallel("embexp.train", sys.argv[1:])
    sys.argv.insert(1, f"--config-dir={cli.conf_dir()}")
    main()


if __name__ == "__main__":
    # Run the importable module's copy, not __main__'s: launchers that pickle the task function
    # (hydra/launcher=submitit_slurm|submitit_local) then find it by name on the other side.
    import embexp.train

    embexp.train.entry()
