"""Check 1, the environment: library versions, the device, its precisions and the attention kernels."""

from __future__ import annotations

import importlib.metadata
import os
import platform

import torch

from embexp import __version__
from embexp.core.records import git_commit
from embexp.doctor.common import Section, mib, table

PACKAGES = ("torch", "transformers", "accelerate", "peft")


def versions() -> dict:
    out = {"python": platform.python_version(), "embexp": __version__, "git": git_commit()[:12]}
    for p in PACKAGES:
        try:
            out[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            out[p] = "not installed"
    out["cuda (torch built with)"] = torch.version.cuda or "none (a CPU build)"
    out["cudnn"] = str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else "none"
    return out


def attention_kernels() -> dict:
    """The attn_implementation values this installation can run (transformers' own availability checks)."""
    from transformers import utils

    out = {"eager": True, "sdpa": hasattr(torch.nn.functional, "scaled_dot_product_attention")}
    probes = (("flash_attention_2", "is_flash_attn_2_available"), ("flash_attention_3", "is_flash_attn_3_available"),
              ("flex_attention", "is_torch_flex_attn_available"))
    for name, probe in probes:
        fn = getattr(utils, probe, None)
        out[name] = bool(fn()) if fn else False
    if torch.cuda.is_available():  # the SDPA backends torch may pick on this GPU
        for b in ("flash", "mem_efficient", "math", "cudnn"):
            enabled = getattr(torch.backends.cuda, f"{b}_sdp_enabled", None)
            if enabled is not None:
                out[f"sdpa backend {b}"] = bool(enabled())
    return out


def cpu_bf16() -> bool:
    """Whether bf16 autocast runs on this CPU (emulated unless it has AVX512-BF16/AMX: correct, not fast)."""
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    except RuntimeError:
        return False


def device_facts(device: torch.device) -> dict:
    if device.type == "cuda":
        i = device.index or 0
        p = torch.cuda.get_device_properties(i)
        cap = torch.cuda.get_device_capability(i)
        return {"device": "cuda", "gpu": p.name, "gpus": torch.cuda.device_count(), "memory_bytes": p.total_memory,
                "compute capability": f"{cap[0]}.{cap[1]}", "bf16": torch.cuda.is_bf16_supported(),
                "tf32": cap >= (8, 0), "multiprocessors": p.multi_processor_count}
    return {"device": "cpu", "processor": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "torch threads": torch.get_num_threads(), "cpu capability": torch.backends.cpu.get_cpu_capability(),
            "bf16": cpu_bf16(), "tf32": False, "gpus": torch.cuda.device_count()}


def check(device: torch.device) -> Section:
    v, d, a = versions(), device_facts(device), attention_kernels()
    kernels = ", ".join(k for k, ok in a.items() if ok and not k.startswith("sdpa backend"))
    if device.type == "cuda":
        where = f"{d['gpu']} x{d['gpus']}, {mib(d['memory_bytes'])}, sm {d['compute capability']}"
    else:
        where = f"CPU {d['processor']}, {d['cores']} cores, {d['torch threads']} torch threads, {d['cpu capability']}"
    screen = [f"torch {v['torch']} (CUDA {v['cuda (torch built with)']}), transformers {v['transformers']}, "
              f"accelerate {v['accelerate']}, peft {v['peft']}",
              f"{where}; bf16 {'yes' if d['bf16'] else 'no'}, tf32 {'yes' if d['tf32'] else 'no'}; "
              f"attention: {kernels}"]
    rows = [[k, val] for k, val in {**v, **{k: (mib(x) if k == "memory_bytes" else x) for k, x in d.items()}}.items()]
    md = table(["what", "value"], rows)
    md += ["", "Attention implementations (`model.attn_implementation=`) available here:", ""]
    md += table(["implementation", "available"], [[k, "yes" if ok else "no"] for k, ok in a.items()])
    return Section("environment", "info", screen, md, {"versions": v, "device": d, "attention": a})
