"""Check 2, numerics: every method of the shared matrix under fp32, bf16 autocast and bf16 weights.

Each (model, method) is built as the shared test matrix builds it (tests/test_methods.py: the real
composed config, ``load_backbone``, ``build_method``, ``setup`` on the task fixture's rows), takes
two fp32 AdamW steps (so a method that starts as the identity, TinyTE's b = 0, has moved), and then:

- fp32 (the reference; TF32 off) against bf16 autocast of the same weights, and against the same
  trained state in a copy built with ``model.dtype=bfloat16`` (no autocast: every method casts for
  itself): the loss and the logits agree within :data:`TOLERANCE`;
- the dtypes of the trainable tensors under bf16 weights (:func:`dtype_rule`);
- SDPA against eager attention (fp32), where the model class has both.

:func:`tinyte_bias` checks that TinyTE's fp32 bias moves under bf16 weights, through the real loop.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import torch

from embexp.doctor.common import RANDOM, Section, compose, model_config, strict_fp32, table
from embexp.featurize import Featurizer, collate
from embexp.methods import build_method
from embexp.methods.registry import registered, unsupported
from embexp.models import load_backbone
from embexp.tasks import build_task

# Largest relative differences accepted against the fp32 reference: bf16's about 1.5x the largest measured, SDPA
# against eager (the same math in another order, fp32) far above it (measures, figures: docs/benchmarks.md).
TOLERANCE = {"bf16 autocast": {"loss": 0.08, "logits": 0.06},
             "bf16 weights": {"loss": 0.08, "logits": 0.08},
             "sdpa vs eager": {"loss": 1e-5, "logits": 1e-4}}
ROWS = 4  # examples per forward
WARM_LR, WARM_STEPS = 1e-3, 2


@dataclass
class Built:
    method: object
    batch: dict
    loaded: set  # ids of the parameters load_backbone returned
    loaded_names: set  # their names in the transformers model
    head: set  # ids of an encoder's task head (loaded, trained by every method but zero_shot)


def build(cfg, device: torch.device) -> Built:
    """One method on its backbone, set up on the fixture's first rows, as the shared matrix builds it."""
    task = build_task(cfg.task)
    torch.manual_seed(cfg.seed)
    bb = load_backbone(cfg.model, num_labels=task.num_labels, device=device)
    loaded = {id(p) for p in bb.model.parameters()}
    names = {n for n, _ in bb.model.named_parameters(remove_duplicate=False)}
    head = {id(p) for _, p in bb.head_parameters()}
    method = build_method(cfg.method, bb)
    enc = Featurizer(bb.tokenizer, bb.is_decoder, cfg.task.max_source_tokens, cfg.task.max_target_tokens,
                     cfg.model.chat_template and bb.is_decoder, task.loss_on)
    feats = [enc.train_features(e) for e in task.examples("train")[:ROWS]]
    method.setup({"train": [f["input_ids"] for f in feats], "eval": []})
    method.to(device)
    batch = {k: v.to(device) for k, v in collate(feats, bb.tokenizer.pad_token_id).items()}
    return Built(method, batch, loaded, names, head)


def warm(b: Built) -> dict:
    """Two fp32 AdamW steps on the batch; the trained state (every method, also the identity ones, moved)."""
    if not b.method.trains:
        return {}
    opt = torch.optim.AdamW(list(b.method.trainable_tensors().values()), lr=WARM_LR, weight_decay=0.0)
    b.method.train()
    for _ in range(WARM_STEPS):
        b.method(**b.batch).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return {k: v.detach().clone() for k, v in b.method.trainable_state().items()}


@torch.no_grad()
def forward(b: Built, dtype: torch.dtype | None = None) -> tuple[float, torch.Tensor]:
    """(loss, fp32 logits at the positions the backbone attended) of one eval-mode forward, autocast to
    ``dtype`` if given. The mask is the one the backbone received (a prefix adds positions, K-Token's
    merging removes some): padding positions are left out, where SDPA and eager legitimately differ."""
    b.method.eval()
    seen = {}

    def hook(module, args, kwargs):
        if kwargs.get("attention_mask") is not None and kwargs["attention_mask"].dim() == 2:
            seen["mask"] = kwargs["attention_mask"]

    handle = b.method.backbone_model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        with torch.autocast(b.batch["input_ids"].device.type, dtype=dtype, enabled=dtype is not None):
            out = b.method(**b.batch)
    finally:
        handle.remove()
    logits, mask = out.logits.float(), seen.get("mask", b.batch["attention_mask"]).bool()
    if logits.dim() == 3 and logits.shape[:2] == mask.shape:
        logits = logits[mask]
    return float(out.loss), logits


def differences(a: tuple[float, torch.Tensor], ref: tuple[float, torch.Tensor]) -> dict:
    loss = abs(a[0] - ref[0]) / max(abs(ref[0]), 1.0)
    logits = float((a[1] - ref[1]).norm() / ref[1].norm().clamp_min(1e-30))
    return {k: v if math.isfinite(v) else float("inf") for k, v in (("loss", loss), ("logits", logits))}


