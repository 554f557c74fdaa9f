"""Paper tables as sweeps: ``python -m embexp.sweep <paper>/<table> [--dry-run] [--extra "..."] [name=value ...]``.

The files: ``runner.py``'s module doc and docs/architecture.md.
"""

from embexp.sweep.runner import command_lines, commands, entry, main, spec_names

__all__ = ["command_lines", "commands", "entry", "main", "spec_names"]
