"""Render paper tables from run records: ``python -m embexp.report table=<n> [key=value ...]``.

    python -m embexp.report table=1                     # tables/tinyte/table1.md + .csv from outputs/
    python -m embexp.report table=all                   # every TinyTE table (what `make tables` runs)
    python -m embexp.report table=11 se=seeds           # ± across seeds instead of the test examples
    python -m embexp.report table=4 debug=smoke         # read outputs/smoke, write outputs/smoke/tables/tinyte

Tables (tinyte.md): 1 (TinyTE variants vs base), 2 (vs PEFT baselines), 3 (SuperGLUE individual vs
multitask), 4 and 10 (embedding ablation, random / variance sorting, with Figures 5 and 7 as PNG),
5 (ROUGE-L by input length, Gemma-2), 11 (Tables 1+2 with standard errors), alpaca (our ROUGE table
for the Alpaca runs of Fig. 3). Cells come from finished runs only; a missing cell stays empty, and
several seeds are averaged. #TP is the run record's ``n_method_params``.

R-L (Tables 1, 2, 5, 11) is the cnndm task's ``rougeLsum``: summary-level ROUGE-L over sentences
split the same way on both sides (``embexp.tasks.cnndm.split_sentences``), the variant CNN/DM
evaluations report and the scale of the paper's numbers; sentence-level ``rougeL`` is an extra column
(``rougeL``) of Tables 1, 2 and 11. Runs recorded before ``rougeLsum`` existed leave R-L empty.
The Alpaca table's R-L is sentence-level ``rougeL`` (the instruction-tuning convention), with
``rougeLsum`` as R-Lsum.

Standard errors (``se``): seeds = the standard error of the mean across seeds (needs >= 2 seeds);
examples = the uncertainty from the test examples of each run, as the paper's Table 11 reports it
(one run per cell): the task's recorded ``<metric>_stderr`` (ROUGE), a bootstrap over sentences for
corpus BLEU/TER (sacreBLEU's sentence statistics, ``bootstrap_iters`` resamples, cached in
``<out>/.se_cache.json``), the binomial s.e. for accuracies; with several seeds, their mean / sqrt(n).
auto = seeds where a cell has >= 2 seeds, else examples. The default (``se=``) is each table's own:
examples for Table 11 (so a one-seed sweep fills every ±), seeds elsewhere. Every CSV has a
``<column> se`` column.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embexp import EmbexpError, cli
from embexp.analysis import collect_runs, debug_output_root, markdown, method_label
from embexp.config import f
from embexp.results import atomic_write

TABLES = ("1", "2", "3", "4", "5", "10", "11", "alpaca")
DISPLAY = {"gemma2": "Gemma-2", "qwen25": "Qwen-2.5", "llama31": "Llama-3.1", "llama2": "Llama-2-7b"}
SUPERGLUE = [("boolq", "BoolQ"), ("copa", "Copa"), ("cb", "CB"), ("rte", "RTE"), ("wic", "WIC")]


@dataclass
class Config:
    table: str = f("all", "Which table: " + ", ".join(TABLES) + ", or all.")
    runs: str = f("", "Root of the run directories ('' = outputs, or the debug preset's output_root).")
    out: str = f("", "Folder for <table>.md/.csv/.png ('' = tables/tinyte, or <output_root>/tables/tinyte with debug=...).")
    models: list = f(["gemma2", "qwen25", "llama31"], "Model config names, in row order.")
    length_model: str = f("gemma2", "Table 5: the model whose CNN/DM runs are bucketed (the paper: Gemma-2).")
    se: str = f("", "Standard errors: seeds, examples, auto (seeds where >= 2, else examples), none, or '' = each table's default: examples for Table 11 (the paper's test-example s.e.; one run per cell), seeds elsewhere. See the module doc.")
    bootstrap_iters: int = f(100, "se=examples: bootstrap resamples for corpus BLEU/TER (lm-eval uses 100 for BLEU/TER).")
    debug: str = f("", "A conf/debug preset: read its output_root (smoke: outputs/smoke) and write tables under it.")


# ---- cells -----------------------------------------------------------------------------------------
class Runs:
    """Finished runs indexed by (task family, subset, model, method, tag)."""

    def __init__(self, runs: list[dict]):
        self.by_key: dict[tuple, list[dict]] = {}
        for r in runs:
            self.by_key.setdefault((r["task_name"], r["subset"], r["model"], r["method"], r["tag"]), []).append(r)

    def get(self, task: str, model: str, method: str, tag: str = "", subset: str | None = None) -> list[dict]:
        return sorted((r for (t, s, mo, me, tg), rs in self.by_key.items() for r in rs
                       if t == task and mo == model and me == method and tg == tag and (subset is None or s == subset)),
                      key=lambda r: r.get("seed", 0))


SE_MODES = ("seeds", "examples", "auto", "none")
TABLE_SE = {"11": "examples"}  # each table's default standard error; seeds for the others


class SE:
    """Standard-error policy (see the module doc), with a cache for the bootstraps."""

    def __init__(self, mode: str, iters: int, cache: Path):
        if mode not in SE_MODES:
            raise EmbexpError(f"unknown se '{mode}' (choose from: {', '.join(SE_MODES)}, or empty for each table's default)")
        self.mode, self.iters, self.path = mode, iters, cache
        self.cache = json.loads(cache.read_text()) if cache.is_file() else {}

    def __call__(self, runs: list[dict], metric: str, values: list[float]) -> float | None:
        if self.mode == "none" or not values:
            return None
        if self.mode == "seeds" or (self.mode == "auto" and len(values) >= 2):
            return float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) >= 2 else None
        per = [self.example_se(r, metric) for r in runs]
        per = [s for s in per if s is not None]
        return float(np.mean(per) / math.sqrt(len(per))) if per else None

    def example_se(self, run: dict, metric: str) -> float | None:
        m = run["metrics"]
        if f"{metric}_stderr" in m:
            return m[f"{metric}_stderr"]
        if metric.endswith("accuracy") and m.get(metric) is not None:
            n = max(1, run.get("n_eval_examples", 0))
            p = m[metric] / 100.0
            return 100.0 * math.sqrt(p * (1 - p) / n)
        if metric in ("bleu", "ter"):
            key = f"{run['run_dir']}|{metric}|{self.iters}|{Path(run['run_dir'], 'metrics.json').stat().st_mtime}"
            if key not in self.cache:
                self.cache[key] = bootstrap_se(Path(run["run_dir"]), metric, self.iters)
                self.path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(self.path, json.dumps(self.cache, indent=1))
            return self.cache[key]
        return None


def bootstrap_se(run_dir: Path, metric: str, iters: int, seed: int = 0) -> float | None:
    """Bootstrap s.e. of corpus BLEU/TER over the sentences of predictions.jsonl (stripped, as the
    wmt16 task scores them): sentence statistics are extracted once and resampled."""
    from sacrebleu.metrics import BLEU, TER

    from embexp.analysis.lengths import read_predictions

    recs = [r for r in read_predictions(run_dir) if "generation" in r]
    if len(recs) < 2:
        return None
    scorer = BLEU() if metric == "bleu" else TER()
    stats = np.array(scorer._extract_corpus_statistics([r["generation"].strip() for r in recs], [[r["target"].strip() for r in recs]]))
    rng = np.random.default_rng(seed)
    n = len(recs)
    scores = [scorer._compute_score_from_stats(stats[rng.integers(0, n, n)].sum(0).tolist()).score for _ in range(iters)]
    return float(np.std(scores, ddof=1))


def cell(runs: list[dict], metric: str, se: SE) -> tuple[float | None, float | None]:
    values = [r["metrics"][metric] for r in runs if r["metrics"].get(metric) is not None]
    if not values:
        return None, None
    return float(np.mean(values)), se([r for r in runs if r["metrics"].get(metric) is not None], metric, values)


def n_params(*groups: list[dict]):
    for runs in groups:
        for r in runs:
            return r.get("n_method_params")
    return None


# ---- tables ------------------------------------------------------------------------------------------
RL, BLEU, TER = ("cnndm", "rougeLsum", "R-L"), ("wmt16", "bleu", "BLEU-4"), ("wmt16", "ter", "TER")
RL_SENT = ("cnndm", "rougeL", "rougeL")  # sentence-level ROUGE-L, an extra column
GEN_COLS = [RL, BLEU, TER, RL_SENT]
RL_NOTE = "R-L: ROUGE-Lsum on CNN/DailyMail (summary-level, sentence-split); rougeL: sentence-level"
TABLE1 = [("zero_shot", ""), ("tinyte_full", ""), ("tinyte_half", ""), ("tinyte_gated", ""), ("tinyte_hybrid", "")]
TABLE2 = [("lora", ""), ("emb_tuning", ""), ("prompt_tuning", "tk1"), ("prompt_tuning", "tk2"), ("tinyte_gated", ""), ("tinyte_hybrid", "")]
TABLE11 = [("Base Models", [("zero_shot", "")]),
           ("PEFT Baselines", [("emb_tuning", ""), ("lora", ""), ("prompt_tuning", "tk1"), ("prompt_tuning", "tk2"), ("prompt_tuning", "tk20")]),
           ("TinyTE", [("tinyte_full", ""), ("tinyte_half", ""), ("tinyte_gated", ""), ("tinyte_hybrid", "")])]


def gen_row(idx: Runs, se: SE, model: str, method: str, tag: str, cols) -> dict:
    row = {"Model": DISPLAY.get(model, model), "Method": method_label(method, tag)}
    found = []
    for task, metric, name in cols:
        runs = idx.get(task, model, method, tag)
        found.append(runs)
        row[name], row[f"{name} se"] = cell(runs, metric, se)
        row[f"{name} seeds"] = len(runs) or None
    row["#TP"] = n_params(*found)
    return row


def table_1(cfg, idx, se):
    rows = [gen_row(idx, se, m, me, tg, GEN_COLS) for m in cfg.models for me, tg in TABLE1]
    return rows, ["Model", "Method", "#TP", "R-L", "BLEU-4", "TER", "rougeL"], f"Table 1: TinyTE variants ({RL_NOTE}; BLEU-4, TER: WMT16 cs-en)", False


def table_2(cfg, idx, se):
    rows = [gen_row(idx, se, m, me, tg, [RL, BLEU, RL_SENT]) for m in cfg.models for me, tg in TABLE2]
    return rows, ["Model", "Method", "#TP", "R-L", "BLEU-4", "rougeL"], f"Table 2: TinyTE vs PEFT baselines ({RL_NOTE}; BLEU-4: WMT16 cs-en)", False


def table_11(cfg, idx, se):
    rows = []
    for section, cells in TABLE11:
        rows.append({"Model": f"**{section}**"})
        rows += [gen_row(idx, se, m, me, tg, GEN_COLS) for m in cfg.models for me, tg in cells]
    return rows, ["Model", "Method", "#TP", "R-L", "BLEU-4", "TER", "rougeL"], f"Table 11: full results with standard errors ({se.mode}; {RL_NOTE})", True


def table_3(cfg, idx, se):
    specs = [("Zero-shot", "zero_shot", "", False, "ll_accuracy"),
             ("Prompt Tuning (Individual, 1 tok)", "prompt_tuning", "tk1", False, "em_accuracy"),
             ("Prompt Tuning (Multitask, 1 tok)", "prompt_tuning", "tk1", True, "em_accuracy"),
             ("TinyTE-all (Individual)", "tinyte_full", "", False, "em_accuracy"),
             ("TinyTE-all (Multitask)", "tinyte_full", "", True, "em_accuracy")]
    rows = []
    for model in cfg.models:
        for label, method, tag, multi, metric in specs:
            row = {"Model": DISPLAY.get(model, model), "Method": label}
            for sub, name in SUPERGLUE:
                if multi:
                    runs, key = idx.get("superglue", model, method, tag, "all"), f"{metric[:3]}{sub}_accuracy"
                else:
                    runs, key = idx.get("superglue", model, method, tag, sub), metric
                row[name], row[f"{name} se"] = cell(runs, key, se)
            vals = [row[name] for _, name in SUPERGLUE]
            row["Avg."] = float(np.mean(vals)) if all(v is not None for v in vals) else None
            rows.append(row)
    cols = ["Model", "Method"] + [n for _, n in SUPERGLUE] + ["Avg."]
    return rows, cols, "Table 3: SuperGLUE accuracy (zero-shot: log-likelihood of the choices; trained: exact match of the generation)", False


def ablation_summaries(root: Path, sorting: str) -> list[dict]:
    out = []
    for p in sorted((root / "analysis" / "ablation").rglob("summary.json")) if (root / "analysis" / "ablation").is_dir() else []:
        s = json.loads(p.read_text())
        if s.get("sorting") == sorting:
            out.append(s)
    return out


def table_ablation(cfg, root: Path, out: Path, sorting: str, number: str):
    from embexp.analysis.ablation import DATASETS, TABLE_PS, pct, plot_curves, table_row

    sums = ablation_summaries(root, sorting)
    rows, panels = [], []
    for model in cfg.models:
        curves = []
        for task, dataset in DATASETS.items():
            group = [s for s in sums if s["model"] == model and s["task_name"] == task]
            if not group:
                rows.append({"Model": DISPLAY.get(model, model), "Dataset": dataset})
                continue
            ps = group[0]["ps"]
            group = [s for s in group if s["ps"] == ps]
            scores = [float(np.mean(v)) for v in zip(*[s["bleu"] for s in group])]
            row = table_row(DISPLAY.get(model, model), dataset, ps, scores, float(np.mean([s["auc"] for s in group])))
            row["seeds"] = len(group)
            rows.append(row)
            curves.append((dataset, ps, scores))
        panels.append((DISPLAY.get(model, model), curves))
    fig = {"4": "figure5", "10": "figure7"}[number]
    plot_curves(panels, out / f"{fig}.png")
    cols = ["Model", "Dataset"] + [pct(p) for p in TABLE_PS] + ["AUC"]
    return rows, cols, f"Table {number}: BLEU-4 of ablated vs. unablated outputs, {sorting} sorting (curves: {fig}.png)", False


def table_5(cfg, root: Path):
    from embexp.analysis.lengths import Config as LengthsConfig
    from embexp.analysis.lengths import bucket_table

    runs = [r for r in collect_runs(str(root)) if r["task_name"] == "cnndm" and r["model"] == cfg.length_model]
    rows, labels = bucket_table(runs, LengthsConfig())
    order = [method_label(m, t) for m, t in [("lora", ""), ("prompt_tuning", "tk1"), ("tinyte_full", ""), ("tinyte_half", ""),
                                             ("tinyte_hybrid", ""), ("tinyte_gated", "")]]
    have = {r["Method"]: r for r in rows}
    labels = labels or ["0-300", "301-500", "501-800", "801+"]
    rows = [have.get(m, {"Model": cfg.length_model, "Method": m}) for m in order] + [r for r in rows if r["Method"] not in order]
    return rows, ["Method"] + labels + ["all"], f"Table 5: R-L (ROUGE-Lsum) by input length (words) on CNN/DailyMail, {DISPLAY.get(cfg.length_model, cfg.length_model)}", False


def table_alpaca(cfg, idx, se):
    cols = [("alpaca", "rougeL", "R-L"), ("alpaca", "rougeLsum", "R-Lsum"), ("alpaca", "rouge1", "R-1"), ("alpaca", "rouge2", "R-2")]
    models = sorted({k[2] for k in idx.by_key if k[0] == "alpaca"}) or ["llama2"]
    cells = [("zero_shot", ""), ("tinyte_full", ""), ("tinyte_gated", ""), ("lora", ""), ("prompt_tuning", "tk1")]
    rows = [gen_row(idx, se, m, me, tg, cols) for m in models for me, tg in cells]
    return rows, ["Model", "Method", "#TP", "R-L", "R-Lsum", "R-1", "R-2"], "Alpaca held-out set (Fig. 3 runs; R-L: sentence-level rougeL; the paper's GPT-4 judge score is not computed)", False


# ---- output ------------------------------------------------------------------------------------------
def emit(rows: list[dict], cols: list[str], stem: Path, title: str, pm: bool) -> str:
    """<stem>.md (cols; value ± se where pm) and <stem>.csv (cols + '<col> se' + '<col> seeds')."""
    def show(r, c):
        v, s = r.get(c), r.get(f"{c} se")
        if pm and isinstance(v, float) and isinstance(s, float):
            return f"{v:.2f} ± {s:.2f}"
        return v
    md = markdown([{c: show(r, c) for c in cols} for r in rows], cols, title)
    stem.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(stem.with_suffix(".md"), md)
    extra = [k for r in rows for k in r if k not in cols]
    fields = cols + list(dict.fromkeys(extra))
    tmp = stem.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    tmp.replace(stem.with_suffix(".csv"))
    return md


def render(cfg: Config) -> dict[str, str]:
    root = Path(cfg.runs or debug_output_root(cfg.debug))
    out = Path(cfg.out or (Path(debug_output_root(cfg.debug)) / "tables" / "tinyte" if cfg.debug else Path("tables") / "tinyte"))
    names = TABLES if cfg.table == "all" else (str(cfg.table),)
    for n in names:
        if n not in TABLES:
            raise EmbexpError(f"unknown table '{n}' (choose from: {', '.join(TABLES)}, all)")
    idx = Runs(collect_runs(str(root)))
    se = SE(cfg.se or "seeds", cfg.bootstrap_iters, out / ".se_cache.json")
    done = {}
    for n in names:
        se.mode = cfg.se or TABLE_SE.get(n, "seeds")
        if n in ("4", "10"):
            rows, cols, title, pm = table_ablation(cfg, root, out, "random" if n == "4" else "variance", n)
        elif n == "5":
            rows, cols, title, pm = table_5(cfg, root)
        else:
            rows, cols, title, pm = {"1": table_1, "2": table_2, "3": table_3, "11": table_11, "alpaca": table_alpaca}[n](cfg, idx, se)
        stem = out / (f"table{n}" if n[0].isdigit() else n)
        done[n] = emit(rows, cols, stem, title, pm)
        print(done[n] + f"(written: {stem}.md, {stem}.csv)\n")
    return done


@cli.one_line_errors
def main(argv: list[str] | None = None) -> None:
    from embexp.analyze import parse, usage

    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[1] + "\n\n" + usage("", Config).replace("analyze  key", "report key"))
        return
    render(parse(Config, argv))


if __name__ == "__main__":
    main()
