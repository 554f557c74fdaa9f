"""The reproduction ledger: ``python -m embexp.report paper=ledger`` writes docs/reproduction.md.

    python -m embexp.report paper=ledger                      # every row of the five papers -> docs/reproduction.md
    EMBEXP_DATA=../shared/data python -m embexp.report paper=ledger   # + the rows that read real data
    python -m embexp.report paper=ledger table=pema out=      # one paper's section, printed only
    python -m embexp.report paper=ledger runs=/data/runs      # the GPU rows read from these finished runs

Every table cell of the five papers: computed where one CPU can, else what it needs (a GPU, with an estimate;
data; the hub). The modules (printed/<paper>.csv joined by id with ledger/<paper>.py's ``computes()``, core.py,
sources.py, runs.py, measured.py): docs/architecture.md ("Reports"); what the page shows and how: its own
introduction (ledger/markdown.py). ``make reproduction`` runs this; tests/test_reproduction.py checks the
file is current.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from embexp.core.config import option
from embexp.report.ledger import core
from embexp.report.ledger.core import COMMAND, PAPERS, Compute, Row, bucket, bucket_labels  # noqa: F401 (the API)
from embexp.report.ledger.runs import estimate

TABLES = tuple(PAPERS)


@dataclass
class Config:
    table: str = option(
        "all", "all: every paper, written to out; a paper's name: its section only, printed.", choices=TABLES + ("all",)
    )
    out: Optional[str] = option("docs/reproduction.md", "The ledger file (table=all); out= (empty) prints only.")
    data_dir: Optional[str] = option(
        "${oc.env:EMBEXP_DATA,''}",
        "Root of the real data (the rows that read it); default $EMBEXP_DATA; data_dir= (empty) lists those rows as "
        "needing data.",
    )
    runs: Optional[str] = option(
        "outputs",
        "Roots of finished runs, comma-separated (a folder, run directory or glob each): the GPU rows that are a "
        "metric of one run set show the measured value (smoke runs left out); runs= (empty) reads none.",
    )


def table_key(name: str) -> tuple:
    """Tables by number, then figures by number, then the text's sections, each in its given order."""
    m = re.match(r"(Table|Fig\.) (\d+)", name)
    return (("Table", "Fig.").index(m[1]), int(m[2])) if m else (2, 0)


def paper_rows(paper: str) -> list[Row]:
    """The rows of one paper: its printed cells (ledger/printed/<paper>.csv) joined by id with how embexp
    computes each (ledger/<paper>.py ``computes()``) and the GPU estimate of the runs it names (ledger/runs.py),
    table by table (``table_key``); the estimates they share are numbered (<paper>-E1, ...) in order of first use."""
    import importlib

    computes = importlib.import_module(f"embexp.report.ledger.{paper}").computes()
    cells = core.sheet(paper)
    unknown = set(computes) - {c["id"] for c in cells}
    if unknown:
        raise ValueError(f"ledger: computed but not in {core.sheet_path(paper).name}: {', '.join(sorted(unknown))}")
    found = [Row(**{k: c[k] for k in core.ROW}, **vars(computes.get(c["id"], Compute())),
                 gpu=estimate(c["runs"]) if c["runs"] else None) for c in cells]
    idle = [r.id for r in found if r.data_free and r.ours is None]
    if idle:
        raise ValueError(f"ledger: {', '.join(idle)} say nothing of how embexp computes them")
    rows = sorted(found, key=lambda r: table_key(r.table))
    refs: dict = {}
    for r in rows:
        if r.gpu is not None:
            r.gpu.ref = refs.setdefault(r.gpu.key, f"{paper}-E{len(refs) + 1}")
    ids = [r.id for r in rows]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    return rows


def all_rows() -> dict[str, list[Row]]:
    return {p: paper_rows(p) for p in PAPERS}


def render(cfg: Config) -> str:
    from embexp.report.ledger.markdown import document, section
    from embexp.report.ledger.measured import decide_with_runs, index

    data_dir = Path(str(cfg.data_dir)).expanduser() if cfg.data_dir else None
    runs = index(cfg.runs)
    papers = list(PAPERS) if cfg.table == "all" else [cfg.table]
    outcomes = {p: [(r, decide_with_runs(r, data_dir, runs)) for r in paper_rows(p)] for p in papers}
    if cfg.table == "all":
        text = document(outcomes, data_dir is not None, str(cfg.runs) if runs is not None else "")
    else:
        text = section(cfg.table, outcomes[cfg.table])
    if cfg.out and cfg.table == "all":
        Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
        Path(cfg.out).write_text(text, encoding="utf-8")
        labels = bucket_labels()
        counts = {k: sum(bucket(r, o) == k for rows in outcomes.values() for r, o in rows) for k in labels}
        print(f"wrote {cfg.out}: " + ", ".join(f"{n} {labels[k]}" for k, n in counts.items() if n))
    else:
        print(text)
    return text
