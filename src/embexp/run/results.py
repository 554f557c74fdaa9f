"""A run's results: its status while it runs (:func:`recording`, status.json) and ``metrics.json``
(:func:`metrics_record`): what ran, on which rows, what it scored, how it trained.
"""

from __future__ import annotations

import contextlib
import logging

from accelerate import Accelerator
from omegaconf import OmegaConf

from embexp import EmbexpError, RunInterrupted, __version__
from embexp.core import fingerprint as fp
from embexp.core.records import RunRecord, git_commit, write_json
from embexp.run.build import Components
from embexp.run.loop import TrainResult, peak_memory
from embexp.run.predict import curve_record

log = logging.getLogger("embexp")


@contextlib.contextmanager
def recording(cfg, record: RunRecord, acc: Accelerator, previous: dict | None = None):
    """The run's status follows what happens inside: ``running``, then ``interrupted`` on a preemption
    notice or Ctrl-C (one line) or ``failed`` on any other error (crashes too); ``record.finish`` writes
    ``complete``. The trackers open here and close at the end either way. ``previous``: the status of
    the run before, whose process died (``run.lock``), kept in the new status."""
    if record.is_main:  # what defines the result, before the status says running (core.fingerprint)
        record.dir.mkdir(parents=True, exist_ok=True)
        write_json(record.dir / fp.FINGERPRINT, fp.record(cfg))
    record.start(cfg, resume=cfg.trainer.resume, previous=previous)
    if acc.log_with:
        acc.init_trackers("embexp", config=tracker_config(cfg))
    try:
        yield
    except RunInterrupted as e:
        record.interrupt(str(e))
        raise
    except KeyboardInterrupt:  # Ctrl-C outside the training steps (or twice): as a preemption notice, one line
        message = ("SIGINT (Ctrl-C) received: stopped; rerun the same command with trainer.resume=true to continue"
                   " (from the last checkpoint, if one was written)")
        record.interrupt(message)
        raise RunInterrupted(message) from None
    except BaseException as e:  # keep the status honest for crashes too
        record.fail(str(e) if isinstance(e, EmbexpError) else f"{type(e).__name__}: {e}")
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


def metrics_record(cfg, c: Components, acc: Accelerator, res: TrainResult | None, metrics: dict, preds: list[dict],
                   sizes: dict, final_select: dict | None = None) -> dict:
    """metrics.json: what ran, on which rows, what it scored, how it trained. ``final_select``: the selection
    rows' point at the end of the learning curve (``run.predict.select_point``; trainer.curve_select)."""
    task, sel = c.task, c.selection
    return {
        "method": cfg.method.name, "model": cfg.model.name, "task": task.display_name, "seed": cfg.seed,
        **({"weights": "random"} if cfg.model.init == "random" else {}),
        "fingerprint": fp.fingerprint(cfg), "git_commit": git_commit(), "embexp_version": __version__,
        **sizes,
        "n_train_examples": len(c.train_examples), "n_eval_examples": len(c.eval_examples),
        "n_select_examples": len(c.select_examples),
        "select_split": sel.split(task),
        "select_on": sel.on,
        "select_metric": sel.recorded(task, res is not None),
        **({"curriculum_gate_split": task.split_name(sel.gate_rows())} if sel.staged else {}),
        "loss_on": task.loss_on if c.backbone.is_decoder else "",
        "metrics": metrics,
        "data": data_record(cfg, c),
        **({"curve": curve_record(res, task, metrics, preds, final_select)} if sel.curve_at and cfg.do_eval else {}),
        "train": {**train_summary(res, acc.num_processes), "strategy": cfg.trainer.strategy,
                  "effective_batch": effective_batch(cfg.trainer, acc.num_processes)},
        "memory": peak_memory(),
        "method_values": c.method.log_values(),
        "notes": cfg.notes,
    }


def data_record(cfg, c) -> dict:
    """metrics.json's ``data``: what featurising cut (``build.featurize``). Under a curriculum the
    run trains on each stage's rows (``truncated_train_<stage>``), not on task.subset's training rows,
    whose counts are left out."""
    data = dict(c.data)
    if cfg.do_train and cfg.trainer.curriculum:
        data.pop("truncated_train", None)
    return data


def effective_batch(t, world_size: int):
    """Examples per optimizer step: per-device batch x trainer.grad_accum x devices; a list (one per
    stage) under trainer.curriculum_batch_size."""
    sizes = list(t.curriculum_batch_size) if t.curriculum else []
    eff = [int(b) * t.grad_accum * world_size for b in (sizes or [t.batch_size])]
    return eff if sizes else eff[0]


def train_summary(res, world_size: int = 1) -> dict:
    if res is None:
        return {"steps": 0}
    keys = ("steps", "micro_batches", "examples", "tokens", "input_tokens", "wall_seconds", "tokens_per_second",
            "final_train_loss",
            "eval_loss", "select_loss", "select_metric", "select_score", "best_step", "best_select_loss",
            "best_select_score", "resumed_from_step", "stopped_early", "state_memory")
    out = {k: getattr(res, k) for k in keys}
    out["world_size"] = world_size
    out["history"] = res.history
    return out


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


def numeric_fields(d: dict, prefix: str) -> dict:
    """The numbers of ``d`` (not booleans) as floats, their keys prefixed (a tracker's flat metrics)."""
    return {f"{prefix}{k}": float(v) for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
