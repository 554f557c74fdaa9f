"""The shared run index of every report: finished runs indexed by (task family, subset, model,
method, tag), the standard-error policy, table cells, and Markdown + CSV output.

Standard errors (``se``): seeds = the standard error of the mean across seeds (needs >= 2 seeds);
examples = the uncertainty from the test examples of each run: the task's recorded
``<metric>_stderr`` (ROUGE), a bootstrap over sentences for corpus BLEU/TER (sacreBLEU's sentence
statistics, ``bootstrap_iters`` resamples, cached in ``<out>/.se_cache.json``), the binomial s.e.
for accuracies; with several seeds, their mean / sqrt(n). auto = seeds where a cell has >= 2 seeds,
else examples.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from embexp import EmbexpError
from embexp.results import atomic_write
from embexp.studies import markdown

DISPLAY = {"gemma2": "Gemma-2", "qwen25": "Qwen-2.5", "llama31": "Llama-3.1", "llama2": "Llama-2-7b"}


class Runs:
    """Finished runs indexed by (task family, subset, model, method, tag)."""

    def __init__(self, runs: list[dict]):
        self.by_key: dict[tuple, list[dict]] = {}
        for r in runs:
            self.by_key.setdefault((r["task_name"], r["subset"], r["model"], r["method"], r["tag"]), []).append(r)

    def get(self, task: str, model: str, method: str, tag: str = "", subset: str | None = None) -> list[dict]:
        return sorted((r for (t, s, mo, me, tg), rs in self.by_key.items() for r in rs
                       if t == task and mo == model and me == method and tg == tag and (subset is None or s == subset)),
                      key=lambda r: r.get("seed", 0))


SE_MODES = ("seeds", "examples", "auto", "none")


class SE:
    """Standard-error policy (see the module doc), with a cache for the bootstraps."""

    def __init__(self, mode: str, iters: int, cache: Path):
        if mode not in SE_MODES:
            raise EmbexpError(f"unknown se '{mode}' (choose from: {', '.join(SE_MODES)}, or empty for each table's default)")
        self.mode, self.iters, self.path = mode, iters, cache
        self.cache = json.loads(cache.read_text()) if cache.is_file() else {}

    def __call__(self, runs: list[dict], metric: str, values: list[float]) -> float | None:
        if self.mode == "none" or not values:
            return None
        if self.mode == "seeds" or (self.mode == "auto" and len(values) >= 2):
            return float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) >= 2 else None
        per = [self.example_se(r, metric) for r in runs]
        per = [s for s in per if s is not None]
        return float(np.mean(per) / math.sqrt(len(per))) if per else None

    def example_se(self, run: dict, metric: str) -> float | None:
        m = run["metrics"]
        if f"{metric}_stderr" in m:
            return m[f"{metric}_stderr"]
        if metric.endswith("accuracy") and m.get(metric) is not None:
            n = max(1, run.get("n_eval_examples", 0))
            p = m[metric] / 100.0
            return 100.0 * math.sqrt(p * (1 - p) / n)
        if metric in ("bleu", "ter"):
            key = f"{run['run_dir']}|{metric}|{self.iters}|{Path(run['run_dir'], 'metrics.json').stat().st_mtime}"
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

    from embexp.studies.lengths import read_predictions

    recs = [r for r in read_predictions(run_dir) if "generation" in r]
    if len(recs) < 2:
        return None
    scorer = BLEU() if metric == "bleu" else TER()
    stats = np.array(scorer._extract_corpus_statistics([r["generation"].strip() for r in recs], [[r["target"].strip() for r in recs]]))
    rng = np.random.default_rng(seed)
    n = len(recs)
    scores = [scorer._compute_score_from_stats(stats[rng.integers(0, n, n)].sum(0).tolist()).score for _ in range(iters)]
    return float(np.std(scores, ddof=1))


def cell(runs: list[dict], metric: str, se: SE) -> tuple[float | None, float | None]:
    values = [r["metrics"][metric] for r in runs if r["metrics"].get(metric) is not None]
    if not values:
        return None, None
    return float(np.mean(values)), se([r for r in runs if r["metrics"].get(metric) is not None], metric, values)


def n_params(*groups: list[dict]):
    for runs in groups:
        for r in runs:
            return r.get("n_method_params")
    return None


def emit(rows: list[dict], cols: list[str], stem: Path, title: str, pm: bool) -> str:
    """<stem>.md (cols; value ± se where pm) and <stem>.csv (cols + '<col> se' + '<col> seeds')."""
    def show(r, c):
        v, s = r.get(c), r.get(f"{c} se")
        if pm and isinstance(v, float) and isinstance(s, float):
            return f"{v:.2f} ± {s:.2f}"
        return v
    md = markdown([{c: show(r, c) for c in cols} for r in rows], cols, title)
    stem.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(stem.with_suffix(".md"), md)
    extra = [k for r in rows for k in r if k not in cols]
    fields = cols + list(dict.fromkeys(extra))
    tmp = stem.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    tmp.replace(stem.with_suffix(".csv"))
    return md
