"""Train and evaluate one configuration: ``python -m embexp.train method=... model=... task=...``.

Reads top to bottom: config -> backbone -> method -> data -> loop -> evaluation -> record.
"""

from __future__ import annotations

import json
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
from safetensors.torch import save_file

from embexp import EmbexpError, RunInterrupted, __version__, cli, curriculum, judge, sharding
from embexp.config import register_core_schemas
from embexp.inference import evaluate
from embexp.pipeline import build
from embexp.results import RunRecord, git_commit, is_complete
from embexp.loop import Trainer, check_curve, check_selection, peak_memory, selects_on_reported

register_core_schemas()
import embexp.methods  # noqa: E402,F401  (register method schemas)
import embexp.tasks  # noqa: E402,F401  (register task schemas)


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


def run(cfg, run_dir: Path) -> dict:
    check_selection(cfg)  # before the run directory, the data and the model
    check_curve(cfg)
    judge.check(cfg)  # judge.model on a task without generations: refused before the model loads
    acc = make_accelerator(cfg, run_dir)
    sharding.check(cfg, acc.num_processes)  # what cannot run sharded, in one line, before the data and the model
    cli.setup_logging(run_dir, acc.is_main_process)
    import logging

    log = logging.getLogger("embexp")
    record = RunRecord(run_dir, acc.is_main_process)
    if cfg.trainer.resume and is_complete(run_dir):
        log.info("run %s is already complete; nothing to resume", run_dir)
        return json.loads((run_dir / "metrics.json").read_text())
    record.start(cfg, resume=cfg.trainer.resume)
    if acc.log_with:
        acc.init_trackers("embexp", config=tracker_config(cfg))
    try:
        set_seed(cfg.seed)
        # config -> backbone -> method -> data -> setup (pipeline.build)
        c = build(cfg, acc.device)
        method, task = c.method, c.task
        train_ex, eval_ex = c.train_examples, c.eval_examples
        train_feats, eval_feats, select_feats = c.train_features, c.eval_features, c.select_features
        log.info("run %s: method=%s model=%s task=%s seed=%d (%d process%s on %s)", run_dir, cfg.method.name, cfg.model.name,
                 task.display_name, cfg.seed, acc.num_processes, "es" if acc.num_processes > 1 else "", acc.device)
        curriculum.check(cfg, task)  # trainer.curriculum: stage rows come from the curriculum, not task.train_split
        n_total = c.n_backbone_params
        n_train = method.n_trainable() if method.trains else 0
        n_method = method.n_trainable(include_head=False) if method.trains else 0  # as trained (before finalize)
        log.info("trainable parameters: %d (method %d) of %d", n_train, n_method, n_total)
        # loop
        train_res = None
        if cfg.do_train and method.trains and cfg.trainer.curriculum:
            train_res = curriculum.fit(cfg, c, acc)
        elif train_feats:
            def curve_point(step: int) -> dict:  # trainer.curve_at: the final evaluation, mid-run
                m, recs = evaluate(method, task, eval_ex, c.featurizer, cfg.trainer.eval_batch_size, acc.device, False)
                return curve_metrics(task, m, recs)

            trainer = Trainer(method, cfg.trainer, acc, train_feats, eval_feats, c.backbone.tokenizer.pad_token_id, cfg.seed, run_dir,
                              select_feats, curve_point if cfg.trainer.curve_at and cfg.do_eval else None)
            train_res = trainer.fit()
            if trainer.sharded:  # gathered into an unsharded copy on the main process, which finalises, saves and evaluates
                c = sharding.unsharded(cfg, trainer, acc) or c
                method = c.method if acc.is_main_process else None
        if method is not None:
            method.finalize()  # e.g. parameter averaging, before the adapter is saved and evaluated
        acc.wait_for_everyone()
        # evaluation (main process) and record
        metrics = {}
        if acc.is_main_process:
            if cfg.save_adapter and method.trains:
                save_file(method.trainable_state(), run_dir / "adapter.safetensors")
                (run_dir / "method.json").write_text(json.dumps(method_json(cfg, c), indent=2))
            if cfg.do_eval:
                t0 = time.perf_counter()
                metrics, preds = evaluate(method, task, eval_ex, c.featurizer, cfg.trainer.eval_batch_size, acc.device,
                                          cfg.trainer.progress)
                metrics["eval_seconds"] = time.perf_counter() - t0
                metrics.update(judge.score_run(cfg, eval_ex, preds, run_dir, acc.device))  # judge.model: judge the generations
                record.write_jsonl("predictions.jsonl", preds)
            if cfg.export:
                out = run_dir / "export"
                method.export().save_pretrained(out)
                c.backbone.tokenizer.save_pretrained(out)
            record_metrics = {
                "method": cfg.method.name, "model": cfg.model.name, "task": task.display_name, "seed": cfg.seed,
                "git_commit": git_commit(), "embexp_version": __version__,
                "n_trainable_params": n_train,
                "n_method_params": n_method,
                "n_total_params": n_total,
                "n_train_examples": len(train_ex), "n_eval_examples": len(eval_ex), "n_select_examples": len(c.select_examples),
                "select_split": task.split_name("eval") if selects_on_reported(cfg) else task.split_name("select"),
                "select_on": cfg.trainer.get("select_on", "heldout"),
                **({"curriculum_gate_split": curriculum.gate_split(cfg, task)}
                   if cfg.do_train and method.trains and cfg.trainer.curriculum else {}),
                "loss_on": task.loss_on if c.backbone.is_decoder else "",
                "metrics": metrics,
                "data": data_record(cfg, c),
                **({"curve": curve_record(train_res, task, metrics, preds)} if cfg.trainer.curve_at and cfg.do_eval else {}),
                "train": {**_train_summary(train_res, acc.num_processes), "strategy": cfg.trainer.get("strategy", "ddp"),
                          "effective_batch": effective_batch(cfg.trainer, acc.num_processes)},
                "memory": peak_memory(),
                "method_values": method.log_values(),
                "notes": cfg.notes,
            }
            steps = train_res.steps if train_res is not None else 0
            acc.log(numeric(metrics, "eval/"), step=steps)
            record.finish(record_metrics)
            log.info("metrics: %s", json.dumps(metrics))
            metrics = record_metrics
        acc.wait_for_everyone()
        return metrics
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


