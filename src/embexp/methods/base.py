"""The method contract.

A method is an ``nn.Module`` that owns the backbone (``self.model``) and an explicit dict of its
trainable tensors. At initialisation it changes nothing (outputs equal the backbone's, bit for bit
in fp32) unless its docstring says what it preserves instead. It saves and loads its trainable
state as safetensors, and where the math allows it exports a plain transformers model.
Build one with ``build_method``: ``__init__`` freezes the backbone and creates the method's
tensors; the builder then switches their gradients on (``mark_trainable``), once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from embexp import EmbexpError
from embexp.config import f


@dataclass
class MethodConfig:
    name: str = f("", "Method name (the file under conf/method).")
    train_head: bool = f(True, "Encoders: also train the task head (classifier), which starts random.")


class Method(nn.Module):
    Config: ClassVar[type] = MethodConfig
    trains: ClassVar[bool] = True  # False for zero_shot: no optimisation at all
    export_blocker: ClassVar[str] = ""  # why this method cannot export a plain model ("": it can)
    # batch keys besides the backbone's inputs that forward() reads and removes (e.g. "prompt_lengths");
    # the trainer adds them to a batch only for methods that list them here
    extra_inputs: ClassVar[tuple[str, ...]] = ()

    def __init__(self, cfg, backbone):
        super().__init__()
        self.cfg = cfg
        self.model = backbone.model  # registered submodule: DDP sees one module
        self.tokenizer = backbone.tokenizer
        self.is_decoder = backbone.is_decoder
        self.embed_scale = backbone.embed_scale  # what the embedding module multiplies rows by (models.py)
        self._head = dict(backbone.head_parameters()) if (self.trains and cfg.train_head) else {}
        for p in self.model.parameters():
            p.requires_grad_(False)

    # ---- to implement ---------------------------------------------------------------------
    def method_tensors(self) -> dict[str, nn.Parameter]:
        """The tensors this method trains (besides an encoder's head)."""
        return {}

    def setup(self, token_ids: dict[str, list[list[int]]]) -> None:
        """Data-dependent preparation before training (e.g. PEMA's token counts); ids per split."""

    def export(self) -> nn.Module:
        """A plain transformers model with the method folded in (no embexp code at inference)."""
        self.check_export()
        raise EmbexpError(f"method {self.cfg.name} cannot be exported to a plain model (set export=false)")

    def check_export(self) -> None:
        """Raise before any training when ``export=true`` cannot be honoured."""
        if self.export_blocker:
            raise EmbexpError(f"method {self.cfg.name} cannot be exported to a plain model: {self.export_blocker} "
                              "(set export=false)")

    def log_values(self) -> dict[str, float]:
        """Scalars worth logging during training (e.g. a learned gate parameter)."""
        return {}

    # ---- shared -------------------------------------------------------------------------------
    def trainable_tensors(self) -> dict[str, nn.Parameter]:
        out = dict(self.method_tensors())
        out.update({f"head.{n}": p for n, p in self._head.items()})
        return out

    def mark_trainable(self) -> None:
        """Switch gradients on for the trainable tensors. ``build_method`` calls it once, after
        construction; a method that replaces its tensors later (PEMA's setup) calls it again."""
        for p in self.trainable_tensors().values():
            p.requires_grad_(True)

    def n_trainable(self, include_head: bool = True) -> int:
        tensors = self.trainable_tensors() if include_head else self.method_tensors()
        return sum(p.numel() for p in {id(p): p for p in tensors.values()}.values())

    def forward(self, **batch):
        return self.model(**batch)

    @torch.no_grad()
    def generate(self, **kw):
        return self.model.generate(**kw)

    def trainable_state(self) -> dict[str, torch.Tensor]:
        return {n: p.detach().to("cpu").contiguous().clone() for n, p in self.trainable_tensors().items()}

    def load_trainable_state(self, state: dict[str, torch.Tensor]) -> None:
        own = self.trainable_tensors()
        if set(state) != set(own):
            raise EmbexpError(
                f"adapter does not match method {self.cfg.name}: missing {sorted(set(own) - set(state))[:5]}, "
                f"unexpected {sorted(set(state) - set(own))[:5]}"
            )
        with torch.no_grad():
            for n, p in own.items():
                if p.shape != state[n].shape:
                    raise EmbexpError(f"adapter tensor {n} has shape {tuple(state[n].shape)}, expected {tuple(p.shape)}")
                p.copy_(state[n].to(p.device, p.dtype))


def embedding_hook(module: nn.Module, fn):
    """Register ``fn(input_ids, embeds) -> embeds`` on an embedding module's output.

    Working on the embedding module's output (rather than calling the model with
    ``inputs_embeds``) keeps ``generate()`` and its KV cache untouched and keeps tied
    input/output embeddings tied: the weight itself is never modified.
    """

    def hook(mod, args, output):
        return fn(args[0], output)

    return module.register_forward_hook(hook)
