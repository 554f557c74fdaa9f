"""Check 4, speed: embexp's training loop against a plain PyTorch loop on the same model, batches and
precision; model FLOPs utilisation; batched generation against a plain ``model.generate`` loop.

The plain loop and its batches are shared with ``scripts/bench.py throughput`` (make bench): both sides
see the same collated batches in the same order and train the same tensors from the same state; the
plain loop gets its batches collated and on the device before its clock starts, so any difference is
embexp's overhead. The sides alternate (plain first, then embexp first, ...) and medians are compared.
The goal: embexp's seconds per token at most :data:`GOAL` times the plain loop's (reported, never failed:
the reduced form's few steps cannot judge it).

MFU = the model FLOPs of embexp's tokens per second (:func:`flops_per_token`: 6 N per token for full FT,
4 N for a frozen backbone, N the parameters that take part in matmuls; attention's own FLOPs are not
counted, as in the usual 6 N T convention) over this device's measured dense matmul rate in the
training precision (an n x n matmul, n = 8192 on a GPU), not the datasheet's peak. Generation:
zero_shot (the backbone itself) through ``run.predict.generate`` (what
evaluation runs: left-padded batches sorted by length, greedy, the KV cache) against ``model.generate``
on the same batches; generated tokens (up to each row's end of sequence) per second, and whether the
two give the same texts.
"""

from __future__ import annotations

import gc
import statistics

import torch

from embexp.doctor.common import Section, compose, matmul_params, model_config, model_label, table, timed
from embexp.featurize import collate, n_tokens
from embexp.run.build import build
from embexp.run.loop import Trainer, TrainInputs
from embexp.run.predict import eos_ids, generate
from embexp.run.schedule import micro_batch_indices

GOAL = 1.02  # embexp's seconds per token at most this times the plain loop's (the goal)
AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16, "no": None}


def alternating(r: int, items: list) -> list:
    """`items` in order on even repeats, reversed on odd ones (A/B, B/A, ...)."""
    return items if r % 2 == 0 else items[::-1]


def alternated(sides: dict, repeats: int, reset=lambda: None) -> dict[str, list]:
    """Each side's results (``sides``: name -> a call) over ``repeats`` repeats in :func:`alternating` order,
    ``reset`` called before each call."""
    out = {k: [] for k in sides}
    for r in range(repeats):
        for k in alternating(r, list(sides)):
            reset()
            out[k].append(sides[k]())
    return out


def fixed_batches(feats, steps: int, batch: int, pad: int, seed: int = 0) -> list[dict]:
    """The collated batches the Trainer would draw for `steps` steps (one micro-batch each)."""
    return [collate([feats[i] for i in micro_batch_indices(len(feats), batch, 1, 0, seed, m)], pad)
            for m in range(steps)]


def embexp_loop(cfg, c, feats, acc) -> float:
    """Tokens/s of embexp's Trainer (Accelerate, schedule, accumulation, clipping, bookkeeping). Afterwards
    the method's forward is its own again (``prepare``'s autocast wrapper: docs/benchmarks.md) and the
    Accelerator lets go of the prepared model and optimizer (their state would pile up)."""
    trainer = Trainer(c.method, cfg.trainer, acc, TrainInputs(feats, c.backbone.tokenizer.pad_token_id, cfg.seed))
    res = trainer.fit()
    acc.unwrap_model(trainer.model, keep_fp32_wrapper=False)
    trainer.release()
    return res.tokens / res.wall_seconds


