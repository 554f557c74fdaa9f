"""Tables from run records: ``python -m embexp.report paper=<paper> table=<name> [key=value ...]``.

One module per paper. Each has a ``Config`` dataclass (help text on every field) and ``render(cfg)``,
which writes Markdown + CSV (+ PNG where the table has a figure) under ``out`` and prints the
Markdown. Every module reads the runs through ``embexp.core.records`` (the run index by task, subset,
model, method, tag and seed; standard errors; Markdown, CSV and PNG output):

- ``tinyte``: the TinyTE paper's Tables 1-6, 8-11, alpaca, ranking and Figures 3 and 6 (``table=all``);
- ``pema``: PEMA's Tables 9 and 10 (Tables 2-4 need tokenizers: ``python -m embexp.analyze vocab``);
- ``pete``: PETE against the standard encoder (pete.md Table 2);
- ``tinyattn``: Tiny-Attention's Tables 1, 2, 8, 10, 11 and 12;
- ``ktoken``: K-Token Merging's Tables 1-3 and the Fig. 6 ablation;
- ``compare``: every method side by side: quality, parameters, memory, speed, export;
- ``curve`` (``table=curve``): learning curves of the runs that recorded one (``trainer.curve_at``);
- ``ledger``: the reproduction ledger, docs/reproduction.md: every table cell of the five papers, computed
  where one CPU can, else what it needs (a GPU, with an estimate; data; the hub) (``make reproduction``).

Without ``paper=``, ``table=compare`` is the comparison, ``table=curve`` the learning curves and any
other table (``table=1``, ``table=all``, ...) TinyTE's, as before the papers were named.
"""

from __future__ import annotations

import dataclasses
import sys

from embexp import EmbexpError

from embexp.core import cli

PAPERS = ("tinyte", "pema", "pete", "tinyattn", "ktoken", "compare", "ledger")


def modules() -> dict:
    """Every report module by name (the papers, and curve)."""
    from embexp.report import compare, curve, ktoken, ledger, pema, pete, tinyattn, tinyte

    return {"tinyte": tinyte, "pema": pema, "pete": pete, "tinyattn": tinyattn, "ktoken": ktoken, "compare": compare,
            "curve": curve, "ledger": ledger}


def table_names(module) -> tuple[str, ...]:
    """The table= values a module takes (its Config's choices; TinyTE's numbers, table<n> and all)."""
    field = next(fl for fl in dataclasses.fields(module.Config) if fl.name == "table")
    return field.metadata.get("choices") or tuple(module.TABLES) + ("all",)


def select(argv: list[str]):
    """The module an argument list names (paper=, else table=compare|curve, else TinyTE) and the
    arguments left for its Config."""
    mods = modules()
    papers = [a.split("=", 1)[1] for a in argv if a.startswith("paper=")]
    rest = [a for a in argv if not a.startswith("paper=")]
    if papers:
        if papers[-1] not in PAPERS:
            raise EmbexpError(f"unknown paper '{papers[-1]}' (choose from: {', '.join(PAPERS)})")
        return mods[papers[-1]], rest
    table = next((a.split("=", 1)[1] for a in reversed(rest) if a.startswith("table=")), "")
    return mods[table if table in ("compare", "curve") else "tinyte"], rest


def configure(argv: list[str]):
    """(module, its checked Config) for ``python -m embexp.report`` arguments: an unknown paper, key
    or table (or another value outside a field's choices) is one line naming it and the valid ones."""
    from embexp.analyze import parse
    from embexp.core.config import validate

    module, rest = select(argv)
    cfg = parse(module.Config, rest)
    validate(cfg)
    return module, cfg


def usage(paper: str | None) -> str:
    from embexp.analyze import usage as fields

    mods = modules()
    names = [paper] if paper else list(PAPERS) + ["curve"]
    head = ["python -m embexp.report paper=<paper> table=<name> [key=value ...]", "", "papers and their tables:"]
    head += [f"  {'paper=' + n if n != 'curve' else '(no paper)':<16} table=" + "|".join(table_names(mods[n])) for n in names]
    body = []
    for n in names:
        mod = mods[n]
        example = mod.__doc__.split("\n\n")[1]
        call = f"paper={n}" if n != "curve" else "table=curve"
        body.append(f"== {call} ==\n{example}\n\n" + fields("", mod.Config).split("\n", 2)[2])
    return "\n".join(head) + "\n\n" + "\n\n".join(body)


@cli.one_line_errors
def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        paper = next((a.split("=", 1)[1] for a in argv if a.startswith("paper=")), None)
        if paper is not None and paper not in PAPERS:
            raise EmbexpError(f"unknown paper '{paper}' (choose from: {', '.join(PAPERS)})")
        print(usage(paper))
        return
    module, cfg = configure(argv)
    module.render(cfg)
