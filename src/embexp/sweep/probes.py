"""Whether an analyze or judge command of a sweep already finished: an ablation is done when its folder's
summary holds the command's metrics (from the same judge), a judge's reference scoring when the run's
metrics.json holds ``asr_reference``; any other analyze or judge command runs."""

from __future__ import annotations

import json
from pathlib import Path


def ablation_done(cmd_args: list[str]) -> str:
    """The folder of an ablation that already holds this command's metrics, else ''."""
    if cmd_args[:1] != ["ablation"]:
        return ""
    from embexp.core.cli import parse
    from embexp.studies import ablation

    cfg = parse(ablation.Config, cmd_args[1:])
    d = ablation.output_dir(cfg)
    try:
        s = json.loads((d / "summary.json").read_text())
    except (OSError, ValueError):
        return ""
    need = ablation.METRIC_CHOICES[cfg.metric]
    if any(k not in s for k in need) or ("nli" in need and s.get("nli_judge") != cfg.judge.model):
        return ""  # the folder lacks this command's metric (or another judge's): run it (generations are reused)
    return str(d)


def reference_done(cmd_args: list[str]) -> str:
    """The run directory of a judge's reference scoring already recorded, else ''."""
    kv = dict(a.split("=", 1) for a in cmd_args if "=" in a)
    if kv.get("what") != "reference":
        return ""
    m = Path(kv["run_dir"]) / "metrics.json"
    return kv["run_dir"] if m.is_file() and "asr_reference" in json.loads(m.read_text()).get("metrics", {}) else ""
