"""Field domains of task rows: what each field of a task's rows may hold.

Every row a run reads is checked against its task's :class:`Schema` (``Task.schema(split)``) as it is
read (``Task.read_split``), before the model loads; a row outside its domain stops the run with one
line naming where it is, the field, the value and the valid domain, e.g. (one line, wrapped here)::

    data/train.jsonl:3: field 'label' = 7 is out of range (valid for glue_sst2: an integer class id,
    0 (negative) or 1 (positive))

A missing field and a value of the wrong JSON type are refused too. The domains, and the hub's hidden
test labels (``RowCheck(counting=True)`` takes them): docs/architecture.md ("Field domains").
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable

from embexp import EmbexpError


def show(value, width: int = 60) -> str:
    """The value as JSON (a string quoted), shortened to about ``width`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return (text if len(text) <= width
            else text[: width - 5] + "...\"" if text.startswith('"') else text[: width - 3] + "...")


JSON_TYPES = ((type(None), "null"), (bool, "a boolean"), ((int, float), "a number"), (str, "a string"),
              ((list, tuple), "an array"), (dict, "an object"))


def json_type(value) -> str:
    """The JSON type of a parsed value, as a phrase ('a string', 'an array', ...)."""
    for kinds, phrase in JSON_TYPES:  # bool before number: a bool is an int
        if isinstance(value, kinds):
            return phrase
    return f"a {type(value).__name__}"


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class Domain(ABC):
    """What one field may hold: :meth:`problem` says what is wrong with a value (None: valid)."""

    @abstractmethod
    def problem(self, value) -> str | None:
        """What is wrong with ``value`` (a short phrase), or None when it is valid."""

    @abstractmethod
    def describe(self) -> str:
        """The valid values, as the one-line error names them."""


@dataclass(frozen=True)
class Text(Domain):
    """A string; non-empty (after stripping whitespace) unless ``empty``."""

    empty: bool = False

    def problem(self, value):
        if not isinstance(value, str):
            return f"is {json_type(value)}"
        if not self.empty and not value.strip():
            return "is empty"
        return None

    def describe(self):
        return "a string" if self.empty else "a non-empty string"


@dataclass(frozen=True)
class ClassId(Domain):
    """An integer class id 0..len(names)-1 (an integral float such as 1.0 is read as 1); with
    ``unlabelled``, also -1 (no gold label: rows the task drops); ``hidden``: the hub's marker of a
    hidden test label (allowed only where the split is counted, never scored)."""

    names: tuple[str, ...]
    unlabelled: bool = False
    hidden: int | None = -1

    def problem(self, value):
        if not _is_number(value):
            return f"is {json_type(value)}"
        if not math.isfinite(value):
            return "is not a finite number"
        if value != int(value):
            return "is not an integer"
        if self.unlabelled and value == -1:
            return None
        if not 0 <= value < len(self.names):
            return "is out of range"
        return None

    def describe(self):
        ids = ", ".join(f"{i} ({n})" for i, n in enumerate(self.names))
        ids = " or ".join(ids.rsplit(", ", 1)) if len(self.names) == 2 else ids
        return f"an integer class id, {ids}" + (", or -1 (no gold label; such rows are dropped)"
                                                 if self.unlabelled else "")


@dataclass(frozen=True)
class Number(Domain):
    """A finite number (not a boolean) within [lo, hi]; ``hidden``: the hub's marker of a hidden test
    label (STS-B: -1.0), allowed only where the split is counted, never scored."""

    lo: float
    hi: float
    hidden: float | None = None

    def problem(self, value):
        if not _is_number(value):
            return f"is {json_type(value)}"
        if not math.isfinite(value):
            return "is not a finite number"
        return None if self.lo <= value <= self.hi else "is out of range"

    def describe(self):
        return f"a finite number from {self.lo:g} to {self.hi:g}"


@dataclass(frozen=True)
class Word(Domain):
    """One of ``words``; with ``fold``, compared after stripping whitespace and lower-casing."""

    words: tuple[str, ...]
    fold: bool = False

    def problem(self, value):
        if not isinstance(value, str):
            return f"is {json_type(value)}"
        got = value.strip().lower() if self.fold else value
        return None if got in self.words else "is not one of the label words"

    def describe(self):
        return "one of " + ", ".join(f"'{w}'" for w in self.words) + (" (case and surrounding spaces ignored)"
                                                                        if self.fold else "")


@dataclass(frozen=True)
class Integer(Domain):
    """An integer >= 0 (an integral float such as 3.0 is read as 3)."""

    def problem(self, value):
        if not _is_number(value):
            return f"is {json_type(value)}"
        if not math.isfinite(value) or value != int(value):
            return "is not an integer"
        return "is out of range" if value < 0 else None

    def describe(self):
        return "an integer >= 0"


@dataclass(frozen=True)
class Flag(Domain):
    """A JSON boolean."""

    def problem(self, value):
        return None if isinstance(value, bool) else f"is {json_type(value)}"

    def describe(self):
        return "true or false"


@dataclass(frozen=True)
class Anything(Domain):
    """Any value (the field must be present)."""

    def problem(self, value):
        return None

    def describe(self):
        return "any value"


@dataclass(frozen=True)
class Record(Domain):
    """An object whose fields have domains of their own (checked as ``field.sub``)."""

    fields: tuple[tuple[str, Domain], ...]

    def problem(self, value):
        return None if isinstance(value, dict) else f"is {json_type(value)}"

    def describe(self):
        return "an object with " + ", ".join(f"'{k}' ({d.describe()})" for k, d in self.fields)


@dataclass
class Schema:
    """The rows of one split of a task: ``fields`` must be present, ``optional`` ones are checked
    when present and not null, ``key`` (e.g. ``idx``) must not repeat within the split, and
    ``check(row)`` may return ``(field, value, problem, domain)`` for what involves several fields."""

    fields: dict[str, Domain]
    optional: dict[str, Domain] = field(default_factory=dict)
    key: str = ""
    check: Callable[[dict], tuple[str, object, str, str] | None] | None = None


class RowCheck:
    """Checks the rows of one split in order (``check(row, where)``), remembering where each key
    value was first seen; raises :class:`EmbexpError` with one line at the first bad row."""

    def __init__(self, schema: Schema, task: str, split: str, counting: bool = False):
        self.schema, self.task, self.split, self.counting = schema, task, split, counting
        self.seen: dict = {}

    def fail(self, where: str, name: str, value, problem: str, domain: str):
        raise EmbexpError(f"{where}: field '{name}' = {show(value)} {problem} (valid for {self.task}: {domain})")

    def value(self, where: str, name: str, value, dom: Domain) -> None:
        if is_hidden(dom, value):
            if self.counting:
                return
            raise EmbexpError(f"{where}: field '{name}' = {show(value)} is a hidden label (the hub's marker for a test "
                              f"label it keeps secret): split '{self.split}' of {self.task} can be counted "
                              f"(method.count_splits, analyze vocab splits=) but never trained on or scored")
        problem = dom.problem(value)
        if problem:
            self.fail(where, name, value, problem, dom.describe())
        if isinstance(dom, Record):
            for sub, sdom in dom.fields:
                if sub not in value:
                    raise EmbexpError(f"{where}: field '{name}.{sub}' is missing "
                                      f"(valid for {self.task}: {dom.describe()})")
                self.value(where, f"{name}.{sub}", value[sub], sdom)

    def __call__(self, row, where: str) -> None:
        s = self.schema
        if not isinstance(row, dict):
            raise EmbexpError(f"{where}: the row is {json_type(row)}, not an object (valid for {self.task}: one JSON "
                              f"object per line with fields {', '.join(s.fields)})")
        for name, dom in s.fields.items():
            if name not in row:
                raise EmbexpError(f"{where}: field '{name}' is missing (valid for {self.task}: rows with fields "
                                  f"{', '.join(s.fields)})")
            self.value(where, name, row[name], dom)
        for name, dom in s.optional.items():
            if row.get(name) is not None:
                self.value(where, name, row[name], dom)
        if s.key and row.get(s.key) is not None:
            k = row[s.key]
            if k in self.seen:
                self.fail(where, s.key, k, f"repeats the {s.key} of {self.seen[k]}",
                          f"a {s.key} unique within the split")
            self.seen[k] = where
        if s.check is not None:
            bad = s.check(row)
            if bad:
                self.fail(where, *bad)


def is_hidden(dom: Domain, value) -> bool:
    """Whether `value` is `dom`'s marker of a hidden test label (a number equal to ``dom.hidden``)."""
    marker = getattr(dom, "hidden", None)
    if getattr(dom, "unlabelled", False):  # -1 is then a row the task drops (SNLI), not a hidden label
        return False
    return marker is not None and _is_number(value) and value == marker


def required(*names: str) -> Schema:
    """A schema that only asks for the fields to be present."""
    return Schema({n: Anything() for n in names})
