"""Method registry: name -> Method class, with its config schema stored in Hydra's ConfigStore, and
the questions every other part asks of the classes' capabilities (``Method.model_kinds``, ``label``,
``comparison``, ...): which methods run on a model, which take part in the comparison and at what
learning rate, what a table calls them. Nothing outside the method files lists methods by hand."""

from __future__ import annotations

from embexp import EmbexpError
from embexp.core.config import CHECKS
from embexp.core.plugins import Registry, discover

METHODS = Registry("method")
register_method = METHODS.register


def build_method(cfg, backbone):
    discover("embexp.methods")  # registers every method
    method = METHODS.get_class(cfg.name)(cfg, backbone)
    method.mark_trainable()  # once, after construction: __init__ only creates the tensors
    return method


def registered() -> dict[str, type]:
    """Every method discovered in ``embexp/methods/`` (names starting with '_' are test-only toys),
    in registration order (the files alphabetically, each file's methods in order)."""
    discover("embexp.methods")

    return {name: cls for name, cls in METHODS.items() if not name.startswith("_")}


def unsupported(name: str, model_cfg) -> str:
    """Why method ``name`` cannot run on this model ('' where it can): the one line a run prints."""
    cls = METHODS.get_class(name)
    kind = model_cfg.kind
    if kind not in cls.model_kinds:
        want = " or ".join(k for k in cls.model_kinds if k != "scratch")
        return f"method {name} needs {_a(want)} {want} model; model {model_cfg.name} is {_a(kind)} {kind}"
    if model_cfg.get("source") == "scratch" and "scratch" not in cls.model_kinds:
        able = ", ".join(n for n, c in registered().items() if "scratch" in c.model_kinds)
        return (f"method {name} adapts pretrained weights; model {model_cfg.name} is trained from scratch "
                f"(model.source=scratch; methods for it: {able})")
    return ""


def _a(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def method_and_model(cfg) -> tuple:
    """(method config, model config) of a composed train config; (None, None) for another config
    (or an unknown method, which composition names)."""
    method, model = (cfg.get(g) if hasattr(cfg, "get") else getattr(cfg, g, None) for g in ("method", "model"))
    if method is None or model is None or not method.get("name") or method.name not in METHODS:
        return None, None
    return method, model


def check_method(cfg) -> None:
    """A composed train config's method against its model (``model_kinds``): refused with one line
    before anything loads. Registered in ``core.config.CHECKS`` (methods/inner.py adds the check of
    a wrapped method)."""
    method, model = method_and_model(cfg)
    reason = unsupported(method.name, model) if method is not None else ""
    if reason:
        raise EmbexpError(reason)


CHECKS.append(check_method)


def compared(kind: str) -> list[str]:
    """The methods that take part in the comparison on a model of this kind, in the comparison's
    order (``Method.comparison``): what the comparison sweep runs (its ``compare_<kind>`` lists)."""
    rows = [(c.comparison.rank, n) for n, c in registered().items()
            if c.comparison is not None and kind in c.comparison.kinds and kind in c.model_kinds]
    return [n for _, n in sorted(rows)]


def compare_lr(name: str) -> str:
    """A method's learning rate in the comparison, as the command line writes it ('' where it
    trains nothing there)."""
    comp = METHODS.get_class(name).comparison
    return "" if comp is None or comp.lr is None else str(comp.lr)


def method_label(method: str, tag: str = "") -> str:
    """A run's name in the tables: the class's ``label`` (else the method's name), with its tag:
    'prompt_tuning' + tag 'tk2' -> 'PromptT (tk=2)'; other tags are appended in brackets."""
    cls = registered().get(method)
    base = (cls.label if cls is not None else "") or method
    if tag.startswith("tk") and tag[2:].isdigit():
        return f"{base} (tk={tag[2:]})"
    return f"{base} [{tag}]" if tag else base
