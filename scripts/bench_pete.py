"""Seconds per training step of PETE against the standard embedding table, measured in one run.

Builds the same encoder twice from the same seed (method=pete and method=full_ft on
model=scratch_encoder, task=nli_pairs), then trains each with embexp's Trainer on the same
batches, interleaved A/B, B/A, ... so machine noise hits both; prints the median seconds per
optimizer step of each (wall clock and process CPU clock), and the ratio pete / full_ft (the issue
asks for <= 1.0). Each method keeps one Trainer (and optimizer) across repeats, so a step is
measured in steady state: forward, backward, clipping, the optimizer update.

    python scripts/bench_pete.py                                            # the task's fixture
    python scripts/bench_pete.py data_dir=../shared/data steps=10 repeats=6 # real SNLI pairs (validation+test)

Options: model, steps, batch, repeats, data_dir, seed, threads (default: 2 at most, as the tests;
use threads=1 on a shared CPU, where the CPU clock then measures each step's compute).
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
from embexp.pipeline import build  # noqa: E402
from embexp.loop import Trainer  # noqa: E402

METHODS = ("pete", "full_ft")


def args(argv):
    opts = dict(model="scratch_encoder", steps="10", batch="32", repeats="6", data_dir="", seed="0", threads="")
    for a in argv:
        k, v = a.split("=", 1)
        if k not in opts:
            sys.exit(f"embexp: error: unknown option '{k}' (choose from: {', '.join(opts)})")
        opts[k] = v
    return opts


def setup(o, method):
    data = ([f"task.data_dir={o['data_dir']}", "task.datasets=[snli]", "task.train_split=validation+test"]
            if o["data_dir"] else ["task.source=fixture", "task.fixture_size=512"])
    cfg = compose(f"method={method}", f"model={o['model']}", "task=nli_pairs", *data, f"trainer.max_steps={o['steps']}",
                  f"trainer.batch_size={o['batch']}", "trainer.cpu=true", "trainer.progress=false", "trainer.log_every=0",
                  "trainer.mixed_precision=no", "trainer.warmup_steps=0", f"seed={o['seed']}")
    torch.manual_seed(cfg.seed)
    c = build(cfg, torch.device("cpu"))  # data, features and method.setup as a run does them
    return cfg, c, c.train_features


def seconds_per_step(trainer) -> tuple[float, float]:
    """One fit() of `steps` steps on a trainer whose optimizer state already exists (steady state):
    wall seconds and process CPU seconds per step. On a shared machine with threads=1 the CPU clock
    measures the step's compute; the wall clock also counts the time other processes held the core."""
    t0, c0 = time.perf_counter(), time.process_time()
    res = trainer.fit()
    return (time.perf_counter() - t0) / res.steps, (time.process_time() - c0) / res.steps


def main():
    o = args(sys.argv[1:])
    quiet_libraries()
    if o["threads"]:
        torch.set_num_threads(int(o["threads"]))
    acc = Accelerator(cpu=True)
    built = {m: setup(o, m) for m in METHODS}
    print(f"model={o['model']} data={'SNLI validation+test (' + o['data_dir'] + ')' if o['data_dir'] else 'fixture'} "
          f"batch={o['batch']} steps={o['steps']} repeats={o['repeats']} threads={torch.get_num_threads()} torch={torch.__version__}")
    trainers = {}
    for m, (cfg, c, feats) in built.items():  # one trainer each; a first fit warms up kernels and creates the optimizer state
        trainers[m] = Trainer(c.method, cfg.trainer, acc, feats, [], c.backbone.tokenizer.pad_token_id, cfg.seed)
        seconds_per_step(trainers[m])
    wall, cpu = {m: [] for m in METHODS}, {m: [] for m in METHODS}
    for r in range(int(o["repeats"])):
        for m in (METHODS if r % 2 == 0 else METHODS[::-1]):
            w, c = seconds_per_step(trainers[m])
            wall[m].append(w)
            cpu[m].append(c)
    med = {m: (statistics.median(wall[m]), statistics.median(cpu[m])) for m in METHODS}
    for m in METHODS:
        n = built[m][1].method.n_trainable(include_head=False)
        print(f"{m:<8} {n:>11,} params  wall {med[m][0]:.3f} s/step  CPU {med[m][1]:.3f} s/step   "
              f"per repeat wall {[round(x, 3) for x in wall[m]]} CPU {[round(x, 3) for x in cpu[m]]}")
    print(f"ratio pete / full_ft: wall {med['pete'][0] / med['full_ft'][0]:.3f}  CPU {med['pete'][1] / med['full_ft'][1]:.3f}")


if __name__ == "__main__":
    main()
