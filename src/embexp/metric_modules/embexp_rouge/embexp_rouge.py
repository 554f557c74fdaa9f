"""embexp's ROUGE as an ``evaluate`` module: rouge-score's ROUGE-1/2/L/Lsum F-measure (0-100), the
mean over examples, with the standard errors of the L means, computed by
``embexp.tasks.metrics.rouge_scores``, the function the cnndm, alpaca and bsd tasks score runs with
(Porter stemming on by default; rougeLsum over embexp's sentence split of both sides)."""

import evaluate

from embexp.metric_modules import info
from embexp.tasks.metrics import rouge_scores

_DESCRIPTION = __doc__
_KWARGS = """
Args:
    predictions: generated texts (strings).
    references: one reference string per prediction.
    use_stemmer: Porter-stem tokens first (default True, as the tasks' rouge_stemmer).
Returns:
    {'rouge1', 'rouge2', 'rougeL', 'rougeLsum', 'rougeL_stderr', 'rougeLsum_stderr'} (0-100).
"""


class EmbexpRouge(evaluate.Metric):
    def _info(self):
        return info(_DESCRIPTION, _KWARGS, "string", "string")

    def _compute(self, predictions, references, use_stemmer=True):
        return rouge_scores(references, predictions, bool(use_stemmer))
