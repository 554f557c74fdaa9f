"""Task families, one file each. Importing this package imports every module of it, which
registers every task; no list names them."""

from embexp.core.plugins import discover
from embexp.tasks.base import Example, Task, TaskConfig  # noqa: F401
from embexp.tasks.registry import TASKS, build_task, register_task  # noqa: F401

discover(__name__)
