"""Check 3, memory: one training step per method, through the real loop (``run.build.build`` +
``Trainer``), measured against the formula of docs/running.md's Llama-3.1-8B table.

Formula (one process, no activation checkpointing; T tokens of the padded micro-batch, L layers,
hidden size h, FFN width i, vocabulary V, s bytes per activation element: 2 under bf16, 4 in fp32):

- state = parameters (count x bytes of their dtype) + gradients (trainable count x bytes) + AdamW
  (two moments in the trainable tensor's dtype, 2 x count x bytes, and a 4-byte step per tensor);
- activations kept for the backward, where gradients flow into the layers (the method trains more
  than an encoder's head): T x L x (16 h + (c_h h + c_i i) s) bytes: the two RMSNorms' fp32 inputs
  and outputs (4 h x 4 B) and the rest in s, with (c_h, c_i) = (6, 4) when the layers' weights train
  (half of them or more: every matmul keeps its input), (6, 8) when adapters inside the layers train
  (LoRA: the adapted matmuls' inputs and the adapters' sums) and (2, 3) when the layers are frozen
  (only what the backward through them needs); plus, for decoders, the loss's fp32 log-softmax,
  T x V x 4; plus, under bf16 autocast of fp32 weights, the bf16 copies of the matmul weights that
  the backward reads, 2 x N_matmul (N_matmul: the backbone's parameters less its input table, plus a
  tied output head once more);
- peak = state + activations + the logits' gradient while the backward starts, T x V x (4 + s).

Measured: the state as ``run.loop.state_memory`` counts it (the live tensors after the first optimizer
step), the activations as the bytes of the distinct storages autograd saves during the step
(``torch.autograd.graph.saved_tensors_hooks``, parameters excluded: on any device), and on a GPU the
peak of ``torch.cuda.max_memory_allocated`` over the step (not measured on a CPU: its peak RSS is
the process's, not the step's). The state must match the formula (it counts the same tensors: a miss
is a gradient or an optimizer moment where none belongs); the activations and the peak are an
estimate, derived for Llama-like decoders (encoders add dropout masks), and reported as a ratio.
"""

from __future__ import annotations

import contextlib
import gc

import torch

from embexp.doctor.common import Section, compose, matmul_params, mib, model_label, table
from embexp.doctor.numerics import methods_for
from embexp.doctor.speed import AUTOCAST, fixed_batches
from embexp.methods.registry import registered
from embexp.models.loading import text_config
from embexp.run.build import build
from embexp.run.loop import Trainer, TrainInputs

LAYER = {"weights train": (6, 4), "adapters": (6, 8), "frozen": (2, 3)}  # (c_h, c_i) of the formula
STATE_TOLERANCE = 0.01  # the measured state within 1% of the formula


@contextlib.contextmanager
def saved_storages(exclude: set[int]):
    """Bytes of the distinct storages autograd saves for the backward while the block runs (``exclude``:
    storage pointers of the parameters, which exist anyway)."""
    seen: dict[int, int] = {}

    def pack(t):
        try:
            st = t.untyped_storage()
            if st.data_ptr() not in exclude:
                seen[st.data_ptr()] = st.nbytes()
        except (RuntimeError, NotImplementedError):  # a tensor without storage (sparse, meta, a wrapper)
            pass
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield seen


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def state_formula(m) -> dict:
    params = list({id(p): p for p in m.parameters()}.values())
    trainable = list(m.trainable_tensors().values())
    state = {"param_bytes": _nbytes(params), "grad_bytes": _nbytes(trainable),
             "optimizer_bytes": 2 * _nbytes(trainable) + 4 * len(trainable)}
    return {**state, "total_bytes": sum(state.values())}


