"""Tables from run records: ``python -m embexp.report paper=<paper> table=<name> [key=value ...]``.

One report module per paper, found by ``embexp.core.plugins.discover`` (a new module of this package
is a new ``paper=``). Each has a ``Config`` dataclass (``base.ReportConfig``'s fields and its own,
help text on every field) and ``render(cfg)``, which writes Markdown + CSV (+ PNG where the table has
a figure) under ``out`` and prints the Markdown. Runs are read through ``embexp.core.records``, cells
computed by ``report/cells.py`` (means, the one standard error), files written by ``embexp.core.tables``.
The papers, their tables and figures, and ``table=`` without ``paper=``: docs/architecture.md ("Reports").
"""

from __future__ import annotations

import dataclasses
import sys

from embexp import EmbexpError
from embexp.core import cli

# Modules of this package that are not report modules: the shared config and cells, the claims' digests, and the curve
# comparison (``paper=compare table=curves``).
HELPERS = ("base", "cells", "compare_curves", "digest")
# Without paper=: these table= values name a report module, any other is TinyTE's.
WITHOUT_PAPER = {"compare": "compare", "curve": "run_curves"}
DEFAULT = "tinyte"


def reports() -> dict:
    """Every report module by name (a ``paper=`` value), discovered."""
    from embexp.core.plugins import discover

    return discover("embexp.report", skip=HELPERS)


def table_names(module) -> tuple[str, ...]:
    """The table= values a module takes (its Config's choices; TinyTE's numbers, table<n> and all)."""
    field = next(fl for fl in dataclasses.fields(module.Config) if fl.name == "table")
    return field.metadata.get("choices") or tuple(module.TABLES) + ("all",)


def check_paper(paper: str, mods: dict) -> None:
    if paper not in mods:
        raise EmbexpError(f"unknown paper '{paper}' (choose from: {', '.join(mods)})")


def select(argv: list[str]):
    """The module an argument list names (paper=, else table=compare|curve, else TinyTE) and the
    arguments left for its Config."""
    mods = reports()
    papers = [a.split("=", 1)[1] for a in argv if a.startswith("paper=")]
    rest = [a for a in argv if not a.startswith("paper=")]
    if papers:
        check_paper(papers[-1], mods)
        return mods[papers[-1]], rest
    table = next((a.split("=", 1)[1] for a in reversed(rest) if a.startswith("table=")), "")
    return mods[WITHOUT_PAPER.get(table, DEFAULT)], rest


def configure(argv: list[str]):
    """(module, its checked Config) for ``python -m embexp.report`` arguments: an unknown paper, key
    or table (or another value outside a field's choices) is one line naming it and the valid ones."""
    from embexp.core.cli import parse

    module, rest = select(argv)
    cfg = parse(module.Config, rest)  # validated once: every field inside its domain
    check_runs(module.Config, cfg)
    if hasattr(module, "check"):  # the module's own checks of its options (claims: its folders)
        module.check(cfg)
    return module, cfg


def check_runs(config_cls, cfg) -> None:
    """A ``runs`` that the command line names (not the field's default, which a new checkout may lack) is a
    folder or run directory that exists, or a glob that matches one (the ledger's: each of its comma-separated
    parts): a typo is one line, not a table of empty cells."""
    import glob
    from pathlib import Path

    field = next((fl for fl in dataclasses.fields(config_cls) if fl.name == "runs"), None)
    value = getattr(cfg, "runs", None)
    if field is None or not value or value == field.default or Path(value).is_dir():
        return
    for part in value.split(",") if not Path(value).exists() else [value]:
        if any(c in part for c in "*?["):
            if not any(Path(p).is_dir() for p in glob.glob(part)):
                raise EmbexpError(f"runs={value}: the glob {part} matches no folder (runs names the run directories: "
                                  f"a folder that holds them, one run directory or a glob)")
        elif not Path(part).is_dir():
            what = "is a file, not a folder" if Path(part).exists() else "does not exist"
            raise EmbexpError(f"runs={value}: {part} {what} (runs names the run directories: a folder that holds "
                              f"them, one run directory or a glob)")


def usage(paper: str | None) -> str:
    from embexp.core.cli import usage as fields

    mods = reports()
    names = [paper] if paper else list(mods)
    head = ["python -m embexp.report paper=<paper> table=<name> [key=value ...]", "", "papers and their tables:"]
    head += [f"  {'paper=' + n:<16} table=" + "|".join(table_names(mods[n])) for n in names]
    head += [f"  {'(no paper)':<16} table={t}" for t, n in WITHOUT_PAPER.items() if n in names and n != t]
    body = []
    for n in names:
        example = mods[n].__doc__.split("\n\n")[1]
        body.append(f"== paper={n} ==\n{example}\n\n" + fields("", mods[n].Config).split("\n", 2)[2])
    return "\n".join(head) + "\n\n" + "\n\n".join(body)


@cli.one_line_errors
def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        paper = next((a.split("=", 1)[1] for a in argv if a.startswith("paper=")), None)
        if paper is not None:
            check_paper(paper, reports())
        print(usage(paper))
        return
    module, cfg = configure(argv)
    try:
        module.render(cfg)
    except OSError as e:  # a table folder that cannot be made or written (read-only, a file in the way): one line
        if not e.filename:
            raise
        raise EmbexpError(f"cannot write {e.filename}: {e.strerror or e}") from None
