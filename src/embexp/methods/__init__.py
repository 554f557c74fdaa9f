"""Methods, one file each. Importing this package imports every module of it
(``core.plugins.discover``), which registers every method; no list names them."""

from embexp.core.plugins import discover
from embexp.methods.base import Method, MethodConfig  # noqa: F401
from embexp.methods.registry import METHODS, build_method, register_method  # noqa: F401

discover(__name__)
