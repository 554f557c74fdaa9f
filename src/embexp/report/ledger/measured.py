"""The ledger's GPU rows read from finished runs: ``python -m embexp.report paper=ledger runs=outputs``.

A GPU row whose cells are metrics of one run set carries a lookup (``Row.measure``: one of the functions
below, its last argument left open with ``functools.partial``): given the index of the finished runs
(``index``: complete run directories only, ``records.run_dirs``, and never a smoke run), a value per printed
cell, None where no run holds it. Each computes its cells with the paper's report module's own functions
(``embexp.report.<paper>``: the same run filters, metrics and means over seeds), so the ledger and the report
tables never disagree. ``outcome`` compares each value with the printed number at its precision: the row is
equal, measured (differs: no reason is recorded, a measurement is not a test) or measured in part, its GPU
estimate beside it; a row with no run at all stays "needs a GPU".
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace
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


def no_se():
    """The report's standard-error policy, off: the ledger compares means only."""
    from embexp.report.cells import SE

    return SE("none", 0, Path(os.devnull))


def tinyte_nlg(model: str, cell: tuple, names: tuple, idx) -> list:
    """Tables 1, 2, 11: R-L, BLEU-4, TER (the report's column names) of one model and cell ((method, tag) of the
    runs), mean over seeds (``report.tinyte.gen_row``)."""
    from embexp.report import tinyte as rep

    cols = [c for c in (rep.RL, rep.BLEU, rep.TER) if c[2] in names]
    row = rep.gen_row(idx, no_se(), model, *cell, cols)
    return [row[n] for n in names]


def tinyte_superglue(model: str, label: str, which: tuple, idx) -> list:
    """Table 3: the row `label` of ``report.tinyte.table_3`` for one model; `which` picks its columns by
    position (BoolQ, Copa, CB, RTE, WiC, Avg.)."""
    from embexp.report import tinyte as rep

    rows, cols, *_ = rep.table_3(SimpleNamespace(models=[model]), idx, no_se())
    row = next(r for r in rows if r["Method"] == label)
    return [row[cols[2 + i]] for i in which]


def pema_t10(model: str, pema: bool, idx) -> list:
    """Table 10: the ✗ (inner method) or ✓ (PEMA) row of ``report.pema.table10`` for one model over the
    nine GLUE tasks, mean over seeds, and its Mean (over the seeds that have all nine)."""
    from embexp.report import pema as rep

    runs = [r for rs in idx.by_key.values() for r in rs if r["task_name"] == "glue" and r["model"] == model]
    runs.sort(key=lambda r: (rep.GLUE.index(r["subset"]) if r["subset"] in rep.GLUE else 99, r.get("seed", 0)))
    rows, _ = rep.table10(runs, list(rep.GLUE))
    row = next((r for r in rows if r["PEMA"] == ("✓" if pema else "✗")), {})
    return [row.get(rep.LABELS[s]) for s in rep.GLUE] + [float(row["Mean"].split()[0]) if row.get("Mean") else None]


def tinyattn(table: str, tag: str, model: str, tasks: tuple, seeds: tuple, idx) -> list:
    """Tiny-Attention: the mean over seeds of each task's metric for one setting (``report.tinyattn.gather``,
    the held-out protocol); Table 8's 4H reads the 1H run where 4H was not trained, as the report does."""
    from embexp.report import tinyattn as rep
    from embexp.report.cells import mean

    got = rep.gather(idx, table, list(seeds), "heldout")
    out = []
    for t in tasks:
        vals = got.get((tag, model), {}).get(t, ([],))[0]
        if not vals and table == "table8" and tag == "4h":
            vals = got.get(("1h", model), {}).get(t, ([],))[0]
        out.append(mean(vals))
    return out


def ktoken(table: str, column: str, idx) -> list:
    """K-Token Tables 1-3: the best of N runs' accuracy (perplexity: the lowest) and the measured length
    reduction (mean over the N), ``report.ktoken.compression_table``."""
    from embexp.report import ktoken as rep

    _, rows, _ = rep.compression_table(idx, table, [], "")
    row = next(r for r in rows if r["column"] == column)
    return [row.get("best"), row.get("reduction")]
