"""The Performance-Length reduction score of K-Token Merging (k-token-merging.md, Eq. 3-4).

``P-L = 2 * P * L / (P + L)``: the harmonic mean of a normalised performance ``P`` and the length
reduction ratio ``L`` (both in [0, 1]; 0 when both are 0, e.g. the uncompressed run). For accuracy
tasks ``P`` is the accuracy as a fraction; for perplexity tasks ``P = ppl_uncompressed / ppl_method``
(Eq. 4), so lower perplexity gives higher ``P`` and the uncompressed run has ``P = 1``. The paper's
Tables 1-3 are reproduced to 3 decimals from their printed accuracy/perplexity and reduction
(tests/test_ktoken.py).
"""

from __future__ import annotations

import math

from embexp import EmbexpError


def pl_score(performance: float, reduction: float) -> float:
    """Eq. 3: harmonic mean of performance and length reduction, both fractions in [0, 1]."""
    for name, v in (("performance", performance), ("reduction", reduction)):
        if not (isinstance(v, (int, float)) and math.isfinite(v)):
            raise EmbexpError(f"P-L score: {name}={v!r} is not a finite number")
    if performance + reduction == 0:
        return 0.0
    return 2.0 * performance * reduction / (performance + reduction)


def perplexity_performance(ppl: float, ppl_uncompressed: float) -> float:
    """Eq. 4: the normalised performance of a perplexity, against the uncompressed run's."""
    if not (ppl > 0 and ppl_uncompressed > 0):
        raise EmbexpError(f"P-L score: perplexities must be > 0, got {ppl} and {ppl_uncompressed} (uncompressed)")
    return ppl_uncompressed / ppl


def pl_from_accuracy(accuracy: float, reduction: float) -> float:
    """P-L from an accuracy and a length reduction as embexp records them (both 0-100)."""
    return pl_score(accuracy / 100.0, reduction / 100.0)


def pl_from_perplexity(ppl: float, ppl_uncompressed: float, reduction: float) -> float:
    """P-L from a perplexity, the uncompressed run's perplexity and a length reduction (0-100)."""
    return pl_score(perplexity_performance(ppl, ppl_uncompressed), reduction / 100.0)
