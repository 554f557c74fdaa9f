"""Methods, one file each. Importing this package imports every module of it (:func:`discover`),
which registers every method; no list names them."""

import importlib
import pkgutil

from embexp.methods.base import Method, MethodConfig  # noqa: F401
from embexp.methods.registry import METHODS, build_method, register_method  # noqa: F401


def discover() -> None:
    """Import every module found on this package's ``__path__`` (alphabetically), so that each
    file's ``@register_method`` classes are registered; a module already imported is not run again."""
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


discover()
