"""CommitPackFT code editing (the K-Token Merging paper's Table 3): ``bigcode/commitpackft``, config
``python``, scored by the perplexity of the new code given the old code and the commit subject.

The authors' prompt verbatim (``scripts/commitpackft/run.py`` @8d29f47, their typo "instrutions" kept),
target ``new_contents``; the authors' split of the hub's only split, ``train`` (``amazon.authors_split``);
``task.data_dir`` reads ``train.jsonl`` in the hub schema. The perplexity (no generation) is computed by
``Method.score_continuations`` on the prompt as the method reads it; also ``nll`` (nats per token) and
``scored_tokens``. The prompt, the split, the metric and the truncation (ours): docs/methods_ktoken.md.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from embexp import EmbexpError
from embexp.core.config import option
from embexp.tasks.amazon import SPLITS, authors_split
from embexp.tasks.base import Example, Task, TaskConfig, load_dataset
from embexp.tasks.domains import Schema, Text
from embexp.tasks.registry import register_task

HUB_ID = "bigcode/commitpackft"
PROMPT = ("Update the old python code content based on the instrutions.\nOld Content: {old}\n"
          "Instructions: {subject}\nNew Content:\n")
HUB_SPLIT = "train"
LANGUAGES = ("python",)  # the paper's language config


@dataclass
class CommitPackConfig(TaskConfig):
    name: str = option("commitpack", "Task family (the file under conf/task).")
    subset: str = option("python", "Language config of bigcode/commitpackft (the paper: python; "
                                   "the prompt names python as the authors').", choices=LANGUAGES)
    train_split: str = option("train", "train = the hub's train split minus the authors' test carve.", choices=SPLITS)
    eval_split: str = option("test", "test = the test_size rows the authors' split holds "
                                     "out of the hub's train split.", choices=SPLITS)
    test_size: int = option(5600, "Rows held out for testing (the authors: 5,600).", ge=1)
    split_seed: int = option(
        42, "Seed of the train/test split (the authors: 42, datasets' train_test_split permutation).")
    max_source_tokens: int = option(2048, "Keep the last N prompt tokens (ours; the authors do not truncate).")
    max_target_tokens: int = option(2048, "Train and score the first N tokens of the new "
                                          "code (ours; the authors do not truncate).")


@register_task("commitpack")
class CommitPackTask(Task):
    """CommitPackFT Python: new code given old code + commit subject, scored by perplexity."""

    Config = CommitPackConfig
    kind = "perplexity"
    subsets = LANGUAGES
    reports_length_reduction = True  # K-Token Merging's Table 3 (its P-L needs the uncompressed run's perplexity)

    def schema(self, split: str) -> Schema:
        """old/new contents strings, possibly empty (a commit may create or empty a file); the
        commit subject non-empty (it is the instruction)."""
        return Schema({"old_contents": Text(empty=True), "new_contents": Text(empty=True), "subject": Text()})

    def hub_source(self):
        return HUB_ID, self.cfg.subset

    def load_hub(self, split: str, cap: int):
        url = f"hf://datasets/{HUB_ID}/data/{self.cfg.subset}/data.jsonl"
        return load_dataset(url, "json", data_files={HUB_SPLIT: url}, split=HUB_SPLIT)

    def read_split(self, split: str, cap: int, extra: int = 0):
        """The rows of ``split`` (train or test) carved out of the hub's train split; a fixture's
        train split holds test_size + fixture_size rows."""
        cfg = self.cfg
        if split not in SPLITS:  # a selection split (task.select_split names any split)
            raise EmbexpError(f"split '{split}' of task {self.display_name}: the splits are carved out of the hub's "
                              f"train split (choose from: {', '.join(SPLITS)})")
        if self.resolved_source() == "fixture":
            rng = random.Random(self.fixture_key(HUB_SPLIT))
            full = self.checked(self.fixture_rows(HUB_SPLIT, cfg.test_size + cfg.fixture_size + extra, rng), HUB_SPLIT,
                                "fixture")
        else:
            full = super().read_split(HUB_SPLIT, -1)  # local rows are checked as they are read, hub rows below
        train, test = authors_split(len(full), cfg.test_size, cfg.split_seed)
        ids = train if split == "train" else test
        if cap is not None and cap >= 0:
            ids = ids[:cap]
        if isinstance(full, list):
            return [full[i] for i in ids]
        return self.checked([dict(r) for r in full.select(ids)], HUB_SPLIT, "hub", index=ids)  # only the rows used

    def format(self, row: dict) -> Example:
        return Example(prompt=PROMPT.format(old=row["old_contents"], subject=row["subject"]),
                       target=row["new_contents"])

    # ---- fixture (ours): one-line Python edits, the subject says which ---------------------------
    def fixture_rows(self, split: str, n: int, rng: random.Random) -> list[dict]:
        rows = []
        for i in range(n):
            fn, a, b = rng.choice(FUNCS), rng.randrange(1, 10), rng.randrange(1, 10)
            old = f"def {fn}(x):\n    return x * {a}\n"
            kind = rng.randrange(3)
            if kind == 0:
                new, subject = f"def {fn}(x):\n    return x * {b}\n", f"Change the factor of {fn} to {b}"
            elif kind == 1:
                new, subject = f"def {fn}(x, y):\n    return x * {a} + y\n", f"Add y to {fn}"
            else:
                new, subject = f'def {fn}(x):\n    """Multiply x by {a}."""\n    return x * {a}\n', f"Document {fn}"
            rows.append({"commit": f"{i:040x}", "old_file": f"src/{fn}.py", "new_file": f"src/{fn}.py",
                         "old_contents": old, "new_contents": new, "subject": subject, "message": subject + "\n",
                         "lang": "Python", "license": "mit", "repos": f"user{i % 7}/repo{i % 5}"})
        return rows


FUNCS = ["scale", "double", "grow", "weight", "boost", "stretch", "amplify", "inflate"]
