"""CNN/DailyMail summarisation (the TinyTE paper's summarisation task), ``abisee/cnn_dailymail`` 3.0.0.

Prompt (ours) ``"Article: {article}\\nSummary:"``, target ``" {highlights}"``; articles are cut after
``max_article_words`` whitespace words, keeping the lead (ours); ROUGE-1/2/L/Lsum by
``metrics.rouge_scores``. The prompt, the cut, the metrics (the paper's R-L is ``rougeLsum``), the
sentence split and the generation budget: docs/tasks_tinyte.md.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from embexp.core.config import option
from embexp.tasks.base import Example, Task, TaskConfig
from embexp.tasks.domains import Schema, Text
from embexp.tasks.metrics import lsum_text, rouge_scores, split_sentences  # noqa: F401  (also imported from here)
from embexp.tasks.registry import register_task

PROMPT = "Article: {article}\nSummary:"
VERSIONS = ("3.0.0",)  # hub configs wired


@dataclass
class CnnDmConfig(TaskConfig):
    name: str = option("cnndm", "Task family (the file under conf/task).")
    subset: str = option("3.0.0", "Hub config of abisee/cnn_dailymail (3.0.0: the non-anonymised version).",
                         choices=VERSIONS)
    eval_split: str = option("test", "Split used for evaluation (the paper reports the test set).")
    max_eval_samples: int = option(2500, "Keep the first N evaluation rows (the paper caps the test set at 2,500).")
    select_split: str = option("validation", "Rows for the periodic evaluation loss and select_best: "
                                             "the validation split, never the reported test split.")
    select_size: int = option(2500, "Keep the first N validation rows for selection (ours: the size of "
                                    "the capped test set; each evaluation costs as much as before).")
    max_article_words: int = option(1500, "Cut articles after this many whitespace words, "
                                          "keeping the lead (ours; -1: never).", ge=1, also=(-1,))
    max_source_tokens: int = option(2048, "Truncate the prompt to this many tokens "
                                          "(1,500 words are ~2,000 tokens; rarely hit).")
    max_target_tokens: int = option(160, "Truncate training summaries to this many "
                                         "tokens (highlights: ~55 words, 99th pct ~125).")
    max_new_tokens: int = option(256, "Greedy generation budget for one summary (ours): covers every "
                                      "test highlight (longest 202 SmolLM2 tokens; 3.6% exceed 128), the "
                                      "same budget as wmt16 (python -m embexp.analyze eval_evidence).")
    stop_at_newline: bool = option(False, "Also stop at the first newline and cut the text there. Off: highlights "
                                          "put one sentence per line, so a newline stop would keep only the first.")
    rouge_stemmer: bool = option(True, "Porter-stem tokens before ROUGE (ours; rouge-score's use_stemmer).")


@register_task("cnndm")
class CnnDmTask(Task):
    """CNN/DailyMail on ``abisee/cnn_dailymail``; rows keep the hub fields."""

    Config = CnnDmConfig
    kind = "generation"
    subsets = VERSIONS

    def hub_source(self):
        return "abisee/cnn_dailymail", self.cfg.subset

    def schema(self, split: str) -> Schema:
        return Schema({"article": Text(), "highlights": Text()})

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
