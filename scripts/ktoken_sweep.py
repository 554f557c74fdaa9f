"""The K-Token Merging paper's sweeps: the commands behind one table, then the table from the records.

    python scripts/ktoken_sweep.py table1                         # run what is missing, print the table
    python scripts/ktoken_sweep.py table1 --dry-run               # print the exact commands only
    python scripts/ktoken_sweep.py table1 --extra "debug=smoke"   # append to every command (offline check)

`make ktoken_table1 [DRY_RUN=1] [EXTRA=...] [SEEDS="42"]` calls this (mk/ktoken.mk). Tables 1-3 (tree,
amazon, commitpack) run the same columns on the paper's backbone (model=qwen25_05b) with the authors'
recipe (AdamW lr 1e-4, no schedule, seed 42, one epoch; LoRA r=4/alpha=16/dropout 0.05 on
q/k/v/o/gate/up/down and lm_head for every column): uncompressed LoRA, SelectiveContext and
LLMLingua-2 (method=prompt_compress, with method.rate set to the reduction the paper measured for
that baseline on that task; ours), and K-Token merging with K = 2, 3, 4. The tree runs the paper's
six-stage curriculum to x3large. ``ablation`` is Fig. 6: average vs random initialisation (K=4,
x3large, ten one-epoch rounds, the generated answer's accuracy after each). LTSC (another paper's
method) is not run. A run whose metrics.json exists is skipped (tree runs cannot resume: a
curriculum keeps no checkpoints).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from embexp.tasks.metrics import pl_from_accuracy, pl_from_perplexity  # noqa: E402

MODEL = "qwen25_05b"
AUTHORS_LORA = ["method.r=4", "method.alpha=16", "method.dropout=0.05",
                "method.target_modules=[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,lm_head]"]
RECIPE = ["trainer.lr=1e-4", "trainer.scheduler=constant", "trainer.warmup_steps=0", "trainer.epochs=1"]
STAGES = "[small,xsmall,medium,xmedium,large,x3large]"
# table -> (task overrides, task dir, per-device batch size (the authors': amazon 2, commitpack 12, tree x3large 16))
TASKS = {
    "table1": (["task=tree", "task.subset=x3large", f"trainer.curriculum={STAGES}"], "tree_x3large", 16),
    "table2": (["task=amazon"], "amazon_Amazon_Fashion", 2),
    "table3": (["task=commitpack"], "commitpack_python", 12),
}
# the paper's measured reductions of the two hard-compression baselines (Tables 1-3), used as method.rate
BASELINE_RATE = {"table1": {"selective_context": 0.525, "llmlingua2": 0.27},
                 "table2": {"selective_context": 0.446, "llmlingua2": 0.51},
                 "table3": {"selective_context": 0.399, "llmlingua2": 0.30}}
# the paper's rows, as printed: column -> (accuracy or perplexity, length reduction)
PAPER = {
    "table1": {"uncompressed": (99.97, 0.0), "selective_context": (90.43, 52.5), "llmlingua2": (82.17, 27.0),
               "k2": (99.91, 50.0), "k3": (98.63, 66.7), "k4": (98.38, 75.0)},
    "table2": {"uncompressed": (93.54, 0.0), "selective_context": (91.30, 44.6), "llmlingua2": (91.49, 51.0),
               "k2": (92.51, 50.0), "k3": (92.23, 66.7), "k4": (91.05, 75.0)},
    "table3": {"uncompressed": (1.293, 0.0), "selective_context": (1.380, 39.9), "llmlingua2": (1.381, 30.0),
               "k2": (1.343, 50.0), "k3": (1.382, 66.7), "k4": (1.391, 75.0)},
}
TABLES = ["table1", "table2", "table3", "ablation"]


def cells(table: str) -> list[tuple[str, str, list[str]]]:
    """(column tag, method, method overrides) in run order."""
    if table == "ablation":
        return [(f"init_{i}", "ktoken", ["method=ktoken", "method.k=4", f"method.init={i}"]) for i in ("average", "random")]
    if table not in TASKS:
        raise SystemExit(f"embexp: error: unknown table '{table}' (choose from: {', '.join(TABLES)})")
    out = [("uncompressed", "lora", ["method=lora", *AUTHORS_LORA])]
    for comp, rate in BASELINE_RATE[table].items():
        out.append((comp, "prompt_compress", ["method=prompt_compress", f"method.compressor={comp}", f"method.rate={rate}"]))
    out += [(f"k{k}", "ktoken", ["method=ktoken", f"method.k={k}"]) for k in (2, 3, 4)]
    return out


def task_args(table: str) -> tuple[list[str], str]:
    if table == "ablation":  # ten one-epoch rounds of the last stage, never passing: accuracy after each epoch
        return (["task=tree", "task.subset=x3large", "trainer.curriculum=[x3large]", "trainer.curriculum_max_rounds=10",
                 "trainer.curriculum_final_gate=101", "trainer.batch_size=16"], "tree_x3large")
    args, tdir, bs = TASKS[table]
    return [*args, f"trainer.batch_size={bs}"], tdir


def command(py: str, table: str, tag: str, margs: list[str], seed: int, extra: list[str]) -> list[str]:
    targs, _ = task_args(table)
    return [py, "-m", "embexp.train", *margs, f"model={MODEL}", *targs, *RECIPE, f"seed={seed}", f"tag={tag}", *extra]


def output_root(extra: list[str]) -> Path:
    root = next((a.split("=", 1)[1] for a in extra if a.startswith("output_root=")), None)
    return REPO / (root or ("outputs/smoke" if "debug=smoke" in extra else "outputs"))


def record(root: Path, table: str, method: str, tag: str, seed: int) -> dict | None:
    _, tdir = task_args(table)
    path = root / tdir / MODEL / f"{method}_{tag}" / f"seed{seed}" / "metrics.json"
    return json.loads(path.read_text()) if path.is_file() else None


def mean(vals):
    return sum(vals) / len(vals) if vals else None


def render(table: str, root: Path, seeds: list[int]) -> str:
    if table == "ablation":
        out = [f"ablation (Fig. 6): K=4 on tree x3large, generated-answer accuracy after each epoch; seeds {seeds}", "",
               "| init | " + " | ".join(f"ep{i}" for i in range(1, 11)) + " |", "|---|" + "---:|" * 10]
        for tag, method, _ in cells(table):
            curves = [[h["em_accuracy"] for h in r["train"]["history"] if "round" in h]
                      for s in seeds if (r := record(root, table, method, tag, s))]
            row = [mean([c[i] for c in curves if len(c) > i]) for i in range(10)]
            out.append(f"| {tag[5:]} | " + " | ".join("-" if v is None else f"{v:.1f}" for v in row) + " |")
        return "\n".join(out)
    ppl = table == "table3"
    metric = "perplexity" if ppl else "em_accuracy"
    got = {}
    for tag, method, _ in cells(table):
        recs = [r["metrics"] for s in seeds if (r := record(root, table, method, tag, s))]
        got[tag] = (mean([m[metric] for m in recs]), mean([m["length_reduction"] for m in recs]))
    base = got["uncompressed"][0]
    out = [f"{table} ({'perplexity' if ppl else 'accuracy'}, length reduction %, P-L; mean over seeds {seeds}; paper in brackets)", "",
           "| column | " + ("perplexity" if ppl else "accuracy") + " | reduction | P-L |", "|---|---:|---:|---:|"]
    for tag, (perf, red) in got.items():
        p_perf, p_red = PAPER[table][tag]
        p_pl = pl_from_perplexity(p_perf, PAPER[table]["uncompressed"][0], p_red) if ppl else pl_from_accuracy(p_perf, p_red)
        if perf is None:
            out.append(f"| {tag} | - [{p_perf}] | - [{p_red}] | - [{p_pl:.3f}] |")
            continue
        pl = (pl_from_perplexity(perf, base, max(red, 0.0)) if base is not None else None) if ppl else pl_from_accuracy(perf, max(red, 0.0))
        fmt = "{:.3f}" if ppl else "{:.2f}"
        out.append(f"| {tag} | {fmt.format(perf)} [{p_perf}] | {red:.1f} [{p_red}] | "
                   f"{'-' if pl is None else f'{pl:.3f}'} [{p_pl:.3f}] |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", choices=TABLES)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--py", default=sys.executable)
    ap.add_argument("--seeds", default="42")
    ap.add_argument("--extra", default="")
    a = ap.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split()]
    extra = shlex.split(a.extra)
    root = output_root(extra)
    failed = []
    for seed in seeds:
        for tag, method, margs in cells(a.table):
            cmd = command(a.py, a.table, tag, margs, seed, extra)
            print(shlex.join(cmd), flush=True)
            if a.dry_run or record(root, a.table, method, tag, seed) is not None:
                continue
            if subprocess.run(cmd, cwd=REPO).returncode != 0:
                failed.append(shlex.join(cmd))
    if a.dry_run:
        return 0
    print(render(a.table, root, seeds))
    for f in failed:
        print(f"failed: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
