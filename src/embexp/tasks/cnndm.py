"""CNN/DailyMail summarisation (the TinyTE paper's summarisation task), ``abisee/cnn_dailymail`` 3.0.0.

Rows: ``{"article", "highlights", "id"}`` (hub schema). lm-eval has no CNN/DM task and the paper prints
no prompt, so the prompt is ours:

    "Article: {article}\\nSummary:"      target " {highlights}"

Articles longer than ``max_article_words`` whitespace words are cut at the end (ours: the lead of a
news story carries the summary; the generic token truncation keeps the *end* of a prompt, which would
drop the lead). ``meta["input_words"]`` holds the full article's word count (tokeniser-independent,
for the input-length buckets of the paper's Table 5) and ``meta["truncated"]`` whether it was cut.
Generation (ours; docs/tasks_tinyte.md): greedy, up to 256 new tokens, stopping only at the model's
end-of-sequence ids (highlights span several lines, so never at a newline).
Evaluation: the test split, capped at 2,500 rows (the paper: "we limit the number of test samples on
CNN/Dailymail and Alpaca to 2500"; conf/task/cnndm.yaml sets max_eval_samples: 2500).

Metrics (0–100): ROUGE-1/2/L/Lsum F-measure from Google's ``rouge-score`` (its default tokeniser:
lowercase, alphanumeric tokens), Porter stemming on (ours: the paper does not say; stemming is the
common summarisation setting, e.g. the transformers summarisation examples), averaged over examples,
with the standard error of each L mean (``rougeLsum_stderr``, ``rougeL_stderr``).

``rougeLsum`` is summary-level ROUGE-L (the union LCS over sentences), the variant CNN/DM
evaluations report and the scale of the paper's R-L column (LoRA 37–39; sentence-level ``rougeL``
is ~10 points lower on CNN/DM). rouge-score's ``rougeLsum`` reads sentences as newline-separated
lines; reference and hypothesis are both put through :func:`split_sentences` (ours; nltk's punkt
data is not available offline) and re-joined with newlines, so the two sides are split the same way.
``rougeL`` (sentence-level LCS over the whole text) is kept as an extra column.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from embexp.config import f
from embexp.tasks.base import Example, Task, TaskConfig
from embexp.tasks.registry import register_task

PROMPT = "Article: {article}\nSummary:"


@dataclass
class CnnDmConfig(TaskConfig):
    name: str = f("cnndm", "Task family (the file under conf/task).")
    subset: str = f("3.0.0", "Hub config of abisee/cnn_dailymail (3.0.0: the non-anonymised version).")
    eval_split: str = f("test", "Split used for evaluation (the paper reports the test set).")
    max_eval_samples: int = f(2500, "Keep the first N evaluation rows (the paper caps the test set at 2,500).")
    select_split: str = f("validation", "Rows for the periodic evaluation loss and select_best: the validation split, never the reported test split.")
    select_size: int = f(2500, "Keep the first N validation rows for selection (ours: the size of the capped test set; each evaluation costs as much as before).")
    max_article_words: int = f(1500, "Cut articles after this many whitespace words, keeping the lead (ours; -1: never).")
    max_source_tokens: int = f(2048, "Truncate the prompt to this many tokens (1,500 words are ~2,000 tokens; rarely hit).")
    max_target_tokens: int = f(160, "Truncate training summaries to this many tokens (highlights: ~55 words, 99th pct ~125).")
    max_new_tokens: int = f(256, "Greedy generation budget for one summary (ours): covers every test highlight (longest 202 SmolLM2 tokens; 3.6% exceed 128), the same budget as wmt16 (scripts/tinyte_eval_evidence.py).")
    stop_at_newline: bool = f(False, "Also stop at the first newline and cut the text there. Off: highlights put one sentence per line, so a newline stop would keep only the first.")
    rouge_stemmer: bool = f(True, "Porter-stem tokens before ROUGE (ours; rouge-score's use_stemmer).")


# ---- sentence splitting for ROUGE-Lsum (ours) ------------------------------------------------------
# A boundary is sentence-final punctuation (. ! ?), any closing quotes/brackets, then whitespace, unless
# the word before it is an abbreviation or initials (U.S., J.) or the next word starts in lower case.
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
    """Sentences of `text` (ours): every line is split at sentence-final punctuation followed by
    whitespace, except after abbreviations/initials or before a lower-case word; pieces are stripped
    and empty ones dropped. CNN/DM highlights (one sentence per line, " ." tokenised spacing) come
    back line by line."""
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


@register_task("cnndm")
class CnnDmTask(Task):
    """CNN/DailyMail on ``abisee/cnn_dailymail``; rows keep the hub fields."""

    Config = CnnDmConfig
    kind = "generation"
    subsets = ("3.0.0",)
    required_fields = ("article", "highlights")

    def hub_source(self):
        return "abisee/cnn_dailymail", self.cfg.subset

    def format(self, row: dict) -> Example:
        words = row["article"].split()
        cap = self.cfg.max_article_words
        truncated = 0 <= cap < len(words)
        article = " ".join(words[:cap]) if truncated else row["article"]
        return Example(prompt=PROMPT.format(article=article), target=" " + row["highlights"],
                       meta={"id": row.get("id"), "input_words": len(words), "truncated": truncated})

    def score_text(self, refs: Sequence[str], hyps: Sequence[str], examples: Sequence[Example]) -> dict[str, float]:
        return rouge_scores(refs, hyps, self.cfg.rouge_stemmer)

    # ---- fixture (ours): short templated news stories whose highlights restate the lead ----------
    def fixture_rows(self, split: str, n: int, rng: random.Random) -> list[dict]:
        rows = []
        for _ in range(n):
            who, town, what = rng.choice(PEOPLE), rng.choice(TOWNS), rng.choice(EVENTS)
            day = rng.choice(DAYS)
            lead = f"{who} {what} in {town} on {day}."
            filler = [f"Residents of {town} {rng.choice(REACTIONS)}.", "Officials said more details would follow.",
                      f"The news spread quickly across {rng.choice(TOWNS)}.", f"{who} thanked {rng.choice(GROUPS)}."]
            rng.shuffle(filler)
            body = " ".join([lead] + filler[: rng.randint(1, len(filler))] * rng.randint(1, 3))
            highlights = f"{who} {what} in {town} .\nIt happened on {day} ."
            rows.append({"article": f"({town.upper()}) -- {body}", "highlights": highlights,
                         "id": f"{rng.getrandbits(160):040x}"})
        return rows


PEOPLE = ["The mayor", "A local teacher", "The football club", "A young nurse", "The city council", "A famous chef"]
TOWNS = ["London", "Leeds", "Boston", "Dublin", "Glasgow", "Denver", "Austin"]
EVENTS = ["opened a new library", "won a national award", "rescued a stranded dog", "announced a new park",
          "broke a world record", "raised money for the hospital"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
REACTIONS = ["celebrated in the streets", "were surprised", "welcomed the news", "asked for more information"]
GROUPS = ["the volunteers", "the fans", "the police", "the families", "everyone involved"]
