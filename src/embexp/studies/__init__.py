"""Analyses behind the papers' tables that compute with models or data (``python -m embexp.analyze``: its module
doc says what an analysis module holds). They compose the real train config through ``core.cli.compose_train``
and write their tables through ``core.tables``; the papers' numbers they print beside theirs come from the
reproduction ledger's data files (``printed_cell``).
"""

from __future__ import annotations

import csv
from pathlib import Path

PRINTED = Path(__file__).parents[1] / "report" / "ledger" / "printed"  # read as files: studies import no report module


def printed_cell(paper: str, rid: str) -> str:
    """Row `rid`'s cell as the paper prints it (the ``paper`` column of report/ledger/printed/<paper>.csv, the one
    copy of the papers' numbers)."""
    with (PRINTED / f"{paper}.csv").open(encoding="utf-8", newline="") as fh:
        return next(r["paper"] for r in csv.DictReader(fh) if r["id"] == rid)
