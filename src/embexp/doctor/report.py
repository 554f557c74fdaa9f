"""The report: one screen on stdout, and ``report.md`` + ``report.json`` under the output folder."""

from __future__ import annotations

import datetime
import json
import math
from pathlib import Path

from embexp.doctor.common import Section

TITLES = {"environment": "1. Environment", "numerics": "2. Numerics", "memory": "3. Memory", "speed": "4. Speed",
          "fsdp": "5. FSDP"}
MARK = {"pass": "PASS", "fail": "FAIL", "info": "info", "skipped": "skipped"}


def _json(o):
    if isinstance(o, float) and not math.isfinite(o):
        return str(o)
    if isinstance(o, dict):
        return {str(k): _json(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_json(v) for v in o]
    return o


def screen(head: list[str], sections: list[Section], verdict: str, out: Path) -> str:
    lines = list(head)
    for s in sections:
        lines.append(f"{TITLES.get(s.name, s.name)} [{MARK[s.status]}]")
        lines += [f"   {ln}" for ln in s.screen]
    lines += [verdict, f"report: {out / 'report.md'} (+ report.json)"]
    return "\n".join(lines)


def markdown(head: list[str], sections: list[Section], verdict: str, explain: dict) -> str:
    lines = ["# embexp gpu-check", "", *[f"{h}  " for h in head], "", f"**{verdict}**", ""]
    for s in sections:
        lines += [f"## {TITLES.get(s.name, s.name)}: {MARK[s.status]}", ""]
        if explain.get(s.name):
            lines += [explain[s.name], ""]
        lines += s.markdown + [""]
    return "\n".join(lines).rstrip() + "\n"


def write(out: Path, head: list[str], sections: list[Section], verdict: str, settings: dict, explain: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(markdown(head, sections, verdict, explain))
    data = {"written": datetime.datetime.now().isoformat(timespec="seconds"), "header": head, "verdict": verdict,
            "passed": all(s.status != "fail" for s in sections), "settings": settings,
            "sections": {s.name: {"status": s.status, "summary": s.screen, **s.data} for s in sections}}
    (out / "report.json").write_text(json.dumps(_json(data), indent=1, default=str) + "\n")
