"""Methods that wrap another method (K-Token merging, the prompt-compression baselines, PEMA): one
config for the wrapped method (:class:`InnerMethodConfig`), its domain read from the classes
(``Method.composable``), its config built and checked when the outer config is composed
(:func:`inner_config`), and built with the backbone (:func:`build_inner`)."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import OmegaConf

from embexp import EmbexpError
from embexp.core.config import CHECKS, option, validate_fields
from embexp.methods.base import MethodConfig
from embexp.methods.registry import METHODS, method_and_model, registered, unsupported

AUTHORS_LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"]
OWN = ("name", "train_head")  # fields of the inner config that come from the outer one


def composable_inner() -> tuple[str, ...]:
    """What ``method.inner`` may name: none, or a method that runs inside another's forward."""
    return ("none",) + tuple(sorted(n for n, c in registered().items() if c.composable()))


@dataclass
class InnerMethodConfig(MethodConfig):
    inner: str = option("lora", "Method that adapts the backbone under this one: lora (K-Token Merging's recipe, the "
                                "lora_* fields), none (nothing else trains), or an embexp method that works on the "
                                "backbone's own forward (Method.composable: tinyte_full, tinyte_half, emb_tuning, "
                                "full_ft, ...).", choices=composable_inner)
    inner_args: dict = option({}, "Overrides of the inner method's config fields, e.g. {p: 0.25} for inner=tinyte_half "
                                  "(for lora the lora_* fields come first); checked against that method's schema when "
                                  "the config is composed.")
    lora_r: int = option(4, "inner=lora: rank (the K-Token authors: 4).", ge=1)
    lora_alpha: float = option(16.0, "inner=lora: lora_alpha (the K-Token authors: 16).", gt=0)
    lora_dropout: float = option(
        0.05, "inner=lora: dropout on the LoRA branch (the K-Token authors: 0.05).", ge=0, lt=1)
    lora_targets: list = option(list(AUTHORS_LORA_TARGETS), "inner=lora: module names given LoRA (the K-Token authors: "
                                                            "attention and MLP projections and lm_head).")


def inner_config(cfg):
    """The inner method's config (``cfg.inner``'s schema, the lora_* fields for lora, then
    ``cfg.inner_args``), every field inside its domain; None for ``inner=none``."""
    name = cfg.inner
    args = dict(cfg.get("inner_args") or {})  # .get: a PEMA run recorded before PEMA had inner_args
    if name == "none":
        if args:
            raise EmbexpError(f"method.inner_args={args} given but method.inner=none")
        return None
    icfg = OmegaConf.structured(METHODS.get_class(name).Config)
    icfg.name, icfg.train_head = name, cfg.train_head
    if name == "lora":
        icfg.r, icfg.alpha, icfg.dropout, icfg.target_modules = (cfg.lora_r, cfg.lora_alpha, cfg.lora_dropout,
                                                                 list(cfg.lora_targets))
    for key, value in args.items():
        if key not in icfg or key in OWN:
            raise EmbexpError(f"unknown key '{key}' in method.inner_args (valid keys of method {name}: "
                              f"{', '.join(k for k in icfg if k not in OWN)})")
        icfg[key] = value
    validate_fields(icfg, "method.inner_args")
    return icfg


def check_inner(cfg) -> None:
    """A composed train config's wrapped method: its config (name, ``inner_args`` and their domains)
    and its model kinds (``method=ktoken method.inner=head_only model=<a decoder>`` is refused), in
    one line before anything loads. Registered in ``core.config.CHECKS``."""
    method, model = method_and_model(cfg)
    if method is None or "inner" not in method:
        return
    icfg = inner_config(method)
    reason = unsupported(icfg.name, model) if icfg is not None else ""
    if reason:
        raise EmbexpError(f"method.inner={icfg.name}: {reason}")


CHECKS.append(check_inner)


def build_inner(cfg, backbone):
    """The method that adapts the backbone under its owner, or None for ``none`` or a method that
    trains nothing. Gradients are switched on by the owner's ``build_method`` (``mark_trainable``)."""
    icfg = inner_config(cfg)
    if icfg is None:
        return None
    inner = METHODS.get_class(icfg.name)(icfg, backbone)
    return inner if inner.trains else None


class WrapsInner:
    """For a method that adapts the backbone through an inner embexp method (``self.inner``, or None
    for none; built by :func:`build_inner`): the inner method prepares on the data and reports its
    values, and its tensors and saved state are this method's under ``inner.*`` (its own saved state,
    so e.g. PEMA merges its rows and TinyTE-half keeps its ranking). K-Token merging and the
    prompt-compression baselines share it."""

    def setup(self, token_ids):
        if self.inner is not None:
            self.inner.setup(token_ids)
            self.mark_trainable()

    def log_values(self):
        return self.inner.log_values() if self.inner is not None else {}

    def method_tensors(self):
        if getattr(self, "inner", None) is None:  # also while the method is being built
            return {}
        return {f"inner.{n}": p for n, p in self.inner.method_tensors().items()}

    def trainable_state(self):
        return {f"inner.{n}": t for n, t in self.inner.trainable_state().items()} if self.inner is not None else {}

    def load_trainable_state(self, state):
        inner = {n[len("inner."):]: t for n, t in state.items() if n.startswith("inner.")}
        if len(inner) != len(state) or (inner and self.inner is None):
            raise EmbexpError(f"adapter does not match method {self.cfg.name}: unexpected tensors "
                              f"{sorted(set(state) - {'inner.' + n for n in inner})[:5]}"
                              + (" (method.inner=none)" if inner and self.inner is None else ""))
        if self.inner is not None:
            self.inner.load_trainable_state(inner)
