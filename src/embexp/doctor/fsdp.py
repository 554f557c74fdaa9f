"""Check 5, FSDP (two or more GPUs): the DDP/FSDP equality of tests/test_fsdp.py on this machine's
GPUs, and the per-GPU state ratio.

Two real launches per method (``accelerate launch --num_processes 2 -m embexp.train``, full_ft and
tinyte_full on tiny_llama, 6 steps, clipping on, fp32 without TF32), once with
``trainer.strategy=ddp`` and once with ``fsdp``: the final training loss, the metrics and every
adapter tensor agree within :data:`TOLERANCE`, and FSDP's per-process state (parameters, gradients,
AdamW: metrics.json's ``train.state_memory``) is about half of DDP's for full_ft (:data:`RATIO_MAX`).
``fsdp=always`` runs it on a machine without two GPUs too, as two gloo processes on the CPU (``torchrun``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from embexp.doctor.common import Section, table

TOLERANCE = 1e-5
RATIO_MAX = 0.55  # FSDP's state over DDP's for full_ft with 2 processes (half, and the unsharded 0-d/small tensors)
CASES = {"full_ft": ("trainer.lr=1e-3",), "tinyte_full": ("trainer.lr=0.05",)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(run_dir: Path, cpu: bool, *args: str) -> dict:
    """One 2-process training run: its metrics.json, or ``{"error": <its last stderr line>}``."""
    launcher = (["torch.distributed.run", "--nproc_per_node", "2", "--master_port"] if cpu else  # torchrun (gloo)
                ["accelerate.commands.launch", "--num_processes", "2", "--main_process_port"])
    cmd = [sys.executable, "-m", *launcher, str(free_port()), "-m", "embexp.train", "debug=smoke", *args,
           f"hydra.run.dir={run_dir}"]
    if not cpu:
        cmd += ["trainer.cpu=false", "trainer.mixed_precision=no", "trainer.tf32=false"]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=900)
    if r.returncode:
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        return {"error": (lines or ["(no output)"])[-1]}
    return json.loads((run_dir / "metrics.json").read_text())


def compare(method: str, out: Path, cpu: bool) -> dict:
    """DDP against FSDP for one method: the largest differences and the state ratio."""
    args = (f"method={method}", "model=tiny_llama", "task=wmt16", "trainer.max_steps=6", "trainer.max_grad_norm=0.5",
            *CASES[method])
    runs = {s: launch(out / method / s, cpu, *args, f"trainer.strategy={s}") for s in ("ddp", "fsdp")}
    errors = [f"{s}: {r['error']}" for s, r in runs.items() if "error" in r]
    if errors:
        return {"method": method, "ok": False, "error": "; ".join(errors)}
    d, f = runs["ddp"], runs["fsdp"]
    metrics = {k: abs(v - f["metrics"][k]) for k, v in d["metrics"].items()
               if not k.endswith("seconds") and k in f["metrics"]}
    a, b = (load_file(out / method / s / "adapter.safetensors") for s in ("ddp", "fsdp"))
    adapter = max(float((a[k].float() - b[k].float()).abs().max()) for k in a) if a.keys() == b.keys() else float("inf")
    loss = abs(d["train"]["final_train_loss"] - f["train"]["final_train_loss"])
    state = f["train"]["state_memory"]["total_bytes"] / d["train"]["state_memory"]["total_bytes"]
    worst = max([loss, adapter, *metrics.values()])
    ok = worst <= TOLERANCE and (method != "full_ft" or state <= RATIO_MAX)
    return {"method": method, "loss diff": loss, "adapter diff": adapter,
            "metric diff": max(metrics.values(), default=0.0), "state ratio fsdp/ddp": state,
            "world size": f["train"]["world_size"], "ok": ok}


def check(mode: str, device: torch.device, out: Path, progress) -> Section:
    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    if mode == "never" or (mode == "auto" and gpus < 2):
        why = "fsdp=never" if mode == "never" else f"needs 2 or more GPUs, found {gpus}"
        why += " (device=cpu)" if mode != "never" and torch.cuda.device_count() > gpus else ""
        return Section("fsdp", "skipped", [f"skipped: {why}"], [f"Skipped: {why}."], {"skipped": why})
    cpu = gpus < 2
    rows = []
    for method in CASES:
        progress(f"fsdp: {method}, ddp and fsdp launches{' on the CPU (gloo)' if cpu else ''}")
        rows.append(compare(method, out / "fsdp_runs", cpu))
    return render(rows, "2 CPU processes (gloo)" if cpu else "2 GPUs")


def render(rows: list[dict], where: str) -> Section:
    screen = [f"on {where}"]
    for r in rows:
        if "error" in r:
            screen.append(f"{r['method']}: FAIL {r['error']}")
            continue
        worst = max(r["loss diff"], r["adapter diff"], r["metric diff"])
        screen.append(f"{r['method']}: DDP = FSDP within {worst:.1e} (tol {TOLERANCE:g}), state per process fsdp/ddp "
                      f"{r['state ratio fsdp/ddp']:.2f}: {'pass' if r['ok'] else 'FAIL'}")
    md = [f"tiny_llama, 6 steps, {where}, fp32 without TF32; tolerance {TOLERANCE:g}; full_ft's FSDP state at most "
          f"{RATIO_MAX} of DDP's.", ""]
    diffs = ("loss diff", "adapter diff", "metric diff")
    body = [[r["method"], *(["error: " + r["error"], "", "", ""] if "error" in r else
             [f"{r[k]:.1e}" for k in diffs] + [f"{r['state ratio fsdp/ddp']:.3f}"]), "pass" if r["ok"] else "FAIL"]
            for r in rows]
    md += table(["method", "loss diff", "adapter max diff", "metric max diff", "state fsdp/ddp", "verdict"], body)
    return Section("fsdp", "pass" if all(r["ok"] for r in rows) else "fail", screen, md, {"rows": rows})