def dtype_rule(b: Built) -> dict:
    """The dtypes of the trainable tensors under bf16 weights, and whether they are what the docs say.

    A tensor is *pretrained* when load_backbone returned it, or when it sits under the name of one
    (PEMA's partial matrix replaces the embedding's weight); the rest the method adds. A method that
    trains only tensors it adds (and an encoder's head) keeps them in fp32 (docs/methods_tinyte.md:
    "Parameters are kept in fp32"; peft casts LoRA and prompt tuning up; Tiny-Attention and K-Token
    create theirs in fp32), so an fp32 update is never rounded away. A method that trains pretrained
    weights (full_ft, emb_tuning, PEMA, PETE's body) trains in model.dtype, as that field says."""
    where = {id(p): n for n, p in b.method.backbone_model.named_parameters(remove_duplicate=False)}
    own, pre, body = Counter(), Counter(), False
    for t in b.method.trainable_tensors().values():
        pretrained = id(t) in b.loaded or where.get(id(t)) in b.loaded_names
        (pre if pretrained else own)[str(t.dtype).replace("torch.", "")] += t.numel()
        body |= pretrained and id(t) not in b.head
    ok = body or set(own) <= {"float32"}
    expect = "own follow model.dtype (trains pretrained weights)" if body else "own tensors fp32"
    return {"own": dict(own), "pretrained": dict(pre), "expected": expect, "ok": ok}


def attention_pair(cfg, ref: Built, state: dict, device: torch.device) -> dict | None:
    """SDPA against eager on the same weights and state (fp32), or None where the class has one only."""
    impl = ref.method.backbone_model.config._attn_implementation
    other = "eager" if impl != "eager" else "sdpa"
    try:
        twin = build(compose_like(cfg, device, f"model.attn_implementation={other}"), device)
    except (ValueError, ImportError):  # transformers refuses an implementation the class lacks
        return None
    got = twin.method.backbone_model.config._attn_implementation
    if got != other:  # model.attn_implementation did not reach the model: a loader that drops it
        return {"pair": f"{impl} vs {other}", "loss": float("inf"), "logits": float("inf"),
                "error": f"model.attn_implementation={other} loaded {got}"}
    if state:
        twin.method.load_trainable_state(state)
    with strict_fp32():
        d = differences(forward(twin), forward(ref))
    return {"pair": f"{impl} vs {other}", **d}


def compose_like(cfg, device: torch.device, *extra: str):
    entry = cfg.model.name + (RANDOM if cfg.model.get("init") == "random" else "")
    return compose(entry, cfg.method.name, cfg.task.max_source_tokens, cfg.trainer.batch_size, device,
                   f"seed={cfg.seed}", *extra)


def method_row(model: str, name: str, seq_len: int, device: torch.device, seed: int) -> dict:
    """Every numerics figure of one method on one model."""
    cfg = compose(model, name, seq_len, ROWS, device, f"seed={seed}")
    ref = build(cfg, device)
    with strict_fp32():
        state = warm(ref)
        fp32 = forward(ref)
        row = {"model": model, "method": name, "loss fp32": fp32[0],
               "bf16 autocast": differences(forward(ref, torch.bfloat16), fp32)}
    low = build(compose_like(cfg, device, "model.dtype=bfloat16"), device)
    if state:
        low.method.load_trainable_state(state)
    row["bf16 weights"] = differences(forward(low), fp32)
    row["dtypes"] = dtype_rule(low)
    del low
    row["sdpa vs eager"] = attention_pair(cfg, ref, state, device)
    row["ok"] = passes(row)
    return row


def passes(row: dict) -> bool:
    ok = row["dtypes"]["ok"]
    for what, tol in TOLERANCE.items():
        got = row.get(what)
        ok &= got is None or all(got[k] <= tol[k] for k in tol)
    return bool(ok)


def methods_for(model: str, wanted: list[str]) -> list[str]:
    cfg = model_config(model)
    return [n for n in (wanted or registered()) if not unsupported(n, cfg)]


