"""Methods, one file each. Importing this package imports every module of it (:func:`discover`),
which registers every method; no list names them."""

from embexp.core.plugins import discover as _discover
from embexp.methods.base import Method, MethodConfig  # noqa: F401
from embexp.methods.registry import METHODS, build_method, register_method  # noqa: F401


def discover() -> None:
    """Import every module of this package, so that each file's ``@register_method`` classes are
    registered; a module already imported is not run again."""
    _discover(__name__)


discover()
