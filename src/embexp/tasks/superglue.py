"""SuperGLUE (the TinyTE paper's NLU tasks): BoolQ, CB, COPA, RTE, WiC on ``aps/super_glue``.

Prompts and choices are lm-evaluation-harness's SuperGLUE tasks (@4e7e0d4), verbatim; ``subset=all``
concatenates the five, each prompt prefixed with ``"<subset>: "`` (ours); ``task.cloze=true`` (encoders,
cb and rte) gives PET's pattern-verbalizer pairs, scored by the masked-LM head (embexp/objectives/cloze.py).
The prompts, the metrics, the multitask protocol, local data and the fixtures: docs/tasks_tinyte.md; the
cloze patterns and verbalizers: docs/methods_tinyattn.md.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from embexp import EmbexpError
from embexp.core.config import option
from embexp.tasks.base import MASK, Example, Task, TaskConfig
from embexp.tasks.domains import ClassId, Integer, Schema, Text, Word, required
from embexp.tasks.metrics import accuracy, macro_f1
from embexp.tasks.registry import register_task

SUBSETS = ("boolq", "cb", "copa", "rte", "wic")
# subset -> (hub fields besides idx/label, hub ClassLabel names, prompt template, choices)
SPECS = {
    "boolq": (("question", "passage"), ("False", "True"),
              "{passage}\nQuestion: {question}?\nAnswer:", ("no", "yes")),
    "cb": (("premise", "hypothesis"), ("entailment", "contradiction", "neutral"),
           "{premise}\nQuestion: {hypothesis}. True, False, or Neither?\nAnswer:", ("True", "False", "Neither")),
    "copa": (("premise", "choice1", "choice2", "question"), ("choice1", "choice2"), None, None),
    "rte": (("premise", "hypothesis"), ("entailment", "not_entailment"),
            "{premise}\nQuestion: {hypothesis} True or False?\nAnswer:", ("True", "False")),
    "wic": (("word", "sentence1", "sentence2", "start1", "start2", "end1", "end2"), ("False", "True"),
            "Sentence 1: {sentence1}\nSentence 2: {sentence2}\nQuestion: Is the word "
            "'{target}' used in the same way in the two sentences above?\nAnswer:",
            ("no", "yes")),
}
COPA_CONNECTOR = {"cause": "because", "effect": "therefore"}


def wic_span(row: dict):
    """WiC: start/end select a non-empty span of each sentence (the prompt quotes sentence1's)."""
    for k in ("1", "2"):
        start, end, text = row[f"start{k}"], row[f"end{k}"], row[f"sentence{k}"]
        if not start < end <= len(text):
            return (f"end{k}", end, f"does not close a non-empty span of sentence{k} starting at start{k}={start}",
                    f"start{k} < end{k} <= {len(text)} (the length of sentence{k})")
    return None
CLOZE_SUBSETS = ("cb", "rte")
CLOZE_PATTERNS = (0, 1, 2, 3, 4)
# PET's verbalizers per label index (SPECS order): patterns 0-3, pattern 4
VERBALIZERS = {"cb": (("Yes", "No", "Maybe"), ("true", "false", "neither")),
               "rte": (("Yes", "No"), ("true", "false"))}


@dataclass
class SuperGlueConfig(TaskConfig):
    name: str = option("superglue", "Task family (the file under conf/task).")
    subset: str = option("boolq", "SuperGLUE sub-task: boolq, cb, copa, rte, wic, or all (multitask: "
                                  "the five concatenated, prompts prefixed with '<subset>: '; ours).",
                         choices=SUBSETS + ("all",))
    eval_split: str = option("validation", "Split used for evaluation (the paper reports "
                                           "the validation sets; hub test labels are -1).")
    train_split: str = option("train", "Split used for training; train_fewglue32 = the "
                                       "FewGLUE 32-example sets (local files only).")
    max_new_tokens: int = option(32, "Greedy generation budget (ours): enough for a COPA "
                                     "sentence; 3-4 suffice for yes/no/True/False + eos.")
    select_split: str = option("train_holdout", "Rows for the periodic evaluation loss and select_best: SuperGLUE "
                                                "has no labelled split besides train and the reported validation, "
                                                "so train_holdout (ours) carves select_size rows out of each "
                                                "sub-task's train split (never trained on); FewGLUE (32 rows): set "
                                                "select_size=8 or select_split='' with trainer.select_best=false.")
    select_size: int = option(50, "Rows held out of each sub-task's train split for selection (ours: 50 = 20% "
                                  "of CB's 250 hub training rows, 12.5% of COPA's 400, <2% of the others).")
    cloze: bool = option(
        False, "Encoders, cb and rte: PET-style cloze classification (Schick & Schuetze 2021): the input "
               "is a pattern with one mask token, the encoder keeps its pretrained masked-LM head, and "
               "the class is the likeliest verbalizer token at the mask (training: cross-entropy over "
               "the verbalizers' logits there). false: a classifier head on the text pair.")
    cloze_loss: str = option("verbalizers", "task.cloze=true, training loss at the mask: verbalizers = cross-entropy "
                                            "over the verbalizer tokens' logits (PET's loss; the Tiny-Attention "
                                            "paper: 'the output space is limited to a few selected tokens'); "
                                            "vocabulary = cross-entropy over the whole vocabulary with the label's "
                                            "verbalizer token as the target (the Tiny-Attention authors' "
                                            "train_few_shot.py: masked-LM labels at the mask). Prediction is the "
                                            "likeliest verbalizer either way.", choices=("verbalizers", "vocabulary"))
    pattern: int = option(
        3, "task.cloze=true: PET's pattern id for RTE/CB (pet/pvp.py; h = hypothesis without its "
           "final punctuation, p = premise, [SEP] between the two segments): 0 '\"h\" ? [SEP] [MASK], "
           "\"p\"', 1 'h ? [SEP] [MASK], p', 2 '\"h\" ? [SEP] [MASK]. \"p\"', 3 'h ? [SEP] [MASK]. p' "
           "(the Tiny-Attention paper's), 4 'p question: <hypothesis as is> True or False? answer: "
           "[MASK]' (one segment; CB: true, false or neither?).", choices=CLOZE_PATTERNS)


@register_task("superglue")
class SuperGlueTask(Task):
    """SuperGLUE on ``aps/super_glue``; rows keep the hub fields (plus ``subset`` for ``subset=all``)."""

    Config = SuperGlueConfig
    kind = "classification"
    subsets = SUBSETS + ("all",)

    def __init__(self, cfg):
        super().__init__(cfg)
        self.multitask = cfg.subset == "all"
        self._eval_subsets: list[str] | None = None  # sub-task of each eval example (multitask scoring)
        self.cloze = bool(cfg.cloze)
        if self.cloze and cfg.subset not in CLOZE_SUBSETS:
            raise EmbexpError(f"task.cloze=true: PET cloze patterns exist here for {', '.join(CLOZE_SUBSETS)}, "
                              f"not task.subset={cfg.subset} (choose from: {', '.join(CLOZE_SUBSETS)})")

    @property
    def verbalizers(self) -> tuple[str, ...]:
        """task.cloze: the verbalizer word of each label index (PET's)."""
        return VERBALIZERS[self.cfg.subset][self.cfg.pattern == 4] if self.cloze else ()

    def cloze_parts(self, row: dict) -> tuple:
        """PET's ``RtePVP``/``CbPVP.get_parts``: (segment a parts, segment b parts), each part
        (text, shortenable); MASK marks the mask token."""
        p, h = (row["premise"], True), (row["hypothesis"].rstrip(string.punctuation), True)
        k = self.cfg.pattern
        if k == 4:
            question = " true, false or neither? answer:" if self.cfg.subset == "cb" else " True or False? answer:"
            return ((p, (" question: ", False), (row["hypothesis"], True), (question, False), (MASK, False)), ())
        quote = k in (0, 2)
        a = (('"', False), h, ('" ?', False)) if quote else (h, ("?", False))
        sep = {0: ', "', 1: ",", 2: '. "', 3: "."}[k]
        b = ((MASK, False), (sep, False), p) + ((('"', False),) if quote else ())
        return a, b

    def hub_source(self):
        return "aps/super_glue", self.cfg.subset

    def schema(self, split: str) -> Schema:
        """The sub-task's text fields non-empty (WiC: start/end integers that select a non-empty span
        of each sentence; COPA: question 'cause' or 'effect'), label a class id of the sub-task (the
        hub's test splits, label -1, are refused), idx unique within the split."""
        if self.multitask:  # read through one child task per sub-task (load), each with its own schema
            return required("subset", "label")
        subset = self.cfg.subset
        fields, names = SPECS[subset][0], SPECS[subset][1]
        domains = {k: Integer() if k.startswith(("start", "end")) else Text() for k in fields}
        if subset == "copa":
            domains["question"] = Word(tuple(COPA_CONNECTOR))
        return Schema({**domains, "label": ClassId(names)}, optional={"idx": Integer()}, key="idx",
                      check=wic_span if subset == "wic" else None)

    @property
    def label_names(self) -> tuple[str, ...]:
        return ("0", "1", "2") if self.multitask else SPECS[self.cfg.subset][1]

    # ---- rows ---------------------------------------------------------------------------------
    def load(self, which: str) -> list[dict]:
        if not self.multitask:
            return super().load(which)
        return [{**row, "subset": s} for s in SUBSETS for row in self.with_subset(s).load(which)]

    def examples(self, which: str) -> list[Example]:
        out = super().examples(which)
        if which == "eval":
            self._eval_subsets = [ex.meta["subset"] for ex in out]
        return out

    def format(self, row: dict) -> Example:
        subset = row["subset"] if self.multitask else self.cfg.subset
        if subset not in SPECS:
            raise EmbexpError(f"task {self.display_name}: row has unknown subset "
                              f"'{subset}' (choose from: {', '.join(SUBSETS)})")
        fields, _, template, choices = SPECS[subset]
        missing = [k for k in fields + ("label",) if k not in row]
        if missing:
            raise EmbexpError(f"task superglue_{subset}: row lacks field(s) {', '.join(missing)}")
        if subset == "copa":
            prompt = row["premise"].strip()[:-1] + " " + COPA_CONNECTOR[row["question"]]
            # lm-eval's convert_choice lowercases the first character; its target delimiter adds a space
            conts = tuple(" " + " " + row[k][0].lower() + row[k][1:] for k in ("choice1", "choice2"))
            text = (prompt, row["choice1"] + " " + row["choice2"])  # encoder text pair (ours)
        else:
            values = {k: row[k] for k in fields}
            if subset == "wic":
                values["target"] = row["sentence1"][row["start1"]:row["end1"]]
            prompt = template.format(**values)
            conts = tuple(" " + c for c in choices)
            if subset == "boolq":  # encoder text pairs (ours)
                text = (row["question"], row["passage"])
            elif subset == "wic":
                text = (f"{values['target']}: {row['sentence1']}", row["sentence2"])
            else:
                text = (row["premise"], row["hypothesis"])
        if self.multitask:
            prompt = f"{subset}: {prompt}"
            text = (f"{subset}: {text[0]}",) + text[1:]
        label = int(row["label"])
        target = conts[label] if 0 <= label < len(conts) else ""  # hub test splits: label -1
        return Example(prompt=prompt, target=target, label=label, choices=conts, text=text,
                       meta={"idx": row.get("idx"), "subset": subset},
                       cloze=self.cloze_parts(row) if self.cloze else ())

    # ---- scoring ------------------------------------------------------------------------------
    def score_labels(self, gold: Sequence[int], pred: Sequence[int],
                     subsets: Sequence[str] | None = None) -> dict[str, float]:
        """Accuracy (+ CB macro-F1). Multitask: per sub-task, their mean (``accuracy``) and pooled;
        the sub-task of each row comes from ``subsets`` or from the last ``examples('eval')`` call."""
        if not self.multitask:
            out = {"accuracy": accuracy(gold, pred)}
            if self.cfg.subset == "cb":
                out["f1"] = macro_f1(gold, pred, 3)
            return out
        subsets = list(subsets) if subsets is not None else self._eval_subsets
        if subsets is None or len(subsets) != len(gold):
            raise EmbexpError("superglue_all: scoring needs the sub-task of every row "
                              "(call task.examples('eval') first or pass subsets=)")
        gold, pred, subsets = np.asarray(gold), np.asarray(pred), np.asarray(subsets)
        out, accs = {}, []
        for s in SUBSETS:
            m = subsets == s
            if not m.any():
                continue
            out[f"{s}_accuracy"] = accuracy(gold[m], pred[m])
            accs.append(out[f"{s}_accuracy"])
            if s == "cb":
                out["cb_f1"] = macro_f1(gold[m], pred[m], 3)
        out["accuracy"] = float(np.mean(accs)) if accs else 0.0
        out["pooled_accuracy"] = accuracy(gold, pred)
        return out

    # ---- fixture: templated rows whose label is decided by the words (ours) ---------------------
    def fixture_rows(self, split: str, n: int, rng: random.Random) -> list[dict]:
        if self.multitask:
            return [{**r, "subset": s} for s in SUBSETS for r in self.with_subset(s).fixture_rows(split, n, rng)]
        rows = []
        for i in range(n):
            label = rng.randrange(len(SPECS[self.cfg.subset][1]))
            row = FIXTURES[self.cfg.subset](rng, label)
            rows.append({**row, "idx": i, "label": -1 if split.startswith("test") else label})
        return rows


ANIMALS = ["cat", "dog", "fox", "horse", "rabbit", "mouse", "goat", "bird", "sheep", "duck"]
PLACES = ["garden", "barn", "forest", "river", "field", "kitchen", "meadow", "yard"]
NAMES = ["Anna", "Ben", "Clara", "David", "Emma", "Felix", "Grace", "Hugo"]


def _other(rng, pool, *avoid):
    return rng.choice([x for x in pool if x not in avoid])


def _fixture_boolq(rng, y):
    a, place = rng.choice(ANIMALS), rng.choice(PLACES)
    asked = place if y == 1 else _other(rng, PLACES, place)
    passage = (f"{a.capitalize()} -- The {a} lives in the {place}. It is often seen there in the morning, "
               f"and it rarely leaves the {place}.")
    return {"question": f"does the {a} live in the {asked}", "passage": passage}


def _fixture_cb(rng, y):  # 0 entailment, 1 contradiction, 2 neutral
    name, a = rng.choice(NAMES), rng.choice(ANIMALS)
    premise = f"{name} said that the {a} was asleep in the {rng.choice(PLACES)}. Nobody doubted it."
    hyp = [f"the {a} was asleep", f"the {a} was awake", f"the {a} was hungry"][y]
    return {"premise": premise, "hypothesis": hyp}


COPA_EVENTS = [  # (premise, cause, effect) of one small causal story
    ("The man was thirsty.", "He ran a long way.", "He drank a glass of water."),
    ("The girl felt cold.", "The window was open.", "She put on a sweater."),
    ("The road was wet.", "It rained all night.", "The car slid on the road."),
    ("The child cried.", "He dropped his ice cream.", "His mother hugged him."),
    ("The lamp went out.", "The bulb burned out.", "The room became dark."),
    ("The dog barked.", "A stranger knocked at the door.", "The baby woke up."),
    ("The bread was burnt.", "The oven was too hot.", "We threw it away."),
    ("The woman was late.", "She missed the bus.", "Her boss was angry."),
]


def _fixture_copa(rng, y):
    k = rng.randrange(len(COPA_EVENTS))
    premise, cause, effect = COPA_EVENTS[k]
    question = rng.choice(("cause", "effect"))
    right = cause if question == "cause" else effect
    other = rng.choice([e for j, e in enumerate(COPA_EVENTS) if j != k])
    wrong = other[1] if question == "cause" else other[2]
    c1, c2 = (right, wrong) if y == 0 else (wrong, right)
    return {"premise": premise, "choice1": c1, "choice2": c2, "question": question}


def _fixture_rte(rng, y):  # 0 entailment, 1 not_entailment
    name, a, place = rng.choice(NAMES), rng.choice(ANIMALS), rng.choice(PLACES)
    premise = f"{name} found a {a} in the {place} on Monday and took it home."
    where = place if y == 0 else _other(rng, PLACES, place)
    return {"premise": premise, "hypothesis": f"A {a} was found in the {where}."}


WIC_SENSES = {  # word -> two senses, each with two sentence frames ({} is the word)
    "bank": (("We sat on the {} of the river.", "The boat drifted to the far {}."),
             ("She put her money in the {}.", "The {} closed my account.")),
    "bat": (("The {} flew out of the cave.", "A {} hung from the roof at night."),
            ("He swung the {} at the ball.", "She bought a new cricket {}.")),
    "light": (("Turn on the {} please.", "The {} in the hall is broken."),
              ("The box is {} enough to carry.", "She packed a {} bag for the trip.")),
    "spring": (("Flowers bloom in {}.", "We plant seeds every {}."),
               ("The {} in the mattress broke.", "A steel {} holds the door shut.")),
    "ring": (("She wore a gold {}.", "He lost his wedding {}."),
             ("I heard the phone {} twice.", "The bells {} at noon.")),
}


def _fixture_wic(rng, y):
    word = rng.choice(sorted(WIC_SENSES))
    s1 = rng.randrange(2)
    s2 = s1 if y == 1 else 1 - s1
    f1 = rng.choice(WIC_SENSES[word][s1])
    f2 = rng.choice([fr for fr in WIC_SENSES[word][s2] if fr != f1])
    start1, start2 = f1.index("{}"), f2.index("{}")
    return {"word": word, "sentence1": f1.format(word), "sentence2": f2.format(word),
            "start1": start1, "start2": start2, "end1": start1 + len(word), "end2": start2 + len(word)}


FIXTURES = {"boolq": _fixture_boolq, "cb": _fixture_cb, "copa": _fixture_copa, "rte": _fixture_rte, "wic": _fixture_wic}
