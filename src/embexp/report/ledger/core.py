"""A row of the reproduction ledger and how its status is decided (docs/reproduction.md).

A row is one cell of a paper's table (or a group of cells one run set produces, for the rows that
need a GPU): the paper's value as printed, a function computing embexp's, the command a user runs
for it, and what it needs. Its printed half is a line of the paper's data file, ledger/printed/<paper>.csv
(``sheet``): its ``id``, the ``table`` and ``cell`` it transcribes, the ``paper``'s value exactly as printed
(its precision is the comparison's), the ``kind`` of check an equal value rests on (``KINDS``), the
``reason`` a value differs and the value embexp records then (``expected``: ours at the paper's precision,
so a test fails if it moves), the ``command`` that computes it, what a row needs that embexp cannot give
here (``hub``, ``absent``), the runs a GPU row needs (``runs``: a set or a run of the GPU estimates' table,
ledger/runs.py), and for a row whose check is the paper's formula on its own numbers, the
printed numbers it applies it to (``inputs``, space-separated: they are printed cells too, some of no
other row). Its code half is a ``Compute`` keyed by the same id in the paper's module, ledger/<paper>.py
(``computes()``): a function, the data files it reads, a lookup in finished runs. Its status (``decide``) is one
of ``LABELS``, an equal one split by ``KINDS``; what each means is docs/reproduction.md's "Statuses" paragraph
(ledger/markdown.py ``STATUSES``).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional

from embexp import EmbexpError

PAPERS = {
    "tinyte": "TinyTE (papers/tinyte.md)",
    "pema": "PEMA (papers/pema.md)",
    "pete": "PETE (papers/pete.md)",
    "tinyattn": "Tiny-Attention (papers/tiny-attention.md)",
    "ktoken": "K-Token Merging (papers/k-token-merging.md)",
}  # each paper's section title; its rows module is ledger/<paper>.py (``computes()``: id -> Compute)
COMMAND = "python -m embexp.report paper=ledger"
LABELS = {
    "equal": "equal at the paper's precision",
    "differs": "differs (explained)",
    "unexplained": "differs (unexplained)",
    "unprinted": "no printed value (ours recorded)",
    "measured": "measured: differs",
    "partial": "measured in part",
    "gpu": "needs a GPU",
    "data": "needs data",
    "hub": "needs the hub",
    "absent": "not in embexp",
    "error": "error",
}
# what an equal row's agreement rests on (Row.kind); the summary counts each apart
KINDS = {
    "reproduced": "reproduced",  # computed from the real architectures, data files, generator or finished runs
    "formula": "formula on the paper's numbers",  # the paper's own formula applied to its own printed inputs
    "config": "config echo",  # embexp's config holds the paper's printed setting, read back
    "construction": "by construction",  # embexp's setting was chosen so that it gives the paper's number
}
NOT_PRINTED = ("—", "-", "")

_NUM = re.compile(r"^(?P<pre>~|≈|roughly )?(?P<num>\d[\d,]*(?:\.\d+)?)(?P<suf>K|k|M|B|%| thousand| million| MB| s)?$")
_SCI = re.compile(r"^\d+(?:\.\d+)?e-?\d+$")
_SCALE = {  # the suffixes that scale the printed digits (the others are units: 1)
    "K": 1e3,
    "k": 1e3,
    "M": 1e6,
    "B": 1e9,
    " thousand": 1e3,
    " million": 1e6,
}


@dataclass(frozen=True)
class Printed:
    """A number as a paper prints it: value in base units, and the precision the text carries."""

    text: str
    value: float
    scale: float  # the unit of the printed digits (1e3 for "176K")
    decimals: int  # -1: scientific ("1e-8"), compared as the number itself
    suffix: str
    commas: bool
    prefix: str

    def digits(self, x: float) -> str:
        if self.decimals < 0:
            mant, exp = f"{x:e}".split("e")
            return f"{float(mant):g}e{int(exp)}"
        q = round(x / self.scale, self.decimals)
        return f"{q:,.{self.decimals}f}" if self.commas else f"{q:.{self.decimals}f}"

    def render(self, x: float) -> str:
        """`x` (base units) written as the paper writes this number."""
        return f"{self.prefix}{self.digits(x)}{self.suffix}"

    def same(self, x: float) -> bool:
        if self.decimals < 0:
            return math.isclose(x, self.value, rel_tol=1e-9)
        return self.digits(x) == self.digits(self.value)

    def delta(self, x: float) -> str:
        """|x - printed| at the printed precision, with its unit."""
        d = abs(x - self.value)
        if self.decimals < 0:
            return f"{d:g}"
        q = round(d / self.scale, self.decimals)
        unit = (" point" + ("s" if q != 1 else "")) if self.suffix == "%" else self.suffix
        return f"{q:.{self.decimals}f}{unit}"


def printed(text: str) -> Optional[Printed]:
    """The number a printed cell holds, or None when it is not one ('Linear', '—'); its precision is the text's
    ("176K" -> thousands, "54.9" -> one decimal, "8.9M" -> 0.1M, "1e-8" -> the number itself)."""
    t = text.strip()
    if _SCI.match(t):
        return Printed(t, float(t), 1.0, -1, "", False, "")
    m = _NUM.match(t)
    if not m:
        return None
    num, suf = m["num"], m["suf"]
    decimals = len(num.split(".")[1]) if "." in num else 0
    scale = _SCALE.get(suf, 1.0)
    return Printed(t, float(num.replace(",", "")) * scale, scale, decimals, suf or "", "," in num, m["pre"] or "")


@dataclass
class Row:
    """One ledger row. ``ours(data_dir)`` returns embexp's value in base units (a count, a percent
    for a '%' cell) or a string for a non-numeric cell; it runs only when the row needs nothing."""

    id: str
    table: str
    cell: str
    paper: str
    command: str
    ours: Optional[Callable[[Optional[Path]], object]] = None
    reason: str = ""
    expected: str = ""
    data: tuple = ()
    gpu: object = None  # an Estimate (ledger/runs.py)
    # a GPU row's lookup in the finished runs: (records.Runs) -> a value per printed cell (None: no run)
    measure: Optional[Callable[[object], list]] = None
    hub: str = ""
    absent: str = ""
    kind: str = "reproduced"  # what an equal status rests on (KINDS)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"ledger row {self.id}: kind {self.kind!r} is not one of {', '.join(KINDS)}")

    @property
    def data_free(self) -> bool:
        return not (self.data or self.gpu or self.hub or self.absent)


@dataclass(frozen=True)
class Compute:
    """How embexp gets one row's value: the code half of a row, keyed by the row's id in its paper's
    data file (ledger/printed/<paper>.csv), which holds the printed half. ``ours``, ``data`` and ``measure``
    are the Row's fields of the same names."""

    ours: Optional[Callable[[Optional[Path]], object]] = None
    data: tuple = ()
    measure: Optional[Callable[[object], list]] = None


