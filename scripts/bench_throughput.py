"""Training throughput of embexp's loop against a plain PyTorch/transformers loop.

Same model, same batches (the same collated tensors, in the same order), same trainable tensors,
same optimizer; measured in the same process, interleaved A/B, B/A, ... so machine noise and ordering effects hit both; the median of each is reported.
Prints tokens/s for each and the ratio embexp / plain (1.0 = no overhead).

    python scripts/bench_throughput.py                      # model=minilm, full_ft and tinyte_full
    python scripts/bench_throughput.py model=tiny_llama task=wmt16 steps=30
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
from accelerate import Accelerator  # noqa: E402

from conftest import compose  # noqa: E402  (composes the real configs)
from embexp.cli import quiet_libraries  # noqa: E402
from embexp.data import collate, n_tokens  # noqa: E402
from embexp.pipeline import build  # noqa: E402
from embexp.loop import Trainer, micro_batch_indices  # noqa: E402


def args(argv):
    opts = dict(model="minilm", task="glue", methods="full_ft,tinyte_full", steps="20", batch="16", repeats="6",
                source_tokens="128")
    for a in argv:
        k, v = a.split("=", 1)
        if k not in opts:
            sys.exit(f"embexp: error: unknown option '{k}' (choose from: {', '.join(opts)})")
        opts[k] = v
    return opts


def setup(o, method):
    cfg = compose(f"method={method}", f"model={o['model']}", f"task={o['task']}", "task.source=fixture",
                  "task.fixture_size=256", f"task.max_source_tokens={o['source_tokens']}", f"trainer.max_steps={o['steps']}",
                  f"trainer.batch_size={o['batch']}", "trainer.cpu=true", "trainer.progress=false", "trainer.log_every=0",
                  "trainer.mixed_precision=no", "trainer.max_grad_norm=1.0", "trainer.warmup_steps=0")
    c = build(cfg, torch.device("cpu"))
    feats = [c.featurizer.train_features(e) for e in c.task.examples("train")]
    c.method.setup({"train": [f["input_ids"] for f in feats], "eval": []})
    return cfg, c, feats


def embexp_loop(cfg, c, feats, acc):
    t = Trainer(c.method, cfg.trainer, acc, feats, [], c.backbone.tokenizer.pad_token_id, cfg.seed)
    res = t.fit()
    return res.tokens / res.wall_seconds


def plain_loop(cfg, c, feats):
    """What a researcher would write by hand: the same batches, AdamW, clipping, a cosine lr."""
    params = list(c.method.trainable_tensors().values())
    opt = torch.optim.AdamW(params, lr=cfg.trainer.lr, weight_decay=cfg.trainer.weight_decay)
    steps = cfg.trainer.max_steps
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    model = c.method
    model.train()
    batches = [collate([feats[i] for i in micro_batch_indices(len(feats), cfg.trainer.batch_size, 1, 0, cfg.seed, m)],
                       c.backbone.tokenizer.pad_token_id) for m in range(steps)]
    tokens, t0 = 0, time.perf_counter()
    for batch in batches:
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        tokens += n_tokens(batch)
    return tokens / (time.perf_counter() - t0)


def main():
    o = args(sys.argv[1:])
    quiet_libraries()
    torch.set_num_threads(os.cpu_count() or 1)
    acc = Accelerator(cpu=True)
    print(f"model={o['model']} task={o['task']} batch={o['batch']} steps={o['steps']} repeats={o['repeats']} "
          f"threads={torch.get_num_threads()} torch={torch.__version__}")
    print(f"{'method':<14}{'plain tok/s':>14}{'embexp tok/s':>14}{'ratio':>8}")
    for method in o["methods"].split(","):
        cfg, c, feats = setup(o, method)
        state = {k: v.clone() for k, v in c.method.trainable_state().items()}
        plain_loop(cfg, c, feats)  # warm-up (allocator, kernels)
        plain, ours = [], []
        for r in range(int(o["repeats"])):
            # A/B then B/A: whichever loop runs first after a reset pays for freeing the previous
            # optimizer's state, so the order alternates
            order = ("plain", "embexp") if r % 2 == 0 else ("embexp", "plain")
            for which in order:
                c.method.load_trainable_state(state)
                if which == "plain":
                    plain.append(plain_loop(cfg, c, feats))
                else:
                    ours.append(embexp_loop(cfg, c, feats, acc))
        p, e = statistics.median(plain), statistics.median(ours)
        print(f"{method:<14}{p:>14.0f}{e:>14.0f}{e / p:>8.3f}   per repeat: plain {[round(x) for x in plain]}, "
              f"embexp {[round(x) for x in ours]}")


if __name__ == "__main__":
    main()
