"""Amazon Reviews sentiment (the K-Token Merging paper's Table 2): ``McAuley-Lab/Amazon-Reviews-2023``,
config ``raw_review_Amazon_Fashion``, one hub split ``full``, read through the ``json`` builder.

Prompt and label verbatim from the authors' ``scripts/amazon_reviews/run.py`` (@8d29f47):
``"Review: {text}, Label:"``, target ``positive`` when ``rating >= 3.5`` else ``negative`` (no leading
space: the authors tokenise the answer on its own); the authors' split of ``full``
(:func:`authors_split`), then a 10% sample of the training part drawn with ``sample_seed`` (ours: the
authors' is unseeded). ``task.data_dir`` reads ``full.jsonl`` in the hub schema. Metrics (0–100):
accuracy, balanced accuracy, F1 of ``positive`` and ``majority_baseline``. The splits, the hub file and
a local check on real rows: docs/methods_ktoken.md.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from embexp import EmbexpError
from embexp.core.config import option
from embexp.tasks.base import Example, Task, TaskConfig, load_dataset
from embexp.tasks.domains import Number, Schema, Text
from embexp.tasks.metrics import binary_summary
from embexp.tasks.registry import register_task

PROMPT = "Review: {text}, Label:"
HUB_ID = "McAuley-Lab/Amazon-Reviews-2023"
CATEGORIES = ("Amazon_Fashion",)  # the paper's category; the loader works for any raw_review_* file
SPLITS = ("train", "test")  # carved out of one hub split (amazon: full; commitpack: train)
FULL = "full"


_FIXTURES: dict[tuple[str, int], list[dict]] = {}  # the last fixture 'full' this process generated


def authors_split(n: int, test_size: int, seed: int) -> tuple[list[int], list[int]]:
    """(train indices, test indices) of ``datasets.Dataset.train_test_split(test_size=int, seed=seed)``
    on n rows: ``np.random.default_rng(seed).permutation(n)``, the first ``test_size`` are the test split."""
    if not 0 < test_size < n:
        raise EmbexpError(f"task.test_size={test_size} must be between 1 and {n - 1} (the full split has {n} rows)")
    perm = np.random.default_rng(seed).permutation(n)
    return perm[test_size:].tolist(), perm[:test_size].tolist()


@dataclass
class AmazonConfig(TaskConfig):
    name: str = option("amazon", "Task family (the file under conf/task).")
    subset: str = option("Amazon_Fashion", "Review category: the hub config raw_review_<subset> "
                                           "(the paper: Amazon_Fashion).", choices=CATEGORIES)
    train_split: str = option("train", "train = the training part of the authors' split of "
                                       "'full' (a train_fraction sample).", choices=SPLITS)
    eval_split: str = option(
        "test", "test = the test_size rows the authors' split holds out of 'full'.", choices=SPLITS)
    test_size: int = option(50000, "Rows of 'full' held out for testing (the authors: 50,000).", ge=1)
    split_seed: int = option(
        42, "Seed of the train/test split (the authors: 42, datasets' train_test_split permutation).")
    train_fraction: float = option(
        0.1, "Fraction of the training part kept for training (the authors: 0.1).", gt=0, le=1)
    sample_seed: int = option(42, "Seed of the train_fraction sample (ours: the authors' sample is unseeded).")
    max_source_tokens: int = option(512, "Truncate the prompt to this many tokens (ours; the authors do not truncate).")
    max_target_tokens: int = option(4, "Truncate training targets to this many tokens.")
    max_new_tokens: int = option(2, "Greedy generation budget (the authors read one greedy "
                                    "token; ours 2, as 'negative' may be two tokens).")


@register_task("amazon")
class AmazonTask(Task):
    """Binary sentiment of Amazon reviews (rating >= 3.5 is positive), the authors' split of 'full'."""

    Config = AmazonConfig
    kind = "classification"
    subsets = CATEGORIES
    label_names = ("negative", "positive")
    reports_length_reduction = True  # K-Token Merging's Table 2
    pl_score = True

    def schema(self, split: str) -> Schema:
        """rating a star rating from 1 to 5; text a string, possibly empty (the hub has reviews
        with a rating and no text, which the authors keep: the prompt is then "Review: , Label:")."""
        return Schema({"rating": Number(1.0, 5.0), "text": Text(empty=True)})

    def hub_source(self):
        return HUB_ID, f"raw_review_{self.cfg.subset}"

    def load_hub(self, split: str, cap: int):
        url = f"hf://datasets/{HUB_ID}/raw/review_categories/{self.cfg.subset}.jsonl"
        # split by read_split (Dataset.select keeps memory flat on 2.5M rows)
        return load_dataset(url, "json", data_files={FULL: url}, split=FULL)

    def read_split(self, split: str, cap: int, extra: int = 0):
        """The rows of ``split`` (train or test) carved out of ``full``; a fixture's ``full`` holds
        test_size + fixture_size / train_fraction rows, so its training sample has fixture_size rows."""
        cfg = self.cfg
        if split not in SPLITS:  # a selection split (task.select_split names any split)
            raise EmbexpError(f"split '{split}' of task {self.display_name}: the splits are carved out of 'full' "
                              f"(choose from: {', '.join(SPLITS)})")
        if self.resolved_source() == "fixture":
            n = cfg.test_size + round((cfg.fixture_size + extra) / cfg.train_fraction)
            key = self.fixture_key(FULL)
            if (key, n) not in _FIXTURES:  # ~50,000 rows (the authors' test_size): 0.5 s, once per process
                _FIXTURES.clear()
                _FIXTURES[key, n] = self.checked(self.fixture_rows(FULL, n, random.Random(key)), FULL, "fixture")
            full = _FIXTURES[key, n]
        else:
            full = super().read_split(FULL, -1)  # local rows are checked as they are read, hub rows below
        train, test = authors_split(len(full), cfg.test_size, cfg.split_seed)
        if split == "train" and cfg.train_fraction < 1:
            count = max(1, int(len(train) * cfg.train_fraction))
            train = [train[i] for i in random.Random(cfg.sample_seed).sample(range(len(train)), count)]
        ids = train if split == "train" else test
        if cap is not None and cap >= 0:
            ids = ids[:cap]
        if isinstance(full, list):
            return [dict(full[i]) for i in ids]  # copies: the fixture's rows are kept for the next split
        return self.checked([dict(r) for r in full.select(ids)], FULL, "hub", index=ids)  # only the rows used

    def format(self, row: dict) -> Example:
        y = int(float(row["rating"]) >= 3.5)  # a number: the schema's domain
        text = str(row["text"])
        return Example(prompt=PROMPT.format(text=text), target=self.label_names[y], label=y,
                       choices=self.label_names, text=(text,))

    def score_labels(self, gold: Sequence[int], pred: Sequence[int]) -> dict[str, float]:
        return binary_summary(gold, pred)

    # ---- fixture (ours): reviews whose words carry the rating, in the hub schema --------------
    def fixture_rows(self, split: str, n: int, rng: random.Random) -> list[dict]:
        rows = []
        for i in range(n):
            rating = float(rng.choice((1, 2, 3, 4, 5, 5, 5)))
            words = GOOD if rating >= 3.5 else BAD
            item = rng.choice(ITEMS)
            text = f"The {item} is {rng.choice(words)} and {rng.choice(words)}."
            rows.append({"rating": rating, "title": rng.choice(words).capitalize(), "text": text, "images": [],
                         "asin": f"B{i:09d}", "parent_asin": f"B{i:09d}", "user_id": f"U{rng.randrange(10**8):08d}",
                         "timestamp": 1600000000000 + i, "helpful_vote": rng.randrange(5),
                         "verified_purchase": rng.random() < 0.9})
        return rows


GOOD = ["great", "lovely", "comfortable", "perfect", "soft", "beautiful", "well made", "true to size"]
BAD = ["awful", "cheap", "itchy", "broken", "too small", "ugly", "flimsy", "disappointing"]
ITEMS = ["dress", "shirt", "scarf", "belt", "hat", "jacket", "sock", "bag", "ring", "shoe"]
