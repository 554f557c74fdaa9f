"""The verdict cache: one JSONL line per verdict, keyed by a sha256 of what the judge read (docs/judge.md,
"Cache")."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


class VerdictCache:
    """sha256 key -> verdict, backed by an append-only JSONL file (one write per batch)."""

    def __init__(self, path: Path | None):
        self.path = Path(path) if path else None
        self.data: dict[str, float] = {}
        if self.path and self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self.data[row["key"]] = float(row["verdict"])
                except (ValueError, KeyError, TypeError):  # a line cut by a kill mid-write
                    continue

    def get(self, key: str) -> float | None:
        return self.data.get(key)

    def add(self, rows: list[dict]) -> None:
        """Store verdicts (NaN ones are not cached: a re-score asks again) and append them in one write."""
        rows = [r for r in rows if r["verdict"] == r["verdict"]]
        for r in rows:
            self.data[r["key"]] = r["verdict"]
        if not self.path or not rows:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        blob = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, blob)
            os.fsync(fd)
        finally:
            os.close(fd)


def cache_key(model: str, backend: str, kind: str, prompt: str) -> str:
    return hashlib.sha256(json.dumps([model, backend, kind, prompt], ensure_ascii=False).encode("utf-8")).hexdigest()
