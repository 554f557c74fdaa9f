"""Sentence-pair tasks for sentence embeddings (embexp/objectives/sentence.py: pooling, the objective, scoring).

``nli_pairs`` (kind ``pairs``): the PETE paper's training data, the SNLI + MNLI pairs labelled
*entailment*, trained contrastively and evaluated zero-shot on ``eval_task`` (STS-B).
``max_train_samples`` keeps the first N *entailment pairs* (datasets and splits in the order given;
ours); MNLI's ``validation`` is ``validation_matched``. ``stsb_similarity`` (kind ``similarity``): STS-B
zero-shot, the cosine similarity of the two sentences' embeddings against the gold 0–5 score. Both
tasks, the objective and the local files: docs/methods_pete.md.

Fixtures (ours): the templated animal sentences of the GLUE fixture, in the hub schemas (SNLI and
MNLI rows with all three labels, some SNLI rows unlabelled (-1); STS-B pairs whose score falls with
the number of content words changed), so that a contrastive model trained on the NLI fixture ranks
the STS fixture's pairs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from omegaconf import OmegaConf

from embexp import EmbexpError
from embexp.core.config import option
from embexp.tasks.base import Example, Task, TaskConfig
from embexp.tasks.domains import ClassId, Integer, Number, Schema, Text
from embexp.tasks.glue import _fixture_mnli, _fixture_stsb
from embexp.tasks.metrics import spearman_pearson
from embexp.tasks.registry import TASKS, register_task

SOURCES = {"snli": ("stanfordnlp/snli", "plain_text"), "mnli": ("nyu-mll/glue", "mnli")}
ENTAILMENT = 0  # both hub schemas: 0 entailment, 1 neutral, 2 contradiction (-1: no gold label, SNLI)
NLI_LABELS = ("entailment", "neutral", "contradiction")


def similarity_tasks() -> tuple[str, ...]:
    """What nli_pairs can evaluate on: the registered tasks of kind similarity."""
    return tuple(sorted(n for n, c in TASKS.items() if c.kind == "similarity"))


@dataclass
class StsbSimilarityConfig(TaskConfig):
    name: str = option("stsb_similarity", "Task family (the file under conf/task).")
    eval_split: str = option("validation", "STS-B split scored (the GLUE test split has no scores).")
    max_source_tokens: int = option(128, "Truncate each sentence to this many tokens (the PETE code's max_seq_len).")


@dataclass
class NliPairsConfig(TaskConfig):
    name: str = option("nli_pairs", "Task family (the file under conf/task).")
    datasets: list = option(["snli", "mnli"], "NLI datasets whose entailment pairs are trained "
                                              "on, in this order: snli, mnli (the paper: both).",
                            choices=tuple(SOURCES))
    train_split: str = option("train", "Split(s) trained on; join several with '+' (e.g. "
                                       "validation+test for the local SNLI files).")
    eval_task: str = option("stsb_similarity", "The similarity task evaluated zero-shot after training (it reads "
                                               "eval_split, data_dir, source, max_eval_samples from here).",
                            choices=similarity_tasks)
    eval_split: str = option("validation", "Split of eval_task that is scored.")
    max_source_tokens: int = option(128, "Truncate each sentence to this many tokens (the PETE code's max_seq_len).")
    temperature: float = option(0.07, "InfoNCE temperature at the start (the PETE code's 0.07).", gt=0)
    learn_temperature: bool = option(True, "Learn the temperature (as log tau, ours; the code "
                                           "learns tau itself) with the method's tensors.")


@register_task("stsb_similarity")
class StsbSimilarityTask(Task):
    """STS-B zero-shot: cosine similarity of pooled sentence embeddings, Spearman x100."""

    Config = StsbSimilarityConfig
    kind = "similarity"

    def hub_source(self):
        return "nyu-mll/glue", "stsb"

    def schema(self, split: str) -> Schema:
        """Both sentences non-empty, label the gold similarity from 0 to 5 (the GLUE test split's -1
        is refused: it has no scores), idx unique within the split."""
        return Schema({"sentence1": Text(), "sentence2": Text(), "label": Number(0.0, 5.0)},
                      optional={"idx": Integer()}, key="idx")

    def load(self, which: str) -> list[dict]:
        if which == "train":
            raise EmbexpError("task stsb_similarity is zero-shot and has no "
                              "training objective: train on task=nli_pairs "
                              "(it evaluates on STS-B) or evaluate with method=zero_shot")
        return super().load(which)

    def format(self, row: dict) -> Example:
        return Example(prompt="", target="", label=float(row["label"]), text=(row["sentence1"], row["sentence2"]),
                       meta={"idx": row.get("idx")})

    def score_similarity(self, gold: Sequence[float], cosine: Sequence[float]) -> dict[str, float]:
        return spearman_pearson(gold, cosine)

    def fixture_rows(self, split: str, n: int, rng: random.Random) -> list[dict]:
        return [{**_fixture_stsb(rng), "idx": i} for i in range(n)]


@register_task("nli_pairs")
class NliPairsTask(Task):
    """SNLI + MNLI entailment pairs for contrastive sentence-embedding training; evaluated on eval_task."""

    Config = NliPairsConfig
    kind = "pairs"

    def __init__(self, cfg):
        super().__init__(cfg)
        if not cfg.datasets:  # each entry's domain is the schema's (task.datasets)
            raise EmbexpError(f"task.datasets is empty (choose from: {', '.join(SOURCES)})")
        ecls = TASKS[cfg.eval_task]
        shared = {k: cfg[k] for k in ("source", "data_dir", "eval_split", "max_eval_samples", "max_source_tokens",
                                       "fixture_size", "fixture_seed")}
        self.eval_task = ecls(OmegaConf.merge(OmegaConf.structured(ecls.Config), {"name": cfg.eval_task, **shared}))
        self._dataset = cfg.datasets[0]

    def hub_source(self):
        return SOURCES[self._dataset]

    def schema(self, split: str) -> Schema:
        """Premise and hypothesis non-empty; label an NLI class id, or -1 (SNLI's rows without a gold
        label: dropped with every other non-entailment row); idx (MNLI) unique within the split."""
        return Schema({"premise": Text(), "hypothesis": Text(), "label": ClassId(NLI_LABELS, unlabelled=True)},
                      optional={"idx": Integer()}, key="idx")

    def fixture_key(self, split: str) -> str:
        return f"{self.cfg.fixture_seed}/{self.cfg.name}/{self._dataset}/{split}"

    def load(self, which: str) -> list[dict]:
        if which != "train":
            return self.eval_task.load(which)
        source, rows = self.resolved_source(), []
        for dataset in self.cfg.datasets:
            self._dataset = dataset
            for split in self.cfg.train_split.split("+"):
                if dataset == "mnli" and split == "validation":
                    split = "validation_matched"
                part = self.read_split(split, -1)
                rows += [r for r in part if int(r["label"]) == ENTAILMENT]
        cap = self.cfg.max_train_samples
        rows = rows[:cap] if cap is not None and cap >= 0 else rows
        if not rows:
            raise EmbexpError(f"empty dataset: task nli_pairs has no entailment pairs in {'+'.join(self.cfg.datasets)} "
                              f"split '{self.cfg.train_split}' (source={source})")
        return rows

    def format(self, row: dict) -> Example:
        return Example(prompt="", target="", label=None, text=(row["premise"], row["hypothesis"]))

    def examples(self, which: str) -> list[Example]:
        if which != "train":
            return self.eval_task.examples(which)
        return super().examples(which)

    def score_similarity(self, gold, cosine) -> dict[str, float]:
        return self.eval_task.score_similarity(gold, cosine)

    def fixture_rows(self, split: str, n: int, rng: random.Random) -> list[dict]:
        rows = []
        for i in range(n):
            label = rng.randrange(3)
            row = {**_fixture_mnli(rng, label), "label": label}
            if self._dataset == "snli" and rng.random() < 0.1:
                row["label"] = -1  # SNLI rows without a gold label
            if self._dataset == "mnli":
                row["idx"] = i
            rows.append(row)
        return rows
