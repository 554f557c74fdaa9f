"""Real-data check of Tiny-Attention on MiniLM: tinyattn vs head-only training on SST-2 sentences.

The 872 rows of the SST-2 validation split (../shared/data/glue/sst2/validation.jsonl, the only
labelled SST-2 rows stored offline) are split by their ``idx``: even -> train.jsonl (436 rows),
odd -> validation.jsonl (436 rows), written to <out>/data; every run reads them with
``task.data_dir``. Each configuration trains for the same steps with the same seeds and batches
(the data order is a function of the seed); the eval accuracy of each run is printed as a table.

    python scripts/tinyattn_sst2.py                        # 300 steps, seeds 0 1 2 (OMP_NUM_THREADS=1)
    python scripts/tinyattn_sst2.py steps=20 seeds=0       # a quick look
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# ../shared/data next to the main checkout (worktrees sit one level deeper)
SOURCE = next((p / "shared/data/glue/sst2/validation.jsonl" for p in REPO.parents
               if (p / "shared/data/glue/sst2/validation.jsonl").is_file()), Path("../shared/data/glue/sst2/validation.jsonl"))
CONFIGS = {  # name -> overrides: the same two learning rates for both methods
    "tinyattn_lr1e-3": ["method=tinyattn", "trainer.lr=1e-3"],  # Tiny-Attn-1H
    "tinyattn_lr1e-2": ["method=tinyattn", "trainer.lr=1e-2"],
    "head_only_lr1e-3": ["method=head_only", "trainer.lr=1e-3"],
    "head_only_lr1e-2": ["method=head_only", "trainer.lr=1e-2"],
}


def args(argv):
    opts = dict(steps="300", seeds="0,1,2", out="outputs/tinyattn_sst2", source=str(SOURCE), configs=",".join(CONFIGS))
    for a in argv:
        k, v = a.split("=", 1)
        if k not in opts:
            sys.exit(f"embexp: error: unknown option '{k}' (choose from: {', '.join(opts)})")
        opts[k] = v
    return opts


def split(source: Path, out: Path) -> tuple[int, int]:
    if not source.is_file():
        sys.exit(f"embexp: error: no SST-2 rows at '{source}' (pass source=PATH to validation.jsonl)")
    rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    out.mkdir(parents=True, exist_ok=True)
    train = [r for r in rows if r["idx"] % 2 == 0]
    held = [r for r in rows if r["idx"] % 2 == 1]
    (out / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train))
    (out / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in held))
    return len(train), len(held)


def main():
    o = args(sys.argv[1:])
    out = Path(o["out"]).resolve()
    n_train, n_eval = split(Path(o["source"]), out / "data")
    print(f"SST-2 validation rows split by idx parity: train {n_train}, eval {n_eval} ({out / 'data'})")
    common = ["model=minilm", "task=glue", "task.subset=sst2", "task.source=local", f"task.data_dir={out / 'data'}",
              "task.max_source_tokens=64", "trainer.batch_size=16", f"trainer.max_steps={o['steps']}",
              f"trainer.warmup_steps={max(1, int(o['steps']) // 10)}", "trainer.eval_batch_size=64", "trainer.cpu=true",
              "trainer.progress=false", "trainer.log_every=50"]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(REPO / "src")}
    seeds = [int(s) for s in o["seeds"].split(",")]
    labels = [c for c in o["configs"].split(",") if c]
    results: dict[str, dict[int, float]] = {}
    for label in labels:
        if label not in CONFIGS:
            sys.exit(f"embexp: error: unknown config '{label}' (choose from: {', '.join(CONFIGS)})")
        for seed in seeds:
            run_dir = out / "runs" / label / f"seed{seed}"
            cmd = [sys.executable, "-m", "embexp.train", *common, *CONFIGS[label], f"seed={seed}", f"hydra.run.dir={run_dir}"]
            print("$", " ".join(cmd[1:]), flush=True)
            r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"run failed ({run_dir}):\n{r.stderr[-2000:]}")
            m = json.loads((run_dir / "metrics.json").read_text())
            acc = m["metrics"]["accuracy"]
            results.setdefault(label, {})[seed] = acc
            print(f"  accuracy {acc:.2f}  trainable {m['n_trainable_params']}  train {m['train']['wall_seconds']:.0f} s", flush=True)
    print(f"\n| configuration | {' | '.join(f'seed {s}' for s in seeds)} | mean |\n|---|{'---:|' * (len(seeds) + 1)}")
    for label, accs in results.items():
        vals = [accs[s] for s in seeds]
        print(f"| {label} ({' '.join(CONFIGS[label])}) | {' | '.join(f'{v:.2f}' for v in vals)} | {statistics.mean(vals):.2f} |")


if __name__ == "__main__":
    main()
