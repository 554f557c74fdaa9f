"""Inside the layers: where "after attention, before the FFN" is in each family (:data:`SITES`, the
only place that knows), and :func:`after_attention`, which adds a method's function there."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from embexp import EmbexpError
from embexp.models.loading import text_config


@dataclass(frozen=True)
class SiteSpec:
    """Where one family's layers sit and which module's output ends their attention sublayer.

    ``layers``: dotted path from the base model (``model.base_model``) to the layer list, or to the
    list of layer groups for ALBERT. ``module``: path inside a layer to the module whose output is
    changed. ``branch``: True when that output is the attention branch that the layer then adds to
    its input (pre-norm decoders), False when it is already the hidden state that enters the FFN
    (post-norm encoders: attention + residual + LayerNorm).
    """

    layers: str
    module: str
    branch: bool


SITES = {
    # returns (attn, weights); h = x + attn, then post_attention_layernorm -> mlp
    "llama": SiteSpec("layers", "self_attn", True),
    "qwen2": SiteSpec("layers", "self_attn", True),
    "mistral": SiteSpec("layers", "self_attn", True),
    # GPT-J runs attention and FFN in parallel on ln_1(x): out = x + attn + mlp. The site is the attention
    # branch (h = x + attn, the residual stream after attention); the FFN does not read it (ours)
    "gptj": SiteSpec("h", "attn", True),
    # h = x + norm(attn), then pre_feedforward_layernorm -> mlp
    "gemma2": SiteSpec("layers", "post_attention_layernorm", True),
    "bert": SiteSpec("encoder.layer", "attention.output", False),  # LayerNorm(dense(attn) + x) -> intermediate
    "roberta": SiteSpec("encoder.layer", "attention.output", False),
    "xlm-roberta": SiteSpec("encoder.layer", "attention.output", False),
    "deberta-v2": SiteSpec("encoder.layer", "attention.output", False),
    "distilbert": SiteSpec("transformer.layer", "sa_layer_norm", False),  # sa_layer_norm(attn + x) -> ffn
    # shared layers, called num_hidden_layers times
    "albert": SiteSpec("encoder.albert_layer_groups", "attention", False),
    "modernbert": SiteSpec("layers", "attn", True),  # pre-norm: h = x + attn(attn_norm(x)), then mlp_norm -> mlp
}


@dataclass
class SiteCall:
    """What a function placed after attention sees, per layer call."""

    index: int  # layer number, 0-based, in the order the layers run
    layer_input: torch.Tensor  # the hidden states entering the layer (for parallel placements)


def attention_sites(model: nn.Module) -> tuple[SiteSpec, list[nn.Module], list[nn.Module]]:
    """(spec, layers in the order they run, the site module of each): one entry per layer call,
    so ALBERT's shared layer appears num_hidden_layers times."""
    family = text_config(model).model_type
    spec = SITES.get(family)
    if spec is None:
        raise EmbexpError(f"no 'after attention' placement known for model family '{family}' "
                          f"(known: {', '.join(SITES)})")
    base = model.base_model
    found = base.get_submodule(spec.layers)
    if family == "albert":  # AlbertTransformer: layer i runs every layer of group int(i / (L / groups))
        cfg = text_config(model)
        per = cfg.num_hidden_layers / cfg.num_hidden_groups
        layers = [lyr for i in range(cfg.num_hidden_layers) for lyr in found[int(i / per)].albert_layers]
    else:
        layers = list(found)
    return spec, layers, [lyr.get_submodule(spec.module) for lyr in layers]


def after_attention(model: nn.Module, fn) -> list:
    """Add ``fn(h, call) -> delta`` to the hidden states of every layer between attention and FFN.

    ``h`` is the hidden state that enters the FFN sublayer (after attention, its residual and, in
    post-norm encoders, its LayerNorm); the layer then continues from ``h + delta``. ``call`` is a
    :class:`SiteCall`: the layer index and the layer's input (a parallel placement reads it instead of
    ``h``). Works through forward hooks, so the backbone's classes, weights and ``generate()`` are
    untouched; returns the hook handles (``.remove()``).
    """
    spec, layers, sites = attention_sites(model)
    calls: dict[int, list[int]] = {}  # id(site) -> layer indices, in call order (ALBERT repeats one module)
    for i, site in enumerate(sites):
        calls.setdefault(id(site), []).append(i)
    state = {"n": {}, "input": {}}

    def reset(module, args, kwargs):
        state["n"] = {}

    def before_layer(layer):
        def hook(module, args, kwargs):
            state["input"][id(layer)] = args[0] if args else kwargs.get("hidden_states")
        return hook

    def after_site(layer, site):
        def hook(module, args, output):
            k = state["n"].get(id(site), 0)
            state["n"][id(site)] = k + 1
            index = calls[id(site)][k % len(calls[id(site)])]
            x = state["input"][id(layer)]
            out = output[0] if isinstance(output, tuple) else output
            h = x + out if spec.branch else out
            new = out + fn(h, SiteCall(index, x)).to(out.dtype)
            return (new, *output[1:]) if isinstance(output, tuple) else new
        return hook

    handles = [model.register_forward_pre_hook(reset, with_kwargs=True)]
    for layer, site in dict((id(s), (lyr, s)) for lyr, s in zip(layers, sites)).values():
        handles.append(layer.register_forward_pre_hook(before_layer(layer), with_kwargs=True))
        handles.append(site.register_forward_hook(after_site(layer, site)))
    return handles
