"""Prefill time of one long prompt: K-Token merging against the uncompressed prompt, same model.

One process builds ``method=ktoken`` (its LoRA-adapted backbone and merging encoder) and times, on
the same n-token prompt, (a) the backbone reading the n tokens and (b) the merging encoder plus the
backbone reading the ceil(n/K) merged positions. Both are a generation prefill: one forward that
fills the KV cache and returns the next-token logits only (``logits_to_keep=1``, as ``generate``
does). The two alternate (uncompressed first, then merged first, ...) so machine noise hits both;
the medians are compared. Each call is timed twice: wall-clock seconds and the process's CPU
seconds (``time.process_time``); on a shared machine the CPU clock is the steadier one, and with
``threads=1`` (the default) it is the compute the prefill took. Prints per-repeat seconds, the
medians and the ratios merged / uncompressed. Other ``key=value`` arguments with a dot are Hydra
overrides (e.g. a larger tiny model: ``+model.tiny.hidden_size=512 ...``).

    python scripts/bench_ktoken_prefill.py                         # model=smollm2, k=4, 2,048 tokens
    python scripts/bench_ktoken_prefill.py model=tiny_llama k=2 tokens=512 repeats=3
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from conftest import compose  # noqa: E402  (composes the real configs)
from embexp.cli import quiet_libraries  # noqa: E402
from embexp.pipeline import build  # noqa: E402


def args(argv):
    opts = dict(model="smollm2", k="4", tokens="2048", repeats="7", seed="0", threads="1")
    overrides = []
    for a in argv:
        k, _, v = a.partition("=")
        if "." in k or k.startswith("+"):
            overrides.append(a)
            continue
        if k not in opts:
            sys.exit(f"embexp: error: unknown option '{k}' (choose from: {', '.join(opts)}, or a Hydra override with a dot)")
        opts[k] = v
    return opts, overrides


def main(argv):
    o, overrides = args(argv)
    quiet_libraries()
    torch.set_num_threads(int(o["threads"]))
    n, k, repeats = int(o["tokens"]), int(o["k"]), int(o["repeats"])
    cfg = compose("method=ktoken", f"model={o['model']}", "task=tree", f"method.k={k}", "trainer.cpu=true", *overrides)
    torch.manual_seed(int(o["seed"]))
    c = build(cfg, torch.device("cpu"))
    method, tok = c.method, c.backbone.tokenizer
    method.eval()
    model = method.backbone_model
    special = set(tok.all_special_ids)
    pool = torch.tensor([i for i in range(c.backbone.vocab_size) if i not in special])
    ids = pool[torch.randint(len(pool), (1, n), generator=torch.Generator().manual_seed(int(o["seed"])))]
    mask = torch.ones_like(ids)

    def uncompressed():
        return model(input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1).logits

    def merged():
        x, m = method.prefix(ids, mask)
        return model(inputs_embeds=x, attention_mask=m, use_cache=True, logits_to_keep=1).logits

    def timed(fn):
        w, c = time.perf_counter(), time.process_time()
        fn()
        return time.perf_counter() - w, time.process_time() - c

    with torch.inference_mode():
        x, _ = method.prefix(ids, mask)
        print(f"model={o['model']} ({c.n_backbone_params:,} params) k={k}: {n} prompt tokens -> {x.shape[1]} positions; "
              f"torch {torch.__version__}, {torch.get_num_threads()} threads")
        uncompressed(), merged()  # warm-up
        times = {"uncompressed": [], "merged": []}
        for r in range(repeats):
            order = [("uncompressed", uncompressed), ("merged", merged)]
            for name, fn in (order if r % 2 == 0 else order[::-1]):
                times[name].append(timed(fn))
            (uw, uc), (mw, mc) = times["uncompressed"][-1], times["merged"][-1]
            print(f"repeat {r}: uncompressed wall {uw:.3f} s cpu {uc:.3f} s; merged wall {mw:.3f} s cpu {mc:.3f} s", flush=True)
    for i, clock in enumerate(("wall", "cpu")):
        u = statistics.median(t[i] for t in times["uncompressed"])
        m = statistics.median(t[i] for t in times["merged"])
        print(f"median prefill ({clock}): uncompressed {u:.3f} s, merged (K={k}, encoder included) {m:.3f} s, "
              f"ratio merged / uncompressed {m / u:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
