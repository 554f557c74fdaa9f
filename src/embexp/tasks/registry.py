"""Task registry: name -> Task class, with its config schema stored in Hydra's ConfigStore."""

from __future__ import annotations

from embexp.core.plugins import Registry

TASKS = Registry("task")
register_task = TASKS.register


def build_task(cfg):
    return TASKS.get_class(cfg.name)(cfg)
