"""``python -m embexp.judge``: re-score a finished run (embexp.judge.rescore)."""

from embexp.judge.rescore import entry

entry()