def curve_record(res, task, metrics: dict, records: list[dict]) -> list[dict]:
    """metrics.json's ``curve``: the points of trainer.curve_at, then the final evaluation."""
    points = [{"step": h["step"], **h["curve"]} for h in (res.history if res is not None else []) if "curve" in h]
    return points + [{"step": res.steps if res is not None else 0, **curve_metrics(task, metrics, records)}]


def data_record(cfg, c) -> dict:
    """metrics.json's ``data``: what featurising cut (``pipeline.truncation``). A curriculum trains
    on each stage's rows, which curriculum.py featurises itself: those are not counted, so the
    task.subset training rows' counts are left out rather than shown for rows that were not trained on."""
    data = dict(c.data)
    if cfg.do_train and cfg.trainer.get("curriculum"):
        data.pop("truncated_train", None)
        data["curriculum_stages"] = "not counted (trainer.curriculum featurises each stage's training rows itself)"
    return data


def method_json(cfg, c) -> dict:
    return {
        "method": OmegaConf.to_container(cfg.method, resolve=True),
        "base_model": cfg.model.id or cfg.model.source,
        "model": cfg.model.name,
        "vocab_size": c.backbone.model.config.get_text_config().vocab_size,
        "hidden_size": c.backbone.hidden_size,
        "embexp_version": __version__,
    }


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
            "eval_loss", "select_loss", "best_step", "best_select_loss", "resumed_from_step", "state_memory")
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
