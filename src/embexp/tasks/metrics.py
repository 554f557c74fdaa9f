"""The metric functions behind every task's scores (0–100 unless said), in one place.

Runs reach them through the tasks (``Task.score_labels`` / ``score_regression`` / ``score_text`` /
``score_similarity``) and through ``run.predict`` (length reduction, P–L); users reach the same
functions as ``evaluate`` modules that load from a folder inside the installed package, offline
(``embexp.metric_modules``; docs/architecture.md, "Two doors to one implementation").
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from embexp import EmbexpError


# ---- classification ------------------------------------------------------------------------------
def accuracy(gold, pred) -> float:
    gold, pred = np.asarray(gold), np.asarray(pred)
    return float((gold == pred).mean()) * 100 if len(gold) else 0.0


def binary_counts(gold, pred, positive=1):
    """tp, fp, fn, tn; an invalid prediction (not 0/1) is scored as the wrong class (ours)."""
    gold, pred = np.asarray(gold), np.asarray(pred)
    pred = np.where(np.isin(pred, (0, 1)), pred, 1 - gold)
    g, p = gold == positive, pred == positive
    return int((g & p).sum()), int((~g & p).sum()), int((g & ~p).sum()), int((~g & ~p).sum())


def f1_score(gold, pred, positive=1) -> float:
    tp, fp, fn, _ = binary_counts(gold, pred, positive)
    return 100.0 * 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def mcc_score(gold, pred) -> float:
    tp, fp, fn, tn = binary_counts(gold, pred)
    den = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return 100.0 * (tp * tn - fp * fn) / den if den else 0.0


def macro_f1(gold, pred, n_classes: int) -> float:
    """lm-eval's cb_multi_fi: mean over classes of the one-vs-rest F1 (0 when a class is never hit)."""
    gold, pred = np.asarray(gold), np.asarray(pred)
    scores = []
    for c in range(n_classes):
        tp = int(((gold == c) & (pred == c)).sum())
        fp = int(((gold != c) & (pred == c)).sum())
        fn = int(((gold == c) & (pred != c)).sum())
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return 100.0 * float(np.mean(scores))


def binary_summary(gold, pred) -> dict[str, float]:
    """Accuracy, balanced accuracy (mean recall of the classes present), F1 of class 1 and the
    majority baseline (always answering the majority class of the scored set)."""
    gold, pred = np.asarray(gold), np.asarray(pred)
    if not len(gold):
        return {"accuracy": 0.0, "balanced_accuracy": 0.0, "f1": 0.0, "majority_baseline": 0.0}
    recalls = [float((pred[gold == k] == k).mean()) for k in (0, 1) if (gold == k).any()]
    pos = float((gold == 1).mean())
    return {"accuracy": accuracy(gold, pred), "balanced_accuracy": 100.0 * sum(recalls) / len(recalls),
            "f1": f1_score(gold, pred), "majority_baseline": 100.0 * max(pos, 1 - pos)}


# ---- correlation ---------------------------------------------------------------------------------
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")


def parse_score(x) -> float:
    """A float from a number or a generated string (the whole stripped string must be a number), else NaN."""
    if isinstance(x, str):
        return float(x.strip()) if _NUMBER.fullmatch(x.strip()) else math.nan
    return float(x)


def spearman_pearson(gold: Sequence[float], pred: Sequence[float]) -> dict[str, float]:
    """Spearman and Pearson correlation x100 (0 when undefined: fewer than two rows or a constant)."""
    from scipy.stats import pearsonr, spearmanr

    gold, pred = np.asarray(gold, dtype=float), np.asarray(pred, dtype=float)
    if len(gold) < 2 or np.ptp(gold) == 0 or np.ptp(pred) == 0:
        return {"spearman": 0.0, "pearson": 0.0}
    return {"spearman": float(spearmanr(gold, pred)[0]) * 100, "pearson": float(pearsonr(gold, pred)[0]) * 100}


def regression_scores(gold: Sequence[float], pred: Sequence, invalid_value: float) -> dict[str, float]:
    """Pearson and Spearman ×100 of predictions that may be numbers or generated strings (parsed
    strictly by :func:`parse_score`); an unparseable or non-finite one scores as ``invalid_value``,
    and ``invalid`` reports their share (0–100)."""
    parsed = np.array([parse_score(p) for p in pred], dtype=float)
    bad = ~np.isfinite(parsed)
    parsed[bad] = invalid_value
    out = spearman_pearson(gold, parsed)
    return {"pearson": out["pearson"], "spearman": out["spearman"],
            "invalid": float(bad.mean()) * 100 if len(bad) else 0.0}


# ---- translation ---------------------------------------------------------------------------------
TRANSLATION = ("bleu", "ter", "chrf")


def translation_scores(refs: Sequence[str], hyps: Sequence[str],
                       metrics: Sequence[str] = ("bleu", "ter")) -> dict[str, float]:
    """Corpus-level sacreBLEU scores (0–100) with sacreBLEU's defaults: BLEU-4 (13a tokenisation),
    TER, chrF; hypotheses and references are whitespace-stripped first. One reference per hypothesis."""
    from sacrebleu.metrics import BLEU, CHRF, TER

    bad = [m for m in metrics if m not in TRANSLATION]
    if bad:
        raise EmbexpError(f"unknown translation metric '{bad[0]}' (choose from: {', '.join(TRANSLATION)})")
    if len(refs) != len(hyps):
        raise EmbexpError(f"translation scores: {len(hyps)} hypotheses for {len(refs)} references")
    refs = [r.strip() for r in refs]
    hyps = [h.strip() for h in hyps]
    scorers = {"bleu": BLEU, "ter": TER, "chrf": CHRF}
    return {m: scorers[m]().corpus_score(hyps, [refs]).score for m in metrics}


