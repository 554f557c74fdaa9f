"""Tables from run records: ``python -m embexp.report table=<n> [key=value ...]``.

One module per paper's tables, all over one shared run index:

- ``report.index``: finished runs indexed by (task family, subset, model, method, tag), standard
  errors, cells, Markdown + CSV output;
- ``report.tinyte``: the TinyTE paper's Tables 1-5, 10, 11 and the Alpaca table;
- ``report.compare``: every method side by side (``table=compare``): quality, parameters, memory,
  speed, export;
- ``report.curve``: learning curves of runs that recorded one (``table=curve``, ``trainer.curve_at``).

PEMA's and PETE's tables are computed by ``python -m embexp.analyze pema_tables|pete`` (they need
tokenizers and configs as well as runs); Tiny-Attention's and K-Token's sweeps write ordinary runs.
"""

from __future__ import annotations

import sys

from embexp import cli


@cli.one_line_errors
def main(argv: list[str] | None = None) -> None:
    from embexp.analyze import parse, usage
    from embexp.report import compare, curve, tinyte

    argv = sys.argv[1:] if argv is None else argv
    module = compare if "table=compare" in argv else curve if "table=curve" in argv else tinyte
    if argv and argv[0] in ("-h", "--help"):
        print("\n\n".join(m.__doc__.split("\n\n")[1] + "\n\n" + usage("", m.Config).replace("analyze  key", "report key")
                          for m in (tinyte, compare, curve)))
        return
    module.render(parse(module.Config, argv))
