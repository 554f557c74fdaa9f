"""The template language of sweep specs (conf/sweep/): variables, filters, conditions, the ``for``
axes; ``embexp.sweep``'s module doc describes it for spec writers. Pure functions of a :class:`Scope`
(the variables a template sees); nothing here runs a command.
"""

from __future__ import annotations

import re

from embexp import EmbexpError
from embexp.core import cli

GRID = (0.3, 1.0, 3.0)  # {method:compare_grid}: the learning rates tried around a method's comparison lr
FIELD = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)(?::([^{}]*))?\}")  # ${...}: Hydra's, left alone


# ---- templates ---------------------------------------------------------------------------------
class Scope(dict):
    """Variables visible to a template: raw values (templates, lists, numbers) rendered when read."""

    def child(self, values: dict) -> Scope:
        return Scope({**self, **values})

    def value(self, name: str, depth: int = 0):
        if name not in self:
            raise EmbexpError(f"sweep: unknown variable '{{{name}}}' (defined: {', '.join(sorted(self))})")
        v = self[name]
        if callable(v):  # a built-in read when used (the method classes: compare_<kind>)
            v = v()
        while isinstance(v, dict) and "if" in v:  # {if: cond, then: a, else: b}: a conditional value (may nest)
            v = v.get("then", "") if holds(v["if"], self) else v.get("else", "")
        if isinstance(v, list):
            return [render(str(x), self, depth + 1) for x in v]
        return render(str(v), self, depth + 1) if v is not None else ""


def _filter(v, f: str):
    name, _, arg = f.partition("=")
    items = v if isinstance(v, list) else ([] if v == "" else [v])
    if name in ("csv", "ssv"):
        return ("," if name == "csv" else " ").join(items)
    if name == "first":
        return items[0] if items else ""
    if name == "rest":
        return items[1:]
    if name == "len":
        return str(len(items))
    if name in ("without", "only"):
        keep = set(arg.split("+"))
        return [x for x in items if (x in keep) == (name == "only")]
    if name in ("compare_lr", "compare_grid"):  # a method's learning rate in the comparison (its class's), or
        from embexp.methods.registry import compare_lr  # the grid around it: lr x 0.3, 1, 3

        lr = compare_lr(v)
        return lr if name == "compare_lr" else [f"{float(lr) * k:g}" for k in GRID] if lr else []
    if name in ("hub_id", "settings"):  # a config file's hub id, or its top-level settings as written
        text = (cli.conf_dir() / (arg or "model") / f"{v}.yaml").read_text()
        pairs = re.findall(r"^([a-z_0-9]+): *([^#\n]*[^#\s])", text, re.M)
        if name == "hub_id":
            return next((val.strip('"') for key, val in pairs if key == "id"), "")
        return " ".join(f"{key}={val}" for key, val in pairs)
    raise EmbexpError(f"sweep: unknown template filter '{name}' (choose from: csv, ssv, first, rest, len, without, "
                      "only, hub_id, settings, compare_lr, compare_grid)")


def render(text: str, scope: Scope, depth: int = 0) -> str:
    if depth > 20:
        raise EmbexpError(f"sweep: template '{text}' refers to itself")

    def one(m: re.Match) -> str:
        v = scope.value(m.group(1), depth)
        for f in (m.group(2) or "").split("|") if m.group(2) else []:
            v = _filter(v, f)
        if isinstance(v, list):
            name = m.group(1)
            raise EmbexpError(f"sweep: '{{{name}}}' is a list; write {{{name}:csv}} or {{{name}:ssv}}")
        return str(v)

    out = FIELD.sub(one, text)
    return out if out == text else render(out, scope, depth + 1)  # a field may build another: {note_{tree}}


def holds(cond, scope: Scope) -> bool:
    """A condition: ``C or D``, ``C and D`` (and binds tighter), ``not C``, ``A == B``, ``A != B``, ``A in B C``
    (space- or comma-separated), else a
    template that holds when it renders non-empty (and not 0/false/no)."""
    cond = str(cond).strip()
    if " or " in cond:
        return any(holds(part, scope) for part in cond.split(" or "))
    if " and " in cond:
        return all(holds(part, scope) for part in cond.split(" and "))
    if cond.startswith("not "):
        return not holds(cond[4:], scope)
    for op in (" == ", " != ", " in "):
        if op in cond:
            a, b = (render(x, scope).strip() for x in cond.split(op, 1))
            return {" == ": a == b, " != ": a != b, " in ": a in re.split(r"[\s,]+", b)}[op]
    return render(cond, scope).strip() not in ("", "0", "false", "False", "no")


def args_of(items, scope: Scope) -> list[str]:
    """Rendered arguments: empty ones dropped, ``$name`` spliced (a list variable: one argument per
    item), ``{if: cond, then: [...], else: [...]}`` chosen."""
    out: list[str] = []
    for it in [items] if isinstance(items, str) else items or []:
        if isinstance(it, dict):
            out += args_of(it.get("then", []) if holds(it["if"], scope) else it.get("else", []), scope)
        elif isinstance(it, str) and it.startswith("$"):
            v = scope.value(it[1:])
            out += [x for x in (v if isinstance(v, list) else [v]) if x != ""]
        elif (a := render(str(it), scope)) != "":
            out.append(a)
    return out


def combinations(axes: dict, scope: Scope):
    """Every binding of the axes, outermost first; mapping items bind several variables, rendered
    with the variables bound so far (so a row can narrow a later axis, e.g. seeds)."""
    if not axes:
        yield scope
        return
    (name, values), rest = next(iter(axes.items())), dict(list(axes.items())[1:])
    if isinstance(values, str):
        if values.startswith("$"):  # $name or $name:filter|filter: a list variable, filtered
            var, _, filters = values[1:].partition(":")
            raw = scope.get(var)
            rows = isinstance(raw, list) and any(isinstance(x, dict) for x in raw)
            v = raw if rows else scope.value(var)  # rows stay rows
            for f in filters.split("|") if filters else []:
                v = _filter(v, f)
        elif (m := FIELD.fullmatch(values)) and m.group(2):  # one filtered field: its value, a list stays a list
            v = scope.value(m.group(1))
            for f in m.group(2).split("|"):
                v = _filter(v, f)
        else:
            v = render(values, scope)
        values = v if isinstance(v, list) else [v]
    for item in values:
        row = item if isinstance(item, dict) else {name: item}
        bound = scope.child({k: bind(v, scope) for k, v in row.items()})
        yield from combinations(rest, bound)


def bind(v, scope: Scope):
    """A value of a ``for`` row: ``$name`` the list variable itself, a string rendered, else as written."""
    if isinstance(v, str) and v.startswith("$"):
        return scope.value(v[1:])
    return render(v, scope) if isinstance(v, str) else v
