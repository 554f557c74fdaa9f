"""K-Token Merging's Performance-Length reduction score (Eq. 3) as an ``evaluate`` module, computed
by the functions a run uses (``embexp.tasks.metrics``): the accuracy of the class predictions
(``accuracy``, 0-100), the length reduction (given as ``length_reduction`` 0-100, or measured from
per-example ``prompt_tokens`` and the ``positions`` the backbone read, as ``run.predict`` does), and
``pl_score`` = 2PL/(P+L) with both as fractions (a negative reduction counts as 0)."""

import evaluate

from embexp.metric_modules import info
from embexp.tasks.metrics import accuracy, pl_from_accuracy
from embexp.tasks.metrics import length_reduction as measured_reduction

_DESCRIPTION = __doc__
_KWARGS = """
Args:
    predictions: predicted class ids (-1: no valid answer).
    references: gold class ids.
    length_reduction: the reduction in % (0-100); or
    prompt_tokens, positions: per example, the prompt's tokens and the positions the backbone read for it.
Returns:
    {'accuracy': float, 'length_reduction': float, 'pl_score': float}.
"""


class EmbexpPlScore(evaluate.Metric):
    def _info(self):
        return info(_DESCRIPTION, _KWARGS, "int64", "int64")

    def _compute(self, predictions, references, length_reduction=None, prompt_tokens=None, positions=None):
        if (length_reduction is None) == (prompt_tokens is None or positions is None):
            raise ValueError("give length_reduction, or prompt_tokens and positions (one per example)")
        acc = accuracy(references, predictions)
        if length_reduction is None:
            length_reduction = measured_reduction(prompt_tokens, positions)
        red = float(length_reduction)
        return {"accuracy": acc, "length_reduction": red, "pl_score": pl_from_accuracy(acc, max(red, 0.0))}

