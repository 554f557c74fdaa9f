"""The numbers in a table's cells: a mean over seeds and its standard error, the one way every table
computes them (``embexp.report.<paper>``, and the ledger through them).

*Standard errors.* ``sem`` is the only formula for the standard error of the mean across seeds. ``SE``, the
policy a table's ``se=`` names: seeds = ``sem``; examples = the uncertainty from the test examples of each
run: the task's recorded ``<metric>_stderr`` (ROUGE), a bootstrap over sentences for corpus BLEU/TER
(sacreBLEU's sentence statistics, ``bootstrap_iters`` resamples, cached in ``<out>/.se_cache.json``), the
binomial s.e. for accuracies; with several seeds, their mean / sqrt(n). auto = seeds where a cell has >= 2
seeds, else examples.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from embexp import EmbexpError
from embexp.core.records import METRICS, atomic_write, read_predictions


def mean(values: list) -> float | None:
    """The plain mean of the values that are not None; None without any."""
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def sem(values: list[float]) -> float | None:
    """The standard error of the mean across seeds (sample s.d. / sqrt(n)); None below two values."""
    return float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) >= 2 else None


def binomial_se(percent: float, n: int) -> float:
    """The s.e. (in points) of a rate of `percent` % over `n` examples (accuracies, attack success)."""
    p = percent / 100.0
    return 100.0 * math.sqrt(p * (1 - p) / max(1, n))


def pooled(per_run: list[float]) -> float | None:
    """The s.e. of a mean over runs from each run's own s.e. (their mean / sqrt(n)); None without any."""
    return float(np.mean(per_run) / math.sqrt(len(per_run))) if per_run else None


SE_MODES = ("seeds", "examples", "auto", "none")
# the runs of a cell under the paper's protocol (selected on the reported split) carry this tag suffix; such a
# cell is marked MARK
PAPER_TAG, MARK = "_paper", "\u2020"


class SE:
    """Standard-error policy (see the module doc), with a cache for the bootstraps."""

    def __init__(self, mode: str, iters: int, cache: Path):
        if mode not in SE_MODES:
            raise EmbexpError(f"unknown se '{mode}' (choose from: {', '.join(SE_MODES)}, "
                              "or empty for each table's default)")
        self.mode, self.iters, self.path = mode, iters, cache
        self.cache = json.loads(cache.read_text()) if cache.is_file() else {}

    def __call__(self, runs: list[dict], metric: str, values: list[float]) -> float | None:
        if self.mode == "none" or not values:
            return None
        if self.mode == "seeds" or (self.mode == "auto" and len(values) >= 2):
            return sem(values)
        return pooled([s for s in (self.example_se(r, metric) for r in runs) if s is not None])

    def example_se(self, run: dict, metric: str) -> float | None:
        m = run["metrics"]
        if f"{metric}_stderr" in m:
            return m[f"{metric}_stderr"]
        if metric.endswith("accuracy") and m.get(metric) is not None:
            return binomial_se(m[metric], run.get("n_eval_examples", 0))
        if metric in ("bleu", "ter"):
            key = f"{run['run_dir']}|{metric}|{self.iters}|{Path(run['run_dir'], METRICS).stat().st_mtime}"
            if key not in self.cache:
                self.cache[key] = bootstrap_se(Path(run["run_dir"]), metric, self.iters)
                self.path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(self.path, json.dumps(self.cache, indent=1))
            return self.cache[key]
        return None


def bootstrap_se(run_dir: Path, metric: str, iters: int, seed: int = 0) -> float | None:
    """Bootstrap s.e. of corpus BLEU/TER over the sentences of predictions.jsonl (stripped, as the
    wmt16 task scores them): sentence statistics are extracted once and resampled."""
    from sacrebleu.metrics import BLEU, TER

    recs = [r for r in read_predictions(run_dir) if "generation" in r]
    if len(recs) < 2:
        return None
    scorer = BLEU() if metric == "bleu" else TER()
    hyps, refs = [r["generation"].strip() for r in recs], [[r["target"].strip() for r in recs]]
    stats = np.array(scorer._extract_corpus_statistics(hyps, refs))
    rng = np.random.default_rng(seed)
    n = len(recs)
    scores = [scorer._compute_score_from_stats(stats[rng.integers(0, n, n)].sum(0).tolist()).score
              for _ in range(iters)]
    return float(np.std(scores, ddof=1))


def cell(runs: list[dict], metric: str, se: SE) -> tuple[float | None, float | None]:
    """The mean of `metric` over the runs that hold it, and its standard error under `se`."""
    values = [r["metrics"][metric] for r in runs if r["metrics"].get(metric) is not None]
    if not values:
        return None, None
    return float(np.mean(values)), se([r for r in runs if r["metrics"].get(metric) is not None], metric, values)


def n_params(*groups: list[dict]):
    """The first run's ``n_method_params`` among the groups (None without runs)."""
    for runs in groups:
        for r in runs:
            return r.get("n_method_params")
    return None


def majority(run_dir: str) -> float | None:
    """The eval split's majority-class share (%), from the run's predictions.jsonl labels."""
    labels = [r.get("label") for r in read_predictions(Path(run_dir))]
    labels = [x for x in labels if isinstance(x, int) and x >= 0]
    return 100.0 * max(labels.count(c) for c in set(labels)) / len(labels) if labels else None


# ---- a method's row of the comparisons -----------------------------------------------------------------
def exports(method: str) -> str:
    from embexp.methods import METHODS

    if method not in METHODS:
        return ""
    cls = METHODS.get_class(method)
    return "no" if cls.export_blocker else "yes"


def method_row(runs: list[dict], metric: str, se: SE) -> dict:
    """One method's cells, the row of both comparisons (``table=compare`` and ``table=curves``): quality ± s.e.,
    trainable parameters and their share of the backbone, training state and peak memory, training and
    evaluation speed, export."""
    from embexp.methods.registry import method_label

    r0 = runs[0]
    value, err = cell(runs, metric, se)
    tp = r0.get("n_trainable_params") if r0["method"] != "zero_shot" else None
    total = r0.get("n_total_params")
    train = [r.get("train", {}) for r in runs]
    state = [t.get("state_memory", {}).get("total_bytes") for t in train]
    peak = [(r.get("memory") or {}).get("peak_cuda_allocated_bytes") or (r.get("memory") or {}).get("peak_rss_bytes")
            for r in runs]
    eval_rate = [r["n_eval_examples"] / r["metrics"]["eval_seconds"] for r in runs
                 if r["metrics"].get("eval_seconds") and r.get("n_eval_examples")]
    trained = any(t.get("steps") for t in train)
    mb = lambda b: b / 2**20 if b else None  # noqa: E731
    return {
        "Method": method_label(r0["method"], r0.get("tag", "")), "method": r0["method"],
        "metric": value, "metric se": err,
        "#TP": tp or None, "% of backbone": (100.0 * tp / total) if tp and total else None,
        "train state MB": mb(mean(state)) if trained else None, "peak MB": mb(mean(peak)),
        "train tok/s": mean([t.get("tokens_per_second") for t in train]) if trained else None,
        "eval ex/s": mean(eval_rate), "exports": exports(r0["method"]), "seeds": len(runs),
    }
