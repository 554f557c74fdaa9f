"""Alpaca instruction following (the TinyTE paper's instruction-tuning task), ``tatsu-lab/alpaca``.

Two prompt formats (``task.prompt_format``): the Stanford Alpaca template (``prompt + target`` is the
hub's ``text``) and ``llama2_inst`` (``"[INST] ... [/INST]"``). ``eval_split=heldout`` evaluates on a
seeded carve of ``train_split`` that is never trained on (ours: the paper holds out 2,500 instructions
without saying which). Metrics: ROUGE (the paper's R-L read as sentence-level ``rougeL``, ours) and,
with ``judge.model`` set, the Instruct Score (``task.judge=instruct``). The formats, the carves, the
metrics and the generation budget: docs/tasks_tinyte.md.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from embexp import EmbexpError
from embexp.core.config import option
from embexp.tasks.base import Example, Task, TaskConfig
from embexp.tasks.domains import Schema, Text
from embexp.tasks.metrics import rouge_scores
from embexp.tasks.registry import register_task

HEADER_INPUT = ("Below is an instruction that describes a task, paired with an input that provides further context. "
                "Write a response that appropriately completes the request.\n\n")
HEADER = "Below is an instruction that describes a task. Write a response that appropriately completes the request.\n\n"
HELDOUT = "heldout"
FORMATS = ("alpaca", "llama2_inst")


@dataclass
class AlpacaConfig(TaskConfig):
    name: str = option("alpaca", "Task family (the file under conf/task).")
    eval_split: str = option(HELDOUT, "Evaluation split: 'heldout' carves heldout_size rows out of "
                                      "train_split (never trained on); any other name is read as a split.")
    heldout_size: int = option(2500, "Rows held out of train_split for evaluation when "
                                     "eval_split=heldout (the paper: 2,500).", ge=1)
    heldout_seed: int = option(0, "Seed of the held-out carve (ours; the authors' held-out rows are not published).")
    select_split: str = option(
        "train_holdout", "Rows for the periodic evaluation loss and select_best (the paper trains "
                         "'until convergence (patience of 3 epochs)', on which rows it does not "
                         "say): train_holdout = select_size rows carved out of the training rows "
                         "left after the evaluation carve (ours); a split name; or '' (none).")
    select_size: int = option(500, "Rows of the train_holdout selection slice (ours; "
                                   "with the 2,000-row local sample use e.g. 100).")
    prompt_format: str = option("alpaca", "alpaca (the Stanford Alpaca template; prompt + target == the "
                                          "hub's text field) or llama2_inst ('[INST] ... [/INST]').",
                                choices=FORMATS)
    max_source_tokens: int = option(512, "Truncate the prompt to this many tokens.")
    max_target_tokens: int = option(512, "Truncate training responses to this many tokens.")
    max_new_tokens: int = option(512, "Greedy generation budget for one response (ours): = "
                                      "max_target_tokens, so any trained response length fits (of 2,000 "
                                      "Alpaca outputs, 1.2% exceed 256 SmolLM2 tokens and 1 exceeds 512).")
    stop_at_newline: bool = option(False, "Also stop at the first newline and cut the text "
                                          "there. Off: 20% of Alpaca outputs span several lines.")
    rouge_stemmer: bool = option(True, "Porter-stem tokens before ROUGE (ours; rouge-score's use_stemmer).")


def alpaca_prompt(instruction: str, inp: str) -> str:
    if inp:
        return f"{HEADER_INPUT}### Instruction:\n{instruction}\n\n### Input:\n{inp}\n\n### Response:\n"
    return f"{HEADER}### Instruction:\n{instruction}\n\n### Response:\n"


@register_task("alpaca")
class AlpacaTask(Task):
    """Alpaca on ``tatsu-lab/alpaca`` (one split, ``train``), with a seeded held-out evaluation carve."""

    Config = AlpacaConfig
    kind = "generation"

    def hub_source(self):
        return "tatsu-lab/alpaca", None

    def schema(self, split: str) -> Schema:
        """instruction and output non-empty; input a string, empty when the instruction has none."""
        return Schema({"instruction": Text(), "input": Text(empty=True), "output": Text()})

    def load(self, which: str) -> list[dict]:
        self.check_which(which)
        if self.cfg.eval_split != HELDOUT or (which == "select" and not self.holdout):
            return super().load(which)
        split, k = self.cfg.train_split, self.cfg.heldout_size
        source = self.resolved_source()
        # a fixture makes fixture_size training rows + the held-out rows (+ the selection rows)
        rows = self.read_split(split, -1, extra=k + (self.fixture_holdout() if self.holdout else 0))
        if not 0 < k < len(rows):
            raise EmbexpError(f"task.heldout_size={k} must be between 1 and {len(rows) - 1}: split '{split}' "
                              f"has {len(rows)} rows (source={source})")
        held = set(random.Random(self.cfg.heldout_seed).sample(range(len(rows)), k))
        keep = [r for i, r in enumerate(rows) if (i in held) == (which == "eval")]
        if which != "eval" and self.holdout:  # the selection slice comes out of what is left for training
            keep = self.carve(keep, which)
        cap = {"train": self.cfg.max_train_samples, "eval": self.cfg.max_eval_samples, "select": -1}[which]
        return keep[:cap] if cap >= 0 else keep

    def format(self, row: dict) -> Example:
        ins, inp, out = row["instruction"], row["input"], row["output"]
        user = f"{ins}\n\n{inp}" if inp else ins  # the question an instruct judge reads (task.judge)
        if self.cfg.prompt_format == "alpaca":
            return Example(prompt=alpaca_prompt(ins, inp), target=out,
                           meta={"input_words": len((ins + " " + inp).split()), "question": user})
        return Example(prompt=f"[INST] {user} [/INST]", target=" " + out,
                       meta={"input_words": len(user.split()), "question": user})

    def score_text(self, refs: Sequence[str], hyps: Sequence[str], examples: Sequence[Example]) -> dict[str, float]:
        return rouge_scores(refs, hyps, self.cfg.rouge_stemmer)

    # ---- fixture (ours): small deterministic instructions a model can learn from a few rows -------
    def fixture_rows(self, split: str, n: int, rng: random.Random) -> list[dict]:
        rows = []
        for _ in range(n):
            kind = rng.randrange(4)
            words = rng.sample(WORDS, rng.randint(2, 5))
            if kind == 0:
                ins, inp, out = "Reverse the order of the words.", " ".join(words), " ".join(reversed(words))
            elif kind == 1:
                ins, inp, out = "Sort the words alphabetically.", ", ".join(words), ", ".join(sorted(words))
            elif kind == 2:
                ins, inp, out = "Write the words in upper case.", " ".join(words), " ".join(words).upper()
            else:
                w = words[0]
                ins, inp, out = f"Give the first letter of the word '{w}'.", "", f"The first letter of '{w}' is {w[0]}."
            rows.append({"instruction": ins, "input": inp, "output": out, "text": alpaca_prompt(ins, inp) + out})
        return rows


WORDS = ["apple", "river", "cloud", "stone", "garden", "window", "yellow", "music", "pencil", "orange",
         "mountain", "candle", "forest", "rabbit", "silver", "letter"]
