"""The K-Token Merging paper's sweeps: the commands behind one table, then the table from the records.

    python scripts/ktoken_sweep.py table1                         # run what is missing, print the table
    python scripts/ktoken_sweep.py table1 --dry-run               # print the exact commands only
    python scripts/ktoken_sweep.py table1 --extra "debug=smoke"   # append to every command (offline check)

`make ktoken_table1 [DRY_RUN=1] [EXTRA=...] [SEEDS="42"]` calls this (mk/ktoken.mk). Tables 1-3 (tree,
amazon, commitpack) run the same columns on the paper's backbone (model=qwen25_05b) with the authors'
recipe (AdamW lr 1e-4, weight decay 0.01, no clipping, no schedule, one epoch; LoRA r=4/alpha=16/dropout 0.05 on
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
import math
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
# the authors' optimiser: torch AdamW with only the lr given (weight decay 0.01, its default), no clipping
RECIPE = ["trainer.lr=1e-4", "trainer.scheduler=constant", "trainer.warmup_steps=0", "trainer.epochs=1",
          "trainer.weight_decay=0.01", "trainer.max_grad_norm=0"]
STAGES = "[small,xsmall,medium,xmedium,large,x3large]"
TASKS = {
    "table1": (["task=tree", "task.subset=x3large", f"trainer.curriculum={STAGES}"], "tree_x3large"),
    "table2": (["task=amazon"], "amazon_Amazon_Fashion"),
    "table3": (["task=commitpack"], "commitpack_python"),
}
# Batch: the authors' README trains on 4 GPUs with --grad-accum-steps 4 (effective = per-GPU x 4 x 4);
# per-GPU sizes from their HEAD (8d29f47): amazon 3, commitpack 3 (26c181b; 2 and 12 before), the tree
# per stage from run.py's table (K=4 and K=2/3). We run one device: the same per-device batch with
# accumulation 16 (ours), so the effective batch is the authors'. The baselines on the tree (the authors
# publish none) use the K=2/3 table (ours).
DEVICES_AUTHORS, ACCUM_AUTHORS, GRAD_ACCUM = 4, 4, 16
PER_DEVICE = {"table2": 3, "table3": 3, "ablation": 16}
TREE_STAGE_BATCH = {4: [320, 320, 192, 128, 48, 16], 2: [282, 192, 144, 96, 48, 16], 3: [282, 192, 144, 96, 48, 16]}
# Tree size per stage. paper (default): the paper's 2.45M training and 50k test questions, i.e. 500k trees
# (the authors' count) x 5 questions (task.max_pairs_per_tree=5), 10k test trees; the gate's 10k held-out
# trees (task.select_size; item 6) come out of the 500k, leaving 490k trained trees = 2.45M questions on
# x3large (smaller stages have trees with fewer than 5 pairs). small (ours): 1% of that, 4,900 trained trees.
TREE_SIZES = {
    "paper": ["task.num_train_trees=500000", "task.num_eval_trees=10000", "task.max_pairs_per_tree=5", "task.select_size=10000"],
    "small": ["task.num_train_trees=5000", "task.num_eval_trees=100", "task.max_pairs_per_tree=5", "task.select_size=100"],
}
# trainer.select_on=reported: the authors' curriculum gate on the stage's test split (tree tables only;
# tags get PAPER_TAG, the table marks the cells)
PAPER_TAG, MARK = "_paper", "\u2020"
MARK_NOTE = f"{MARK} paper protocol: the curriculum gate selected on the reported split (trainer.select_on=reported)"
# the paper's measured reductions of the two hard-compression baselines (Tables 1-3), used as method.rate
BASELINE_RATE = {"table1": {"selective_context": 0.525, "llmlingua2": 0.27},
                 "table2": {"selective_context": 0.446, "llmlingua2": 0.51},
                 "table3": {"selective_context": 0.399, "llmlingua2": 0.30}}
# the paper's rows, as printed (each the best of three runs): column -> (accuracy or perplexity, length reduction)
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


def tree_table(table: str) -> bool:
    return table in ("table1", "ablation")


def budget(table: str, tag: str) -> list[str]:
    """The cell's batch: per-device size(s) and accumulation (see PER_DEVICE, TREE_STAGE_BATCH)."""
    if table == "table1":
        k = int(tag[1]) if tag in ("k2", "k3", "k4") else 2
        return [f"trainer.curriculum_batch_size=[{','.join(map(str, TREE_STAGE_BATCH[k]))}]",
                f"trainer.batch_size={TREE_STAGE_BATCH[k][-1]}", f"trainer.grad_accum={GRAD_ACCUM}"]
    return [f"trainer.batch_size={PER_DEVICE[table]}", f"trainer.grad_accum={GRAD_ACCUM}"]


