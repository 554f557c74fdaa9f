"""The optimizer and its schedule, and the data order: what ``run.loop.Trainer`` steps through. The learning
rate depends on the step alone and the data order on (seed, epoch) alone, so a resumed run takes exactly the
steps of an uninterrupted one."""

from __future__ import annotations

import logging
import math

import torch

log = logging.getLogger("embexp")


def lr_factor(step: int, total: int, warmup: int, kind: str) -> float:
    """Multiplier of the peak lr at optimizer step `step` (0-based): linear warm-up, then decay
    (``kind``: trainer.scheduler, whose domain the schema checks: cosine, linear or constant)."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return {"constant": lambda: 1.0, "cosine": lambda: 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress))),
            "linear": lambda: max(0.0, 1.0 - progress)}[kind]()


def build_optimizer(params, cfg, peak_lrs=None) -> torch.optim.Optimizer:
    """AdamW / Adam, one group per peak lr (``peak_lrs``: tensor index -> lr; ``trainer.lr`` for the rest,
    e.g. K-Token's encoder has its own); ``Trainer.fit`` multiplies each group's ``peak_lr`` by the schedule."""
    groups: dict[float, list] = {}
    for i, p in enumerate(params):
        groups.setdefault(float((peak_lrs or {}).get(i, cfg.lr)), []).append(p)
    param_groups = [{"params": ps, "lr": lr, "peak_lr": lr} for lr, ps in groups.items()]
    kw = dict(lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay)
    optimizer = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[cfg.optimizer]  # the schema's choices
    return optimizer(param_groups, **kw)


def micro_batch_indices(n: int, batch: int, world: int, rank: int, seed: int, m: int) -> list[int]:
    """Example indices of global micro-batch m for this rank: a seeded permutation per epoch."""
    per_epoch = math.ceil(n / (batch * world))
    epoch, pos = divmod(m, per_epoch)
    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    perm = torch.randperm(n, generator=g).tolist()
    start = pos * batch * world + rank * batch
    if world == 1:
        return perm[start:start + batch]
    return [perm[(start + j) % n] for j in range(batch)]  # wrap so every rank gets a full batch


def total_steps(n: int, cfg, world: int) -> int:
    if cfg.max_steps > 0:
        return cfg.max_steps
    per_epoch = math.ceil(n / (cfg.batch_size * world))
    return max(1, math.ceil(cfg.epochs * per_epoch / cfg.grad_accum))


MANY_EPOCHS = 10  # trainer.max_steps past this many epochs of the training rows is said (accepted: a choice)


def schedule_warnings(cfg, total: int, n: int, world: int) -> None:
    """One warning line for each schedule that does not do what it seems to: a warm-up as long as training
    (the learning rate never reaches trainer.lr) and a max_steps far past the training rows."""
    if cfg.warmup_steps >= total:
        log.warning("trainer.warmup_steps=%d is not shorter than the %d steps trained: the learning rate never "
                    "reaches trainer.lr=%g", cfg.warmup_steps, total, cfg.lr)
    epochs = total * cfg.batch_size * cfg.grad_accum * world / max(n, 1)
    if cfg.max_steps > 0 and n and epochs > MANY_EPOCHS:
        log.warning("trainer.max_steps=%d is %.0f epochs over the %d training rows (each row seen ~%.0f times)",
                    cfg.max_steps, epochs, n, epochs)
