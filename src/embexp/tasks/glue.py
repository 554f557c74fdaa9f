"""GLUE: the nine sub-tasks of ``nyu-mll/glue``, with the official metric of each.

Decoder prompts and choices are lm-evaluation-harness's GLUE tasks, verbatim
(``lm_eval/tasks/glue/<task>/default.yaml``; MNLI via ``mnli/utils.py``; QQP is its v2.0 prompt on
question1/question2). Each choice is a continuation with one leading space (" positive").
STS-B has no lm-eval prompt; ours (labelled as such) mirrors the MRPC one and asks for the score,
with the target formatted ``" {:.1f}"``; ``score_regression`` parses generated text strictly.

Metrics (0–100): CoLA MCC (+ accuracy), MRPC/QQP accuracy and F1 of the positive class, STS-B
Pearson and Spearman, accuracy otherwise (an invalid prediction, -1: ``metrics.binary_counts``).
MNLI-mm: set ``eval_split=validation_mismatched`` (``auto`` is ``validation_matched``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from embexp.core.config import option
from embexp.tasks.base import Example, Task, TaskConfig
from embexp.tasks.domains import ClassId, Integer, Number, Schema, Text
from embexp.tasks.metrics import accuracy, f1_score, mcc_score, regression_scores
from embexp.tasks.registry import register_task

# subset -> (text fields in hub order, hub ClassLabel names, prompt, decoder choices)
SPECS = {
    "cola": (("sentence",), ("unacceptable", "acceptable"),
             "{sentence}\nQuestion: Does this sentence make sense?\nAnswer:", ("no", "yes")),
    "sst2": (("sentence",), ("negative", "positive"),
             "{sentence}\nQuestion: Is this sentence positive or negative?\nAnswer:", ("negative", "positive")),
    "mrpc": (("sentence1", "sentence2"), ("not_equivalent", "equivalent"),
             "Sentence 1: {sentence1}\nSentence 2: {sentence2}\nQuestion: "
             "Do both sentences mean the same thing?\nAnswer:",
             ("no", "yes")),
    "qqp": (("question1", "question2"), ("not_duplicate", "duplicate"),
            "Question 1: {question1}\nQuestion 2: {question2}\nQuestion: "
            "Do both questions ask the same thing?\nAnswer:",
            ("no", "yes")),
    "stsb": (("sentence1", "sentence2"), (),  # prompt ours: lm-eval has no STS-B task
             "Sentence 1: {sentence1}\nSentence 2: {sentence2}\nQuestion: How "
             "similar are the two sentences, on a scale from 0 to 5?\nAnswer:",
             ()),
    "mnli": (("premise", "hypothesis"), ("entailment", "neutral", "contradiction"),
             "{premise}\nQuestion: {hypothesis} True, False or Neither?\nAnswer:", ("True", "Neither", "False")),
    "qnli": (("question", "sentence"), ("entailment", "not_entailment"),
             "{question}\n{sentence}\nQuestion: Does this response answer the question?\nAnswer:", ("yes", "no")),
    "rte": (("sentence1", "sentence2"), ("entailment", "not_entailment"),
            "{sentence1}\nQuestion: {sentence2} True or False?\nAnswer:", ("True", "False")),
    "wnli": (("sentence1", "sentence2"), ("not_entailment", "entailment"),
             "{sentence1}\nQuestion: {sentence2} True or False?\nAnswer:", ("False", "True")),
}
STSB_INVALID = 2.5  # ours: an unparseable STS-B answer scores as the scale midpoint (no information)


@dataclass
class GlueConfig(TaskConfig):
    name: str = option("glue", "Task family (the file under conf/task).")
    subset: str = option("sst2", "GLUE sub-task: cola, sst2, mrpc, qqp, stsb, mnli, qnli, rte or wnli.",
                         choices=tuple(SPECS))
    eval_split: str = option(
        "auto", "Split used for evaluation; auto = validation_matched for mnli, validation otherwise.")
    max_new_tokens: int = option(8, "Greedy generation budget (answers are one or two words).")


@register_task("glue")
class GlueTask(Task):
    """GLUE on ``nyu-mll/glue``; rows keep the hub fields (text fields, ``label``, ``idx``)."""

    Config = GlueConfig
    kind = "classification"  # stsb: regression (set per instance)
    subsets = tuple(SPECS)

    def __init__(self, cfg):
        super().__init__(cfg)
        self.fields, self.label_names, self.template, self.choices = SPECS[cfg.subset]
        self.kind = "regression" if cfg.subset == "stsb" else "classification"

    def hub_source(self):
        return "nyu-mll/glue", self.cfg.subset

    def schema(self, split: str) -> Schema:
        """Text fields non-empty; label a class id of the sub-task (STS-B: a score from 0 to 5); idx
        (the hub's row id) unique within the split. The hub's test splits mark their hidden labels -1
        (STS-B -1.0): such a split can be counted (PEMA), never trained on or scored (tasks/domains.py)."""
        label = Number(0.0, 5.0, hidden=-1.0) if self.kind == "regression" else ClassId(self.label_names)
        return Schema({**{k: Text() for k in self.fields}, "label": label}, optional={"idx": Integer()}, key="idx")

    def counted_splits(self, which: str) -> list[str]:
        """MNLI's eval and test are both of its splits (matched and mismatched), as the authors' code counts."""
        if self.cfg.subset == "mnli" and which == "test":
            return ["test_matched", "test_mismatched"]
        if self.cfg.subset == "mnli" and which == "eval" and self.cfg.eval_split == "auto":
            return ["validation_matched", "validation_mismatched"]
        return super().counted_splits(which)

    def split_name(self, which: str) -> str:
        if which == "eval" and self.cfg.eval_split == "auto":
            return "validation_matched" if self.cfg.subset == "mnli" else "validation"
        return super().split_name(which)

    @property
    def validation_metric(self) -> str:
        """The first value of the GLUE metric (CoLA Matthews correlation, STS-B Pearson, otherwise accuracy), which
        the Tiny-Attention authors keep the best state by (train_ada.py @03eee7e, ``eval`` returns
        ``list(result.values())[0]``) and the paper names (App. B: accuracy for MNLI-m, QQP and MRPC)."""
        return {"cola": "mcc", "stsb": "pearson"}.get(self.cfg.subset, "accuracy")

    def format(self, row: dict) -> Example:
        text = tuple(row[k] for k in self.fields)
        values = dict(zip(self.fields, text))
        if self.cfg.subset == "mnli":  # lm-eval's mnli/utils.py: strip and end the hypothesis with a period
            h = row["hypothesis"].strip()
            values["hypothesis"] = h + ("" if h.endswith(".") else ".")
        prompt = self.template.format(**values)
        meta = {"idx": row.get("idx")}
        if self.kind == "regression":
            label = float(row["label"])
            return Example(prompt=prompt, target=f" {label:.1f}", label=label, text=text, meta=meta)
        label = int(row["label"])
        choices = tuple(" " + c for c in self.choices)
        target = choices[label] if 0 <= label < len(choices) else ""  # test splits: label -1
        return Example(prompt=prompt, target=target, label=label, choices=choices, text=text, meta=meta)

    def score_labels(self, gold: Sequence[int], pred: Sequence[int]) -> dict[str, float]:
        out = {"accuracy": accuracy(gold, pred)}
        if self.cfg.subset == "cola":
            out["mcc"] = mcc_score(gold, pred)
        elif self.cfg.subset in ("mrpc", "qqp"):
            out["f1"] = f1_score(gold, pred)
        return out

    def score_regression(self, gold: Sequence[float], pred: Sequence) -> dict[str, float]:
        """``metrics.regression_scores``: an unparseable prediction scores as the scale midpoint."""
        return regression_scores(gold, pred, STSB_INVALID)

    # ---- fixture: tiny templated sentences whose label is decided by the words (ours) -------------
    def fixture_rows(self, split: str, n: int, rng: random.Random) -> list[dict]:
        rows = []
        for i in range(n):
            if self.kind == "regression":
                values = _fixture_stsb(rng)
                label = values["label"]
            else:
                label = rng.randrange(len(self.label_names))
                values = FIXTURES[self.cfg.subset](rng, label)
            rows.append({**values, "label": -1 if split.startswith("test") else label, "idx": i})
        return rows


POS = ["great", "charming", "moving", "brilliant", "delightful", "funny", "warm", "clever"]
NEG = ["dull", "boring", "awful", "tedious", "bland", "messy", "weak", "clumsy"]
TOPICS = ["film", "movie", "story", "cast", "script", "plot", "ending", "soundtrack"]
ANIMALS = ["cat", "dog", "fox", "horse", "rabbit", "mouse", "goat", "bird", "sheep", "duck"]
COLOURS = ["red", "black", "small", "big", "young", "old", "brown", "white"]
VERBS = [("chased", "chase"), ("followed", "follow"), ("found", "find"),
         ("watched", "watch"), ("helped", "help"), ("pushed", "push"), ("carried", "carry")]


def _scene(rng):
    a, b = rng.sample(ANIMALS, 2)
    return {"adj": rng.choice(COLOURS), "a": a, "b": b, "verb": rng.choice(VERBS)}


def _other(rng, *avoid):
    return rng.choice([x for x in ANIMALS if x not in avoid])


def _say(s, b=None, a=None):
    return f"The {s['adj']} {a or s['a']} {s['verb'][0]} the {b or s['b']}."


def _fixture_sst2(rng, y):
    w = POS if y == 1 else NEG
    return {"sentence": f"the {rng.choice(TOPICS)} is {rng.choice(w)} and {rng.choice(w)} "}


def _fixture_cola(rng, y):
    s = _scene(rng)
    words = ["the", s["a"], s["verb"][0], "the", s["b"]]
    if y == 0:  # unacceptable: a scrambled word order
        words = [words[2], words[1], words[0], words[4], words[3]]
    return {"sentence": " ".join(words).capitalize() + "."}


def _fixture_pair(rng, y, same_label, keys=("sentence1", "sentence2")):
    """sentence2 restates sentence1 (label == same_label) or swaps the object for another animal."""
    s = _scene(rng)
    b = s["b"] if y == same_label else _other(rng, s["a"], s["b"])
    return {keys[0]: _say(s), keys[1]: f"The {b} was {s['verb'][0]} by the {s['a']}."}


def _fixture_qqp(rng, y):
    s = _scene(rng)
    b = s["b"] if y == 1 else _other(rng, s["a"], s["b"])
    return {"question1": f"Why did the {s['adj']} {s['a']} {s['verb'][1]} the {s['b']}?",
            "question2": f"What made the {s['a']} {s['verb'][1]} the {b}?"}


def _fixture_mnli(rng, y):
    s = _scene(rng)
    hyp = [f"The {s['a']} {s['verb'][0]} the {s['b']}.",                    # entailment
           f"The {s['a']} {s['verb'][0]} the {s['b']} yesterday.",          # neutral: new information
           f"The {s['a']} did not {s['verb'][1]} the {s['b']}."][y]         # contradiction
    return {"premise": _say(s), "hypothesis": hyp}


def _fixture_qnli(rng, y):
    s = _scene(rng)
    a = s["a"] if y == 0 else _other(rng, s["a"], s["b"])
    return {"question": f"What did the {s['a']} {s['verb'][1]}?", "sentence": _say(s, a=a)}


def _fixture_stsb(rng):
    """Two sentences and their score: k = 0..4 content words changed gives 5.0 ... 0.0."""
    k = rng.randrange(5)
    s = _scene(rng)
    t = dict(s)
    for key in rng.sample(["adj", "a", "verb", "b"], k):
        pool = {"adj": COLOURS, "a": ANIMALS, "b": ANIMALS, "verb": VERBS}[key]
        t[key] = rng.choice([x for x in pool if x not in (s[key], s["a"], s["b"])])
    return {"sentence1": _say(s), "sentence2": _say(t), "label": 5.0 * (4 - k) / 4}


FIXTURES = {
    "cola": _fixture_cola,
    "sst2": _fixture_sst2,
    "mrpc": lambda rng, y: _fixture_pair(rng, y, same_label=1),
    "qqp": _fixture_qqp,
    "mnli": _fixture_mnli,
    "qnli": _fixture_qnli,
    "rte": lambda rng, y: _fixture_pair(rng, y, same_label=0),
    "wnli": lambda rng, y: _fixture_pair(rng, y, same_label=1),
}
