"""docs/reproduction.md from the ledger's rows and their outcomes."""

from __future__ import annotations

import importlib

from embexp.report.ledger import runs as gpu
from embexp.report.ledger.core import COMMAND, PAPERS, Outcome, Row, bucket, bucket_labels
from embexp.report.ledger.runs import hrs

HEAD = ["| id | cell | paper | embexp | status | command |", "|---|---|---|---|---|---|"]


def celltext(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def line(row: Row, out: Outcome) -> str:
    """One row of a table: what a test compares with the committed file."""
    return (
        f"| `{row.id}` | {celltext(row.cell)} | {celltext(row.paper)} | {celltext(out.ours)} | "
        f"{celltext(out.text)} | `{celltext(row.command)}` |"
    )


def tables(rows: list) -> dict:
    """Rows grouped by table, in order of first appearance."""
    out: dict = {}
    for r, o in rows:
        out.setdefault(r.table, []).append((r, o))
    return out


def section(paper: str, rows: list) -> str:
    """A paper's section: its INTRO, and each table with its NOTES (ledger/<paper>.py), rows and estimates."""
    mod = importlib.import_module(f"embexp.report.ledger.{paper}")
    notes, intro = mod.NOTES, mod.INTRO
    out = [f"## {PAPERS[paper]}", ""] + ([intro, ""] if intro else [])
    seen: set = set()
    for table, group in tables(rows).items():
        out += [f"### {table}", ""] + ([notes[table], ""] if notes.get(table) else []) + HEAD
        out += [line(r, o) for r, o in group]
        fresh = []
        for r, _ in group:
            if r.gpu is not None and r.gpu.ref not in seen:
                seen.add(r.gpu.ref)
                fresh.append(f"- **{r.gpu.ref}**: {r.gpu.text()}")
        out += ([""] + fresh if fresh else []) + [""]
    return "\n".join(out)


def gpu_hours(rows: list) -> float:
    """GPU-hours of the distinct runs the rows need (a run that two tables read is counted once)."""
    runs = {run.key: run for r, o in rows if r.gpu is not None and o.status == "gpu" for run in r.gpu.runs}
    return sum(run.hours() for run in runs.values())


def summary(outcomes: dict) -> list[str]:
    """Rows per paper in each status, the equal rows split by what they rest on (``core.KINDS``)."""
    labels = bucket_labels()
    used = [k for k in labels if any(bucket(r, o) == k for rows in outcomes.values() for r, o in rows)]
    head = "| paper | rows | " + " | ".join(labels[k] for k in used) + " | GPU-hours (distinct runs) |"
    out = [head, "|---|---:|" + "---:|" * len(used) + "---:|"]
    total = {k: 0 for k in used}
    for p, rows in outcomes.items():
        counts = {k: sum(bucket(r, o) == k for r, o in rows) for k in used}
        total = {k: total[k] + counts[k] for k in used}
        out.append(
            f"| {PAPERS[p].split(' (')[0]} | {len(rows)} | "
            + " | ".join(str(counts[k]) for k in used)
            + f" | {hrs(gpu_hours(rows))} |"
        )
    every = [x for rows in outcomes.values() for x in rows]
    out.append(
        f"| **all** | {len(every)} | " + " | ".join(str(total[k]) for k in used) + f" | {hrs(gpu_hours(every))} |"
    )
    return out


INTRO = (
    "Every table of the five papers, cell by cell: the paper's value as printed, embexp's value at the same precision, "
    "the status and the command that computes it. A row that needs a GPU groups the cells one run set produces and "
    "gives that set's estimate; the arithmetic is under its table. Where that set's runs have finished (under `runs`, "
    "default `outputs`), the row shows the measured value, computed as the paper's report module computes the cell "
    "(`python -m embexp.report paper=<paper>`), with the estimate beside it."
)
STATUSES = (
    "Statuses: *equal at the paper's precision*, with what the agreement rests on: *reproduced* (computed from the "
    "real architectures, data files, the tree generator or finished runs), *formula on the paper's numbers* (the "
    "paper's own formula applied to its own printed inputs: a check of embexp's formula, not a re-run), *config "
    "echo* (embexp's config holds the paper's printed setting and the row reads it back), *by construction* "
    "(embexp's setting was chosen so that it gives the paper's number: the x3large tree counts, the TinyTE LoRA "
    "targets calibrated to the paper's counts); the summary counts each kind apart; *differs by X because Y* (the "
    "row records our value, so a test fails if it moves); *differs (unexplained)* (a test fails); *no printed "
    "value*; *measured: differs by X* (read from finished runs: no reason is recorded and no test fails); "
    "*measured in part* (some of the set's runs are missing); *needs a GPU*; *needs data*; *needs the hub*; *not "
    "in embexp*. The data-free rows are tests in `make test` (tests/test_reproduction.py); the rows that read "
    "`EMBEXP_DATA` are tests that skip without it."
)


def document(outcomes: dict, with_data: bool, runs: str = "") -> str:
    data = (
        "Rows that read real data were computed (`EMBEXP_DATA` was set)."
        if with_data
        else "`EMBEXP_DATA` was unset: the rows that read real data say which file they need."
    )
    generated = (
        f"Generated by `{COMMAND}` (`make reproduction`) from the code, the papers' printed values and the finished "
        "runs; do not edit by hand (tests/test_reproduction.py fails when the data-free rows here differ from what "
        "the code renders)."
    )
    measured = sum(o.status in ("equal", "measured", "partial") and r.gpu is not None for rs in outcomes.values()
                   for r, o in rs)
    read = (
        f"The GPU rows were read from the finished runs under `{runs}` ({measured} measured)."
        if runs
        else "No finished runs were read (none under `runs`): every GPU row gives its estimate."
    )
    out = ["# Reproduction ledger", "", generated, "", f"{INTRO} {data} {read}", "", STATUSES, "", "## Summary", ""]
    how = gpu.__doc__.split("\n\n", 1)[1].strip()
    out += summary(outcomes) + ["", "## How the GPU estimates are made", "", how, ""]
    for paper, rows in outcomes.items():
        out += [section(paper, rows)]
    return "\n".join(out).rstrip() + "\n"
