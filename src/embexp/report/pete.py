"""PETE against the standard encoder (papers/pete.md Table 2) from finished runs:
``python -m embexp.report paper=pete``.

    python -m embexp.report paper=pete table=table2 runs=outputs out=tables/pete     # comparison.md + .csv

One row per (method, tag) among the runs of ``task`` on ``model`` (``make pete_table`` tags them
``drop0`` / ``dropP``): parameters (the run record's ``n_method_params``: the model's parameters,
without the objective's temperature), STS-B Spearman and Pearson (x100), seconds per optimizer step
and per epoch (seconds per step x the steps of one pass over the run's training pairs), with the
mean over seeds. The paper's figures are printed alongside.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from embexp import EmbexpError
from embexp.core.config import option
from embexp.core.records import collect_runs, debug_output_root
from embexp.core.tables import write_table
from embexp.report.base import ReportConfig
from embexp.report.ledger.core import printed_cell

TABLES = ("table2",)
COLUMNS = ["Method", "Tag", "Seeds", "Parameters", "STS-B Spearman", "STS-B Pearson", "s/step", "s/epoch",
           "Paper params", "Paper Spearman"]


@dataclass
class Config(ReportConfig):
    table: str = option("table2", "table2 (papers/pete.md Table 2: PETE vs the standard encoder), "
                        "written as comparison.md/.csv.",
                        choices=TABLES)
    task: str = option("nli_pairs", "Task of the runs compared.")
    model: str = option("scratch_encoder", "Model config of the runs compared.")
    methods: list = option(["pete", "full_ft"], "Methods, in row order.")
    out: str = option("tables/pete", "Folder for comparison.md/.csv.")
    debug: str = option(
        "", "A conf/debug preset whose output_root holds the runs when runs is '' (smoke: outputs/smoke).")


def rows(cfg: Config) -> list[dict]:
    root = cfg.runs or debug_output_root(cfg.debug)
    runs = [r for r in collect_runs(root, strict=cfg.strict)
            if r["task_name"] == cfg.task and r["model"] == cfg.model and r["method"] in cfg.methods]
    if not runs:
        raise EmbexpError(f"no finished {cfg.task} runs of model {cfg.model} under {root}")
    out = []
    for method in cfg.methods:
        for tag in sorted({r["tag"] for r in runs if r["method"] == method}):
            group = [r for r in runs if r["method"] == method and r["tag"] == tag]
            mean = lambda xs: statistics.fmean(xs) if xs else None  # noqa: E731
            per_step = [r["train"]["wall_seconds"] / r["train"]["steps"] for r in group if r["train"].get("steps")]
            batch = [r["config"]["trainer"]["batch_size"] for r in group]
            per_epoch = [s * math.ceil(r["n_train_examples"] / b) for s, r, b in zip(per_step, group, batch) if b]
            out.append({
                "Method": method, "Tag": tag, "Seeds": len(group),
                "Parameters": group[0]["n_method_params"],
                "STS-B Spearman": mean([r["metrics"]["spearman"] for r in group]),
                "STS-B Pearson": mean([r["metrics"]["pearson"] for r in group]),
                "s/step": mean(per_step), "s/epoch": mean(per_epoch),
                **dict(zip(("Paper params", "Paper Spearman"), paper(method))),
            })
    return out


def paper(method: str) -> tuple[str, str]:
    """(parameters, STS-B Spearman) as the paper prints them for a method (ledger/printed/pete.csv), '' where it
    prints none."""
    row = {"pete": "pete", "full_ft": "baseline"}.get(method)
    if row is None:
        return "", ""
    return (printed_cell("pete", f"pete.t2.{row}.params").replace(" million", "M"),
            printed_cell("pete", f"pete.t2.{row}.stsb"))


def render(cfg: Config) -> dict[str, str]:
    title = f"PETE vs the standard encoder: {cfg.model} trained on {cfg.task}, STS-B zero-shot"
    stem = Path(cfg.out) / "comparison"
    md = write_table(rows(cfg), COLUMNS, stem, title=title)
    print(md + f"(written: {stem}.md, .csv)\n")
    return {"table2": md}
