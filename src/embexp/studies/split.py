"""A seeded train/evaluation split of one local file of real rows: ``python -m embexp.analyze split``.

    python -m embexp.analyze split source=$EMBEXP_DATA/glue/sst2/validation.jsonl out=outputs/compare/sst2 n_train=600

The lines of ``source`` (JSON lines in the hub schema) are shuffled with ``random.Random(seed)``; the
first ``n_train`` become ``<out>/train.jsonl`` and the rest ``<out>/validation.jsonl``, which runs read
with ``task.data_dir=<out>``. A split that exists is kept (both files present: nothing is written), so
every run of a sweep reads the same rows. Used where the hub's labelled rows of a task are only its
validation split offline (e.g. the comparison's 600/272 split of the 872 SST-2 validation rows).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from embexp import EmbexpError
from embexp.core.config import option
from embexp.core.records import atomic_write


@dataclass
class Config:
    source: str = option("", "The file of rows to split (JSON lines in the hub schema), e.g. "
                         "$EMBEXP_DATA/glue/sst2/validation.jsonl.")
    out: str = option("", "Folder that receives train.jsonl and validation.jsonl (kept as it is when both exist).")
    n_train: int = option(600, "Lines that become train.jsonl; the rest become validation.jsonl.", ge=1)
    seed: int = option(0, "Seed of random.Random that shuffles the lines before the cut.", ge=0)


def split(cfg: Config) -> dict:
    out = Path(cfg.out)
    if not cfg.out:
        raise EmbexpError("split: out= is required (the folder that receives train.jsonl and validation.jsonl)")
    if (out / "train.jsonl").is_file() and (out / "validation.jsonl").is_file():
        return {"out": str(out), "kept": True}
    src = Path(cfg.source)
    if not src.is_file():
        raise EmbexpError(f"split: source '{cfg.source}' is not a file (set EMBEXP_DATA to the folder of local "
                          "datasets, or pass source=<file>)")
    rows = [ln for ln in src.read_text(encoding="utf-8").splitlines() if ln.strip()]
    if cfg.n_train >= len(rows):
        raise EmbexpError(f"split: n_train={cfg.n_train} leaves no evaluation rows ({src} has {len(rows)} rows)")
    random.Random(cfg.seed).shuffle(rows)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "validation.jsonl", "\n".join(rows[cfg.n_train:]) + "\n")
    atomic_write(out / "train.jsonl", "\n".join(rows[:cfg.n_train]) + "\n")  # last: its presence marks a whole split
    return {"out": str(out), "kept": False, "train": cfg.n_train, "validation": len(rows) - cfg.n_train}


def run(cfg: Config) -> dict:
    res = split(cfg)
    print(f"{res['out']}: " + ("kept (train.jsonl and validation.jsonl exist)" if res["kept"]
                               else f"{res['train']} train / {res['validation']} validation rows"))
    return res
