"""Table output: the Markdown, CSV and PNG files that the report tables and the studies write (here, in core,
because the studies may not import the report layer).
"""

from __future__ import annotations

import csv
from pathlib import Path

from embexp.core.records import atomic_path, atomic_write, debug_output_root


def table_dirs(runs: str, out: str, debug: str, name: str) -> tuple[str, Path]:
    """A table's (run root, output folder): `runs` or the debug preset's output_root (else outputs),
    `out` or tables/<name> (<output_root>/tables/<name> with a debug preset)."""
    root = runs or debug_output_root(debug)
    return root, Path(out or (Path(debug_output_root(debug)) / "tables" / name if debug else Path("tables") / name))


def markdown(rows: list[dict], columns: list[str], title: str = "") -> str:
    """A Markdown table (floats with two decimals, None empty), under `title` as a ### heading."""
    fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else ("" if v is None else str(v))  # noqa: E731
    head = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines = ([f"### {title}", ""] if title else []) + head
    return "\n".join(lines + ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]) + "\n"


def write_csv(rows: list[dict], fields: list[str], path: Path) -> None:
    """`rows` as CSV with these columns (others left out), written by rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def write_table(rows: list[dict], columns: list[str], stem: Path, title: str = "") -> str:
    """Write `rows` as <stem>.md (Markdown) and <stem>.csv (these columns); returns the Markdown text."""
    stem = Path(stem)
    md = markdown(rows, columns, title)
    stem.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(stem.with_suffix(".md"), md)
    write_csv(rows, columns, stem.with_suffix(".csv"))
    return md


def write_text_table(text: str, rows: list[dict], fields: list[str], stem: Path) -> None:
    """A table whose Markdown is composed cell by cell (e.g. ours beside the paper's figure in
    brackets): <stem>.md holds `text`, <stem>.csv the rows' plain values."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(stem.with_suffix(".md"), text + "\n")
    write_csv(rows, fields, stem.with_suffix(".csv"))


def emit(rows: list[dict], cols: list[str], stem: Path, title: str, pm: bool) -> str:
    """<stem>.md (cols; value ± se where pm) and <stem>.csv (cols + every other key of the rows,
    e.g. '<col> se' and '<col> seeds')."""
    def show(r, c):
        v, s = r.get(c), r.get(f"{c} se")
        if pm and isinstance(v, float) and isinstance(s, float):
            return f"{v:.2f} ± {s:.2f}"
        return v
    md = markdown([{c: show(r, c) for c in cols} for r in rows], cols, title)
    stem.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(stem.with_suffix(".md"), md)
    extra = [k for r in rows for k in r if k not in cols]
    write_csv(rows, cols + list(dict.fromkeys(extra)), stem.with_suffix(".csv"))
    return md


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig, path: Path, dpi: int = 120) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
