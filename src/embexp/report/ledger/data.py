"""The real data behind the ledger's data rows (``EMBEXP_DATA``): rows of a split as the project's
tasks read them."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


def task(name: str, subset: str, data_dir: Path, **fields):
    """The task ``name/subset`` reading local files under `data_dir` (no selection carve)."""
    from omegaconf import OmegaConf

    from embexp.tasks import TASKS, build_task

    cfg = OmegaConf.merge(
        OmegaConf.structured(TASKS[name].Config),
        {"name": name, "subset": subset, "source": "local", "data_dir": str(data_dir), "select_split": "", **fields},
    )
    return build_task(cfg)


@lru_cache(maxsize=None)
def _rows(name: str, subset: str, split: str, data_dir: str) -> tuple:
    """Every row of one split, from the file the task reads (hidden test labels are only counted)."""
    from embexp.tasks.base import read_jsonl

    t = task(name, subset, Path(data_dir))
    return tuple(read_jsonl(t.local_path(split)))


def rows(name: str, subset: str, split: str, data_dir: Path) -> tuple:
    return _rows(name, subset, split, str(data_dir))


def n_rows(name: str, subset: str, split: str, data_dir: Path) -> int:
    return len(rows(name, subset, split, data_dir))


GLUE_FILES = {
    "cola": "cola",
    "mnli": "mnli",
    "mrpc": "mrpc",
    "qnli": "qnli",
    "qqp": "qqp",
    "rte": "rte",
    "sst2": "sst2",
    "stsb": "stsb",
    "wnli": "wnli",
}


def glue_file(subset: str, split: str) -> str:
    """The path under EMBEXP_DATA of a GLUE split (../shared/data/README.md)."""
    return f"glue/{GLUE_FILES[subset]}/{split}.jsonl"
