"""Task families, one file each. Importing this package registers them all."""

from embexp.tasks import alpaca, amazon, cnndm, commitpack, glue, safety, sentence_pairs, superglue, tree, wmt16, xnli  # noqa: F401
from embexp.tasks.base import Example, Task, TaskConfig  # noqa: F401
from embexp.tasks.registry import TASKS, build_task, register_task  # noqa: F401
