"""Real-data check of Tiny-Attention on MiniLM: tinyattn vs head-only training on SST-2 sentences.

Data. The 872 rows of the SST-2 validation split (../shared/data/glue/sst2/validation.jsonl, the
only labelled SST-2 rows stored offline) are split by their ``idx``: even -> train.jsonl (436 rows),
odd -> validation.jsonl (436 rows, the reported eval rows), written to <out>/data. For the choice of
the learning rate, the 436 train rows are split once more with a seeded shuffle
(``random.Random(carve_seed)``, 20% = 87 rows held out): <out>/select/data holds 349 train rows and
the 87 held-out rows as its validation.jsonl. The reported eval rows are never read for any choice.

Protocol. Stage 1: each method trains on the 349 rows at every learning rate of its grid (``lrs``;
the head alone also ``head_only_lrs``: a linear probe's best lr lies higher; its grid was extended
upwards while the best held-out lr was the largest one tried) with seeds ``select_seeds`` and is scored
on the 87 held-out rows; each method keeps its own lr with the best mean held-out accuracy (ties: the
smaller lr). Stage 2: each method trains on the 436 train rows at
its chosen lr with seeds ``seeds`` and is scored once on the 436 eval rows. Both stages: the same
steps, batch 16, warm-up 10%, linear decay, ``trainer.select_best=false`` (the last state is
evaluated). A run whose metrics.json exists with the same command is reused, so the two methods can
run in two processes (``methods=tinyattn`` / ``methods=head_only``) and a last call prints the tables.

    python scripts/tinyattn_sst2.py                   # 200 steps; lrs 1e-3,1e-2 (+1e-1,1,10 head_only); seeds 0 1 2
    python scripts/tinyattn_sst2.py methods=tinyattn  # one method's runs only
    python scripts/tinyattn_sst2.py split_only=1      # only write the split (scripts/bench.py tinyattn reads it)
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# ../shared/data next to the main checkout (worktrees sit one level deeper)
SOURCE = next((p / "shared/data/glue/sst2/validation.jsonl" for p in REPO.parents
               if (p / "shared/data/glue/sst2/validation.jsonl").is_file()),
              Path("../shared/data/glue/sst2/validation.jsonl"))
METHODS = ("tinyattn", "head_only")  # tinyattn: Tiny-Attn-1H (the method's defaults); head_only: only the head trains


def args(argv):
    opts = dict(steps="200", seeds="0,1,2", select_seeds="0", lrs="1e-3,1e-2", head_only_lrs="1e-1,1,10",
                methods=",".join(METHODS), carve_seed="0", out="outputs/tinyattn_sst2", source=str(SOURCE),
                split_only="0")
    for a in argv:
        k, v = a.split("=", 1) if "=" in a else (a, "")
        if k not in opts:
            sys.exit(f"embexp: error: unknown option '{k}' (choose from: {', '.join(opts)})")
        opts[k] = v
    for m in opts["methods"].split(","):
        if m not in METHODS:
            sys.exit(f"embexp: error: unknown method '{m}' (choose from: {', '.join(METHODS)})")
    return opts


def write(path: Path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def split(source: Path, out: Path, carve_seed: int) -> dict[str, int]:
    if not source.is_file():
        sys.exit(f"embexp: error: no SST-2 rows at '{source}' (pass source=PATH to validation.jsonl)")
    rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    train = [r for r in rows if r["idx"] % 2 == 0]
    held = [r for r in rows if r["idx"] % 2 == 1]
    (out / "data").mkdir(parents=True, exist_ok=True)
    write(out / "data/train.jsonl", train)
    write(out / "data/validation.jsonl", held)
    order = list(range(len(train)))
    random.Random(carve_seed).shuffle(order)
    n_hold = len(train) // 5
    carve = sorted(order[:n_hold])
    inner = [train[i] for i in sorted(order[n_hold:])]
    (out / "select/data").mkdir(parents=True, exist_ok=True)
    write(out / "select/data/train.jsonl", inner)
    write(out / "select/data/validation.jsonl", [train[i] for i in carve])
    return dict(train=len(train), eval=len(held), select_train=len(inner), select_holdout=len(carve))


def run(run_dir: Path, overrides: list[str], env) -> dict:
    cmd = [sys.executable, "-m", "embexp.train", *overrides, f"hydra.run.dir={run_dir}"]
    line = " ".join(["python", *cmd[1:]])
    done = run_dir / "metrics.json"
    if done.is_file() and (run_dir / "command.txt").is_file() and (run_dir / "command.txt").read_text() == line:
        print(f"(reused) {line}", flush=True)
    else:
        print(f"$ {line}", flush=True)
        r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"run failed ({run_dir}):\n{r.stderr[-2000:]}")
        (run_dir / "command.txt").write_text(line)
    m = json.loads(done.read_text())
    print(f"  accuracy {m['metrics']['accuracy']:.2f}  trainable {m['n_trainable_params']}  "
          f"train {m['train']['wall_seconds']:.0f} s  eval {m['metrics']['eval_seconds']:.0f} s", flush=True)
    return m


def table(title: str, results: dict[str, dict[int, dict]], seeds: list[int]) -> None:
    print(f"\n{title}\n| run | {' | '.join(f'seed {s}' for s in seeds)} "
          f"| mean | train s / run |\n|---|{'---:|' * (len(seeds) + 2)}")
    for label, by_seed in results.items():
        if not all(s in by_seed for s in seeds):
            continue
        accs = [by_seed[s]["metrics"]["accuracy"] for s in seeds]
        wall = statistics.mean(by_seed[s]["train"]["wall_seconds"] for s in seeds)
        print(f"| {label} | {' | '.join(f'{a:.2f}' for a in accs)} | {statistics.mean(accs):.2f} | {wall:.0f} |")


def main():
    o = args(sys.argv[1:])
    out = Path(o["out"]).resolve()
    sizes = split(Path(o["source"]), out, int(o["carve_seed"]))
    print(f"SST-2 validation rows split by idx parity: train {sizes['train']}, eval {sizes['eval']} ({out / 'data'}); "
          f"lr choice: train rows carved with seed {o['carve_seed']} "
          f"into {sizes['select_train']} + {sizes['select_holdout']} "
          f"held out ({out / 'select/data'})")
    if o["split_only"] not in ("", "0"):
        return
    steps = int(o["steps"])
    common = ["model=minilm", "task=glue", "task.subset=sst2", "task.source=local", "task.max_source_tokens=64",
              "trainer.batch_size=16", f"trainer.max_steps={steps}", f"trainer.warmup_steps={max(1, steps // 10)}",
              "trainer.scheduler=linear", "trainer.select_best=false", "trainer.eval_batch_size=64", "trainer.cpu=true",
              "trainer.progress=false", "trainer.log_every=50"]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(REPO / "src")}
    methods = o["methods"].split(",")
    grid = {m: o["lrs"].split(",") + ([x for x in o["head_only_lrs"].split(",") if x] if m == "head_only" else [])
            for m in methods}
    sel_seeds = [int(s) for s in o["select_seeds"].split(",")]
    seeds = [int(s) for s in o["seeds"].split(",")]
    chosen, sel = {}, {}
    for method in methods:  # stage 1: lr per method on the held-out carve of the train rows
        lrs = grid[method]
        for lr in lrs:
            label = f"{method} lr={lr}"
            for seed in sel_seeds:
                sel.setdefault(label, {})[seed] = run(
                    out / "select/runs" / f"{method}_lr{lr}" / f"seed{seed}",
                    [*common, f"task.data_dir={out / 'select/data'}", f"method={method}", f"trainer.lr={lr}",
                     f"seed={seed}"], env)
        score = {lr: statistics.mean(sel[f"{method} lr={lr}"][s]["metrics"]["accuracy"] for s in sel_seeds)
                 for lr in lrs}
        chosen[method] = max(lrs, key=lambda lr: (score[lr], -float(lr)))
        print(f"{method}: lr {chosen[method]} (held-out accuracy "
              f"{', '.join(f'{lr}: {a:.2f}' for lr, a in score.items())})", flush=True)
    final = {}
    for method in methods:  # stage 2: the reported runs, each method at its chosen lr
        label = f"{method} lr={chosen[method]}"
        for seed in seeds:
            final.setdefault(label, {})[seed] = run(
                out / "runs" / method / f"seed{seed}",
                [*common, f"task.data_dir={out / 'data'}", f"method={method}", f"trainer.lr={chosen[method]}",
                 f"seed={seed}"], env)
    table(f"Stage 1: accuracy on the {sizes['select_holdout']} held-out train rows (lr choice)", sel, sel_seeds)
    table(f"Stage 2: accuracy on the {sizes['eval']} eval rows", final, seeds)


if __name__ == "__main__":
    main()