def predict(c, shape: tuple[int, int], precision: str) -> dict:
    """The formula's terms for the method of ``c`` on one micro-batch of ``shape`` (rows, padded length)."""
    m = c.method
    state = state_formula(m)
    tc = text_config(m.backbone_model)
    h, layers, v = tc.hidden_size, tc.num_hidden_layers, tc.vocab_size
    i = getattr(tc, "intermediate_size", None) or 4 * h
    tokens = shape[0] * shape[1]
    weights = next(m.backbone_model.parameters()).dtype
    autocast = AUTOCAST[precision] is not None
    s = 2 if (autocast or weights != torch.float32) else 4
    head = {id(p) for _, p in c.backbone.head_parameters()}
    flows = any(id(t) not in head for t in m.trainable_tensors().values())
    mode = layer_mode(m, head)
    ch, ci = LAYER[mode]
    act = tokens * layers * (16 * h + (ch * h + ci * i) * s) if flows else 0
    logits = tokens * v * 4 if (flows and c.backbone.is_decoder) else 0
    copies = 2 * matmul_params(c) if (flows and autocast and weights == torch.float32) else 0
    saved = act + logits + copies
    grad_logits = tokens * v * (4 + s) if logits else 0
    return {"state": state, "layers": act, "logits": logits, "autocast copies": copies, "saved": saved,
            "peak": state["total_bytes"] + saved + grad_logits, "mode": mode if flows else "head only", "s": s}


def layer_mode(m, head: set[int]) -> str:
    """weights train (half or more of the layers' parameters train), adapters (some tensor inside the
    layers trains) or frozen; the layers: the backbone less its input and output embeddings and head."""
    model = m.backbone_model
    edges = {id(p) for mod in (model.get_input_embeddings(), model.get_output_embeddings()) if mod is not None
             for p in mod.parameters()} | head
    layers = [p for p in {id(p): p for p in model.parameters()}.values() if id(p) not in edges]
    own = {id(t) for t in m.trainable_tensors().values()}
    share = sum(p.numel() for p in layers if id(p) in own) / max(1, sum(p.numel() for p in layers))
    return "weights train" if share >= 0.5 else ("adapters" if share > 0 else "frozen")


def step_memory(model: str, method: str, s, device: torch.device, acc, batch_size: int = 0) -> dict:
    """Measured and predicted memory of one training step of ``method`` on ``model`` (``batch_size`` rows, 0 =
    the check's); a step that runs out of GPU memory is a row saying so (with the formula's peak, where the
    model loaded). The peak is counted from what was allocated before the model was built."""
    batch_size = batch_size or s.batch_size
    row = {"model": model, "method": method, "precision": acc.mixed_precision, "batch": [], "predicted": None,
           "measured": None, "state ok": True}
    cuda = device.type == "cuda"
    if cuda:
        gc.collect()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated(device)
    try:
        cfg = compose(model, method, s.seq_len, batch_size, device, "trainer.max_steps=1", "trainer.lr=1e-6",
                      f"seed={s.seed}", *s.model_extra)
        c = build(cfg, device)
        row["weights"] = str(next(c.method.backbone_model.parameters()).dtype).replace("torch.", "")
        pad = c.backbone.tokenizer.pad_token_id
        row["batch"] = list(fixed_batches(c.train_features, 1, batch_size, pad, cfg.seed)[0]["input_ids"].shape)
        row["predicted"] = predict(c, tuple(row["batch"]), acc.mixed_precision)
        exclude = {p.untyped_storage().data_ptr() for p in c.method.parameters()}
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
        with saved_storages(exclude) as seen:
            res = Trainer(c.method, cfg.trainer, acc, TrainInputs(c.train_features, pad, cfg.seed)).fit()
        peak = torch.cuda.max_memory_allocated(device) - base if cuda else None
    except torch.cuda.OutOfMemoryError as e:
        row["oom"] = str(e).strip().splitlines()[0][:200]
        return row
    finally:
        acc.free_memory()  # the Accelerator lets go of the prepared model and optimizer (also after an OOM)
        c = None
        if cuda:
            gc.collect()
            torch.cuda.empty_cache()
    row["measured"] = {"state": res.state_memory, "saved": sum(seen.values()), "peak": peak}
    got, want = res.state_memory["total_bytes"], row["predicted"]["state"]["total_bytes"]
    row["state ok"] = abs(got - want) <= STATE_TOLERANCE * want
    return row


