"""embexp's classification metrics as an ``evaluate`` module (0-100), computed by the functions
of ``embexp.tasks.metrics`` the tasks score runs with: accuracy, f1 (of class 1; GLUE MRPC/QQP,
tree, amazon), mcc (CoLA), macro_f1 (lm-eval's CB F1, over ``num_classes``), balanced_accuracy and
majority_baseline (K-Token Merging's tree/amazon set). A prediction of -1 (no valid answer) counts
as wrong; for f1/mcc it is scored as the wrong class."""

import evaluate

from embexp.metric_modules import info
from embexp.tasks.metrics import accuracy, binary_summary, f1_score, macro_f1, mcc_score

_DESCRIPTION = __doc__
_KWARGS = """
Args:
    predictions: predicted class ids (-1: no valid answer).
    references: gold class ids.
    metrics: names to compute, from accuracy, f1, mcc, macro_f1, balanced_accuracy, majority_baseline
        (default: ['accuracy']).
    num_classes: classes for macro_f1.
Returns:
    {name: float} for each requested metric.
"""
CHOICES = ("accuracy", "f1", "mcc", "macro_f1", "balanced_accuracy", "majority_baseline")


class EmbexpClassification(evaluate.Metric):
    def _info(self):
        return info(_DESCRIPTION, _KWARGS, "int64", "int64")

    def _compute(self, predictions, references, metrics=("accuracy",), num_classes=None):
        bad = [m for m in metrics if m not in CHOICES]
        if bad:
            raise ValueError(f"unknown metric '{bad[0]}' (choose from: {', '.join(CHOICES)})")
        if "macro_f1" in metrics and not num_classes:
            raise ValueError("macro_f1 needs num_classes")
        scores = {"accuracy": accuracy, "f1": f1_score, "mcc": mcc_score,
                  "macro_f1": lambda gold, pred: macro_f1(gold, pred, int(num_classes))}
        return {m: scores[m](references, predictions) if m in scores else binary_summary(references, predictions)[m]
                for m in metrics}
