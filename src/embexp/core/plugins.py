"""Name -> class registries for the pluggable config groups (methods, tasks).

Registering a class also stores its ``Config`` dataclass in Hydra's ConfigStore as
``<group>/schema_<name>``, which the group's YAML files name in their defaults list.
"""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from embexp import EmbexpError


class Registry(dict):
    def __init__(self, group: str):
        super().__init__()
        self.group = group

    def register(self, name: str):
        def wrap(cls):
            if name in self:
                raise ValueError(f"{self.group} '{name}' registered twice")
            self[name] = cls
            ConfigStore.instance().store(group=self.group, name=f"schema_{name}", node=cls.Config)
            return cls

        return wrap

    def get_class(self, name: str) -> type:
        if name not in self:
            raise EmbexpError(f"unknown {self.group} '{name}' (choose from: {', '.join(sorted(self))})")
        return self[name]
