"""Baselines that need no adapter library: zero-shot, full fine-tuning, embedding tuning."""

from __future__ import annotations

from embexp.methods.base import Method
from embexp.methods.registry import register_method


@register_method("zero_shot")
class ZeroShot(Method):
    """The backbone as it is: no training. Encoders keep their random head (a chance baseline)."""

    trains = False

    def export(self):
        return self.model


@register_method("full_ft")
class FullFineTuning(Method):
    """Every backbone parameter is trained (tied weights counted once)."""

    def method_tensors(self):
        head = {id(p) for p in self._head.values()}
        return {f"model.{n}": p for n, p in self.model.named_parameters() if id(p) not in head}

    def export(self):
        return self.model


@register_method("emb_tuning")
class EmbeddingTuning(Method):
    """Only the input embedding matrix is trained (with tied embeddings the output head moves too)."""

    def method_tensors(self):
        return {"embedding": self.model.get_input_embeddings().weight}

    def export(self):
        return self.model
