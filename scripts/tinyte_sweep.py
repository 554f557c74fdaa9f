"""The TinyTE paper's sweeps: one list of commands per table, then the table rendered from the records.

    python scripts/tinyte_sweep.py table1                        # run what is missing, render tables/tinyte/table1.*
    python scripts/tinyte_sweep.py table1 --dry-run              # print the exact commands only
    python scripts/tinyte_sweep.py table1 --extra "debug=smoke"  # append to every command (offline check)

`make table1 [DRY_RUN=1] [EXTRA=...] [SEEDS="0 1 2"] [MODELS="gemma2 qwen25 llama31"]` calls this (mk/tinyte.mk).
Table 6 (safety) passes ``--judge`` (``make table6 HARMBENCH_JUDGE=...``): every run scores its
generations with that HarmBench classifier (``judge.model``), and after the runs
``python -m embexp.judge run_dir=<the first model's vanilla BSD run> what=reference`` scores the
BSD reference responses (the Gold Labels row).
Every cell is an experiment file conf/experiment/tinyte_<cell>_<task>.yaml run as
``python -m embexp.train experiment=... model=... seed=...``; ablations (Tables 4/10) are
``python -m embexp.analyze ablation ...``; Table 9 (and Table 10's NLI rows when --nli-judge is
given) add ``metric=nli|both judge.model=<judge>``. A run whose directory is already complete is skipped
(--force reruns it), so tables that share cells (1, 2, 5, 11) share runs. Zero-shot cells and the
variance-sorted ablation are deterministic: they run for the first seed only (ours).
``tinyte_fig3`` runs the Alpaca cells with the judge overrides of --extra (``judge.model=...``);
a cell that is already complete is judged instead (``python -m embexp.judge run_dir=...``; cached
verdicts cost nothing). A failed command does not stop the sweep; the table is rendered from what finished and the script
exits 1 after listing the failures.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

MODELS = ["gemma2", "qwen25", "llama31"]
GEN_TASKS = ["cnndm", "wmt16"]
SUPERGLUE = ["boolq", "cb", "copa", "rte", "wic"]
CELLS = {  # table -> cells (experiment file stems without the task) on CNN/DM and WMT16
    "table1": ["base", "full", "half", "gated", "hybrid"],
    "table2": ["lora", "emb", "pt1", "pt2", "gated", "hybrid"],
    "table11": ["base", "emb", "lora", "pt1", "pt2", "pt20", "full", "half", "gated", "hybrid"],
}
TABLE5_CELLS = ["lora", "pt1", "full", "half", "hybrid", "gated"]  # Gemma-2 on CNN/DM
ALPACA_CELLS = ["base", "full", "gated", "lora", "pt1"]            # Llama-2-7b (Fig. 3)
# §4.2 sorting heuristics, TinyTE-half on Gemma-2 CNN/DM: (tag, method overrides); variance/lowest is
# the Table 1 cell itself (no tag), random draws its dims with rank_seed = seed (ours)
RANKING_CELLS = [("", []), ("rank_var_high", ["method.select=highest"]), ("rank_random", ["method.ranking=random"]),
                 ("rank_ig_low", ["method.ranking=integrated_gradients"]),
                 ("rank_ig_high", ["method.ranking=integrated_gradients", "method.select=highest"])]
TABLE8_MODELS = ["llama2", "gptj", "qwen25_05b"]  # App. E: the robust baseline, then the two low-robustness models
TABLE6_CELLS = [("base", "bsd"), ("gated", "bsd"), ("gated", "advbench")]  # vanilla, TinyTE-gated, its transfer
HARMBENCH_JUDGE = "cais/HarmBench-Llama-2-13b-cls"
TABLES = ["table1", "table2", "table3", "table4", "table5", "table6", "table9", "table10", "table11", "tinyte_alpaca", "tinyte_fig3", "tinyte_ranking", "table8"]
DEFAULT_NLI_JUDGE = "google/t5_xxl_true_nli_mixture"  # Table 9's judge unless --nli-judge names one (TRUE, Honovich et al. 2022)


def train(exp: str, model: str, seed: int, *more: str) -> list[str]:
    return ["-m", "embexp.train", f"experiment={exp}", f"model={model}", *more, f"seed={seed}"]


def sweep(table: str, models: list[str], seeds: list[int], judge: str = HARMBENCH_JUDGE, nli_judge: str = "") -> list[list[str]]:
    """The module arguments of every command of `table` (without the interpreter and EXTRA); `judge`:
    the HarmBench classifier of Table 6's runs; `nli_judge`: Table 9's judge ('' = DEFAULT_NLI_JUDGE);
    Table 10 scores NLI too only when it is set."""
    first = seeds[:1]
    cmds: list[list[str]] = []
    if table in CELLS:
        for task in GEN_TASKS:
            for model in models:
                for cell in CELLS[table]:
                    cmds += [train(f"tinyte_{cell}_{task}", model, s) for s in (first if cell == "base" else seeds)]
    elif table == "table3":
        for model in models:
            cmds += [train("tinyte_base_superglue", model, s, f"task.subset={sub}") for sub in SUPERGLUE for s in first]
            for cell in ("full", "pt1"):
                for sub in SUPERGLUE + ["all"]:
                    for s in seeds:
                        cmds.append(train(f"tinyte_{cell}_copa", model, s) if sub == "copa"
                                    else train(f"tinyte_{cell}_superglue", model, s, f"task.subset={sub}"))
    elif table in ("table4", "table9", "table10"):
        sorting = "variance" if table == "table10" else "random"
        metric = {"table4": [], "table9": ["metric=nli", f"judge.model={nli_judge or DEFAULT_NLI_JUDGE}"],
                  "table10": ["metric=both", f"judge.model={nli_judge}"] if nli_judge else []}[table]
        for model in models:
            for task in ("wmt16", "cnndm"):
                cmds += [["-m", "embexp.analyze", "ablation", f"model={model}", f"task={task}", f"sorting={sorting}", f"seed={s}", *metric]
                         for s in (seeds if sorting == "random" else first)]
    elif table == "table5":
        cmds += [train(f"tinyte_{cell}_cnndm", "gemma2", s) for cell in TABLE5_CELLS for s in seeds]
    elif table == "table6":
        for model in models:
            for cell, task in TABLE6_CELLS:
                cmds += [train(f"tinyte_{cell}_{task}", model, s, f"judge.model={judge}") for s in (first if cell == "base" else seeds)]
    elif table in ("tinyte_alpaca", "tinyte_fig3"):
        cmds += [train(f"tinyte_{cell}_alpaca", "llama2", s) for cell in ALPACA_CELLS for s in (first if cell == "base" else seeds)]
    elif table == "tinyte_ranking":
        for tag, more in RANKING_CELLS:
            for s in seeds:
                rs = [f"method.rank_seed={s}"] if "method.ranking=random" in more else []
                cmds.append(train("tinyte_half_cnndm", "gemma2", s, *more, *rs, *([f"tag={tag}"] if tag else [])))
    elif table == "table8":
        for model in TABLE8_MODELS:
            cmds += [train("tinyte_full_alpaca", model, s) for s in seeds]
            cmds.append(["-m", "embexp.analyze", "ablation", f"model={model}", "task=alpaca", "sorting=variance", "ps=[0,0.3]", f"seed={first[0]}"])
        cmds += [train("tinyte_base_alpaca", "llama2", s, "method=repeat_prompt") for s in first]  # deterministic
    else:
        raise SystemExit(f"unknown table '{table}' (choose from: {', '.join(TABLES)})")
    return cmds


def report_args(table: str, extra: list[str], out: str) -> list[str]:
    """The report command: EXTRA's debug=... passes through, output_root=X becomes runs=X."""
    name = table.replace("table", "").replace("tinyte_", "")  # table8 -> 8, tinyte_ranking -> ranking
    args = ["-m", "embexp.report", f"table={name}"] + [e for e in extra if e.startswith("debug=")]
    root = [e.split("=", 1)[1] for e in extra if e.startswith("output_root=")]
    args += [f"runs={root[-1]}"] if root else []
    return args + ([f"out={out}"] if out else ([f"out={root[-1]}/tables/tinyte"] if root else []))