@dataclass
class Outcome:
    status: str
    ours: str
    text: str


def missing_files(row: Row, data_dir: Optional[Path]) -> list[str]:
    return [p for p in row.data if data_dir is None or not (Path(data_dir) / p).is_file()]


def needs(row: Row, data_dir: Optional[Path]) -> Optional[Outcome]:
    """The outcome of a row that cannot be computed here, else None."""
    if row.absent:
        return Outcome("absent", "", f"not in embexp: {row.absent}")
    if row.hub:
        return Outcome("hub", "", f"needs the hub: {row.hub}")
    if row.gpu is not None:
        return Outcome("gpu", "", f"needs a GPU: {row.gpu.summary()}")
    gone = missing_files(row, data_dir)
    if gone:
        if data_dir is None:
            return Outcome("data", "", "needs data: EMBEXP_DATA is unset (reads " + ", ".join(row.data) + ")")
        return Outcome("data", "", "needs data: no " + ", ".join(gone) + " under EMBEXP_DATA")
    return None


def decide(row: Row, data_dir: Optional[Path] = None) -> Outcome:
    """The row's status, computing ours when nothing is missing."""
    out = needs(row, data_dir)
    if out is not None:
        return out
    try:
        value = row.ours(data_dir)
    except EmbexpError as e:
        return Outcome("error", "", f"error: {e}")
    return compare(row, value)


