"""Every method embexp has, on the same footing: the runs behind `python -m embexp.report table=compare`.

    python scripts/compare_sweep.py                          # split the data, run what is missing, print the tables
    python scripts/compare_sweep.py --dry-run                # print the exact commands only
    python scripts/compare_sweep.py --extra "debug=smoke"    # tiny models and fixtures (offline check, seconds per run)

`make compare [DRY_RUN=1] [EXTRA=...] [SEEDS="0"] [COMPARE_STEPS=100]` calls this (mk/compare.mk).

Data (ours): the 872 real SST-2 validation rows (``<data>/glue/sst2/validation.jsonl``, the hub
schema) shuffled with ``random.Random(0)`` and split into 600 training rows and 272 evaluation rows,
written to ``outputs/compare/sst2/{train,validation}.jsonl`` and read with ``task.data_dir``. No
model selection (nothing is chosen on the evaluation rows): the last state is evaluated.

Runs: every decoder method on ``model=smollm2`` (prompts scored by exact match and by the
log-likelihood of " positive"/" negative"), every encoder method on ``model=minilm`` (a
classification head), each for the same ``--steps`` optimizer steps, batch 8, seeds and data. The
learning rate is each method's own (``LR``, ours: what a method of that kind needs to move in a
hundred steps; no paper fixes a shared one). Not here: ``pete`` (an embedding trained from scratch
with its encoder: `make pete_table` compares it with the standard table on STS-B).
"""

from __future__ import annotations

import argparse
import random
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DECODER = ["zero_shot", "full_ft", "emb_tuning", "pema", "lora", "prompt_tuning", "tinyte_full", "tinyte_half",
           "tinyte_gated", "tinyte_hybrid", "tinyattn", "ktoken", "prompt_compress"]
ENCODER = ["head_only", "full_ft", "emb_tuning", "pema", "lora", "prompt_tuning", "tinyte_full", "tinyte_half",
           "tinyte_gated", "tinyte_hybrid", "tinyattn"]
ELSEWHERE = {"pete": "trained from scratch with its encoder (make pete_table)",
             "repeat_prompt": "a generation-task baseline (TinyTE Table 8: Alpaca), not a classifier"}
LR = {"full_ft": 2e-5, "emb_tuning": 1e-4, "pema": 1e-4, "lora": 1e-3, "tinyattn": 1e-3, "ktoken": 1e-3, "prompt_compress": 1e-3, "head_only": 1e-3,
      "prompt_tuning": 1e-2, "tinyte_full": 1e-2, "tinyte_half": 1e-2, "tinyte_gated": 1e-2, "tinyte_hybrid": 1e-2}
MODELS = {"decoder": ("smollm2", DECODER), "encoder": ("minilm", ENCODER)}
DATA = Path("outputs/compare/sst2")


def split(source: Path, out: Path) -> None:
    """600 train / 272 eval rows of the real SST-2 validation split, seeded shuffle (see the module doc)."""
    if (out / "train.jsonl").is_file() and (out / "validation.jsonl").is_file():
        return
    if not source.is_file():
        raise SystemExit(f"embexp: error: {source} not found (pass --data <dir holding glue/sst2/validation.jsonl>)")
    rows = source.read_text().splitlines()
    random.Random(0).shuffle(rows)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.jsonl").write_text("\n".join(rows[:600]) + "\n")
    (out / "validation.jsonl").write_text("\n".join(rows[600:]) + "\n")


def commands(py: str, seeds: list[int], steps: int, extra: list[str], root: str) -> list[list[str]]:
    out = []
    for seed in seeds:
        for kind, (model, methods) in MODELS.items():
            for method in methods:
                args = [py, "-m", "embexp.train", f"method={method}", f"model={model}", "task=glue", "task.subset=sst2",
                        f"task.data_dir={DATA}", f"seed={seed}", f"output_root={root}", "trainer.resume=true"]
                if method != "zero_shot":
                    args += [f"trainer.max_steps={steps}", "trainer.batch_size=8", f"trainer.lr={LR[method]}"]
                out.append(args + extra)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--py", default=sys.executable)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--data", default="../shared/data", help="folder holding glue/sst2/validation.jsonl (the hub schema)")
    ap.add_argument("--extra", default="")
    ap.add_argument("--split-only", action="store_true", help="write the 600/272 split and stop (make ktoken_learning)")
    a = ap.parse_args(argv)
    if a.split_only:
        split(Path(a.data) / "glue" / "sst2" / "validation.jsonl", REPO / DATA)
        return 0
    extra = shlex.split(a.extra)
    smoke = "debug=smoke" in extra
    root = "outputs/smoke/compare" if smoke else "outputs/compare/runs"
    cmds = commands(a.py, [int(s) for s in a.seeds.split()], a.steps, extra, root)
    if not a.dry_run and not smoke:
        split(Path(a.data) / "glue" / "sst2" / "validation.jsonl", REPO / DATA)
    failed = []
    for cmd in cmds:
        print(shlex.join(cmd), flush=True)
        if not a.dry_run and subprocess.run(cmd, cwd=REPO).returncode != 0:
            failed.append(shlex.join(cmd))
    report = [a.py, "-m", "embexp.report", "table=compare", f"runs={root}", f"out={Path(root).parent / 'tables'}"]
    print(shlex.join(report), flush=True)
    if not a.dry_run:
        subprocess.run(report, cwd=REPO, check=False)
    for f in failed:
        print(f"failed: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
