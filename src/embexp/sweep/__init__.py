"""Paper tables as sweeps: ``python -m embexp.sweep <paper>/<table> [--dry-run] [--extra "..."] [name=value ...]``.

``papers/<paper>.py`` holds each paper's tables, one Python function per table that yields its
commands; ``runner.py`` runs them (its module doc says what it adds); ``train.py`` holds the train
commands' additions and "done" probe, ``probes.py`` those of the analyze and judge commands.
"""

from embexp.sweep.runner import command_lines, commands, entry, main, spec_names

__all__ = ["command_lines", "commands", "entry", "main", "spec_names"]
