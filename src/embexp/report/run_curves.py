"""Learning curves: ``python -m embexp.report table=curve runs=<dir> [metric=...] [task=...] [model=...]``.

    python -m embexp.report table=curve runs=outputs/ktoken_learning      # make ktoken_learning's runs

Reads the finished runs under ``runs`` that recorded a ``curve`` (``trainer.curve_at``: the eval split's metrics
at a few steps of one run, the final evaluation its last point) and writes, per (task, model), the table
``curve_<task>_<model>.md/.csv`` (``NOTE`` says what its columns are: a curve is read, never selected on) and
its figure ``curve_<task>_<model>.png`` (``plot``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from embexp import EmbexpError
from embexp.core.config import option
from embexp.core.records import atomic_write, collect_runs, debug_output_root, quality_metric
from embexp.core.tables import emit, pyplot, save_png
from embexp.report.base import ReportConfig
from embexp.report.cells import majority

TABLES = ("curve",)
NOTE = ("Each line is one run evaluated on the eval split at the listed steps (trainer.curve_at) and at its end; "
        "nothing was selected on these points. Answer share: % of predictions per class (class 0 first).")


@dataclass
class Config(ReportConfig):
    table: str = option("curve", "curve (this table).", choices=TABLES)
    out: str = option("", "Folder for curve_<task>_<model>.md/.csv/.png ('' = <runs>/tables).")
    task: str = option("", "Only runs of this task (its display name, e.g. glue_sst2); '' = every task found.")
    model: str = option("", "Only runs of this model config name (e.g. smollm2); '' = every model found.")
    metric: str = option("", "The curve's metric: a key of the runs' metrics (e.g. ll_accuracy); "
                         "'' = the task's headline metric.")


def plot(lines: dict[str, list[tuple[int, float]]], base: float | None, path: Path, title: str, ylabel: str) -> None:
    """The metric against steps, one line per method, the eval split's majority class dashed."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for label, pts in lines.items():
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    if base is not None:
        ax.axhline(base, ls="--", color="0.5", lw=1, label=f"majority class ({base:.1f})")
    ax.set_xlabel("optimizer steps")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, path)


def render(cfg: Config) -> dict[str, str]:
    from embexp.methods.registry import method_label

    root = cfg.runs or debug_output_root(cfg.debug)
    out = Path(cfg.out) if cfg.out else Path(root) / "tables"
    runs = [r for r in collect_runs(root, strict=cfg.strict)
            if r.get("curve") and (not cfg.task or r["task"] == cfg.task)
            and (not cfg.model or r["model"] == cfg.model)]
    if not runs:
        raise EmbexpError(f"no finished runs with a curve under '{root}' (train with trainer.curve_at=[...] first)")
    done = {}
    for task, model in sorted({(r["task"], r["model"]) for r in runs}):
        group = sorted((r for r in runs if r["task"] == task and r["model"] == model),
                       key=lambda r: (r["method"], r["tag"], r["seed"]))
        metric = quality_metric(group, cfg.metric)
        rows, lines = [], {}
        for r in group:
            seeded = len({x["seed"] for x in group}) > 1
            label = method_label(r["method"], r["tag"]) + (f" seed {r['seed']}" if seeded else "")
            for p in r["curve"]:
                share = p.get("ll_answer_share")
                rows.append({"Method": label, "step": p["step"], metric: p.get(metric),
                             "balanced accuracy": p.get("ll_balanced_accuracy"),
                             "answer share": " / ".join(f"{s:.0f}" for s in share) if share else None})
                if p.get(metric) is not None:
                    lines.setdefault(label, []).append((p["step"], p[metric]))
        base = majority(group[0]["run_dir"])
        cols = ["Method", "step", metric, "balanced accuracy", "answer share"]
        stem = out / f"curve_{task}_{model}"
        title = f"Learning curves on {task}, {model}: {metric} on the eval split"
        md = emit(rows, cols, stem, title, pm=False)
        md += (f"\nMajority class of the eval split: {base:.1f}. " if base else "\n") + NOTE + "\n"
        atomic_write(stem.with_suffix(".md"), md)
        plot(lines, base, stem.with_suffix(".png"), f"{task}, {model}", metric)
        done[f"{task}/{model}"] = md
        print(md + f"(written: {stem}.md, .csv, .png)\n")
    return done
