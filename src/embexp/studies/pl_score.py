"""The Performance-Length reduction score of K-Token Merging (k-token-merging.md, Eq. 3-4).

The functions live in ``embexp.tasks.metrics`` (the metrics layer every run and the ``evaluate``
modules use); this module re-exports them for the studies, ``scripts/ktoken_sweep.py`` and the
tests that import them from here.
"""

from embexp.tasks.metrics import pl_from_accuracy, pl_from_perplexity, pl_score, perplexity_performance  # noqa: F401
