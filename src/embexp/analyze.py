"""Analyses behind the papers' tables that compute with models or data: ``python -m embexp.analyze <analysis> key=value ...``.

Tables read from finished runs alone are ``python -m embexp.report`` (PEMA Tables 9-10: ``paper=pema``,
PETE's comparison: ``paper=pete``). Each analysis is a module in ``embexp.studies`` with a config dataclass (every field has help
text) and ``run(cfg)``; arguments are OmegaConf dot-list overrides checked against the dataclass,
so a typo fails with one line naming the valid keys. ``python -m embexp.analyze <analysis> --help``
lists the fields.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from embexp import EmbexpError

from embexp.core import cli

# name -> module under embexp.studies exposing `Config` (a dataclass) and `run(cfg)`.
ANALYSES = {
    "params": "embexp.studies.params",
    "ablation": "embexp.studies.ablation",
    "correlation": "embexp.studies.correlation",
    "lengths": "embexp.studies.lengths",
    "vocab": "embexp.studies.vocab",
    "split": "embexp.studies.split",
    "eval_evidence": "embexp.studies.eval_evidence",
}


def parse(config_cls, args: list[str]):
    """Dot-list overrides (key=value) merged onto the dataclass schema; one-line errors."""
    try:
        return OmegaConf.merge(OmegaConf.structured(config_cls), OmegaConf.from_dotlist(args))
    except OmegaConfBaseException as e:
        valid = ", ".join(fl.name for fl in dataclasses.fields(config_cls))
        raise EmbexpError(f"{str(e).splitlines()[0]} (valid keys: {valid})") from None


def usage(name: str, config_cls) -> str:
    lines = [f"python -m embexp.analyze {name} key=value ...", ""]
    for fl in dataclasses.fields(config_cls):
        default = fl.default if fl.default is not dataclasses.MISSING else (fl.default_factory() if fl.default_factory is not dataclasses.MISSING else "")
        lines.append(f"  {fl.name}={default!s:<24} {fl.metadata.get('help', '')}")
    return "\n".join(lines)


@cli.one_line_errors
def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("python -m embexp.analyze <analysis> key=value ...\nanalyses: " + ", ".join(ANALYSES))
        return
    name, args = argv[0], argv[1:]
    if name not in ANALYSES:
        raise EmbexpError(f"unknown analysis '{name}' (choose from: {', '.join(ANALYSES)})")
    mod = importlib.import_module(ANALYSES[name])
    if args and args[0] in ("-h", "--help"):
        print(usage(name, mod.Config))
        return
    from embexp.core.config import validate

    cfg = parse(mod.Config, args)
    validate(cfg)  # a value outside a field's domain is one line before any tokenizer, data or model loads
    cli.quiet_libraries()
    mod.run(cfg)


if __name__ == "__main__":
    main()
