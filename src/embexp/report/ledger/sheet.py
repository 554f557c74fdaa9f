"""Each paper's printed cells as data: ``ledger/printed/<paper>.csv``, one row per ledger row.

The columns are the row's text: its ``id``, the ``table`` and ``cell`` it transcribes, the ``paper``'s
value exactly as printed (its precision is the comparison's), the ``kind`` of check an equal value
rests on (``core.KINDS``), the ``reason`` a value differs and the value embexp records then
(``expected``: ours at the paper's precision, so a test fails if it moves), the ``command`` that
computes it, and what a row needs that embexp cannot give here (``hub``, ``absent``). How embexp's
value is obtained (``Compute``: a function, the data files it reads, a GPU estimate, a lookup in
finished runs) is code, keyed by the same id in the paper's rows modules (``computes()``).
"""

from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path

FIELDS = ("id", "table", "cell", "paper", "kind", "reason", "expected", "command", "hub", "absent")
DIR = Path(__file__).parent / "printed"


def path(paper: str) -> Path:
    return DIR / f"{paper}.csv"


@lru_cache(maxsize=None)
def read(paper: str) -> tuple:
    """The paper's rows as dicts of FIELDS, in the file's order (the ledger's, table by table)."""
    with path(paper).open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != FIELDS:
            raise ValueError(f"{path(paper)}: columns {reader.fieldnames}, expected {', '.join(FIELDS)}")
        return tuple(dict(r) for r in reader)

