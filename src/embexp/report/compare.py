"""One comparison of every method: ``python -m embexp.report table=compare [runs=...] [task=...] [model=...]``.

    python -m embexp.report table=compare                          # every finished run under outputs/
    python -m embexp.report table=compare runs=outputs/compare task=glue_sst2 model=smollm2
    python -m embexp.report table=compare debug=smoke              # read outputs/smoke
    python -m embexp.report paper=compare table=curves runs=outputs/compare/curves   # report/compare_curves.py

One table per (task, model) found, one row per method (and tag) and config (``core.fingerprint.config_key``:
runs of different configs are never averaged; a row is named by the fields in which its config differs), its
seeds averaged: the cells of ``cells.method_row`` (``COLS``, the quality metric the task's headline one unless
``metric`` names another), in ``compare_<task>_<model>.md/.csv``, and a Pareto plot (``plot``) as
``compare_<task>_<model>.png``. An empty cell is a figure the method has not (``NOTE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embexp import EmbexpError
from embexp.core.config import option
from embexp.core.records import LOWER, atomic_write, collect_runs, config_groups, config_labels, quality_metric
from embexp.core.tables import emit, pyplot, save_png, table_dirs
from embexp.report.base import ReportConfig
from embexp.report.cells import SE, SE_MODES, method_row

TABLES = ("compare", "curves")  # curves: report/compare_curves.py (the lr and budget chosen on held-out rows)
COLS = ["Method", "metric", "#TP", "% of backbone", "train state MB", "peak MB", "train tok/s", "eval ex/s", "exports",
        "seeds"]
NOTE = ("Empty cells: a method that trains nothing has no #TP, training memory or tokens/s; peak MB is the "
        "process's resident peak on CPU (the GPU's allocated peak with CUDA).")


@dataclass
class Config(ReportConfig):
    table: str = option("compare", "compare (every run as it ended: one snapshot) or curves (per method the learning "
                        "rate and budget chosen on held-out rows, the eval split at that choice: "
                        "report/compare_curves.py).", choices=TABLES)
    out: str = option("", "Folder for compare_<task>_<model>.md/.csv/.png ('' = tables/compare, "
                      "or <output_root>/tables/compare with debug=...).")
    task: str = option("", "Only runs of this task (its display name, e.g. glue_sst2); '' = every task found.")
    model: str = option("", "Only runs of this model config name (e.g. smollm2); '' = every model found.")
    metric: str = option("", "The quality column: a metric key of the runs (e.g. ll_accuracy); "
                         "'' = the task's first metric.")
    se: str = option("auto", "Standard errors: seeds, examples, auto (seeds where >= 2, else examples) or none.",
                     choices=SE_MODES)


def label_points(ax, pts: list[tuple[float, float, str]], size: float = 7) -> None:
    """Name each point without two names overlapping: the first free one of a few offsets above and
    below it (a greedy pass from left to right; a moved name gets a thin line to its point), written
    to its left near the right edge."""
    scale = ax.figure.dpi / 72  # points -> pixels
    right = ax.get_window_extent().x1
    r = 4 * scale  # the markers are obstacles too
    taken = [(px - r, py - r, px + r, py + r) for px, py in (ax.transData.transform((x, y)) for x, y, _ in pts)]
    for x, y, label in sorted(pts):
        px, py = ax.transData.transform((x, y))
        w, h = len(label) * size * 0.55 * scale, size * 1.5 * scale
        flip = px + 3 * scale + w > right
        for dy in (3, -13, 15, -24, 27, -35, 39):
            x0 = px - 3 * scale - w if flip else px + 3 * scale
            box = (x0, py + dy * scale, x0 + w, py + dy * scale + h)
            if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in taken):
                break
        taken.append(box)
        arrow = {"arrowstyle": "-", "lw": 0.5, "color": "0.55", "shrinkA": 0, "shrinkB": 3}
        lead = {} if dy == 3 else {"arrowprops": arrow}
        ax.annotate(label, (x, y), fontsize=size, xytext=(-3 if flip else 3, dy), textcoords="offset points",
                    ha="right" if flip else "left", **lead)


def plot(rows: list[dict], path: Path, title: str, ylabel: str) -> None:
    """Quality against trainable parameters (log x); methods without #TP are drawn at the left edge.
    The step line is the Pareto front (no method with fewer parameters does better)."""
    plt = pyplot()
    pts = [(r["#TP"], r["metric"], r["Method"]) for r in rows if r["metric"] is not None]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    have = [p for p in pts if p[0]]
    left = min((p[0] for p in have), default=1) / 4
    ax.set_xscale("log")
    for tp, q, _ in pts:
        ax.scatter([tp or left], [q], marker="o" if tp else "x")
    ax.set_xlabel("trainable parameters (log; x: trains nothing)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.margins(x=0.08, y=0.08)
    fig.tight_layout()
    label_points(ax, [(tp or left, q, label) for tp, q, label in pts])
    sign = -1.0 if ylabel in LOWER else 1.0
    front, best = [], -np.inf
    for tp, q, _ in sorted(have):
        if sign * q > best:
            front.append((tp, q))
            best = sign * q
    if front:
        ax.step([p[0] for p in front], [p[1] for p in front], where="post", alpha=0.4)
    ax.grid(alpha=0.3)
    save_png(fig, path)


def render(cfg: Config) -> dict[str, str]:
    if cfg.table == "curves":
        from embexp.report import compare_curves

        return compare_curves.render(cfg)
    root, out = table_dirs(cfg.runs, cfg.out, cfg.debug, "compare")
    runs = [r for r in collect_runs(root, strict=cfg.strict)
            if (not cfg.task or r["task"] == cfg.task) and (not cfg.model or r["model"] == cfg.model)]
    if not runs:
        raise EmbexpError(f"no finished runs under '{root}'" + (f" for task={cfg.task}" if cfg.task else "")
                          + (f" model={cfg.model}" if cfg.model else "") + " (train some first: make compare)")
    se = SE(cfg.se, 100, out / ".se_cache.json")
    done = {}
    for task, model in sorted({(r["task"], r["model"]) for r in runs}):
        group = [r for r in runs if r["task"] == task and r["model"] == model]
        metric = quality_metric(group, cfg.metric)
        keys = sorted({(r["task_name"], r["subset"], r["method"], r["tag"]) for r in group})
        rows = []
        for t, s, me, tg in keys:  # one row per config: runs of different configs are never averaged
            groups = config_groups([r for r in group if (r["task_name"], r["subset"], r["method"], r["tag"])
                                    == (t, s, me, tg)])
            for runs_, label in zip(groups, config_labels(groups)):
                row = method_row(runs_, metric, se)
                row["Method"] += f" [{label}]" if label else ""
                rows.append(row)
        rows.sort(key=lambda x: (x["#TP"] or 0, x["Method"]))
        cols = [metric if c == "metric" else c for c in COLS]
        for r in rows:
            r[metric], r[f"{metric} se"] = r.pop("metric"), r.pop("metric se")
        title = f"Every method on {task}, {model}: {metric} ({se.mode} s.e.), cost and export"
        stem = out / f"compare_{task}_{model}"
        md = emit(rows, cols, stem, title, pm=True) + f"\n{NOTE}\n"
        atomic_write(stem.with_suffix(".md"), md)
        plot([{**r, "metric": r[metric]} for r in rows], stem.with_suffix(".png"), f"{task}, {model}", metric)
        done[f"{task}/{model}"] = md
        print(md + f"(written: {stem}.md, .csv, .png)\n")
    return done
