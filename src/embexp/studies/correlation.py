"""Point measures at p against the AUC (the TinyTE paper, Tavares et al. 2025, App. D; Figures 4 and 8).

    python -m embexp.analyze correlation runs=outputs/analysis/ablation      # every ablation curve under it
    python -m embexp.analyze correlation debug=smoke                         # outputs/smoke/analysis/ablation
    python -m embexp.analyze correlation tasks=[wmt16,cnndm] alpha=0.05      # what `make tinyte_fig4` runs

Reads every ``summary.json`` an ablation wrote under ``runs`` (one curve each) and, for each metric and
each ablated portion p, correlates the curves' values at p with their AUC (``scipy.stats.pearsonr``):
``figure4.png`` (the heatmap of r), ``figure8.png`` (the most correlated p against the AUC, with the
least-squares line; the smaller p on a tie) and ``correlation.{md,csv,json}`` (:func:`predict_auc` reads
the json). What is correlated, the choices and how they differ from the paper: docs/reproduce_tinyte.md
(Figures 4 and 8).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embexp import EmbexpError
from embexp.core.config import option
from embexp.core.records import atomic_write, debug_output_root, write_json
from embexp.core.tables import markdown, pyplot, save_png, write_csv
from embexp.studies.ablation import METRICS, pct


@dataclass
class Config:
    runs: str = option("", "Root searched (recursively) for ablation summary.json files ('' = "
                       "<output_root>/analysis/ablation: outputs, or the debug preset's).")
    debug: str = option(
        "", "A conf/debug preset whose output_root gives the default runs and out (smoke: outputs/smoke).")
    metrics: list = option(["bleu", "nli"], "Metrics correlated when the summaries carry them (curve key m, AUC key "
                           "'auc' for bleu, 'auc_<m>' otherwise).")
    tasks: list = option([], "Keep only summaries of these task config names (e.g. [wmt16,cnndm], the paper's "
                         "population); [] = every task.")
    sortings: list = option([], "Keep only these sortings (random, variance, variance_desc); [] = all.")
    alpha: float = option(
        0.05, "Significance level: cells with Pearson p-value < alpha get the black outline.", gt=0, le=1)
    min_points: int = option(
        3, "A summary is a curve when it has at least this many portions, p = 0 included (ours).", ge=2)
    out: str = option("", "Output folder ('' = <runs>/../correlation, e.g. outputs/analysis/correlation).")


AUC_KEYS = {m: auc for m, (_, auc, _) in METRICS.items()}  # the ablation's summary keys, as it writes them
LABELS = {m: label for m, (_, _, label) in METRICS.items()}


def auc_key(metric: str) -> str:
    return AUC_KEYS.get(metric, f"auc_{metric}")


# ---- pure functions (tested on synthetic curves) ------------------------------------------------
def curves_of(summaries: list[dict], metric: str, min_points: int = 3) -> tuple[list[dict], list[str]]:
    """The summaries that carry `metric` as a curve (with its AUC), and the names of those skipped."""
    kept, skipped = [], []
    for s in summaries:
        vals, ps = s.get(metric), s.get("ps")
        if (not isinstance(vals, list) or not isinstance(ps, list) or len(vals) != len(ps)
                or s.get(auc_key(metric)) is None):
            continue
        (kept if len(ps) >= min_points else skipped).append(s)
    return kept, [name(s) for s in skipped]


def name(s: dict) -> str:
    return (f"{s.get('model', '?')}/{s.get('dataset', s.get('task', '?'))}/{s.get('sorting', '?')}"
            f"/seed{s.get('seed', 0)}")


def correlate(curves: list[dict], metric: str, alpha: float = 0.05) -> dict:
    """Pearson r, p-value, significance and least-squares fit of the value at every shared p vs the AUC."""
    from scipy.stats import pearsonr

    if len(curves) < 3:
        raise EmbexpError(f"correlation of {metric} needs >= 3 ablation curves, found {len(curves)}")
    shared = set.intersection(*[{round(float(p), 6) for p in c["ps"]} for c in curves])
    ps = sorted(p for p in shared if p > 0)
    aucs = np.array([float(c[auc_key(metric)]) for c in curves])
    out = {"metric": metric, "n_curves": len(curves), "curves": [name(c) for c in curves], "auc": aucs.tolist(),
           "ps": ps, "r": [], "pvalue": [], "significant": [], "fit": [], "values": []}
    for p in ps:
        x = np.array([float(c[metric][[round(float(q), 6) for q in c["ps"]].index(p)]) for c in curves])
        out["values"].append(x.tolist())
        if np.ptp(x) == 0 or np.ptp(aucs) == 0:  # a constant column has no correlation
            out["r"].append(None), out["pvalue"].append(None), out["significant"].append(False), out["fit"].append(None)
            continue
        res = pearsonr(x, aucs)
        r, pv = float(res.statistic), float(res.pvalue)
        slope, intercept = np.polyfit(x, aucs, 1)
        out["r"].append(r), out["pvalue"].append(pv), out["significant"].append(bool(pv < alpha))
        out["fit"].append({"slope": float(slope), "intercept": float(intercept)})
    scored = [(r, -p) for r, p in zip(out["r"], ps) if r is not None]
    out["best_p"] = -max(scored)[1] if scored else None
    return out


def predict_auc(metric: str, p: float, value: float, data: dict | str | Path) -> float | None:
    """The AUC the linear fit at (metric, p) predicts for a curve scoring `value` at p; None when the
    correlation has no fit there. `data`: correlation.json's content or its path."""
    if not isinstance(data, dict):
        data = json.loads(Path(data).read_text())
    m = data.get("metrics", {}).get(metric)
    if not m:
        return None
    key = round(float(p), 6)
    if key not in m["ps"] or m["fit"][m["ps"].index(key)] is None:
        return None
    fit = m["fit"][m["ps"].index(key)]
    return float(fit["slope"] * value + fit["intercept"])


