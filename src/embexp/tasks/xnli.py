"""XNLI (Conneau et al., 2018) on ``facebook/xnli``: MNLI in fifteen languages (the PEMA paper, Sec. 5, Table 4).

Subsets: one language code, ``en-de`` and ``en-zh`` (the paper's Table 4 columns) or ``all`` (all
fifteen). A multi-language subset concatenates the languages' rows in the order given, as the
authors' ``run_xnli_pema.py`` does with ``concatenate_datasets``; ``max_*_samples`` cap every
language separately (ours). Metric: accuracy (0–100). Decoders (ours; the paper fine-tunes encoders
only) get lm-eval's MNLI prompt. Fixture (ours): templated sentences about animals in each language,
whose label is decided by construction (the same sentence, the sentence plus "today", the negated one).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from embexp.core.config import option
from embexp.tasks.base import Example, Task, TaskConfig
from embexp.tasks.domains import ClassId, Schema, Text
from embexp.tasks.registry import register_task

LANGUAGES = ("ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh")
SUBSETS = LANGUAGES + ("en-de", "en-zh", "all")
LABELS = ("entailment", "neutral", "contradiction")
PROMPT = "{premise}\nQuestion: {hypothesis} True, False or Neither?\nAnswer:"
CHOICES = ("True", "Neither", "False")


def languages(subset: str) -> tuple[str, ...]:
    return LANGUAGES if subset == "all" else tuple(subset.split("-"))


@dataclass
class XnliConfig(TaskConfig):
    name: str = option("xnli", "Task family (the file under conf/task).")
    subset: str = option("en", "Language(s): one of the fifteen codes, en-de, en-zh (Table 4) or all.", choices=SUBSETS)


@register_task("xnli")
class XnliTask(Task):
    """XNLI on ``facebook/xnli``: one language, en-de, en-zh or all fifteen (rows concatenated), accuracy."""

    Config = XnliConfig
    kind = "classification"
    subsets = SUBSETS
    label_names = LABELS

    def __init__(self, cfg):
        super().__init__(cfg)
        self.languages = languages(cfg.subset)

    def hub_source(self):
        return "facebook/xnli", self.cfg.subset

    def schema(self, split: str) -> Schema:
        return Schema({"premise": Text(), "hypothesis": Text(), "label": ClassId(LABELS)})

    def load(self, which: str) -> list[dict]:
        if len(self.languages) == 1:
            return super().load(which)
        return [row for lang in self.languages for row in self.with_subset(lang).load(which)]

    def format(self, row: dict) -> Example:
        label = int(row["label"])
        choices = tuple(" " + c for c in CHOICES)
        return Example(prompt=PROMPT.format(premise=row["premise"], hypothesis=row["hypothesis"]),
                       target=choices[label] if 0 <= label < 3 else "", label=label, choices=choices,
                       text=(row["premise"], row["hypothesis"]))

    def fixture_rows(self, split: str, n: int, rng: random.Random) -> list[dict]:
        nouns, (said, negated, today) = FIXTURE[self.cfg.subset]
        rows = []
        for _ in range(n):
            a, b = rng.sample(nouns, 2)
            label = rng.randrange(3)
            premise = _cap(said.format(a=a, b=b))
            hypothesis = _cap((said, today, negated)[label].format(a=a, b=b))
            rows.append({"premise": premise, "hypothesis": hypothesis, "label": label})
        return rows


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


# language -> (nouns, (sentence, negated sentence, sentence + "today")); {a} subject, {b} object.
FIXTURE = {
    "en": (["the cat", "the dog", "the horse", "the bird", "the fish", "the child"],
           ("{a} sees {b}.", "{a} does not see {b}.", "{a} sees {b} today.")),
    "de": (["die Katze", "der Hund", "das Pferd", "der Vogel", "der Fisch", "das Kind"],
           ("{a} sieht {b}.", "{a} sieht {b} nicht.", "{a} sieht {b} heute.")),
    "fr": (["le chat", "le chien", "le cheval", "l'oiseau", "le poisson", "l'enfant"],
           ("{a} voit {b}.", "{a} ne voit pas {b}.", "{a} voit {b} aujourd'hui.")),
    "es": (["el gato", "el perro", "el caballo", "el pájaro", "el pez", "el niño"],
           ("{a} ve a {b}.", "{a} no ve a {b}.", "{a} ve a {b} hoy.")),
    "zh": (["猫", "狗", "马", "鸟", "鱼", "孩子"],
           ("{a}看见了{b}。", "{a}没有看见{b}。", "{a}今天看见了{b}。")),
    "ar": (["القط", "الكلب", "الحصان", "الطائر", "السمكة", "الطفل"],
           ("{a} يرى {b}.", "{a} لا يرى {b}.", "{a} يرى {b} اليوم.")),
    "bg": (["котката", "кучето", "конят", "птицата", "рибата", "детето"],
           ("{a} вижда {b}.", "{a} не вижда {b}.", "{a} вижда {b} днес.")),
    "el": (["η γάτα", "ο σκύλος", "το άλογο", "το πουλί", "το ψάρι", "το παιδί"],
           ("{a} βλέπει {b}.", "{a} δεν βλέπει {b}.", "{a} βλέπει {b} σήμερα.")),
    "hi": (["बिल्ली", "कुत्ता", "घोड़ा", "पक्षी", "मछली", "बच्चा"],
           ("{a} {b} को देखता है।", "{a} {b} को नहीं देखता है।", "{a} आज {b} को देखता है।")),
    "ru": (["кошка", "собака", "лошадь", "птица", "рыба", "ребёнок"],
           ("{a} видит {b}.", "{a} не видит {b}.", "{a} видит {b} сегодня.")),
    "sw": (["paka", "mbwa", "farasi", "ndege", "samaki", "mtoto"],
           ("{a} anamwona {b}.", "{a} hamwoni {b}.", "{a} anamwona {b} leo.")),
    "th": (["แมว", "สุนัข", "ม้า", "นก", "ปลา", "เด็ก"],
           ("{a}เห็น{b}", "{a}ไม่เห็น{b}", "{a}เห็น{b}วันนี้")),
    "tr": (["kedi", "köpek", "at", "kuş", "balık", "çocuk"],
           ("{a} {b} görüyor.", "{a} {b} görmüyor.", "{a} bugün {b} görüyor.")),
    "ur": (["بلی", "کتا", "گھوڑا", "پرندہ", "مچھلی", "بچہ"],
           ("{a} {b} کو دیکھتا ہے۔", "{a} {b} کو نہیں دیکھتا ہے۔", "{a} آج {b} کو دیکھتا ہے۔")),
    "vi": (["con mèo", "con chó", "con ngựa", "con chim", "con cá", "đứa trẻ"],
           ("{a} nhìn thấy {b}.", "{a} không nhìn thấy {b}.", "{a} nhìn thấy {b} hôm nay.")),
}
