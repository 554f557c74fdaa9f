"""Method registry: name -> Method class, with its config schema stored in Hydra's ConfigStore."""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from embexp import EmbexpError

METHODS: dict[str, type] = {}


def register_method(name: str):
    def wrap(cls):
        if name in METHODS:
            raise ValueError(f"method '{name}' registered twice")
        METHODS[name] = cls
        ConfigStore.instance().store(group="method", name=f"schema_{name}", node=cls.Config)
        return cls

    return wrap


def build_method(cfg, backbone):
    import embexp.methods  # noqa: F401  (registers every method)

    if cfg.name not in METHODS:
        raise EmbexpError(f"unknown method '{cfg.name}' (choose from: {', '.join(sorted(METHODS))})")
    return METHODS[cfg.name](cfg, backbone)