def task_args(table: str) -> tuple[list[str], str]:
    if table == "ablation":  # ten one-epoch rounds of the last stage, never passing: accuracy after each epoch
        return (["task=tree", "task.subset=x3large", "trainer.curriculum=[x3large]", "trainer.curriculum_max_rounds=10",
                 "trainer.curriculum_final_gate=101"], "tree_x3large")
    args, tdir = TASKS[table]
    return list(args), tdir


def smoke(extra: list[str]) -> bool:
    """debug=smoke replaces the budget (batch, accumulation, tree size) with its own."""
    return "debug=smoke" in extra


def command(py: str, table: str, tag: str, margs: list[str], seed: int, extra: list[str], tree_size: str = "paper",
            select_on: str = "heldout") -> list[str]:
    targs, _ = task_args(table)
    size = TREE_SIZES[tree_size] if tree_table(table) and not smoke(extra) else []
    batch = [] if smoke(extra) else budget(table, tag)
    paper = ["trainer.select_on=reported", "task.select_split="] if select_on == "reported" else []
    return [py, "-m", "embexp.train", *margs, f"model={MODEL}", *targs, *size, *batch, *RECIPE, *paper, f"seed={seed}",
            f"tag={tag}{PAPER_TAG if select_on == 'reported' else ''}", *extra]


def output_root(extra: list[str]) -> Path:
    root = next((a.split("=", 1)[1] for a in extra if a.startswith("output_root=")), None)
    return REPO / (root or ("outputs/smoke" if "debug=smoke" in extra else "outputs"))


def record(root: Path, table: str, method: str, tag: str, seed: int) -> dict | None:
    _, tdir = task_args(table)
    path = root / tdir / MODEL / f"{method}_{tag}" / f"seed{seed}" / "metrics.json"
    return json.loads(path.read_text()) if path.is_file() else None


def mean(vals):
    return sum(vals) / len(vals) if vals else None


def stderr(vals):
    """Standard error of the mean (sample s.d. / sqrt(n)); None below two runs."""
    if len(vals) < 2:
        return None
    m = mean(vals)
    return math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1) / len(vals))


def batch_text(recs: list[dict]) -> str:
    """The effective batch the records trained with (metrics.json train.effective_batch; per stage: a/b/..)."""
    seen = []
    for r in recs:
        eff = r.get("train", {}).get("effective_batch")
        txt = "-" if eff is None else "/".join(map(str, eff)) if isinstance(eff, list) else str(eff)
        if txt not in seen:
            seen.append(txt)
    return " or ".join(seen) if seen else "-"


