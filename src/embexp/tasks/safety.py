"""Safety tuning (the TinyTE paper's App. B, Table 6): ``task=bsd`` and ``task=advbench``.

``task=bsd``: the unsafe (request, unaligned response) rows of ``PKU-Alignment/BeaverTails`` (our
reading of the paper's Beaver Safety Dataset). ``task=advbench``: ``walledai/AdvBench``, evaluation
only; a method that trains reads BSD's training rows. The attack success rate ``asr`` comes from the
HarmBench judge (``task.judge=harmbench``, when ``judge.model`` is set); without one, bsd reports ROUGE
against the reference response and advbench no quality metric. Our reading of "BSD", the evaluation
sample, the prompt formats and the fixtures (neutral placeholders, never harmful text): docs/tasks_tinyte.md.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, fields
from typing import Sequence

from omegaconf import OmegaConf

from embexp import EmbexpError
from embexp.core.config import option
from embexp.tasks.base import Example, Task, TaskConfig
from embexp.tasks.domains import Anything, Flag, Schema, Text
from embexp.tasks.metrics import rouge_scores
from embexp.tasks.registry import register_task

BSD_HUB = ("PKU-Alignment/BeaverTails", None)
ADVBENCH_HUB = ("walledai/AdvBench", None)
# The 14 harm categories of BeaverTails, as keys of the hub's `category` field.
CATEGORIES = (
    "animal_abuse", "child_abuse", "controversial_topics,politics", "discrimination,stereotype,injustice",
    "drug_abuse,weapons,banned_substance", "financial_crime,property_crime,theft", "hate_speech,offensive_language",
    "misinformation_regarding_ethics,laws_and_safety", "non_violent_unethical_behavior", "privacy_violation",
    "self_harm", "sexually_explicit,adult_content", "terrorism,organized_crime",
    "violence,aiding_and_abetting,incitement",
)
FORMATS = ("qa", "plain")


@dataclass
class SafetyConfig(TaskConfig):
    """What bsd and advbench share: the BSD training rows and the prompt."""

    name: str = option("bsd", "Task family (the file under conf/task).")
    train_split: str = option("30k_train", "BeaverTails split to train on (its rows with "
                                           "is_safe=false; ours: the 30k release, not 330k).")
    select_split: str = option("train_holdout", "Rows for the periodic evaluation loss and select_best: train_holdout "
                                                "= select_size distinct unsafe training requests (with all their "
                                                "responses) carved out with select_seed, never trained on (ours; the "
                                                "paper selects 'by evaluation loss' without saying on which rows).")
    select_size: int = option(500, "Distinct requests of the train_holdout selection "
                                   "slice (ours; Alpaca also holds out 500).")
    prompt_format: str = option("qa", "qa: 'Question: {request}\\nAnswer:' + ' {response}' (ours; "
                                      "no chat template, as for the other tasks); plain: the bare "
                                      "request + the response, for model.chat_template=true.",
                                choices=FORMATS)
    max_source_tokens: int = option(512, "Truncate the request to this many tokens.")
    max_target_tokens: int = option(512, "Truncate training responses to this many tokens (= max_new_tokens).")
    max_new_tokens: int = option(
        512, "Greedy generation budget for one response (ours: HarmBench's 512 generated tokens).")
    judge: str = option("harmbench", "The judge kind that scores the generations when judge.model is set: "
                                     "harmbench (the HarmBench classifier; attack success rate `asr`, 0-100).",
                        choices=("", "instruct", "harmbench", "nli"))
    rouge_stemmer: bool = option(True, "bsd without a judge: Porter-stem tokens "
                                       "before ROUGE against the reference response.")


@dataclass
class BsdConfig(SafetyConfig):
    eval_split: str = option("30k_test", "BeaverTails split to evaluate on (its rows with is_safe=false).")
    eval_size: int = option(
        1000, "Distinct unsafe requests drawn from eval_split with eval_seed (the paper: 1000 queries "
              "of the BSD test set); -1 or more than the split holds: all of them.", ge=1, also=(-1,))
    eval_seed: int = option(0, "Seed of the evaluation sample (ours; the paper's 1000 queries are not published).")


@dataclass
class AdvBenchConfig(SafetyConfig):
    name: str = option("advbench", "Task family (the file under conf/task).")
    eval_split: str = option("train", "AdvBench split to evaluate on (walledai/AdvBench "
                                      "has one, train: all 520 behaviours).")


def fmt(prompt_format: str, request: str, response: str) -> tuple[str, str]:
    if prompt_format == "qa":
        return f"Question: {request.strip()}\nAnswer:", " " + response.strip()
    return request.strip(), response.strip()


@register_task("bsd")
class BsdTask(Task):
    """BeaverTails' unsafe (request, unaligned response) pairs; evaluation on a seeded sample of distinct requests."""

    Config = BsdConfig
    kind = "generation"
    carve_unit = "distinct unsafe requests"

    def hub_source(self):
        return BSD_HUB

    def schema(self, split: str) -> Schema:
        """The BeaverTails schema: prompt and response non-empty, is_safe a boolean (the filter reads
        it), category present (the harm flags)."""
        return Schema({"prompt": Text(), "response": Text(), "is_safe": Flag()}, optional={"category": Anything()})

    def read_split(self, split: str, cap: int, extra: int = 0) -> list[dict]:
        """The unsafe rows of `split` (is_safe == False), in split order; the first `cap` when cap >= 0."""
        raw = super().read_split(split, -1, extra)
        rows = [r for r in raw if r["is_safe"] is False]
        return rows[:cap] if cap is not None and cap >= 0 else rows

    def load(self, which: str) -> list[dict]:
        if which != "eval":
            return super().load(which)
        self.check_which(which)
        split = self.cfg.eval_split
        rows = self.read_split(split, -1)
        if not rows:
            raise EmbexpError(f"empty dataset: task {self.display_name} split '{split}' has no unsafe rows "
                              f"(source={self.resolved_source()})")
        rows = eval_sample(rows, self.cfg.eval_size, self.cfg.eval_seed)
        cap = self.cfg.max_eval_samples
        return rows[:cap] if cap >= 0 else rows

    def carve_keys(self, rows: list[dict]) -> list:
        """select_split=train_holdout by request: a request is held out with every response it has, so
        no selection request is trained on (ours; BeaverTails pairs a request with several responses)."""
        return [r["prompt"].strip() for r in rows]

    def format(self, row: dict) -> Example:
        prompt, target = fmt(self.cfg.prompt_format, row["prompt"], row["response"])
        cats = [k for k, v in (row.get("category") or {}).items() if v]
        return Example(prompt=prompt, target=target, meta={"question": row["prompt"].strip(), "category": cats})

    def score_text(self, refs: Sequence[str], hyps: Sequence[str], examples: Sequence[Example]) -> dict[str, float]:
        # ROUGE against the unaligned reference response; the ASR comes from the judge (task.judge)
        return rouge_scores(refs, hyps, self.cfg.rouge_stemmer)

    def fixture_rows(self, split: str, n: int, rng: random.Random) -> list[dict]:
        return bsd_fixture(n, rng)


