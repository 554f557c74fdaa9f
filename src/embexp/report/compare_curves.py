"""The comparison by learning curves: ``python -m embexp.report paper=compare table=curves runs=<dir>``.

    python -m embexp.report paper=compare table=curves runs=outputs/compare/curves      # make compare's runs

Reads the finished runs under ``runs`` whose curves scored the held-out selection rows (``trainer.curve_at`` +
``trainer.curve_select``, ``task.select_split=train_holdout``). Per (task, model), each method's eval-split metric
at the (learning rate, budget) its held-out rows chose (``choose``: nothing is chosen on the eval split), the cost
columns of ``table=compare`` (``COLS``), a row for the eval split's majority class (``majority_row``) and both
curves (``plot``). The protocol and its tables: docs/compare/README.md.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from embexp import EmbexpError
from embexp.core.records import LOWER, atomic_write, collect_runs, one_config, quality_metric
from embexp.core.tables import emit, pyplot, save_png, table_dirs
from embexp.report.cells import SE, majority, method_row, sem

COLS = ["Method", "metric", "held-out", "lr", "step", "lrs tried", "lr edge", "#TP", "% of backbone", "train state MB",
        "train tok/s", "exports", "seeds"]


def lr_edge(lr: float, lrs: list[float]) -> str:
    """'low' or 'high' when the chosen lr is the end of the grid it was chosen from (a choice the grid may
    have cut short: the sweep extends such a grid one step, make compare), else ''."""
    if len(lrs) < 2 or lr not in (lrs[0], lrs[-1]):
        return ""
    return "low" if lr == lrs[0] else "high"


def lr_of(run: dict) -> float:
    return float(run["config"]["trainer"]["lr"])


def candidates(runs: list[dict], metric: str) -> dict[tuple[float, int], dict[int, tuple[float, float]]]:
    """(lr, step) -> {seed: (held-out value, eval value)} over the runs' curve points that scored both."""
    out: dict = {}
    for r in runs:
        for p in r.get("curve") or []:
            held, val = (p.get("select") or {}).get(metric), p.get(metric)
            if held is not None and val is not None:
                out.setdefault((lr_of(r), int(p["step"])), {})[r["seed"]] = (float(held), float(val))
    return out


def choose(cands: dict, lower: bool) -> tuple[float, int] | None:
    """Among the (lr, step) pairs run with the most seeds (the sweep runs every seed at one lr: the lr its
    first seed chose), the one with the best mean held-out value over the seeds; ties: smaller step,
    then smaller lr."""
    if not cands:
        return None
    most = max(len(v) for v in cands.values())
    sign = 1.0 if lower else -1.0
    full = [k for k, v in cands.items() if len(v) == most]
    return min(full, key=lambda k: (sign * float(np.mean([h for h, _ in cands[k].values()])), k[1], k[0]))


def chosen_row(runs: list[dict], metric: str, lower: bool,
               se_policy: SE) -> tuple[dict, list[tuple[int, float, float]]]:
    """The table row of one method and its curve at the chosen lr: (step, held-out, eval), means over seeds."""
    cands = candidates(runs, metric)
    pick = choose(cands, lower)
    if pick is None:  # trains nothing (or recorded no curve): its evaluation, nothing chosen
        base = method_row(runs, metric, se_policy)
        return {**base, "held-out": None, "lr": None, "step": None, "lrs tried": None, "lr edge": None}, []
    lr, step = pick
    at = list(cands[pick].values())
    chosen = [r for r in runs if lr_of(r) == lr]
    one_config(chosen)  # the seeds averaged at the chosen lr differ in nothing else
    base = method_row(chosen, metric, se_policy)
    vals = [v for _, v in at]
    lrs = sorted({k[0] for k in cands})
    curve = sorted((s, float(np.mean([h for h, _ in v.values()])), float(np.mean([e for _, e in v.values()])))
                   for (l_, s), v in cands.items() if l_ == lr)
    return {**base, "metric": float(np.mean(vals)), "metric se": sem(vals),
            "held-out": float(np.mean([h for h, _ in at])),
            "lr": f"{lr:g}", "step": step, "lrs tried": " ".join(f"{x:g}" for x in lrs), "lr edge": lr_edge(lr, lrs),
            "seeds": len(at)}, curve


def majority_level(metric: str, base: float | None) -> float | None:
    """The eval split's majority class (always answering it) in ``metric``'s terms: its accuracy ``base``,
    MCC 0; None for other metrics or where the labels are unknown."""
    if metric in ("accuracy", "ll_accuracy", "em_accuracy"):
        return base
    return 0.0 if metric == "mcc" else None


def majority_row(metric: str, base: float | None) -> dict | None:
    """The table's row of the eval split's majority class (``majority_level``), or None."""
    value = majority_level(metric, base)
    if value is None:
        return None
    return {"Method": "Majority class (answers it always)", "method": "majority", "metric": value, "metric se": None,
            "held-out": None, "lr": None, "step": None, "lrs tried": None, "seeds": None}