def render(table: str, root: Path, seeds: list[int], select_on: str = "heldout") -> str:
    suffix, marked = PAPER_TAG if select_on == "reported" else "", False
    if table == "ablation":
        out = [f"ablation (Fig. 6): K=4 on tree x3large, the gate rows' generated-answer accuracy after each epoch, "
               f"mean over the runs found (seeds {seeds})", "",
               "| init | runs | eff. batch | " + " | ".join(f"ep{i}" for i in range(1, 11)) + " |", "|---|---:|---:|" + "---:|" * 10]
        for tag, method, _ in cells(table):
            recs = [r for s in seeds if (r := record(root, table, method, tag + suffix, s))]
            curves = [[h["em_accuracy"] for h in r["train"]["history"] if "round" in h] for r in recs]
            row = [mean([c[i] for c in curves if len(c) > i]) for i in range(10)]
            mark = f" {MARK}" if any(r.get("select_on") == "reported" for r in recs) else ""
            marked = marked or bool(mark)
            out.append(f"| {tag[5:]}{mark} | {len(recs)} | {batch_text(recs)} | "
                       + " | ".join("-" if v is None else f"{v:.1f}" for v in row) + " |")
        if marked:
            out += ["", MARK_NOTE]
        return "\n".join(out)
    ppl = table == "table3"
    metric = "perplexity" if ppl else "em_accuracy"
    best_of = min if ppl else max
    got = {}
    for tag, method, _ in cells(table):
        recs = [r for s in seeds if (r := record(root, table, method, tag + suffix, s))]
        got[tag] = recs
    base_recs = got["uncompressed"]
    base_best = best_of([r["metrics"][metric] for r in base_recs]) if base_recs else None
    name = "perplexity" if ppl else "accuracy"
    fmt = "{:.3f}" if ppl else "{:.2f}"
    out = [f"{table}: {name}, length reduction %, P-L; seeds {seeds}; the paper's figure in brackets", "",
           f"| column | {name}: best of N | {name}: mean \u00b1 s.e. | N | eff. batch | reduction (measured) | P-L (best run) |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for tag, recs in got.items():
        p_perf, p_red = PAPER[table][tag]
        p_pl = pl_from_perplexity(p_perf, PAPER[table]["uncompressed"][0], p_red) if ppl else pl_from_accuracy(p_perf, p_red)
        mark = f" {MARK}" if any(r.get("select_on") == "reported" for r in recs) else ""
        marked = marked or bool(mark)
        if not recs:
            out.append(f"| {tag} | - [{p_perf}] | - | 0 | - | - [{p_red}] | - [{p_pl:.3f}] |")
            continue
        vals = [r["metrics"][metric] for r in recs]
        best = next(r["metrics"] for r in recs if r["metrics"][metric] == best_of(vals))
        red = mean([r["metrics"]["length_reduction"] for r in recs])
        b_red = max(best["length_reduction"], 0.0)
        pl = ((pl_from_perplexity(best[metric], base_best, b_red) if base_best is not None else None) if ppl
              else pl_from_accuracy(best[metric], b_red))
        se = stderr(vals)
        out.append(f"| {tag}{mark} | {fmt.format(best[metric])} [{p_perf}] | {fmt.format(mean(vals))} \u00b1 "
                   f"{'-' if se is None else fmt.format(se)} | {len(recs)} | {batch_text(recs)} | {red:.1f} [{p_red}] | "
                   f"{'-' if pl is None else f'{pl:.3f}'} [{p_pl:.3f}] |")
    out += ["", "best of N: the paper's protocol (each cell the best of three runs), i.e. the run chosen by its reported "
                "score; mean \u00b1 s.e. over the same N runs (s.e. = sample s.d./sqrt(N), '-' below two) is the figure "
                "that does not select on the reported split.",
            "eff. batch: per-device batch x trainer.grad_accum x devices, from each record (a/b/...: per curriculum stage).",
            "reduction: measured on the evaluated prompts (mean over the N runs; P-L uses the best run's). For "
            "selective_context and llmlingua2, method.rate is an input set to the paper's measured reduction for that "
            "baseline and task, so their reduction is near the paper's by construction, not a finding."]
    if marked:
        out.append(MARK_NOTE)
    return "\n".join(out)


def budget_note(table: str, extra: list[str], tree_size: str) -> str:
    """The effective batch of each cell, as the dry run prints it."""
    if smoke(extra):
        return "debug=smoke: its own batch and tree size"
    if table == "table1":
        per = {k: "/".join(str(b * GRAD_ACCUM) for b in TREE_STAGE_BATCH[k]) for k in (4, 2)}
        eff = f"effective batch per stage {per[4]} (K=4), {per[2]} (K=2/3 and the baselines, ours)"
    else:
        eff = f"effective batch {PER_DEVICE[table] * GRAD_ACCUM}"
    note = (f"{eff} = per-device x grad_accum {GRAD_ACCUM} x 1 device (the authors: per-GPU x {DEVICES_AUTHORS} GPUs "
            f"x accumulation {ACCUM_AUTHORS})")
    if tree_table(table):
        note += f"; tree size '{tree_size}': " + " ".join(TREE_SIZES[tree_size])
    return note


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", choices=TABLES)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--py", default=sys.executable)
    ap.add_argument("--seeds", default="42")
    ap.add_argument("--extra", default="")
    ap.add_argument("--tree-size", default="paper", choices=sorted(TREE_SIZES),
                    help="tree tables: trees per stage (paper: 2.45M training questions; small: ours, 1%% of it)")
    ap.add_argument("--select-on", default="heldout", choices=("heldout", "reported"),
                    help="tree tables: the curriculum gate reads held-out trees (ours) or the test split (the authors')")
    a = ap.parse_args(argv)
    if a.select_on == "reported" and not tree_table(a.table):
        raise SystemExit(f"embexp: error: --select-on reported is the tree curriculum's gate; {a.table} selects nothing "
                         "(choose from: table1, ablation)")
    seeds = [int(s) for s in a.seeds.split()]
    extra = shlex.split(a.extra)
    root = output_root(extra)
    if a.dry_run:
        print(f"# {a.table}: seeds {seeds} (N={len(seeds)}; the paper: best of 3 runs); " + budget_note(a.table, extra, a.tree_size),
              flush=True)
    failed = []
    suffix = PAPER_TAG if a.select_on == "reported" else ""
    for seed in seeds:
        for tag, method, margs in cells(a.table):
            cmd = command(a.py, a.table, tag, margs, seed, extra, a.tree_size, a.select_on)
            print(shlex.join(cmd), flush=True)
            if a.dry_run or record(root, a.table, method, tag + suffix, seed) is not None:
                continue
            if subprocess.run(cmd, cwd=REPO).returncode != 0:
                failed.append(shlex.join(cmd))
    if a.dry_run:
        return 0
    print(render(a.table, root, seeds, a.select_on))
    for f in failed:
        print(f"failed: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
