"""embexp's translation metrics as an ``evaluate`` module: corpus-level sacreBLEU BLEU-4, TER and
chrF (0-100), computed by ``embexp.tasks.metrics.translation_scores``, the function the wmt16 task
scores runs with (whitespace-stripped hypotheses and references, sacreBLEU's defaults, one
reference per hypothesis)."""

import evaluate

from embexp.metric_modules import info
from embexp.tasks.metrics import TRANSLATION, translation_scores

_DESCRIPTION = __doc__
_KWARGS = """
Args:
    predictions: hypotheses (strings).
    references: one reference string per hypothesis.
    metrics: which of 'bleu', 'ter', 'chrf' to compute (default: all three).
Returns:
    {'bleu': float, 'ter': float, 'chrf': float} (0-100; TER: lower is better).
"""


class EmbexpTranslation(evaluate.Metric):
    def _info(self):
        return info(_DESCRIPTION, _KWARGS, "string", "string")

    def _compute(self, predictions, references, metrics=TRANSLATION):
        return translation_scores(references, predictions, tuple(metrics))