def eval_sample(rows: list[dict], size: int, seed: int) -> list[dict]:
    """The first row of every distinct request (split order), then `size` of them drawn with
    ``random.Random(seed).sample`` and kept in split order; all of them when size is -1 or larger."""
    first: dict[str, dict] = {}
    for r in rows:
        first.setdefault(r["prompt"].strip(), r)
    distinct = list(first.values())
    if size < 0 or size >= len(distinct):
        return distinct
    keep = sorted(random.Random(seed).sample(range(len(distinct)), size))
    return [distinct[i] for i in keep]


@register_task("advbench")
class AdvBenchTask(Task):
    """AdvBench behaviours for evaluation; training rows (when a method trains) are BSD's."""

    Config = AdvBenchConfig
    kind = "generation"

    def __init__(self, cfg):
        super().__init__(cfg)
        # the training and selection rows: task=bsd with this config's shared fields
        # (so the same rows, fixture included)
        shared = {fl.name: cfg[fl.name] for fl in fields(SafetyConfig) if fl.name in cfg}
        self.bsd = BsdTask(OmegaConf.merge(OmegaConf.structured(BsdConfig), {**shared, "name": "bsd"}))

    def hub_source(self):
        return ADVBENCH_HUB

    def schema(self, split: str) -> Schema:
        return Schema({"prompt": Text(), "target": Text()})

    def load(self, which: str) -> list[dict]:
        if which == "eval":
            return super().load(which)
        self.check_which(which)
        return self.bsd.load(which)

    def examples(self, which: str) -> list[Example]:
        if which == "eval":
            return super().examples(which)
        return self.bsd.examples(which)

    def format(self, row: dict) -> Example:
        prompt, target = fmt(self.cfg.prompt_format, row["prompt"], row["target"])
        return Example(prompt=prompt, target=target, meta={"question": row["prompt"].strip()})

    def score_text(self, refs: Sequence[str], hyps: Sequence[str], examples: Sequence[Example]) -> dict[str, float]:
        # AdvBench's target is the attack's "Sure, here is ..." prefix, not a gold response: nothing to
        # score against it. The ASR comes from the judge (task.judge=harmbench, judge.model).
        return {}

    def fixture_rows(self, split: str, n: int, rng: random.Random) -> list[dict]:
        rows = []
        for i in range(n):
            topic = rng.choice(TOPICS)
            rows.append({"prompt": f"Placeholder behaviour {i}: write instructions about the {topic}",
                         "target": f"Sure, here is placeholder text about the {topic}"})
        return rows


# ---- fixtures (ours): neutral placeholders in the hub schema ------------------------------------------
TOPICS = ["red kite", "blue lamp", "green river", "quiet garden", "small boat", "old clock", "tall tree", "warm bread"]


def bsd_fixture(n: int, rng: random.Random) -> list[dict]:
    """`n` distinct unsafe requests (at least one category true), about one in four of them asked
    again with another response, mixed with safe rows (every category false), in the BeaverTails
    schema. n counts requests, so a selection carve of k requests out of fixture_size + k leaves
    fixture_size for training."""
    rows, unsafe = [], []
    while len(unsafe) < n:
        r = rng.random()
        if r < 0.3:  # a safe row: the filter must drop it
            topic = rng.choice(TOPICS)
            rows.append({"prompt": f"Placeholder safe request about the {topic}",
                         "response": f"Placeholder safe reply about the {topic}",
                         "category": {c: False for c in CATEGORIES}, "is_safe": True})
            continue
        if unsafe and r < 0.45:  # a request already asked, another response
            prompt, topic = unsafe[rng.randrange(len(unsafe))]
        else:
            topic = rng.choice(TOPICS)
            prompt = f"Placeholder unsafe request {len(unsafe)} about the {topic}"
            unsafe.append((prompt, topic))
        flagged = set(rng.sample(CATEGORIES, rng.randint(1, 3)))
        rows.append({"prompt": prompt, "response": f"Placeholder unaligned reply {len(rows)}: "
                                                   f"the {topic} is {topic.split()[0]}",
                     "category": {c: c in flagged for c in CATEGORIES}, "is_safe": False})
    return rows
