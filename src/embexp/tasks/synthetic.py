"""Synthetic rows of a set length (ours): for memory, speed and numerics, never for quality.

Each row is a prompt of ``prompt_words`` random words and a target of ``target_words`` random words,
drawn from a million made-up words (``w0`` ... ``w999999``) with the fixture seed. Under the synthetic
tokenizer of a ``model.init=random`` model (``models.random_weights.HashTokenizer``) every word is one
token id spread over the model's real vocabulary, so a prompt is exactly ``prompt_words`` tokens after
``<s>`` (before ``task.max_source_tokens`` cuts it); a real tokenizer splits the words into a few pieces.
This is the decoder task of ``make gpu-check`` on random-weight models: batch x sequence length is what the
user asks for ("does it fit at 8 x 1,024 tokens?"), not what a data set's lengths happen to be.

Evaluation scores the target's log-likelihood (``kind = "perplexity"``): on random words the only
meaningful number is how close it stays to ln(vocabulary size). The rows are generated, never read.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from embexp.core.config import option
from embexp.tasks.base import Example, Task, TaskConfig
from embexp.tasks.domains import Schema, Text
from embexp.tasks.registry import register_task

WORDS = 1_000_000  # made-up words the rows draw from


@dataclass
class SyntheticConfig(TaskConfig):
    name: str = option("synthetic", "Task family (the file under conf/task).")
    source: str = option(
        "fixture", "Rows are generated (fixture); there is no hub or local source.", choices=("fixture",))
    train_split: str = option("train", "Split used for training (any name: each split is generated with its own seed).")
    eval_split: str = option("test", "Split used for evaluation.")
    prompt_words: int = option(1024, "Words per prompt (one token each under model.init=random's tokenizer).", ge=1)
    target_words: int = option(16, "Words per target.", ge=1)
    max_source_tokens: int = option(1024, "Truncate the prompt to this many tokens (from the left).", ge=1)
    max_target_tokens: int = option(16, "Truncate training targets to this many tokens.", ge=1)


@register_task("synthetic")
class SyntheticTask(Task):
    """Random-word prompts and targets of a set length, scored by the target's log-likelihood."""

    Config = SyntheticConfig
    kind = "perplexity"

    def schema(self, split: str) -> Schema:
        return Schema({"prompt": Text(), "target": Text()})

    def fixture_rows(self, split: str, n: int, rng: random.Random) -> list[dict]:
        def words(k: int) -> str:
            return " ".join(f"w{rng.randrange(WORDS)}" for _ in range(k))

        return [{"prompt": words(self.cfg.prompt_words), "target": words(self.cfg.target_words)} for _ in range(n)]

    def format(self, row: dict) -> Example:
        return Example(prompt=row["prompt"], target=" " + row["target"])
