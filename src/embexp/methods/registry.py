"""Method registry: name -> Method class, with its config schema stored in Hydra's ConfigStore."""

from __future__ import annotations

from embexp.registry import Registry

METHODS = Registry("method")
register_method = METHODS.register


def build_method(cfg, backbone):
    import embexp.methods  # noqa: F401  (registers every method)

    return METHODS.get_class(cfg.name)(cfg, backbone)