def plain_loop(cfg, c, feats, device: torch.device | None = None, dtype: torch.dtype | None = None) -> float:
    """What a researcher would write by hand: the same batches, AdamW, clipping, a cosine lr; autocast
    to ``dtype`` where the Trainer autocasts. Tokens/s (non-padding)."""
    device = device or torch.device("cpu")
    params = list(c.method.trainable_tensors().values())
    opt = torch.optim.AdamW(params, lr=cfg.trainer.lr, weight_decay=cfg.trainer.weight_decay)
    steps = cfg.trainer.max_steps
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    c.method.train()
    pad = c.backbone.tokenizer.pad_token_id
    batches = [{k: v.to(device) for k, v in b.items()}
               for b in fixed_batches(feats, steps, cfg.trainer.batch_size, pad, cfg.seed)]
    tokens = sum(n_tokens(b) for b in batches)

    def run():
        for batch in batches:
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss = c.method(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
    seconds, _ = timed(run, device)
    return tokens / seconds


def loop_speeds(cfg, c, feats, acc, repeats: int, device: torch.device | None = None,
                dtype: torch.dtype | None = None) -> dict[str, list[float]]:
    """Tokens/s of :func:`plain_loop` and :func:`embexp_loop` per repeat: one warm-up of the plain loop
    (allocator, kernels), then ``repeats`` alternating repeats (whichever loop runs first after a reset pays
    for freeing the previous optimizer's state), each from the same trainable state."""
    state = {k: v.detach().clone() for k, v in c.method.trainable_state().items()}
    plain_loop(cfg, c, feats, device, dtype)
    return alternated({"plain": lambda: plain_loop(cfg, c, feats, device, dtype),
                       "embexp": lambda: embexp_loop(cfg, c, feats, acc)}, repeats,
                      lambda: c.method.load_trainable_state(state))


def matmul_rate(device: torch.device, dtype: torch.dtype, n: int, reps: int) -> float:
    """FLOP/s of an n x n matmul in ``dtype`` on this device, measured (MFU's denominator)."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    for _ in range(2):
        a @ b
    seconds, _ = timed(lambda: [a @ b for _ in range(reps)], device)
    return 2 * n**3 * reps / seconds


def flops_per_token(c) -> float:
    """Model FLOPs of one training token (docs/benchmarks.md, "MFU"); gradients flow into the layers where the
    method trains more than an encoder's head."""
    n = matmul_params(c)
    trained = c.method.n_trainable(include_head=True)
    head = sum(p.numel() for _, p in c.backbone.head_parameters())
    flows = 1.0 if trained > head else 0.0
    return 2 * n * (1 + flows + min(1.0, trained / n))


def fitting_speed(model: str, method: str, s, device: torch.device, acc) -> dict:
    """:func:`train_speed` at the check's batch, halved after each out-of-memory until it fits (the row
    says which batches did not); a method that does not fit at batch 1 is a row saying so."""
    batch, too_big = s.batch_size, []
    while True:
        try:
            return {**train_speed(model, method, s, device, acc, batch), "out of memory at": too_big}
        except torch.cuda.OutOfMemoryError:
            acc.free_memory()
            too_big.append(batch)
        gc.collect()
        torch.cuda.empty_cache()
        if batch == 1:
            return {"model": model, "method": method, "out of memory at": too_big}
        batch //= 2


def train_speed(model: str, method: str, s, device: torch.device, acc, batch: int = 0) -> dict:
    """Median tokens/s of embexp's loop and the plain loop (``s.repeats`` alternating repeats of ``s.steps``
    steps each, after one warm-up) at ``batch`` rows (0: the check's), their ratio and the model FLOP/s of
    embexp's."""
    batch = batch or s.batch_size
    cfg = compose(model, method, s.seq_len, batch, device, f"trainer.max_steps={s.steps}",
                  "trainer.max_grad_norm=1.0", "trainer.weight_decay=0.0", "trainer.scheduler=cosine", f"seed={s.seed}",
                  *s.model_extra)
    c = build(cfg, device)
    feats = c.train_features
    runs = loop_speeds(cfg, c, feats, acc, s.repeats, device, AUTOCAST[acc.mixed_precision])
    p, e = statistics.median(runs["plain"]), statistics.median(runs["embexp"])
    batches = fixed_batches(feats, s.steps, batch, c.backbone.tokenizer.pad_token_id, cfg.seed)
    fpt = flops_per_token(c)
    shape = [batch, max(b["input_ids"].shape[1] for b in batches)]
    weights = str(next(c.method.backbone_model.parameters()).dtype).replace("torch.", "")
    c = None
    return {"model": model, "method": method, "precision": acc.mixed_precision, "weights": weights, "batch": shape,
            "plain tok/s": p, "embexp tok/s": e,
            "time ratio": p / e, "goal met": p / e <= GOAL, "per repeat plain": runs["plain"],
            "per repeat embexp": runs["embexp"], "flops per token": fpt, "model flop/s": fpt * e}


def plain_generate(c, ids: list[list[int]], batch: int, max_new: int, device: torch.device) -> tuple[list[str], int]:
    """The loop a user writes: ``model.generate`` (greedy, KV cache) on the same left-padded batches, the
    rows in the same order; (texts, new tokens up to and including each row's end-of-sequence)."""
    tok, model = c.backbone.tokenizer, c.method.backbone_model
    stop = eos_ids(c.method, tok)
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    texts, count = [""] * len(ids), 0
    with torch.no_grad():
        for s in range(0, len(order), batch):
            chunk = order[s:s + batch]
            b = collate([{"input_ids": ids[i]} for i in chunk], tok.pad_token_id, left=True)
            b = {k: v.to(device) for k, v in b.items()}
            out = model.generate(**b, max_new_tokens=max_new, do_sample=False, use_cache=True,
                                 pad_token_id=tok.pad_token_id, eos_token_id=stop)
            for i, row in zip(chunk, out[:, b["input_ids"].shape[1]:].tolist()):
                end = next((j + 1 for j, t in enumerate(row) if t in stop), len(row))
                count += end
                texts[i] = tok.decode(row[:end], skip_special_tokens=True)
    return texts, count


def generation_speed(model: str, s, device: torch.device) -> dict | None:
    """Generated tokens/s of embexp's batched greedy generation (run.predict.generate, as evaluation runs
    it) against :func:`plain_generate`, zero_shot (the backbone itself); decoders only."""
    if model_config(model).kind != "decoder":
        return None
    cfg = compose(model, "zero_shot", s.seq_len, s.batch_size, device, f"task.max_eval_samples={4 * s.batch_size}",
                  f"seed={s.seed}", *s.model_extra)
    c = build(cfg, device)
    prompts = [e.prompt for e in c.eval_examples]
    ids = [c.featurizer.prompt_ids(p) for p in prompts]
    plain_generate(c, ids[:s.batch_size], s.batch_size, 2, device)  # warm-up
    sides = {"plain": lambda: plain_generate(c, ids, s.batch_size, s.gen_tokens, device),
             "embexp": lambda: generate(c.method, c.featurizer, prompts, s.batch_size, s.gen_tokens, device,
                                        progress=False)}
    got = alternated({k: lambda fn=fn: timed(fn, device) for k, fn in sides.items()}, s.repeats)
    runs = {k: [sec for sec, _ in v] for k, v in got.items()}
    out = {k: v[-1][1] for k, v in got.items()}  # the last repeat's outputs
    p, e = statistics.median(runs["plain"]), statistics.median(runs["embexp"])
    (_, count), same = out["plain"], sum(a == b for a, b in zip(out["plain"][0], out["embexp"]))
    return {"model": model, "prompts": len(prompts), "new tokens": count,
            "weights": str(next(c.method.parameters()).dtype).replace("torch.", ""), "plain tok/s": count / p,
            "embexp tok/s": count / e, "time ratio": e / p, "same outputs": f"{same}/{len(prompts)}"}


def check(s, device: torch.device, acc, progress) -> Section:
    dtype = AUTOCAST[acc.mixed_precision] or torch.float32
    n, reps = (8192, 20) if device.type == "cuda" else ((512, 3) if s.reduced else (1024, 3))
    peak = matmul_rate(device, dtype, n, reps)
    rows = []
    for method in s.speed_methods:
        progress(f"speed: {method} on {model_label(s.speed_model)}")
        rows.append(fitting_speed(s.speed_model, method, s, device, acc))
        if "model flop/s" in rows[-1]:
            rows[-1]["mfu"] = rows[-1]["model flop/s"] / peak
    progress(f"speed: generation on {model_label(s.speed_model)}")
    gen = generation_speed(s.speed_model, s, device)
    return render(s, rows, gen, peak, str(dtype).replace("torch.", ""))


def _oom(r: dict) -> str:
    sizes = ", ".join(map(str, r.get("out of memory at") or []))
    return f" (out of GPU memory at batch {sizes})" if sizes else ""


def render(s, rows: list[dict], gen: dict | None, peak: float, prec: str) -> Section:
    """Speed is reported, never failed: the goal's line says met or not (a shared machine is noisy)."""
    goal = "reduced form: too few steps to judge the goal" if s.reduced else f"goal <= {GOAL}: " + "{}"
    done = [r for r in rows if "embexp tok/s" in r]
    screen = [f"{r['method']}: embexp {r['embexp tok/s']:,.0f} tok/s, plain {r['plain tok/s']:,.0f} tok/s, time ratio "
              f"{r['time ratio']:.3f} ({goal.format('met' if r['goal met'] else 'NOT met')}), "
              f"MFU {100 * r['mfu']:.1f}%, batch {r['batch'][0]}{_oom(r)}" for r in done]
    screen += [f"{r['method']}: out of GPU memory at every batch ({', '.join(map(str, r['out of memory at']))})"
               for r in rows if r not in done]
    if gen:
        screen.append(f"generation: embexp {gen['embexp tok/s']:,.1f} tok/s, plain generate {gen['plain tok/s']:,.1f} "
                      f"tok/s, time ratio {gen['time ratio']:.3f}, same outputs {gen['same outputs']}")
    first = done[0] if done else {}
    md = [f"Model `{model_label(s.speed_model)}`, prompts cut at {s.seq_len} tokens (longest row "
          f"{first['batch'][1] if first else '?'} tokens), weights {first.get('weights', '?')}, {s.steps} steps x "
          f"{s.repeats} repeats per side (medians), training precision {first.get('precision', '?')}; MFU against "
          f"this device's measured {prec} matmul rate, {peak / 1e12:.3f} TFLOP/s (not the datasheet's peak).", ""]
    md += table(["method", "batch", "plain tok/s", "embexp tok/s", "time ratio embexp/plain", f"goal <= {GOAL}",
                 "model FLOPs/token", "MFU"],
                [[r["method"], f"{r['batch'][0]}{_oom(r)}", f"{r['plain tok/s']:,.1f}", f"{r['embexp tok/s']:,.1f}",
                  f"{r['time ratio']:.3f}", "met" if r["goal met"] else "not met", f"{r['flops per token']:.3g}",
                  f"{100 * r['mfu']:.2f}%"] for r in done]
                + [[r["method"], f"none fits{_oom(r)}", "", "", "", "", "", ""] for r in rows if r not in done])
    if gen:
        md += ["", f"Batched greedy generation, zero_shot, {gen['prompts']} prompts, up to {s.gen_tokens} new tokens "
                   f"({gen['new tokens']} generated), weights {gen['weights']} (evaluation does not autocast):", ""]
        md += table(["plain model.generate tok/s", "embexp tok/s", "time ratio embexp/plain", "same outputs"],
                    [[f"{gen['plain tok/s']:,.1f}", f"{gen['embexp tok/s']:,.1f}", f"{gen['time ratio']:.3f}",
                      gen["same outputs"]]])
    return Section("speed", "info", screen, md, {"matmul flop/s": peak, "train": rows, "generation": gen})
