"""Shared test helpers: compose the real Hydra configs with CPU/tiny overrides."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_num_threads(min(2, os.cpu_count() or 1))

import embexp.train  # noqa: E402,F401  (registers every schema)
from embexp.cli import conf_dir  # noqa: E402

CONF = conf_dir()


def compose(*overrides: str):
    """The train config exactly as the CLI composes it (minus hydra's own keys)."""
    from hydra import compose as hcompose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return hcompose("train", overrides=list(overrides))


def smoke(*overrides: str):
    return compose("debug=smoke", *overrides)


def run_train(cfg, run_dir: Path) -> dict:
    from embexp.train import run

    return run(cfg, Path(run_dir))


@pytest.fixture
def tmp_run(tmp_path):
    return tmp_path / "run"
