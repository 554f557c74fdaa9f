"""A run's trained tensors on disk: ``adapter.safetensors`` and what they belong to (``method.json``).

``train.finish`` saves them (:func:`save_adapter`); ``embexp.eval`` (and lm-eval's ``embexp`` model) rebuild the
run with ``run.build`` and load them back (:func:`load_adapter`), refusing a file that is unreadable, holds
non-finite values or does not fit the method, in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from omegaconf import OmegaConf
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from embexp import EmbexpError, __version__
from embexp.core.records import atomic_path, atomic_write
from embexp.run.build import Components

ADAPTER = "adapter.safetensors"


def save_adapter(cfg, c: Components, run_dir: Path) -> None:
    """The trained tensors (``adapter.safetensors``) and what they belong to (``method.json``), each written
    whole or not at all (a failed write: one line naming it, no partial file)."""
    with atomic_path(run_dir / ADAPTER) as tmp:
        save_file(c.method.trainable_state(), tmp)
    meta = {
        "method": OmegaConf.to_container(cfg.method, resolve=True),
        "base_model": cfg.model.id or cfg.model.source,
        "model": cfg.model.name,
        "vocab_size": c.backbone.model.config.get_text_config().vocab_size,
        "hidden_size": c.backbone.hidden_size,
        "embexp_version": __version__,
    }
    atomic_write(run_dir / "method.json", json.dumps(meta, indent=2))


def load_adapter(c: Components, run_dir: Path) -> None:
    path = Path(run_dir) / ADAPTER
    if not path.is_file():
        raise EmbexpError(f"run_dir '{run_dir}' has no {ADAPTER} (was it trained with save_adapter=false?)")
    try:
        state = load_file(path)
    except (OSError, ValueError, SafetensorError) as e:  # random bytes, a truncated file
        raise EmbexpError(f"unreadable {path}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
                          f"(the run's trained tensors; train it again with trainer.overwrite=true)") from None
    bad = [k for k, t in state.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        raise EmbexpError(f"{path}: tensor {bad[0]} holds non-finite values (NaN or inf)")
    try:
        c.method.load_trainable_state(state)
    except (KeyError, RuntimeError, ValueError) as e:  # another method's or shape's tensors
        raise EmbexpError(f"{path} does not fit the run's method: {type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}") from None