def tinyte_bias(model: str, device: torch.device, acc, seed: int) -> dict:
    """TinyTE-full under ``model.dtype=bfloat16`` through the real loop (run.build.build + Trainer): b
    is fp32, and one AdamW step at lr 1e-4 from b = 1 moves every entry by about lr (Adam's first step is
    lr x sign(g)), an update that bf16, whose spacing at 1.0 is 2^-7, would round away."""
    from embexp.run.build import build as build_run
    from embexp.run.loop import Trainer, TrainInputs

    lr = 1e-4
    cfg = compose(model, "tinyte_full", 32, ROWS, device, "model.dtype=bfloat16", "trainer.max_steps=1",
                  f"trainer.lr={lr}", "trainer.scheduler=constant", "trainer.max_grad_norm=0", "trainer.weight_decay=0",
                  f"seed={seed}")
    c = build_run(cfg, device)
    bias = c.method.bias
    with torch.no_grad():
        bias.fill_(1.0)
    before = bias.detach().clone()
    trainer = Trainer(c.method, cfg.trainer, acc,
                      TrainInputs(c.train_features, c.backbone.tokenizer.pad_token_id, cfg.seed))
    trainer.fit()
    trainer.release()
    delta = (bias.detach() - before).float()
    moved = float(delta.abs().median() / lr)
    swallowed = bool(((before + delta).bfloat16() == before.bfloat16()).all())  # the same update on a bf16 tensor
    ok = bias.dtype == torch.float32 and 0.5 <= moved <= 1.5 and swallowed
    name = lambda t: str(t.dtype).replace("torch.", "")  # noqa: E731
    return {"model": model, "dtype": name(bias), "weights": name(c.method.model.get_input_embeddings().weight),
            "median |step| / lr": moved, "a bf16 tensor would not move": swallowed, "ok": ok}


def check(s, device: torch.device, acc, progress) -> Section:
    rows = []
    for model in s.models:
        for name in methods_for(model, s.methods):
            progress(f"numerics: {name} on {model}")
            rows.append(method_row(model, name, s.seq_len_numerics, device, s.seed))
    bias = None
    if "tinyte_full" in registered() and (not s.methods or "tinyte_full" in s.methods) and s.models:
        progress(f"numerics: TinyTE's bias under bf16 weights on {s.models[0]}")
        bias = tinyte_bias(s.models[0], device, acc, s.seed)
    return render(rows, bias)


def _fmt(d: dict | None) -> str:
    return "n/a" if d is None else d.get("error") or f"{d['loss']:.1e} / {d['logits']:.1e}"


def _dtypes(counts: dict) -> str:
    return ", ".join(f"{k} ({v:,})" for k, v in counts.items()) or "none"


def _pair(d: dict | None) -> str:
    return f"{d['pair']}: {_fmt(d)}" if d else "one implementation"


def _bias_line(b: dict) -> str:
    return (f"b is {b['dtype']} (weights {b['weights']}), its entries moved a median "
            f"{b['median |step| / lr']:.3f} x lr in one step; the same update on a bf16 copy would leave it unchanged: "
            f"{'yes' if b['a bf16 tensor would not move'] else 'no'}: {'pass' if b['ok'] else 'FAIL'}")


def render(rows: list[dict], bias: dict | None) -> Section:
    bad = [r for r in rows if not r["ok"]]
    worst = {w: max((r[w]["logits"] for r in rows if r.get(w)), default=float("nan")) for w in TOLERANCE}
    screen = [f"{len(rows) - len(bad)}/{len(rows)} (model, method) rows within tolerance; worst logits difference: "
              + ", ".join(f"{w} {worst[w]:.1e} (tol {TOLERANCE[w]['logits']:g})" for w in TOLERANCE)]
    for r in bad:
        why = [f"{w} {_fmt(r[w])}" for w, tol in TOLERANCE.items() if r.get(w) and any(r[w][k] > tol[k] for k in tol)]
        if not r["dtypes"]["ok"]:
            why.append(f"trainable dtypes {r['dtypes']['own']} (expected {r['dtypes']['expected']})")
        screen.append(f"FAIL {r['method']} on {r['model']}: " + "; ".join(why))
    if bias:
        screen.append("TinyTE bias under bf16 weights: " + _bias_line(bias))
    tols = "; ".join(f"{w} {t['loss']:g} / {t['logits']:g}" for w, t in TOLERANCE.items())
    md = ["Differences against fp32 (TF32 off), loss / logits: loss |a - b| / max(|b|, 1), logits ||a - b|| / ||b|| "
          f"over the positions the attention mask keeps. Tolerances: {tols}. Trainable dtypes under "
          "`model.dtype=bfloat16`: the method's own tensors / the pretrained ones it trains.", ""]
    md += table(["model", "method", "loss fp32", "bf16 autocast", "bf16 weights", "sdpa vs eager", "own (bf16 weights)",
                 "pretrained (bf16 weights)", "expected", "verdict"],
                [[r["model"], r["method"], f"{r['loss fp32']:.4f}", _fmt(r["bf16 autocast"]), _fmt(r["bf16 weights"]),
                  _pair(r["sdpa vs eager"]),
                  _dtypes(r["dtypes"]["own"]), _dtypes(r["dtypes"]["pretrained"]), r["dtypes"]["expected"],
                  "pass" if r["ok"] else "FAIL"] for r in rows])
    if bias:
        md += ["", f"TinyTE-full on `{bias['model']}` with `model.dtype=bfloat16`, one step of the real loop (AdamW, "
                   f"lr 1e-4, b = 1 before it): " + _bias_line(bias) + "."]
    ok = not bad and (bias is None or bias["ok"])
    return Section("numerics", "pass" if ok else "fail", screen, md,
                   {"tolerance": TOLERANCE, "rows": rows, "tinyte bias": bias})
