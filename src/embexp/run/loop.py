"""The training loop, on Accelerate: one loop for every method, task and model.

Determinism and resumption: the data order is a function of (seed, epoch) alone, the learning
rate a function of the step alone, and a checkpoint holds the trainable tensors, the optimizer
moments and the RNG states (safetensors + JSON, no pickles). A run killed after a checkpoint and
resumed therefore takes exactly the steps an uninterrupted run takes.

Model selection: the periodic evaluation loss and ``select_best`` read the selection rows they are
given (``selection.rows``: never the reported split, unless a paper's protocol is asked for by
name; ``selection.check`` refuses the rest before anything loads). ``select_best`` keeps the state
with the lowest selection loss or, given a ``select_score`` (``trainer.select_metric``), the best value
of that metric on the same rows, scored by the final evaluation's code at every selection point. The
evaluation split's loss is computed once, at the end, for the state that is kept, and only recorded.
"""

from __future__ import annotations

import logging
import math
import resource
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from embexp import EmbexpError, RunInterrupted

from embexp.run import checkpoint, sharding
from embexp.data import IGNORE, collate, n_tokens

log = logging.getLogger("embexp")


@dataclass
class TrainResult:
    steps: int = 0
    micro_batches: int = 0
    examples: int = 0
    tokens: int = 0  # positions the backbone read
    input_tokens: int = 0  # tokens of the tokenised inputs, before a method adds or merges any
    wall_seconds: float = 0.0
    tokens_per_second: float = 0.0
    final_train_loss: float = float("nan")
    eval_loss: float = float("nan")    # the reported split, the kept state, at the end (never used to choose)
    select_loss: float = float("nan")  # the selection rows, the kept state, at the end
    select_metric: str = "loss"  # what select_best keeps the state by: loss, or a metric's name (maximised)
    select_score: float = float("nan")  # that metric on the selection rows, the kept state, at the end
    best_step: int = -1
    best_select_loss: float = float("nan")  # the kept state's selection loss (lowest, when selecting by the loss)
    best_select_score: float = float("nan")  # the kept state's metric (best, when selecting by a metric)
    resumed_from_step: int = 0
    state_memory: dict = field(default_factory=dict)
    history: list = field(default_factory=list)


