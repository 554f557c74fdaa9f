"""TinyTE (tinyte.md): steer an LLM by adding one learned vector to its input token embeddings.

``T(e) = e + b`` for every non-special token; ``b`` starts at zero, so the method is the identity
at initialisation. The bias is applied to the embedding module's *output* (after Gemma-2's
``sqrt(d)`` scaling), and the embedding weight is never touched, so tied input/output embeddings
stay tied while training. Export folds ``b / embed_scale`` into the non-special rows and unties
the output head (it keeps the original rows), giving a plain transformers model.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from embexp.config import f
from embexp.methods.base import Method, MethodConfig, embedding_hook
from embexp.methods.registry import register_method
from embexp.models import embed_scale


@dataclass
class TinyTEConfig(MethodConfig):
    shift_special: bool = f(False, "Also shift special tokens (never in the paper; for ablations only).")


@register_method("tinyte_full")
class TinyTEFull(Method):
    Config = TinyTEConfig

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        d = backbone.hidden_size
        self.bias = nn.Parameter(torch.zeros(d, dtype=torch.float32))
        shift = ~backbone.special_mask() if not cfg.shift_special else torch.ones(backbone.vocab_size, dtype=torch.bool)
        self.register_buffer("shift_mask", shift, persistent=False)
        self._hook = embedding_hook(self.model.get_input_embeddings(), self.shift)
        self.mark_trainable()

    def method_tensors(self):
        return {"bias": self.bias}

    def delta(self) -> torch.Tensor:
        """The vector added to every shifted token (variants override this)."""
        return self.bias

    def shift(self, input_ids: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        mask = self.shift_mask[input_ids].unsqueeze(-1).to(embeds.dtype)
        return embeds + mask * self.delta().to(embeds.dtype)

    def export(self):
        model = copy.deepcopy(self.model)
        for h in list(model.get_input_embeddings()._forward_hooks):
            model.get_input_embeddings()._forward_hooks.pop(h)
        emb = model.get_input_embeddings()
        out = model.get_output_embeddings()
        with torch.no_grad():
            if out is not None and out.weight is emb.weight:
                out.weight = nn.Parameter(emb.weight.detach().clone())
                _untie(model.config)
            rows = self.shift_mask.nonzero().squeeze(-1)
            emb.weight[rows] += (self.delta().detach() / embed_scale(model)).to(emb.weight.dtype)
        return model


def _untie(config) -> None:
    config.tie_word_embeddings = False
    text = getattr(config, "get_text_config", lambda: None)()
    if text is not None and text is not config:
        text.tie_word_embeddings = False
