"""Method registry: name -> Method class, with its config schema stored in Hydra's ConfigStore."""

from __future__ import annotations

from embexp.registry import Registry

METHODS = Registry("method")
register_method = METHODS.register


def build_method(cfg, backbone):
    import embexp.methods  # noqa: F401  (registers every method)

    method = METHODS.get_class(cfg.name)(cfg, backbone)
    method.mark_trainable()  # once, after construction: __init__ only creates the tensors
    return method
