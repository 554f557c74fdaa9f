"""The training loop, on Accelerate: one loop for every method, task and model.

Resumable to the step (``run.schedule``: the data order and the learning rate; ``run.checkpoint``: the
trainable tensors, optimizer moments and RNG states), so a run killed and resumed takes exactly the steps of
an uninterrupted one. Selection (``run.selection`` explains the options) reads only the rows it is given; the
eval split's loss is recorded once, at the end, and chooses nothing.
"""

from __future__ import annotations

import contextlib
import logging
import math
import resource
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from tqdm.auto import tqdm

from embexp import EmbexpError, RunInterrupted
from embexp.featurize import IGNORE, collate, n_tokens
from embexp.run import sharding
from embexp.run.checkpoint import Checkpoint
from embexp.run.schedule import build_optimizer, lr_factor, micro_batch_indices, schedule_warnings, total_steps
from embexp.run.selection import Selection
from embexp.run.stops import training_steps

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
    stopped_early: bool = False  # trainer.curve_patience ended training before max_steps
    log_window: list = field(default_factory=list)  # [loss sum, steps] of the log line a checkpoint cut, resumed
    state_memory: dict = field(default_factory=dict)
    history: list = field(default_factory=list)


@torch.no_grad()
def evaluation_loss(model, features: list[dict], pad_id: int, batch_size: int, device, accelerator,
                    max_batches: int = -1) -> float:
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


@dataclass
class TrainInputs:
    """What one Trainer trains on and reports to. ``select``: the rows behind the periodic loss and
    ``select_best``; ``eval``: the reported split, its loss only recorded at the end; ``select_score``:
    (metric name, () -> its value on the selection rows) when selecting by a metric; ``curve_point``:
    step -> the final evaluation's metrics (trainer.curve_at; main process)."""

    train: list
    pad_id: int
    seed: int
    eval: list = field(default_factory=list)
    select: list = field(default_factory=list)
    run_dir: Path | None = None
    curve_point: Callable[[int], dict] | None = None
    select_score: tuple[str, Callable[[], float]] | None = None


@dataclass
class Window:
    """The running totals between two log lines (trainer.log_every): the line's loss is the mean over its steps."""

    loss: float = 0.0
    steps: int = 0
    tokens: int = 0
    start: float = field(default_factory=time.perf_counter)


