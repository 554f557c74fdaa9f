"""The ledger's GPU rows read from finished runs: ``python -m embexp.report paper=ledger runs=outputs``.

A GPU row whose cells are metrics of one run set carries a lookup (``Row.measure``, built in
ledger/lookups.py from the paper's report module): given the index of the finished runs
(``records.Runs``), a value per printed cell, None where no run holds it. Only complete run
directories count (``records.run_dirs``: status.json says complete and metrics.json is there; a
failed, interrupted or running directory is never read), and never a smoke run (``model.source:
tiny``, ``model.init: random`` or ``task.source: fixture``: random weights or a fixture measure nothing of
the paper's).

Each measured cell is compared with the paper's printed number at its precision (the printed ± s.e.,
subscript s.d. and '*' marks are left out: the mean is compared): every cell equal -> ``equal``;
a cell differs -> ``measured`` ("measured: differs by X", no reason recorded: a measurement is not a
test); some cells have no run yet and the rest are equal -> ``partial``. The row keeps its GPU
estimate beside the result. A row with no run at all stays "needs a GPU".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from embexp import EmbexpError
from embexp.report.ledger.core import Outcome, Row, decide, printed

NO_RUN = "—"


def smoke(run: dict) -> bool:
    """A run of random weights (a tiny model, model.init=random) or on a fixture (debug=smoke, tests): not a
    measurement."""
    cfg = run.get("config") or {}
    model = cfg.get("model") or {}
    return (model.get("source") == "tiny" or model.get("init") == "random"
            or (cfg.get("task") or {}).get("source") == "fixture")


def index(spec: Optional[str]):
    """The finished runs under the comma-separated roots of `spec` (a folder, run directory or glob
    each), smoke runs left out; None when there are none (or `spec` is empty)."""
    from embexp.core.records import Runs, collect_runs

    found: dict = {}
    for root in [s.strip() for s in str(spec or "").split(",") if s.strip()]:
        for r in collect_runs(root):
            if not smoke(r):
                found.setdefault(str(Path(r["run_dir"]).resolve()), r)
    return Runs(list(found.values())) if found else None


def number(text: str):
    """The mean a printed cell holds: '21.62±0.15' -> 21.62, '75.2₁.₅' -> 75.2, '80.4*' -> 80.4."""
    t = re.split(r"[₀-₉]", text.strip().split("±")[0])[0].rstrip("*").strip()
    return printed(t)


def outcome(row: Row, values: list) -> Optional[Outcome]:
    """The row's outcome from measured values (one per ' / '-separated printed cell), None without any."""
    parts = row.paper.split(" / ")
    if len(values) != len(parts):
        return Outcome("error", "", f"error: {len(values)} measured values for {len(parts)} printed cells")
    if all(v is None for v in values):
        return None
    shown, notes, equal = [], [], 0
    for text, v in zip(parts, values):
        p = number(text)
        if v is None:
            shown.append(NO_RUN)
            notes.append("no run")
        elif p is None:
            shown.append(f"{v:.2f}")
            notes.append("not a printed number")
        else:
            shown.append(p.render(v))
            equal += p.same(v)
            notes.append("=" if p.same(v) else p.delta(v))
    est = f"; GPU estimate {row.gpu.summary()}" if row.gpu is not None else ""
    ours = " / ".join(shown)
    if equal == len(parts):
        return Outcome("equal", ours, f"equal at the paper's precision (measured{est})")
    if any(n not in ("=", "no run") for n in notes):
        by = notes[0] if len(parts) == 1 else " / ".join(notes)
        return Outcome("measured", ours, f"measured: differs by {by}{est}")
    return Outcome("partial", ours, f"measured in part: {' / '.join(notes)}{est}")


def decide_with_runs(row: Row, data_dir: Optional[Path], runs) -> Outcome:
    """``decide``, except that a GPU row with a lookup and finished runs is measured."""
    if runs is not None and row.measure is not None:
        try:
            out = outcome(row, row.measure(runs))
        except EmbexpError as e:
            out = Outcome("error", "", f"error: {e}")
        if out is not None:
            return out
    return decide(row, data_dir)
