"""Run records: one directory per run, written atomically, with an explicit status.

A directory is complete only when ``status.json`` says so; ``metrics.json`` is written (by
rename) just before that, and removed when a run starts, so a killed run is never mistaken for
a finished one. Statuses: running, failed, interrupted (a preemption notice; resumable), complete.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from omegaconf import OmegaConf

STATUS, METRICS, CONFIG = "status.json", "metrics.json", "config.yaml"


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_json(path: Path, obj) -> None:
    atomic_write(path, json.dumps(_finite(obj), indent=2, sort_keys=False, default=_default, allow_nan=False) + "\n")


def _finite(o):
    """NaN/inf become null: metrics.json stays strict JSON."""
    if isinstance(o, float) and (o != o or o in (float("inf"), float("-inf"))):
        return None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def _default(o):
    if hasattr(o, "item"):
        return o.item()
    return str(o)


def git_commit() -> str:
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class RunRecord:
    """Writes one run directory. Only the main process writes; the others hold a no-op record."""

    def __init__(self, run_dir: Path, is_main: bool = True):
        self.dir = Path(run_dir)
        self.is_main = is_main

    def start(self, cfg, resume: bool = False) -> None:
        if not self.is_main:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / METRICS).unlink(missing_ok=True)
        if not resume:
            (self.dir / "predictions.jsonl").unlink(missing_ok=True)
        atomic_write(self.dir / CONFIG, OmegaConf.to_yaml(cfg, resolve=True))
        write_json(self.dir / STATUS, {"status": "running", "started": time.strftime("%Y-%m-%dT%H:%M:%S")})

    def write_jsonl(self, name: str, rows: list[dict]) -> None:
        if self.is_main:
            atomic_write(self.dir / name, "".join(json.dumps(r, ensure_ascii=False, default=_default) + "\n" for r in rows))

    def finish(self, metrics: dict) -> None:
        if not self.is_main:
            return
        write_json(self.dir / METRICS, metrics)
        write_json(self.dir / STATUS, {"status": "complete", "finished": time.strftime("%Y-%m-%dT%H:%M:%S")})

    def interrupt(self, message: str) -> None:
        """Stopped on a preemption notice with a checkpoint: never ``complete``; resume continues it."""
        if self.is_main and self.dir.is_dir():
            write_json(self.dir / STATUS, {"status": "interrupted", "reason": message,
                                           "at": time.strftime("%Y-%m-%dT%H:%M:%S")})

    def fail(self, message: str) -> None:
        if self.is_main and self.dir.is_dir():
            write_json(self.dir / STATUS, {"status": "failed", "error": message})


def is_complete(run_dir: Path) -> bool:
    try:
        return json.loads((Path(run_dir) / STATUS).read_text())["status"] == "complete" and (Path(run_dir) / METRICS).is_file()
    except (OSError, ValueError, KeyError):
        return False


def load_runs(root: Path) -> list[dict]:
    """metrics.json of every complete run below `root` (with its directory under `run_dir`)."""
    runs = []
    for status in sorted(Path(root).rglob(STATUS)):
        d = status.parent
        if is_complete(d):
            m = json.loads((d / METRICS).read_text())
            m["run_dir"] = str(d)
            runs.append(m)
    return runs


def write_table(rows: list[dict], columns: list[str], stem: Path, title: str = "") -> str:
    """Write `rows` as <stem>.md (Markdown) and <stem>.csv; returns the Markdown text."""
    import csv

    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else ("" if v is None else str(v))  # noqa: E731
    lines = ([f"### {title}", ""] if title else []) + [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
    ] + ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]
    md = "\n".join(lines) + "\n"
    atomic_write(stem.with_suffix(".md"), md)
    tmp = stem.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, stem.with_suffix(".csv"))
    return md
