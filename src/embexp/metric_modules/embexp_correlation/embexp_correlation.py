"""embexp's correlation metrics as an ``evaluate`` module: Spearman and Pearson correlation x100
(0 where undefined) and the share of invalid predictions, computed by
``embexp.tasks.metrics.regression_scores`` (GLUE STS-B) and ``spearman_pearson`` (stsb_similarity).
Predictions are numbers (the default config), or generated strings with
``evaluate.load(path, "generated")``: a string must be a number as a whole (strict parsing), and an
unparseable or non-finite prediction scores as ``invalid_value``."""

import evaluate

from embexp.metric_modules import info
from embexp.tasks.metrics import regression_scores

_DESCRIPTION = __doc__
_KWARGS = """
Args:
    predictions: predicted scores (numbers; generated strings with the config 'generated').
    references: gold scores.
    invalid_value: the score an unparseable prediction gets (default 2.5, the STS-B scale midpoint).
Returns:
    {'pearson': float, 'spearman': float, 'invalid': float} (x100; invalid: % of predictions).
"""


class EmbexpCorrelation(evaluate.Metric):
    def _info(self):
        return info(_DESCRIPTION, _KWARGS, "string" if self.config_name == "generated" else "float64", "float64")

    def _compute(self, predictions, references, invalid_value=2.5):
        return regression_scores(references, predictions, float(invalid_value))
