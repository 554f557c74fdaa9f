"""Analyses behind the papers' tables that compute with models or data, run with
``python -m embexp.analyze <name> key=value ...``; each module exposes a ``Config`` dataclass (help
text on every field) and ``run(cfg)`` (models/specs.py holds the papers' architectures).
They compose the real train config through ``core.cli.compose_train``, as the CLI does, and write
their tables through ``core.tables``.
"""