def equal_text(row: Row) -> str:
    return f"{LABELS['equal']} ({KINDS[row.kind]})"


def bucket(row: Row, out: Outcome) -> str:
    """The summary's column of a row: its status, an equal row's split by kind (``equal:<kind>``)."""
    return f"equal:{row.kind}" if out.status == "equal" else out.status


def bucket_labels() -> dict[str, str]:
    """Every summary column and its heading, in order."""
    return {**{f"equal:{k}": f"equal: {v}" for k, v in KINDS.items()},
            **{k: v for k, v in LABELS.items() if k != "equal"}}


def compare(row: Row, value) -> Outcome:
    if row.paper in NOT_PRINTED:
        fmt = printed(row.expected)
        ours = fmt.render(value) if fmt and not isinstance(value, str) else str(value)
        return Outcome("unprinted", ours, LABELS["unprinted"])
    p = printed(row.paper)
    if p is None or isinstance(value, str):
        ours = str(value)
        if ours.lower() == row.paper.lower():
            return Outcome("equal", ours, equal_text(row))
        return Outcome(
            "differs" if row.reason else "unexplained",
            ours,
            f"differs because {row.reason}" if row.reason else "differs (unexplained)",
        )
    ours = p.render(value)
    if p.same(value):
        return Outcome("equal", ours, equal_text(row))
    if row.reason:
        return Outcome("differs", ours, f"differs by {p.delta(value)} because {row.reason}")
    return Outcome("unexplained", ours, f"differs by {p.delta(value)} (unexplained)")


# the columns of ledger/printed/<paper>.csv (module doc)
FIELDS = ("id", "table", "cell", "paper", "kind", "reason", "expected", "command", "hub", "absent", "runs", "inputs")
ROW = FIELDS[:-2]  # the Row's fields; ``runs`` names its GPU estimate, ``inputs`` is what a formula row computes from
DIR = Path(__file__).parent / "printed"


def sheet_path(paper: str) -> Path:
    return DIR / f"{paper}.csv"


@lru_cache(maxsize=None)
def sheet(paper: str) -> tuple:
    """The paper's rows as dicts of FIELDS, in the file's order (the ledger's, table by table)."""
    with sheet_path(paper).open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != FIELDS:
            raise ValueError(f"{sheet_path(paper)}: columns {reader.fieldnames}, expected {', '.join(FIELDS)}")
        return tuple(dict(r) for r in reader)


def inputs(paper: str, rid: str) -> tuple:
    """The printed numbers a formula row of the paper applies its formula to (the ``inputs`` column)."""
    found = [r["inputs"] for r in sheet(paper) if r["id"] == rid]
    if not found or not found[0]:
        raise ValueError(f"{sheet_path(paper).name}: {rid} has no inputs")
    return tuple(float(x) for x in found[0].split())


_LEADING = re.compile(r"[~≈]?(\d[\d,]*(?:\.\d+)?)")


def printed_cell(paper: str, rid: str) -> str:
    """A row's cell as the paper prints it (its ``paper`` column). The report modules read the paper's numbers
    here and in ``printed_numbers`` and ``inputs``, never a copy (tests/test_reproduction.py)."""
    text = next((c["paper"] for c in sheet(paper) if c["id"] == rid), None)
    if text is None:
        raise ValueError(f"{sheet_path(paper).name}: no row {rid}")
    return text


def printed_numbers(paper: str, rid: str) -> list:
    """The numbers a row's printed cell holds, one per '/'-separated part, each the part's leading number (an int
    where it has no decimals): '88.57±2.99 / 68.38±2.53' -> [88.57, 68.38], '89.3/89.6' -> [89.3, 89.6],
    '10.21 / 7.38 (real: 7.51)' -> [10.21, 7.38]."""
    text = printed_cell(paper, rid)
    found = [_LEADING.match(part.strip()) for part in text.split("/")]
    if not all(found):
        raise ValueError(f"{sheet_path(paper).name}: {rid}'s printed cell {text!r} is not numbers")
    return [float(m[1].replace(",", "")) if "." in m[1] else int(m[1].replace(",", "")) for m in found]
