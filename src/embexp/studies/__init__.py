"""Analyses behind the papers' tables that compute with models or data, run with
``python -m embexp.analyze <name> key=value ...``; each module exposes a ``Config`` dataclass (help
text on every field) and ``run(cfg)`` (models/specs.py holds the papers' architectures).
They compose the real train config through ``core.cli.compose_train``, as the CLI does, and write
their tables through ``core.tables``. The papers' numbers they print beside theirs come from the
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
