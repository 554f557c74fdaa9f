"""Each paper's printed cells as data: ``ledger/printed/<paper>.csv``, one row per ledger row.

The columns are the row's text: its ``id``, the ``table`` and ``cell`` it transcribes, the ``paper``'s
value exactly as printed (its precision is the comparison's), the ``kind`` of check an equal value
rests on (``core.KINDS``), the ``reason`` a value differs and the value embexp records then
(``expected``: ours at the paper's precision, so a test fails if it moves), the ``command`` that
computes it, what a row needs that embexp cannot give here (``hub``, ``absent``), and for a row
whose check is the paper's formula on its own numbers, the printed numbers it applies it to
(``inputs``, space-separated: they are printed cells too, some of no other row). How embexp's
value is obtained (``Compute``: a function, the data files it reads, a GPU estimate, a lookup in
finished runs) is code, keyed by the same id in the paper's rows modules (``computes()``).
"""

from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path

FIELDS = ("id", "table", "cell", "paper", "kind", "reason", "expected", "command", "hub", "absent", "inputs")
ROW = FIELDS[:-1]  # the Row's fields; ``inputs`` is what a formula row computes from
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



def inputs(paper: str, rid: str) -> tuple:
    """The printed numbers a formula row of the paper applies its formula to (the ``inputs`` column)."""
    found = [r["inputs"] for r in read(paper) if r["id"] == rid]
    if not found or not found[0]:
        raise ValueError(f"{path(paper).name}: {rid} has no inputs")
    return tuple(float(x) for x in found[0].split())
