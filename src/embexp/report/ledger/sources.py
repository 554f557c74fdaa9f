"""What the ledger's rows compute from, cached per process: trainable-parameter counts of the real
architectures on the ``meta`` device (studies/params.py), the configs ``python -m embexp.train``
composes, and the real data behind the data rows (``EMBEXP_DATA``): rows of a split as the project's
tasks read them."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=None)
def count(model: str, *overrides: str, num_labels: int = 2) -> dict:
    """``studies.params.count`` of one cell (tp: trainable incl. an encoder head, method, total)."""
    from embexp.studies import params

    return params.count(model, list(overrides), num_labels)


def tp(model: str, *overrides: str, num_labels: int = 2) -> int:
    return count(model, *overrides, num_labels=num_labels)["tp"]


@lru_cache(maxsize=None)
def spec_config(model: str):
    """The transformers config of a stored architecture (models/specs.py)."""
    import transformers as tf

    from embexp.models.specs import SPECS

    spec = SPECS[model]
    return tf.AutoConfig.for_model(spec["family"], **spec["config"])


@lru_cache(maxsize=None)
def shape(model: str) -> tuple[int, int, int]:
    """(embedding rows, dim, parameters) of a PEMA registry model (studies/vocab.py) with a 2-class head."""
    from embexp.studies import vocab

    return vocab.shape_of(vocab.model_config(model, 2))


@lru_cache(maxsize=None)
def composed(*overrides: str):
    """The train config ``python -m embexp.train`` composes for these overrides (cached)."""
    from embexp.core.cli import compose_train

    return compose_train(list(overrides))


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
def rows(name: str, subset: str, split: str, data_dir: Path) -> tuple:
    """Every row of one split, from the file the task reads (hidden test labels are only counted)."""
    from embexp.tasks.base import read_jsonl

    t = task(name, subset, data_dir)
    return tuple(read_jsonl(t.local_path(split)))


def glue_file(subset: str, split: str) -> str:
    """The path under EMBEXP_DATA of a GLUE split (../shared/data/README.md)."""
    return f"glue/{subset}/{split}.jsonl"