# ---- figures --------------------------------------------------------------------------------------
def plot_heatmap(results: list[dict], path: Path) -> list[tuple[int, int]]:
    """Figure 4. Returns the (row, column) cells that got the black outline, read back from the axes
    (columns index the union of the metrics' portions, sorted)."""
    from matplotlib.patches import Rectangle

    ps = sorted({p for res in results for p in res["ps"]})
    grid = np.full((len(results), len(ps)), np.nan)
    for i, res in enumerate(results):
        for p, r in zip(res["ps"], res["r"]):
            grid[i, ps.index(p)] = np.nan if r is None else r
    fig, ax = pyplot().subplots(figsize=(1.0 + 0.75 * len(ps), 0.9 + 0.7 * len(results)))
    im = ax.imshow(grid, cmap="viridis", vmin=-1, vmax=1, aspect="auto")
    for i, res in enumerate(results):
        for p, r, sig in zip(res["ps"], res["r"], res["significant"]):
            j = ps.index(p)
            if r is not None:
                ax.text(j, i, f"{r:.2f}", ha="center", va="center", fontsize=7, color="white" if r < 0.3 else "black")
            if sig:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", lw=2.0))
    ax.set_xticks(range(len(ps)), [pct(p) for p in ps], fontsize=8)
    ax.set_yticks(range(len(results)), [LABELS.get(r["metric"], r["metric"]) for r in results], fontsize=8)
    ax.set_xlabel("ablated dimensions p")
    ax.set_title("Pearson r: value at p vs. AUC (outline: significant)", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.04)
    fig.tight_layout()
    cells = sorted((int(round(pt.get_xy()[1] + 0.5)), int(round(pt.get_xy()[0] + 0.5)))
                   for pt in ax.patches if isinstance(pt, Rectangle))
    save_png(fig, path)
    return cells


def plot_best(results: list[dict], path: Path) -> None:
    """Figure 8: per metric, the value at the most correlated p against the AUC, with the fit."""
    fig, axes = pyplot().subplots(1, max(1, len(results)), figsize=(4.2 * max(1, len(results)), 3.6), squeeze=False)
    for ax, res in zip(axes[0], results):
        p = res["best_p"]
        if p is None:
            ax.set_title(f"{LABELS.get(res['metric'], res['metric'])}: no correlation")
            continue
        j = res["ps"].index(p)
        x, y, fit = np.array(res["values"][j]), np.array(res["auc"]), res["fit"][j]
        ax.scatter(x, y, s=18)
        xs = np.linspace(x.min(), x.max(), 50)
        ax.plot(xs, fit["slope"] * xs + fit["intercept"], "k--", lw=1,
                label=f"AUC = {fit['slope']:.3f}·x + {fit['intercept']:.2f}")
        ax.set_xlabel(f"{LABELS.get(res['metric'], res['metric'])} at p = {pct(p)}")
        ax.set_ylabel("AUC")
        ax.set_title(f"r = {res['r'][j]:.3f} (p-value {res['pvalue'][j]:.2g}, n = {res['n_curves']})", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path)