def check(s, device: torch.device, acc, progress) -> Section:
    rows = []
    for model, only in s.memory_models:  # only: the methods for a larger model the cache holds
        for name in methods_for(model, only or s.methods):
            if not registered()[name].trains:
                continue
            progress(f"memory: {name} on {model_label(model)}")
            rows.append(step_memory(model, name, s, device, acc))
            if rows[-1].get("oom") and s.batch_size > 1:  # where it fits: one row per step
                progress(f"memory: {name} on {model_label(model)}, batch 1")
                rows.append(step_memory(model, name, s, device, acc, batch_size=1))
    return render(rows, device)


def ratio(a, b) -> str:
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def render(rows: list[dict], device: torch.device) -> Section:
    done = [r for r in rows if r["measured"]]
    bad = [r for r in done if not r["state ok"]]
    cuda = device.type == "cuda"
    parts = [f"{r['method']} {ratio(r['measured']['saved'], r['predicted']['saved'])}"
             + (f"/{ratio(r['measured']['peak'], r['predicted']['peak'])}" if cuda else "") for r in done]
    screen = [f"{len(done) - len(bad)}/{len(done)} steps: measured state = formula (params + grads + AdamW); "
              + ("peak by torch.cuda.max_memory_allocated" if cuda else "peak not measured on CPU"),
              f"measured/formula, saved activations{'/peak' if cuda else ''}: " + ", ".join(parts[:8])
              + (f" ... ({len(parts) - 8} more)" if len(parts) > 8 else "")]
    screen += [f"FAIL {r['method']} on {r['model']}: state {mib(r['measured']['state']['total_bytes'])} measured, "
               f"{mib(r['predicted']['state']['total_bytes'])} by the formula" for r in bad]
    screen += [f"{r['method']} on {r['model']}: out of GPU memory (formula's peak "
               f"{mib(r['predicted']['peak']) if r['predicted'] else '? (at load)'})" for r in rows if r.get("oom")]
    md = table(["model", "method", "batch x tokens", "precision", "state measured", "state formula",
                "grads meas./form.", "AdamW meas./form.", "saved activations meas.",
                "formula (layers + logits + autocast copies)", "ratio",
                "peak meas.", "peak formula", "ratio"], [_md_row(r) for r in rows])
    return Section("memory", "fail" if bad else "pass", screen, md, {"rows": rows, "layer coefficients": LAYER})


def _md_row(r: dict) -> list:
    p, m = r["predicted"], r["measured"]
    head = [model_label(r["model"]), r["method"], "x".join(map(str, r["batch"])) or "?",
            f"{r['precision']}, weights {r.get('weights', '?')}"]
    if not m:
        return head + [f"out of GPU memory: {r.get('oom', '')}"] + [""] * 7 + [mib(p["peak"]) if p else "?", ""]
    st, ps = m["state"], p["state"]
    formula = (f"{mib(p['saved'])} ({mib(p['layers'])} + {mib(p['logits'])} + {mib(p['autocast copies'])}; "
               f"{p['mode']}, s={p['s']})")
    peak = mib(m["peak"]) if m["peak"] is not None else "not measured on CPU"
    return head + [mib(st["total_bytes"]), mib(ps["total_bytes"]), f"{mib(st['grad_bytes'])} / {mib(ps['grad_bytes'])}",
                   f"{mib(st['optimizer_bytes'])} / {mib(ps['optimizer_bytes'])}", mib(m["saved"]), formula,
                   ratio(m["saved"], p["saved"]), peak, mib(p["peak"]), ratio(m["peak"], p["peak"])]
