"""The sweep's analyze commands: the extra overrides appended; an ablation is done when its folder's
summary holds the command's metrics (from the same judge)."""

from __future__ import annotations

import json


def args(cmd_args: list[str], extra: list[str], paper: str) -> list[str]:
    return list(cmd_args) + extra


def done(cmd_args: list[str]) -> str:
    """The folder of an ablation that already holds this command's metrics, else ''."""
    if cmd_args[:1] != ["ablation"]:
        return ""
    from embexp.core.cli import parse
    from embexp.studies import ablation

    kv = dict(a.split("=", 1) for a in cmd_args if "=" in a)
    d = ablation.output_dir(parse(ablation.Config, cmd_args[1:]))
    try:
        s = json.loads((d / "summary.json").read_text())
    except (OSError, ValueError):
        return ""
    need = {"bleu": ["bleu"], "nli": ["nli"], "both": ["bleu", "nli"]}.get(kv.get("metric", "bleu"), ["bleu"])
    if any(k not in s for k in need) or ("nli" in need and s.get("nli_judge") != kv.get("judge.model")):
        return ""  # the folder lacks this command's metric (or another judge's): run it (generations are reused)
    return str(d)