# ---- the analysis -----------------------------------------------------------------------------------
def load_summaries(root: Path, tasks=(), sortings=()) -> list[dict]:
    out = []
    for p in sorted(root.rglob("summary.json")) if root.is_dir() else []:
        s = json.loads(p.read_text())
        if s.get("analysis", "ablation") != "ablation" or "ps" not in s:
            continue
        if (tasks and s.get("task_name") not in tasks) or (sortings and s.get("sorting") not in sortings):
            continue
        out.append(dict(s, path=str(p)))
    return out


def run(cfg: Config) -> dict:
    if not 0 < cfg.alpha <= 1:
        raise EmbexpError(f"alpha={cfg.alpha} is outside (0, 1]")
    root = Path(cfg.runs or Path(debug_output_root(cfg.debug)) / "analysis" / "ablation")
    out = Path(cfg.out) if cfg.out else root.parent / "correlation"
    sums = load_summaries(root, list(cfg.tasks), list(cfg.sortings))
    results, skipped, notes = [], {}, []
    for metric in cfg.metrics:
        curves, skipped[metric] = curves_of(sums, metric, cfg.min_points)
        if not curves:
            continue
        if len(curves) < 3:
            notes.append(f"{metric}: {len(curves)} curve(s), needs >= 3")
            continue
        results.append(correlate(curves, metric, cfg.alpha))
    if not results:
        found = ", ".join(f"{m}: {len(curves_of(sums, m, cfg.min_points)[0])}" for m in cfg.metrics)
        raise EmbexpError(f"correlation needs >= 3 ablation curves of one metric under {root} (found "
                          f"{found or 'no summary.json'})")
    ps = sorted({p for r in results for p in r["ps"]})
    rows = []
    for r in results:
        row = {"metric": LABELS.get(r["metric"], r["metric"]), "curves": r["n_curves"],
               "best p": pct(r["best_p"]) if r["best_p"] is not None else None}
        for p, v, sig in zip(r["ps"], r["r"], r["significant"]):
            row[pct(p)] = None if v is None else (f"{v:.3f}*" if sig else f"{v:.3f}")
        rows.append(row)
    cols = ["metric", "curves", "best p"] + [pct(p) for p in ps]
    md = markdown(rows, cols,
                  f"Pearson r between the value at p and the AUC (* = p-value < {cfg.alpha}; tinyte.md Fig. 4)")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "correlation.md", md)
    long = [{"metric": r["metric"], "p": p, "n_curves": r["n_curves"], "r": v, "pvalue": pv, "significant": sig,
             "slope": (fit or {}).get("slope"), "intercept": (fit or {}).get("intercept"), "best": p == r["best_p"]}
            for r in results for p, v, pv, sig, fit in zip(r["ps"], r["r"], r["pvalue"], r["significant"], r["fit"])]
    write_csv(long, list(long[0]) if long else ["metric"], out / "correlation.csv")
    outlined = plot_heatmap(results, out / "figure4.png")
    plot_best(results, out / "figure8.png")
    data = {"analysis": "correlation", "runs": str(root), "alpha": cfg.alpha, "notes": notes,
            "skipped": {m: s for m, s in skipped.items() if s}, "outlined": outlined,
            "metrics": {r["metric"]: r for r in results}}
    write_json(out / "correlation.json", data)
    print(md)
    for r in results:
        j = r["ps"].index(r["best_p"]) if r["best_p"] is not None else None
        if j is not None:
            fit = r["fit"][j]
            print(f"{r['metric']}: best p = {pct(r['best_p'])}, r = {r['r'][j]:.3f} (p-value {r['pvalue'][j]:.2g}), "
                  f"AUC ~ {fit['slope']:.4f} * value + {fit['intercept']:.3f}")
    print("\n".join(notes + [f"written to {out} (correlation.md/.csv/.json, figure4.png, figure8.png)"]))
    return data
