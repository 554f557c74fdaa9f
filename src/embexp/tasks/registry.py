"""Task registry: name -> Task class, with its config schema stored in Hydra's ConfigStore."""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from embexp import EmbexpError

TASKS: dict[str, type] = {}


def register_task(name: str):
    def wrap(cls):
        if name in TASKS:
            raise ValueError(f"task '{name}' registered twice")
        TASKS[name] = cls
        ConfigStore.instance().store(group="task", name=f"schema_{name}", node=cls.Config)
        return cls

    return wrap


def build_task(cfg):
    import embexp.tasks  # noqa: F401  (registers every family)

    if cfg.name not in TASKS:
        raise EmbexpError(f"unknown task '{cfg.name}' (choose from: {', '.join(sorted(TASKS))})")
    return TASKS[cfg.name](cfg)
