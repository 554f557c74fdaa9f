"""embexp's metrics as Hugging Face ``evaluate`` modules that load from this folder, offline.

``evaluate.load(<a local folder>)`` imports the script in that folder, with no network
(``HF_HUB_OFFLINE=1`` and ``HF_EVALUATE_OFFLINE=1`` are fine); each folder here is a package (its
``__init__.py`` empty, so that it installs) holding one script of its name. Each module of ``NAMES``
(its docstring says what it computes, on the 0–100 scales the runs record) is a thin door onto the
functions the runs score with (``embexp.tasks.metrics``), so a user's own ``evaluate`` pipeline gets
the numbers a run's metrics.json holds for the same predictions::

    import evaluate
    from embexp import metric_modules

    mt = evaluate.load(metric_modules.path("embexp_translation"))
    mt.compute(predictions=["The cat sees the dog."], references=["The cat sees a dog."])
    # {'bleu': ..., 'ter': ..., 'chrf': ...}
"""

from __future__ import annotations

from pathlib import Path

from embexp import EmbexpError

NAMES = ("embexp_translation", "embexp_rouge", "embexp_classification", "embexp_correlation", "embexp_pl_score")


def info(doc: str, kwargs: str, predictions: str, references: str):
    """A module's ``evaluate.MetricInfo``: its docstring, its arguments' text and the ``datasets`` value types of
    its two columns."""
    import datasets
    import evaluate

    features = {"predictions": datasets.Value(predictions), "references": datasets.Value(references)}
    return evaluate.MetricInfo(description=doc, citation="", inputs_description=kwargs,
                               features=datasets.Features(features))


def path(name: str) -> str:
    """The folder of one module, for ``evaluate.load``."""
    if name not in NAMES:
        raise EmbexpError(f"unknown embexp metric module '{name}' (choose from: {', '.join(NAMES)})")
    return str(Path(__file__).resolve().parent / name)
