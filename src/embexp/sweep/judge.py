"""The sweep's judge commands: run as written; a reference scoring is done once the run's
metrics.json holds ``asr_reference``."""

from __future__ import annotations

import json
from pathlib import Path


def args(cmd_args: list[str], extra: list[str], paper: str) -> list[str]:
    return list(cmd_args)


def done(cmd_args: list[str]) -> str:
    kv = dict(a.split("=", 1) for a in cmd_args if "=" in a)
    if kv.get("what") != "reference":
        return ""
    m = Path(kv["run_dir"]) / "metrics.json"
    return kv["run_dir"] if m.is_file() and "asr_reference" in json.loads(m.read_text()).get("metrics", {}) else ""