class Trainer:
    """One training run of a method on an Accelerate accelerator (DDP, or FSDP2 through sharding.py):
    optimizer, schedule, accumulation, clipping, checkpoints, model selection, learning-curve points."""

    def __init__(self, method, cfg, accelerator, inputs: TrainInputs):
        self.method, self.cfg, self.acc, self.inputs = method, cfg, accelerator, inputs
        self.selection = Selection.of(cfg)  # select_best, eval_every (run.selection explains the options)
        self.select_name, self.select_score = inputs.select_score or ("loss", None)
        self.names = list(method.trainable_tensors())
        self.params = [method.trainable_tensors()[n] for n in self.names]
        if not self.params:
            raise EmbexpError(f"method {method.cfg.name} has no trainable tensors")
        own = method.peak_lrs()  # tensors whose peak lr is not trainer.lr (K-Token's encoder)
        unknown = sorted(set(own) - set(self.names))
        if unknown:
            raise EmbexpError(f"method {method.cfg.name} sets a learning rate for tensors it does not train: "
                              f"{unknown[:5]}")
        self.optimizer = build_optimizer(self.params, cfg, {i: own[n] for i, n in enumerate(self.names) if n in own})
        self.sharded = sharding.active(accelerator)  # trainer.strategy=fsdp: self.params become shards
        self.shapes = [p.shape for p in self.params]  # as the method has them (sharding lifts 0-d tensors to 1-d)
        if self.sharded:
            self.model, self.optimizer, self.params, self.fqns = sharding.prepare(accelerator, method, self.optimizer,
                                                                                  self.names)
        else:
            self.model, self.optimizer = accelerator.prepare(method, self.optimizer)
        self.total = total_steps(len(inputs.train), cfg, accelerator.num_processes)
        if accelerator.is_main_process:
            schedule_warnings(cfg, self.total, len(inputs.train), accelerator.num_processes)
        self.result = TrainResult(select_metric=self.select_name)
        self.best_state = None
        self.window = Window()
        where = Path(inputs.run_dir) / "checkpoint" if inputs.run_dir else None
        self.checkpoint = Checkpoint(where, accelerator, "fsdp" if self.sharded else "ddp", self.names, self.params,
                                     self.shapes, self.optimizer)

    def fit(self) -> TrainResult:
        """Train from step 0 (or the checkpoint's, trainer.resume) to ``self.total``, then score the selection
        rows and, under select_best, restore the kept state. One optimizer step per iteration: its lr,
        ``grad_accum`` micro-batches, a finite check, clipping, the update, then log, select, curve, save, stop."""
        start = self.resume() if self.cfg.resume else 0  # replaces self.result with the checkpoint's
        cfg, sel, acc, res, inputs = self.cfg, self.selection, self.acc, self.result, self.inputs
        self.model.train()
        t_start = time.perf_counter() - res.wall_seconds  # a resumed run keeps counting its wall time
        bar = tqdm(total=self.total, initial=start, desc="train", disable=not (cfg.progress and acc.is_main_process),
                   dynamic_ncols=True, leave=False)
        window = self.window = Window(*res.log_window)  # a resumed run's first log line: a straight run's steps
        with training_steps() as stop:
            for step in range(start, self.total):
                factor = lr_factor(step, self.total, cfg.warmup_steps, cfg.scheduler)
                for g in self.optimizer.param_groups:
                    g["lr"] = g.get("peak_lr", cfg.lr) * factor
                step_loss = sum(self._micro_batch(step * cfg.grad_accum + a, a == cfg.grad_accum - 1, window)
                                for a in range(cfg.grad_accum))
                if acc.num_processes > 1:  # the global batch's loss, not this process's share: the one logged, and
                    step_loss = acc.reduce(torch.tensor(step_loss, device=acc.device), "mean").item()  # all stop on it
                if not math.isfinite(step_loss):  # before the update: the weights and checkpoints stay finite
                    raise EmbexpError(f"non-finite training loss ({step_loss}) at step {step + 1}: run stopped and "
                                      f"marked failed; {self.checkpoint.kept()} (try a lower trainer.lr, or "
                                      f"trainer.mixed_precision=no)")
                if cfg.max_grad_norm > 0 and self.sharded:  # every gradient a shard on one mesh: torch's clip is exact
                    torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
                elif cfg.max_grad_norm > 0:
                    acc.clip_grad_norm_(self.params, cfg.max_grad_norm)
                self.optimizer.step()
                res.state_memory = res.state_memory or state_memory(self.method, self.optimizer)
                self.optimizer.zero_grad(set_to_none=True)
                res.steps, res.final_train_loss = step + 1, step_loss
                window.loss, window.steps = window.loss + step_loss, window.steps + 1
                bar.update(1)
                bar.set_postfix(loss=f"{step_loss:.4f}", lr=f"{cfg.lr * factor:.2e}")
                last = res.steps == self.total
                if cfg.log_every > 0 and res.steps % cfg.log_every == 0:
                    window = self.window = self._log(cfg.lr * factor, window)
                if sel.eval_every > 0 and inputs.select and res.steps % sel.eval_every == 0 and not last:
                    self._periodic_eval(res.steps)
                if inputs.curve_point is not None and res.steps in sel.curve_at and not last:
                    self._curve(res.steps)
                    if sel.curve_patience and self._flat():
                        res.stopped_early = True
                        break
                if cfg.save_every > 0 and res.steps % cfg.save_every == 0 and not last:
                    res.wall_seconds = time.perf_counter() - t_start
                    self.save(res.steps)
                if self._stopping(stop):  # a stop signal (the last step's too): checkpoint this step and stop
                    res.wall_seconds = time.perf_counter() - t_start
                    self.save(res.steps)
                    bar.close()
                    raise RunInterrupted(f"{signal.Signals(stop[0]).name} received: stopped after step {res.steps}/"
                                         f"{self.total} with a checkpoint; rerun the same command with "
                                         f"trainer.resume=true to continue")
        bar.close()
        res.wall_seconds = time.perf_counter() - t_start
        res.tokens_per_second = res.tokens / max(res.wall_seconds, 1e-9)
        self._select()
        if inputs.eval:  # recorded only: nothing is chosen by it
            res.eval_loss = self._loss(inputs.eval)
        return res

    def _micro_batch(self, m: int, sync: bool, window: Window) -> float:
        """Forward and backward of global micro-batch ``m`` (gradients synchronised on the step's last);
        returns its share of the step's loss and counts what the backbone read."""
        cfg, acc, res = self.cfg, self.acc, self.result
        world = acc.num_processes
        idx = micro_batch_indices(len(self.inputs.train), cfg.batch_size, world, acc.process_index, self.inputs.seed, m)
        batch = collate([self.inputs.train[i] for i in idx], self.inputs.pad_id)
        batch = {k: v.to(acc.device) for k, v in batch.items()}
        ctx = acc.no_sync(self.model) if (not sync and world > 1) else contextlib.nullcontext()
        with ctx, acc.autocast(), self.method.counting_backbone_tokens() as seen:
            loss = self.model(**batch).loss
            acc.backward(loss / cfg.grad_accum)
        k = seen[0] * world  # as the backbone read them (a prefix adds, merging removes)
        res.tokens += k
        res.input_tokens += n_tokens(batch) * world
        window.tokens += k
        res.examples += len(idx) * world
        res.micro_batches += 1
        return loss.detach().float().item() / cfg.grad_accum

    def _log(self, lr: float, window: Window) -> Window:
        """A log line over the window since the last one (trainer.log_every), kept in the history; a new window."""
        res = self.result
        rec = {"step": res.steps, "loss": window.loss / max(window.steps, 1), "lr": lr,
               "tokens_per_second": window.tokens / max(time.perf_counter() - window.start, 1e-9),
               **self._log_values()}
        res.history.append(rec)
        self.acc.log({f"train/{k}": v for k, v in rec.items() if k != "step"}, step=res.steps)
        log.info("step %d/%d  %s", res.steps, self.total,
                 "  ".join(f"{k}={v:.4g}" for k, v in rec.items() if k != "step"))
        return Window()

    def _stopping(self, stop: list[int]) -> bool:
        """Whether a preemption signal arrived; with several processes all stop at the same step, whichever got it."""
        if self.acc.num_processes > 1:
            flag = torch.tensor([float(bool(stop))], device=self.acc.device)
            if self.acc.reduce(flag, reduction="sum").item() > 0 and not stop:
                stop.append(signal.SIGTERM)
        return bool(stop)

    def _select(self) -> None:
        """After the last step: the selection rows' loss (and metric) now, and under select_best the kept state back."""
        res = self.result
        if not self.inputs.select:
            return
        res.select_loss, res.select_score = self._selection_point()
        if not self.selection.best:
            return
        self._consider_best(res.select_loss, res.select_score, res.steps)
        if self.best_state is not None and res.best_step != res.steps:
            log.info("restoring the trainable state of step %d (selection loss %.4f, %s %.4g)", res.best_step,
                     res.best_select_loss, self.select_name, res.best_select_score)
            self._restore(self.best_state)
            res.select_loss, res.select_score = res.best_select_loss, res.best_select_score

    def save(self, step: int) -> None:
        """A checkpoint of this step (trainer.save_every, or a stop signal), with the open log line's totals."""
        self.result.log_window = [self.window.loss, self.window.steps]
        self.checkpoint.save(step, self.result, self.best_state)

    def resume(self) -> int:
        """Continue from the run's checkpoint (trainer.resume): the step it holds, or 0 where there is none."""
        found = self.checkpoint.load()
        if found is None:
            return 0
        step, result, self.best_state = found
        if result.get("select_metric", "loss") != self.result.select_metric:  # its best state kept by another signal
            raise EmbexpError(f"checkpoint {self.checkpoint.dir} kept its best state by "
                              f"{result.get('select_metric', 'loss')}, but this run selects by "
                              f"{self.result.select_metric} (trainer.select_metric): delete it "
                              f"to train again from the start (or trainer.resume=false)")
        self.result = TrainResult(**result)
        self.result.resumed_from_step = step
        log.info("resumed from checkpoint at step %d", step)
        return step

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
        return evaluation_loss(self.model, features, self.inputs.pad_id, self.cfg.eval_batch_size, self.acc.device,
                               self.acc, self.cfg.max_eval_loss_batches)

    def _selection_point(self) -> tuple[float, float]:
        """(loss, metric) on the selection rows now; the metric (``select_score``: the final evaluation's code,
        run on the main process, its value sent to every process) is nan when selection is by the loss."""
        loss = self._loss(self.inputs.select)
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
        if self.selection.best:
            self._consider_best(loss, score, step)

    def _curve(self, step: int) -> None:
        """A learning-curve point (trainer.curve_at): the eval split's metrics now, in the history; selects nothing."""
        if self.acc.is_main_process:
            was_training = self.method.training
            point = self.inputs.curve_point(step)
            self.method.train(was_training)
            log.info("step %d  curve %s", step,
                     "  ".join(f"{k}={v:.4g}" for k, v in point.items() if isinstance(v, float)))
            self.result.history.append({"step": step, "curve": point})
        self.acc.wait_for_everyone()

    def _flat(self) -> bool:
        """trainer.curve_patience: the held-out curve has not improved on its best for that many points. Read from
        the history (so a resumed run decides as an uninterrupted one), decided on the main process and shared.
        The stopping point's curve entry is dropped: the final evaluation scores that step again as the curve's
        last point."""
        from accelerate.utils import broadcast_object_list

        from embexp.core.records import LOWER, quality_metric

        flat = [False]
        if self.acc.is_main_process:
            points = [h["curve"]["select"] for h in self.result.history if (h.get("curve") or {}).get("select")]
            metric = quality_metric([{"metrics": p} for p in points], "")
            sign = -1.0 if metric in LOWER else 1.0
            values = [sign * p[metric] for p in points if p.get(metric) is not None]
            best = max(range(len(values)), key=lambda i: (values[i], -i)) if values else 0
            flat = [len(values) - 1 - best >= self.selection.curve_patience]
            if flat[0]:
                log.info("step %d  held-out %s flat for %d curve points: stopping (trainer.curve_patience)",
                         self.result.steps, metric, self.selection.curve_patience)
                self.result.history.pop()
        if self.acc.num_processes > 1:
            broadcast_object_list(flat)
        return bool(flat[0])

    def _consider_best(self, loss: float, score: float, step: int) -> None:
        """Keep this step's state if it is the best so far: the lowest loss, or (select_score) the highest
        metric; a tie keeps the earlier state (the Tiny-Attention authors' ``dev_metric > max_dev_metric``)."""
        res = self.result
        better = score > res.best_select_score if self.select_score is not None else loss < res.best_select_loss
        if res.best_step < 0 or better:
            res.best_step, res.best_select_loss, res.best_select_score = step, loss, score
            self.best_state = (self.full_state("name", everywhere=True) if self.sharded
                               else self.method.trainable_state())

    def _restore(self, state: dict) -> None:
        """Back to a kept state (select_best): the method's own loading, or, sharded, each process's part."""
        if not self.sharded:
            self.method.load_trainable_state(state)
            return
        with torch.no_grad():
            for n, p in zip(self.names, self.params):
                p.copy_(sharding.place(state[n].reshape(p.shape), p))

    def full_state(self, by: str = "parameter", everywhere: bool = False) -> dict[str, torch.Tensor]:
        """Sharded: the trained tensors, whole, on the CPU, by parameter name (what :func:`sharding.load_whole`
        loads) or trainable tensor name. Every process gathers; the main one keeps them (all, ``everywhere``)."""
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
        self.method = self.model = self.optimizer = self.params = self.best_state = self.checkpoint = None
        self.acc.free_memory()


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
    """Bytes this process holds for parameters, gradients and optimizer state, measured on the live tensors
    after the first optimizer step (gradients still present; under trainer.strategy=fsdp its shards)."""
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