def plot(curves: dict[str, list[tuple[int, float, float]]], base: float | None, path: Path, title: str,
         ylabel: str) -> None:
    """Two panels, one line per method at its chosen lr: the held-out rows that choose (left) and the
    eval split that is reported (right, with its majority class dashed)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10.0, 4.2), sharex=True)
    budgets = sorted({p[0] for pts in curves.values() for p in pts})
    for i, (ax, side) in enumerate(zip(axes, ("held-out rows (they choose lr and budget)", "eval split (reported)"))):
        for j, (label, pts) in enumerate(curves.items()):
            if pts:  # ten colours, then the same colours dashed with another marker: no two methods alike
                ax.plot([p[0] for p in pts], [p[1 + i] for p in pts], color=f"C{j % 10}",
                        marker="osD^v"[j // 10 % 5], ls=("-", "--")[j // 10 % 2], label=label)
        if i == 1 and base is not None:
            ax.axhline(base, ls="--", color="0.5", lw=1, label=f"majority class ({base:.1f})")
        ax.set_xscale("log")
        ax.set_xticks(budgets, [str(b) for b in budgets])  # the budgets themselves, not 6x10^1
        ax.minorticks_off()
        ax.set_xlabel("optimizer steps (budget, log)")
        ax.set_ylabel(f"{ylabel} (mean over seeds, chosen lr)")
        ax.set_title(side, fontsize=8)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=6, ncol=2)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_png(fig, path)


def note(rows: list[dict], runs: list[dict], base: float | None) -> str:
    steps = sorted({int(p["step"]) for r in runs for p in r.get("curve") or [] if "select" in p})
    seeds = sorted({r["seed"] for r in runs})
    rows_sel = {r["n_select_examples"] for r in runs if r.get("n_select_examples")}
    return ("\nBudgets (steps at which every run scored the held-out rows and the eval split): "
            f"{', '.join(map(str, steps))}. "
            f"Seeds: {', '.join(map(str, seeds))}. Selection: per method, the (lr, budget) with the best held-out "
            f"value averaged over the seeds ({'/'.join(map(str, sorted(rows_sel))) or '?'} held-out rows carved from "
            "the training split; ties: smaller budget, then smaller lr); the metric column is the eval split at that "
            "pair, mean ± s.e. "
            "over the seeds. Nothing was chosen on the eval split. A method without lr/step trains nothing. "
            "lr edge: the chosen lr is the low or high end of the grid tried (the optimum may lie beyond it)."
            + (f" Majority class of the eval split: {base:.1f}." if base is not None else "") + wall(runs) + "\n")


def wall(runs: list[dict]) -> str:
    """The runs' training time summed (metrics.json train.wall_seconds, kept across resumes): the table's cost."""
    seconds = sum((r.get("train") or {}).get("wall_seconds") or 0.0 for r in runs)
    return (f" Wall: {len(runs)} runs, {seconds / 3600:.2f} h of training summed over them (train.wall_seconds: "
            "the steps and the curve scorings, not start-up or the final evaluation).")


def render(cfg) -> dict[str, str]:
    from embexp.methods.registry import method_label  # the classes' display names (loads torch: here, not at import)

    root, out = table_dirs(cfg.runs, cfg.out, cfg.debug, "compare")
    runs = [r for r in collect_runs(root, strict=cfg.strict)
            if (not cfg.task or r["task"] == cfg.task) and (not cfg.model or r["model"] == cfg.model)]
    if not any((p.get("select") for r in runs for p in r.get("curve") or [])):
        raise EmbexpError(f"no finished runs with held-out curve points under '{root}' "
                          "(train with trainer.curve_at=[...] "
                          "trainer.curve_select=true task.select_split=train_holdout first: make compare)")
    se_policy = SE("seeds", 100, out / ".se_cache.json")
    done = {}
    for task, model in sorted({(r["task"], r["model"]) for r in runs}):
        group = [r for r in runs if r["task"] == task and r["model"] == model]
        metric = quality_metric(group, cfg.metric)
        lower = metric in LOWER
        rows, curves = [], {}
        for method, tag in sorted({(r["method"], r["tag"].split("lr")[0].rstrip("_")) for r in group}):
            mine = [r for r in group if r["method"] == method and r["tag"].split("lr")[0].rstrip("_") == tag]
            r_, curve = chosen_row(mine, metric, lower, se_policy)
            r_["Method"] = method_label(method, tag)
            rows.append(r_)
            curves[r_["Method"]] = curve
        base = majority(group[0]["run_dir"])
        rows += [r_ for r_ in [majority_row(metric, base)] if r_]
        rows.sort(key=lambda x: (x["metric"] is None, (1 if lower else -1) * (x["metric"] or 0.0)))
        for r_ in rows:
            r_[metric], r_[f"{metric} se"] = r_.pop("metric"), r_.pop("metric se")
        cols = [metric if c == "metric" else c for c in COLS]
        stem = out / (f"curves_{task}_{model}" + (f"_{cfg.metric}" if cfg.metric else ""))  # one table per metric asked
        title = (f"Every method on {task}, {model}: {metric} on the eval split "
                 "at the (lr, budget) chosen on held-out rows")
        md = emit(rows, cols, stem, title, pm=True) + note(rows, group, base)
        atomic_write(stem.with_suffix(".md"), md)
        plot(curves, majority_level(metric, base), stem.with_suffix(".png"), f"{task}, {model}: {metric} by budget",
             metric)
        done[f"{task}/{model}"] = md
        print(md + f"(written: {stem}.md, .csv, .png)\n")
    return done
