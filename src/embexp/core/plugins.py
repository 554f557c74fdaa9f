"""One plugin discovery for every pluggable kind (methods, tasks, analyses, report papers, sweep tables):
importing a package imports every module on its ``__path__`` (:func:`discover`), so no list names them. Methods
and tasks also register a class by name (:class:`Registry`; its ``Config`` stored as ``<group>/schema_<name>``).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from hydra.core.config_store import ConfigStore

from embexp import EmbexpError


def discover(package: str, skip: tuple[str, ...] = ()) -> dict[str, ModuleType]:
    """Import every module of ``package`` (alphabetically) but those in ``skip`` and the private
    ones (``_name``); returns them by name. A module already imported is not run again."""
    pkg = importlib.import_module(package)
    return {info.name: importlib.import_module(f"{package}.{info.name}")
            for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name)
            if info.name not in skip and not info.name.startswith("_")}


class Registry(dict):
    """Name -> class for one config group; registering twice is an error, an unknown name one line."""

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