# ---- ROUGE ---------------------------------------------------------------------------------------
_BOUNDARY = re.compile(r"""(?<=[.!?])["'\u201d\u2019)\]]*\s+""")
_INITIALS = re.compile(r"(?:[A-Za-z]\.)*[A-Za-z]")
ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st jr sr gov sen rep gen col lt sgt capt cpl adm maj rev hon pres supt det insp "
    "vs etc inc co corp ltd no nos jan feb mar apr jun jul aug sep sept oct nov dec approx dept est fig".split())


def _abbreviation_before(piece: str) -> bool:
    words = piece.split()
    if not words or not words[-1].endswith("."):
        return False
    core = words[-1].rstrip(".").lstrip("\"'(\u201c\u2018[")
    return bool(core) and (core.lower() in ABBREVIATIONS or bool(_INITIALS.fullmatch(core)))


def split_sentences(text: str) -> list[str]:
    """Sentences of `text` (ours, for ROUGE-Lsum): every line is split at sentence-final punctuation
    (. ! ?, then any closing quotes/brackets) followed by whitespace, except after an abbreviation or
    initials (U.S., J.) or before a lower-case word; pieces are stripped and empty ones dropped.
    CNN/DM highlights (one sentence per line, " ." tokenised spacing) come back line by line."""
    out: list[str] = []
    for line in text.split("\n"):
        start = 0
        for m in _BOUNDARY.finditer(line):
            nxt = line[m.end():m.end() + 1]
            if nxt.islower() or _abbreviation_before(line[start:m.start()]):
                continue
            out.append(line[start:m.start()].strip())
            start = m.end()
        out.append(line[start:].strip())
    return [s for s in out if s]


def lsum_text(text: str) -> str:
    """`text` as rouge-score's rougeLsum reads it: one sentence per line."""
    return "\n".join(split_sentences(text))


def _stderr(values: list[float]) -> float:
    return float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else 0.0


def rouge_scores(refs: Sequence[str], hyps: Sequence[str], stemmer: bool = True) -> dict[str, float]:
    """Mean ROUGE-1/2/L/Lsum F-measure ×100 over examples, and the standard errors of the L means.

    rougeLsum scores both sides sentence-split by :func:`split_sentences` and newline-joined."""
    from rouge_score import rouge_scorer

    if len(refs) != len(hyps):
        raise EmbexpError(f"ROUGE: {len(hyps)} hypotheses for {len(refs)} references")
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=stemmer)
    lsum = rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=stemmer)
    keys = ("rouge1", "rouge2", "rougeL", "rougeLsum")
    per: dict[str, list[float]] = {k: [] for k in keys}
    for ref, hyp in zip(refs, hyps):
        s = scorer.score(ref, hyp)
        s["rougeLsum"] = lsum.score(lsum_text(ref), lsum_text(hyp))["rougeLsum"]
        for k in keys:
            per[k].append(100.0 * s[k].fmeasure)
    out = {k: float(np.mean(v)) if v else 0.0 for k, v in per.items()}
    out["rougeL_stderr"] = _stderr(per["rougeL"])
    out["rougeLsum_stderr"] = _stderr(per["rougeLsum"])
    return out


# ---- K-Token Merging: length reduction and the P-L score ------------------------------------------
def length_reduction(prompt_tokens: Sequence[int], positions: Sequence[int]) -> float:
    """0–100: the mean over examples of ``1 - positions / prompt_tokens``, where ``positions`` are
    the positions the backbone reads for a prompt of ``prompt_tokens`` tokens (negative when a method
    adds positions, e.g. prompt tuning's prefix)."""
    if len(prompt_tokens) != len(positions):
        raise EmbexpError(f"length reduction: {len(positions)} position counts for {len(prompt_tokens)} prompts")
    ratios = [1.0 - int(m) / max(int(n), 1) for n, m in zip(prompt_tokens, positions)]
    return 100.0 * sum(ratios) / len(ratios) if ratios else 0.0


def pl_score(performance: float, reduction: float) -> float:
    """Eq. 3: ``P-L = 2 * P * L / (P + L)``, the harmonic mean of a normalised performance and the
    length reduction ratio, both fractions in [0, 1] (0 when both are 0, e.g. the uncompressed run)."""
    for name, v in (("performance", performance), ("reduction", reduction)):
        if not (isinstance(v, (int, float)) and math.isfinite(v)):
            raise EmbexpError(f"P-L score: {name}={v!r} is not a finite number")
    if performance + reduction == 0:
        return 0.0
    return 2.0 * performance * reduction / (performance + reduction)


def perplexity_performance(ppl: float, ppl_uncompressed: float) -> float:
    """Eq. 4: the normalised performance of a perplexity, against the uncompressed run's
    (``ppl_uncompressed / ppl``: lower perplexity gives higher P; the uncompressed run has P = 1)."""
    if not (ppl > 0 and ppl_uncompressed > 0):
        raise EmbexpError(f"P-L score: perplexities must be > 0, got {ppl} and {ppl_uncompressed} (uncompressed)")
    return ppl_uncompressed / ppl


def pl_from_accuracy(accuracy: float, reduction: float) -> float:
    """P-L from an accuracy and a length reduction as embexp records them (both 0-100)."""
    return pl_score(accuracy / 100.0, reduction / 100.0)


def pl_from_perplexity(ppl: float, ppl_uncompressed: float, reduction: float) -> float:
    """P-L from a perplexity, the uncompressed run's perplexity and a length reduction (0-100)."""
    return pl_score(perplexity_performance(ppl, ppl_uncompressed), reduction / 100.0)
