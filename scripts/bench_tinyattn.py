"""Step time of Tiny-Attention against a frozen backbone whose head alone is trained.

Three plain PyTorch setups (forward, backward, clip, AdamW step) on the same collated batches, in
one process. They take turns step by step: for every batch each setup takes one step, in an order
that rotates from batch to batch, so load changes on a shared machine hit all three alike. Reported:
the median step time of each, the ratio of the medians, and the median of the per-batch (paired)
ratios tinyattn / setup:

- head_only:   the backbone without adapters, only the task head trainable; the backward stops at
               the head (autograd never enters the frozen layers);
- head_full_bw: the same, but the embedding output requires grad, so the backward runs through every
               layer (activation gradients only, no weight gradients): the least any in-layer adapter
               must pay;
- tinyattn:    method=tinyattn (adapters + head trainable), on its own copy of the same backbone.

    python scripts/bench_tinyattn.py                        # model=minilm, 1H, batch 16, GLUE fixture
    python scripts/bench_tinyattn.py data_dir=outputs/tinyattn_sst2/data source_tokens=64   # real SST-2 rows
                                                            # (the split scripts/tinyattn_sst2.py writes)
    python scripts/bench_tinyattn.py repeats=3 threads=1 overrides=method.heads=4
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
from embexp.data import collate  # noqa: E402
from embexp.models import load_backbone  # noqa: E402
from embexp.pipeline import build  # noqa: E402
from embexp.loop import micro_batch_indices  # noqa: E402


def args(argv):
    opts = dict(model="minilm", task="glue", steps="20", batch="16", repeats="2", source_tokens="128", threads="0",
                data_dir="", overrides="")
    for a in argv:
        k, v = a.split("=", 1)
        if k not in opts:
            sys.exit(f"embexp: error: unknown option '{k}' (choose from: {', '.join(opts)})")
        opts[k] = v
    return opts


class Loop:
    """One trainable setup: its own AdamW; ``step(batch)`` runs one optimizer step and returns its seconds."""

    def __init__(self, model, params, before=None):
        self.model, self.params, self.before = model, params, before or (lambda: None)
        self.opt = torch.optim.AdamW(params, lr=1e-4)

    def step(self, batch) -> float:
        self.before()
        self.model.train()  # tinyattn keeps its frozen backbone in eval mode (no dropout): the baselines do too
        base = getattr(self.model, "base_model", None)
        if base is not None and base is not self.model:
            base.eval()
        t0 = time.perf_counter()
        loss = self.model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0


def main():
    o = args(sys.argv[1:])
    quiet_libraries()
    torch.set_num_threads(int(o["threads"]) or (os.cpu_count() or 1))
    extra = [x for x in o["overrides"].split(",") if x]
    data = ([f"task.data_dir={o['data_dir']}", "task.source=local", "task.subset=sst2"] if o["data_dir"]
            else ["task.source=fixture", "task.fixture_size=256"])
    cfg = compose("method=tinyattn", f"model={o['model']}", f"task={o['task']}", *data,
                  f"task.max_source_tokens={o['source_tokens']}", "trainer.cpu=true", *extra)
    torch.manual_seed(0)
    c = build(cfg, torch.device("cpu"))  # tinyattn on its own backbone
    feats = [c.featurizer.train_features(e) for e in c.task.examples("train")]
    pad = c.backbone.tokenizer.pad_token_id
    steps, bs = int(o["steps"]), int(o["batch"])
    batches = [collate([feats[i] for i in micro_batch_indices(len(feats), bs, 1, 0, 0, m)], pad) for m in range(steps)]

    torch.manual_seed(0)
    plain = load_backbone(cfg.model, num_labels=c.task.num_labels)  # the same weights, no adapters
    head = [p for _, p in plain.head_parameters()]
    for p in plain.model.parameters():
        p.requires_grad_(False)
    for p in head:
        p.requires_grad_(True)
    full_bw = {"on": False}
    plain.model.get_input_embeddings().register_forward_hook(
        lambda mod, a, out: out.requires_grad_(True) if full_bw["on"] else out)

    loops = {"head_only": Loop(plain.model, head, lambda: full_bw.__setitem__("on", False)),
             "head_full_bw": Loop(plain.model, head, lambda: full_bw.__setitem__("on", True)),
             "tinyattn": Loop(c.method, list(c.method.trainable_tensors().values()))}
    names = list(loops)
    for lp in loops.values():  # warm-up: allocator, kernels
        lp.step(batches[0])
    # rounds: every loop takes one step on the same batch, in a rotating order, so that load
    # changes on a shared machine hit all of them; medians and per-round (paired) ratios
    times = {k: [] for k in names}
    for r in range(int(o["repeats"])):
        for s_, batch in enumerate(batches):
            k = (r * len(batches) + s_) % len(names)
            for name in names[k:] + names[:k]:
                times[name].append(loops[name].step(batch))
    med = {k: statistics.median(v) for k, v in times.items()}
    paired = {k: statistics.median(a / b for a, b in zip(times["tinyattn"], times[k])) for k in names}
    n_ad = c.method.n_trainable(include_head=False)
    n_tok = sum(int(b["attention_mask"].sum()) for b in batches) / len(batches)
    print(f"data={o['data_dir'] or 'fixture'} tokens/batch={n_tok:.0f} model={o['model']} batch={bs} max_source_tokens={o['source_tokens']} steps={steps} repeats={o['repeats']} "
          f"threads={torch.get_num_threads()} torch={torch.__version__} tinyattn: heads={cfg.method.heads} "
          f"head_dim={cfg.method.head_dim} adapter params={n_ad} head params={sum(p.numel() for p in head)}")
    print(f"{'loop':<14}{'median s/step':>15}{'ratio of medians':>18}{'median paired ratio':>21}   quartiles s/step")
    for k in names:
        q = statistics.quantiles(times[k], n=4)
        print(f"{k:<14}{med[k]:>15.4f}{med['tinyattn'] / med[k]:>18.3f}{paired[k]:>21.3f}   {q[0]:.4f} .. {q[2]:.4f}")


if __name__ == "__main__":
    main()