def run_dir(args: list[str]) -> Path:
    """The run directory of an embexp.train command (its overrides, EXTRA included)."""
    from embexp.config import run_name
    from embexp.studies import compose_train

    c = compose_train([a for a in args[2:] if "=" in a])
    return Path(run_name(c.output_root, c.task.name, c.task.subset, c.model.name, c.method.name, c.tag, c.seed))


def after(table: str, models: list[str], seeds: list[int], extra: list[str], judge: str = HARMBENCH_JUDGE) -> list[list[str]]:
    """Commands that read finished runs, run after the sweep and before the report: Table 6's Gold
    Labels row judges the BSD reference responses of the first model's vanilla run (the 1000 requests
    do not depend on the model). They get no EXTRA: the run directory carries the config."""
    if table != "table6" or not models:
        return []
    d = run_dir(train("tinyte_base_bsd", models[0], seeds[0], f"judge.model={judge}") + extra)
    return [["-m", "embexp.judge", f"run_dir={d}", "what=reference", f"judge.model={judge}"]]


def done(args: list[str]) -> str:
    """The run directory (or ablation folder) of a command when it already finished, else ''."""
    from embexp import EmbexpError
    from embexp.studies import compose_train
    from embexp.results import is_complete

    if args[1] == "embexp.train":
        try:
            d = run_dir(args)
        except EmbexpError:  # e.g. a method this checkout lacks: run it, and let the run say why
            return ""
        return str(d) if is_complete(d) else ""
    if args[1] == "embexp.judge":  # the Gold Labels row: done once metrics.json holds asr_reference
        d = Path(args[2].split("=", 1)[1])
        m = d / "metrics.json"
        return str(d) if m.is_file() and "asr_reference" in json.loads(m.read_text()).get("metrics", {}) else ""
    kv = dict(a.split("=", 1) for a in args[3:] if "=" in a)
    c = compose_train([f"model={kv['model']}", f"task={kv['task']}"] + [f"{k}={kv[k]}" for k in ("debug", "output_root") if kv.get(k)])
    task = f"{c.task.name}_{c.task.subset}" if c.task.subset else c.task.name
    d = Path(c.output_root) / "analysis" / "ablation" / task / c.model.name / f"{kv.get('sorting', 'random')}_seed{kv.get('seed', 0)}"
    try:
        s = json.loads((d / "summary.json").read_text())
    except (OSError, ValueError):
        return ""
    need = {"bleu": ["bleu"], "nli": ["nli"], "both": ["bleu", "nli"]}.get(kv.get("metric", "bleu"), ["bleu"])
    if any(k not in s for k in need) or ("nli" in need and s.get("nli_judge") != kv.get("judge.model")):
        return ""  # the folder lacks this command's metric (or has another judge's verdicts): run it (generations are reused)
    return str(d)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", choices=TABLES)
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--extra", default="", help="overrides appended to every training/analysis command (e.g. 'debug=smoke'); the report gets debug= and output_root=, the judge command none")
    ap.add_argument("--seeds", default="0", help="space-separated seeds (the paper reports one run per cell)")
    ap.add_argument("--models", default=" ".join(MODELS), help="space-separated model config names")
    ap.add_argument("--py", default=sys.executable, help="the Python interpreter of the commands")
    ap.add_argument("--launch", default="", help="prefix for training instead of '<py> -m' (e.g. 'accelerate launch -m')")
    ap.add_argument("--out", default="", help="table folder passed to embexp.report (default: tables/tinyte, or <output_root>/tables/tinyte with debug)")
    ap.add_argument("--force", action="store_true", help="rerun cells whose run directory is complete")
    ap.add_argument("--judge", default=HARMBENCH_JUDGE, help="table6: the HarmBench judge (judge.model: a hub id, a local folder or a conf/model name such as tiny_llama)")
    ap.add_argument("--nli-judge", default="", help=f"NLI judge of Table 9 (default {DEFAULT_NLI_JUDGE}); set, it adds Table 10's NLI rows (metric=both)")
    a = ap.parse_args(argv)
    extra = shlex.split(a.extra)
    seeds = [int(s) for s in a.seeds.split()]
    models = a.models.split()

    def line(args: list[str]) -> list[str]:
        if a.launch and args[1] == "embexp.train":
            return shlex.split(a.launch) + args[1:] + extra
        return [a.py] + args + (extra if args[1] not in ("embexp.report", "embexp.judge") else [])

    cmds = sweep(a.table, models, seeds, a.judge, a.nli_judge)
    cmds += after(a.table, models, seeds, extra, a.judge)
    final = report_args(a.table, extra, a.out)
    if a.dry_run:
        for args in cmds + [final]:
            print(shlex.join(line(args)))
        return 0
    failed, t0 = [], time.perf_counter()
    for i, args in enumerate(cmds, 1):
        cmd = line(args)
        prev = "" if a.force else done(args + extra)
        if prev and a.table == "tinyte_fig3":  # a finished run: judge it (python -m embexp.judge), no retraining
            cmd = [a.py, "-m", "embexp.judge", f"run_dir={prev}"] + [e for e in extra if e.startswith("judge.")]
            print(f"[{i}/{len(cmds)}] {shlex.join(cmd)}", flush=True)
            if subprocess.run(cmd).returncode != 0:
                failed.append(shlex.join(cmd))
            continue
        if prev:
            print(f"[{i}/{len(cmds)}] skip (complete): {prev}", flush=True)
            continue
        print(f"[{i}/{len(cmds)}] {shlex.join(cmd)}", flush=True)
        if subprocess.run(cmd).returncode != 0:
            failed.append(shlex.join(cmd))
    subprocess.run(line(final))
    print(f"{a.table}: {len(cmds) - len(failed)}/{len(cmds)} commands ok in {time.perf_counter() - t0:.0f} s")
    for f in failed:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