def lr_factor(step: int, total: int, warmup: int, kind: str) -> float:
    """Multiplier of the peak lr at optimizer step `step` (0-based): linear warm-up, then decay
    (``kind``: trainer.scheduler, whose domain the schema checks: cosine, linear or constant)."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return {"constant": lambda: 1.0, "cosine": lambda: 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress))),
            "linear": lambda: max(0.0, 1.0 - progress)}[kind]()


def build_optimizer(params, cfg, peak_lrs=None) -> torch.optim.Optimizer:
    """AdamW / Adam over ``params`` (a list of tensors, or of names with ``peak_lrs`` mapping each to
    its own peak lr). Every group carries its ``peak_lr``, which the schedule multiplies
    (``Trainer._steps``): ``trainer.lr`` unless a method asks for another one for some of its
    tensors (``Method.peak_lrs``, e.g. K-Token's encoder)."""
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


def check_curve(cfg) -> None:
    """trainer.curve_at holds optimizer steps: positive integers (refused in one line otherwise)."""
    bad = [x for x in cfg.trainer.curve_at if isinstance(x, bool) or not isinstance(x, int) or x < 1]
    if bad:
        raise EmbexpError(f"trainer.curve_at must list optimizer steps (integers >= 1); got {bad[0]!r}")
    from embexp.run import selection

    if cfg.trainer.get("curve_select") and (not cfg.trainer.curve_at or selection.on_reported(cfg) or not cfg.task.select_split):
        raise EmbexpError("trainer.curve_select scores held-out selection rows at the points of trainer.curve_at: it needs "
                          "trainer.curve_at=[...], task.select_split (e.g. train_holdout) and trainer.select_on=heldout")
    if cfg.trainer.curve_at and cfg.trainer.curriculum:
        raise EmbexpError("trainer.curve_at is not drawn across a trainer.curriculum's stages (each stage reports its gate "
                          "metric in the history); set trainer.curve_at=[]")


@torch.no_grad()
def evaluation_loss(model, features: list[dict], pad_id: int, batch_size: int, device, accelerator, max_batches: int = -1) -> float:
    """Token-weighted (decoders) or example-weighted (encoders) mean loss over `features`."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for b, i in enumerate(range(0, len(features), batch_size)):
        if 0 <= max_batches <= b:
            break
        batch = {k: v.to(device) for k, v in collate(features[i:i + batch_size], pad_id).items()}
        with accelerator.autocast():
            loss = model(**batch).loss.float().item()
        labels = batch["labels"]
        k = int((labels[:, 1:] != IGNORE).sum()) if labels.dim() == 2 else labels.shape[0]
        total, count = total + loss * k, count + k
    model.train(was_training)
    return total / max(count, 1)


class Trainer:
    """``select_features``: the rows behind the periodic evaluation loss and ``select_best``;
    ``eval_features``: the reported split, whose loss is only recorded, once, at the end;
    ``select_score``: (metric name, () -> its value on the selection rows) when ``select_best`` keeps
    the state with the best metric rather than the lowest loss (``train.select_score``)."""

    def __init__(self, method, cfg, accelerator, train_features, eval_features, pad_id, seed, run_dir=None,
                 select_features=None, curve_point=None, select_score=None):
        self.method, self.cfg, self.acc = method, cfg, accelerator
        self.train_features, self.eval_features = train_features, eval_features
        self.select_features = select_features or []
        self.select_name, self.select_score = select_score or ("loss", None)
        self.curve_point = curve_point  # step -> metrics on the eval split (trainer.curve_at; main process)
        if cfg.select_best and not self.select_features:
            raise EmbexpError("trainer.select_best=true needs selection rows (task.select_split); none were given")
        self.pad_id, self.seed = pad_id, seed
        self.run_dir = Path(run_dir) if run_dir else None
        self.names = list(method.trainable_tensors())
        self.params = [method.trainable_tensors()[n] for n in self.names]
        if not self.params:
            raise EmbexpError(f"method {method.cfg.name} has no trainable tensors")
        own = method.peak_lrs()  # tensors whose peak lr is not trainer.lr (K-Token's encoder)
        unknown = sorted(set(own) - set(self.names))
        if unknown:
            raise EmbexpError(f"method {method.cfg.name} sets a learning rate for tensors it does not train: {unknown[:5]}")
        self.optimizer = build_optimizer(self.params, cfg, {i: own[n] for i, n in enumerate(self.names) if n in own})
        self.sharded = sharding.active(accelerator)  # trainer.strategy=fsdp: self.params become shards (sharding.py)
        self.strategy = "fsdp" if self.sharded else "ddp"
        self.shapes = [p.shape for p in self.params]  # as the method has them (sharding lifts 0-d tensors to 1-d)
        if self.sharded:
            self.model, self.optimizer, self.params, self.fqns = sharding.prepare(accelerator, method, self.optimizer, self.names)
        else:
            self.model, self.optimizer = accelerator.prepare(method, self.optimizer)
        self.total = total_steps(len(train_features), cfg, accelerator.num_processes)
        self.result = TrainResult(select_metric=self.select_name)
        self.best_state = None

    # ---- checkpoints (safetensors + JSON) -----------------------------------------------------
    @property
    def ckpt_dir(self) -> Path | None:
        return self.run_dir / "checkpoint" if self.run_dir else None

    def save_checkpoint(self, step: int) -> None:
        checkpoint.save(self, step)

    def load_checkpoint(self) -> int:
        return checkpoint.load(self)

    # ---- the loop -------------------------------------------------------------------------------
    def fit(self) -> TrainResult:
        cfg, acc = self.cfg, self.acc
        start = self.load_checkpoint() if cfg.resume else 0
        self.model.train()
        res = self.result
        t_start = time.perf_counter() - res.wall_seconds  # a resumed run keeps counting its wall time
        bar = tqdm(total=self.total, initial=start, desc="train", disable=not (cfg.progress and acc.is_main_process),
                   dynamic_ncols=True, leave=False)
        window_loss, window_tokens, window_t = 0.0, 0, time.perf_counter()
        with _stop_signals() as stop:
            self._steps(start, t_start, bar, window_loss, window_tokens, window_t, stop)
        bar.close()
        res.wall_seconds = time.perf_counter() - t_start
        res.tokens_per_second = res.tokens / max(res.wall_seconds, 1e-9)
        if self.select_features:
            res.select_loss, res.select_score = self._selection_point()
            if cfg.select_best:
                self._consider_best(res.select_loss, res.select_score, res.steps)
                if self.best_state is not None and res.best_step != res.steps:
                    log.info("restoring the trainable state of step %d (selection loss %.4f, %s %.4g)", res.best_step,
                             res.best_select_loss, self.select_name, res.best_select_score)
                    self._restore(self.best_state)
                    res.select_loss, res.select_score = res.best_select_loss, res.best_select_score
        if self.eval_features:  # recorded only: nothing is chosen by it
            res.eval_loss = self._loss(self.eval_features)
        return res

    def _steps(self, start, t_start, bar, window_loss, window_tokens, window_t, stop) -> None:
        cfg, acc, res = self.cfg, self.acc, self.result
        world, rank = acc.num_processes, acc.process_index
        n = len(self.train_features)
        for step in range(start, self.total):
            factor = lr_factor(step, self.total, cfg.warmup_steps, cfg.scheduler)
            lr = cfg.lr * factor
            for g in self.optimizer.param_groups:
                g["lr"] = g.get("peak_lr", cfg.lr) * factor
            step_loss = 0.0
            for a in range(cfg.grad_accum):
                m = step * cfg.grad_accum + a
                idx = micro_batch_indices(n, cfg.batch_size, world, rank, self.seed, m)
                batch = collate([self.train_features[i] for i in idx], self.pad_id)
                batch = {k: v.to(acc.device) for k, v in batch.items()}
                sync = a == cfg.grad_accum - 1
                ctx = acc.no_sync(self.model) if (not sync and world > 1) else _null()
                with ctx, acc.autocast(), self.method.counting_backbone_tokens() as seen:
                    loss = self.model(**batch).loss
                    acc.backward(loss / cfg.grad_accum)
                step_loss += loss.detach().float().item() / cfg.grad_accum
                k = seen[0] * world  # as the backbone read them (a prefix adds, merging removes)
                res.tokens += k
                res.input_tokens += n_tokens(batch) * world
                window_tokens += k
                res.examples += len(idx) * world
                res.micro_batches += 1
            if not math.isfinite(step_loss):  # before the update: the weights and checkpoints stay finite
                ckpt = self.ckpt_dir is not None and (self.ckpt_dir / "meta.json").is_file()
                kept = f"the last checkpoint ({self.ckpt_dir}) is kept" if ckpt else "no checkpoint had been written"
                raise EmbexpError(f"non-finite training loss ({step_loss}) at step {step + 1}: run stopped and marked failed; "
                                  f"{kept} (try a lower trainer.lr, or trainer.mixed_precision=no)")
            if cfg.max_grad_norm > 0 and self.sharded:  # every gradient a shard on one mesh: torch's clip is exact
                torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
            elif cfg.max_grad_norm > 0:
                acc.clip_grad_norm_(self.params, cfg.max_grad_norm)
            self.optimizer.step()
            if not res.state_memory:
                res.state_memory = state_memory(self.method, self.optimizer)
            self.optimizer.zero_grad(set_to_none=True)
            res.steps = step + 1
            res.final_train_loss = step_loss
            window_loss += step_loss
            bar.update(1)
            bar.set_postfix(loss=f"{step_loss:.4f}", lr=f"{lr:.2e}")
            if cfg.log_every > 0 and res.steps % cfg.log_every == 0:
                dt = time.perf_counter() - window_t
                rec = {"step": res.steps, "loss": window_loss / cfg.log_every, "lr": lr,
                       "tokens_per_second": window_tokens / max(dt, 1e-9), **self._log_values()}
                res.history.append(rec)
                acc.log({f"train/{k}": v for k, v in rec.items() if k != "step"}, step=res.steps)
                log.info("step %d/%d  %s", res.steps, self.total,
                         "  ".join(f"{k}={v:.4g}" for k, v in rec.items() if k != "step"))
                window_loss, window_tokens, window_t = 0.0, 0, time.perf_counter()
            if cfg.eval_every > 0 and self.select_features and res.steps % cfg.eval_every == 0 and res.steps < self.total:
                self._periodic_eval(res.steps)
            if self.curve_point is not None and res.steps in cfg.curve_at and res.steps < self.total:
                self._curve(res.steps)
            if cfg.save_every > 0 and res.steps % cfg.save_every == 0 and res.steps < self.total:
                res.wall_seconds = time.perf_counter() - t_start
                self.save_checkpoint(res.steps)
            if world > 1:  # every process stops at the same step, whichever got the signal
                flag = torch.tensor([float(bool(stop))], device=acc.device)
                if acc.reduce(flag, reduction="sum").item() > 0 and not stop:
                    stop.append(signal.SIGTERM)
            if stop and res.steps < self.total:  # a preemption notice: checkpoint this step and stop
                res.wall_seconds = time.perf_counter() - t_start
                self.save_checkpoint(res.steps)
                bar.close()
                raise RunInterrupted(f"{signal.Signals(stop[0]).name} received: stopped after step {res.steps}/{self.total} with a "
                                     f"checkpoint; rerun the same command with trainer.resume=true to continue")

    def _log_values(self) -> dict[str, float]:
        """The method's scalars; sharded, read with its root unit gathered (every process calls it:
        a method's own tensors, e.g. TinyTE-gated's alpha, live there whole)."""
        if not self.sharded:
            return self.method.log_values()
        self.model.unshard()
        try:
            return self.method.log_values()
        finally:
            self.model.reshard()

    def _loss(self, features: list[dict]) -> float:
        return evaluation_loss(self.model, features, self.pad_id, self.cfg.eval_batch_size, self.acc.device, self.acc,
                               self.cfg.max_eval_loss_batches)

    def _selection_point(self) -> tuple[float, float]:
        """(loss, metric) on the selection rows now; the metric (``select_score``: the final evaluation's code,
        run on the main process, its value sent to every process) is nan when selection is by the loss."""
        loss = self._loss(self.select_features)
        if self.select_score is None:
            return loss, float("nan")
        was_training = self.method.training
        value = float(self.select_score()) if self.acc.is_main_process else 0.0
        self.method.train(was_training)
        if self.acc.num_processes > 1:
            from accelerate.utils import broadcast

            value = broadcast(torch.tensor([value], device=self.acc.device), from_process=0).item()
        return loss, value

    def _periodic_eval(self, step: int) -> None:
        loss, score = self._selection_point()
        rec = {"step": step, "select_loss": loss, **({"select_score": score} if self.select_score else {})}
        log.info("step %d  %s", step, "  ".join(f"{k}={v:.4g}" for k, v in rec.items() if k != "step"))
        self.result.history.append(rec)
        self.acc.log({f"select/{k[7:]}": v for k, v in rec.items() if k != "step"}, step=step)
        if self.cfg.select_best:
            self._consider_best(loss, score, step)

    def _curve(self, step: int) -> None:
        """A point of the learning curve (trainer.curve_at): the task's metrics on the eval split at
        this step, recorded in the history; nothing is selected by it."""
        if self.acc.is_main_process:
            was_training = self.method.training
            point = self.curve_point(step)
            self.method.train(was_training)
            log.info("step %d  curve %s", step, "  ".join(f"{k}={v:.4g}" for k, v in point.items() if isinstance(v, float)))
            self.result.history.append({"step": step, "curve": point})
        self.acc.wait_for_everyone()

    def _consider_best(self, loss: float, score: float, step: int) -> None:
        """Keep this step's state if it is the best so far: the lowest loss, or (select_score) the highest
        metric; a tie keeps the earlier state (the Tiny-Attention authors' ``dev_metric > max_dev_metric``)."""
        res = self.result
        better = score > res.best_select_score if self.select_score is not None else loss < res.best_select_loss
        if res.best_step < 0 or better:
            res.best_step, res.best_select_loss, res.best_select_score = step, loss, score
            self.best_state = self.full_state("name", everywhere=True) if self.sharded else self.method.trainable_state()

    def _restore(self, state: dict) -> None:
        """Back to a kept state (select_best): the method's own loading, or, sharded, each process's part."""
        if not self.sharded:
            self.method.load_trainable_state(state)
            return
        with torch.no_grad():
            for n, p in zip(self.names, self.params):
                p.copy_(sharding.place(state[n].reshape(p.shape), p))

    def full_state(self, by: str = "parameter", everywhere: bool = False) -> dict[str, torch.Tensor]:
        """Sharded: the trained tensors, whole, on the CPU, by parameter name in the method module
        (what :func:`sharding.unsharded` loads) or by trainable tensor name. Every process gathers;
        the main process keeps them (every process with ``everywhere``)."""
        keys = self.fqns if by == "parameter" else self.names
        keep = everywhere or self.acc.is_main_process
        out = {}
        for k, p, shape in zip(keys, self.params, self.shapes):
            t = sharding.full(p.detach())
            if keep:
                out[k] = t.reshape(shape).cpu().clone()
        return out

    def release(self) -> None:
        """Drop the prepared model and optimizer (their memory goes back before an unsharded copy is built)."""
        self.method = self.model = self.optimizer = self.params = self.best_state = None
        self.acc.free_memory()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _bytes(tensors) -> int:
    """Bytes this process holds for ``tensors`` (of a sharded tensor, its own shard)."""
    seen, total = set(), 0
    for t in tensors:
        t = sharding.local(t) if torch.is_tensor(t) else t
        if torch.is_tensor(t) and t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    return total


def state_memory(method, optimizer) -> dict:
    """Bytes actually held by this process for parameters, gradients and optimizer state (measured
    on the live tensors after the first optimizer step, gradients still present; under
    trainer.strategy=fsdp each process's shards)."""
    params = _bytes(method.parameters())
    grads = _bytes(p.grad for p in method.parameters() if p.grad is not None)
    opt = _bytes(v for st in optimizer.state.values() for v in st.values())
    return {"param_bytes": params, "grad_bytes": grads, "optimizer_bytes": opt, "total_bytes": params + grads + opt}


def peak_memory() -> dict:
    """Peak memory of this process: CUDA allocator peak on a GPU, else the peak RSS."""
    out = {"peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    if torch.cuda.is_available():
        out["peak_cuda_allocated_bytes"] = torch.cuda.max_memory_allocated()
    return out


class _stop_signals:
    """While training: SIGTERM and SIGUSR1 (SLURM's and submitit's preemption notices) only set a
    flag, read after each optimizer step, so the step finishes and its checkpoint is consistent.
    The previous handlers come back afterwards. Off the main thread (signals cannot be caught
    there) it does nothing."""

    SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGUSR1", None)) if s is not None)

    def __enter__(self) -> list[int]:
        self.flag: list[int] = []
        self.previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self.previous[sig] = signal.signal(sig, lambda signum, frame: self.flag.append(signum))
        return self.flag

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

