"""Analyses behind the papers' tables that compute with models or data:
``python -m embexp.analyze <analysis> key=value ...``.

Tables read from finished runs alone are ``python -m embexp.report``. Each analysis is a module of
``embexp.studies`` with a config dataclass (every field has help text) and ``run(cfg)``, found by
discovery (no list names them); arguments are dot-list overrides checked against the dataclass, so a
typo fails with one line naming the valid keys. ``python -m embexp.analyze <analysis> --help`` lists
the fields.
"""

from __future__ import annotations

import sys

from embexp import EmbexpError
from embexp.core import cli
from embexp.core.plugins import discover


def analyses() -> dict:
    """Every module of embexp.studies that is an analysis (a ``Config`` and a ``run``), by name."""
    return {name: mod for name, mod in discover("embexp.studies").items()
            if hasattr(mod, "Config") and hasattr(mod, "run")}


@cli.one_line_errors
def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    found = analyses()
    if not argv or argv[0] in ("-h", "--help"):
        print("python -m embexp.analyze <analysis> key=value ...\nanalyses: " + ", ".join(found))
        return
    name, args = argv[0], argv[1:]
    if name not in found:
        raise EmbexpError(f"unknown analysis '{name}' (choose from: {', '.join(found)})")
    mod = found[name]
    if args and args[0] in ("-h", "--help"):
        print(cli.usage(name, mod.Config))
        return
    cfg = cli.parse(mod.Config, args)  # a value outside a field's domain is one line before anything loads
    cli.quiet_libraries()
    mod.run(cfg)


if __name__ == "__main__":
    main()
