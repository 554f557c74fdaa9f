"""Cloze classification with a masked-LM head (PET, Schick & Schütze 2021): the encoder reads a
pattern with one mask token, and the logits of the verbalizer tokens at the mask are the class
logits. The two training losses (``task.cloze_loss``): docs/methods_tinyattn.md, "Scoring and loss";
how a cloze task reaches the objective: docs/architecture.md, "Cloze classification".
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from embexp.featurize import MASK_POSITIONS


class ClozeObjective(nn.Module):
    """Class logits = the masked-LM logits of the verbalizer tokens at the mask position."""

    key = MASK_POSITIONS  # Method.__call__ routes a batch carrying this key here

    LOSSES = ("verbalizers", "vocabulary")

    def __init__(self, verbalizer_ids: list[int], loss: str = "verbalizers"):
        super().__init__()
        if loss not in self.LOSSES:
            raise ValueError(f"unknown cloze loss '{loss}' (choose from: {', '.join(self.LOSSES)})")
        self.loss = loss
        self.register_buffer("verbalizer_ids", torch.tensor(verbalizer_ids, dtype=torch.long), persistent=False)

    def forward(self, method, batch: dict) -> SequenceClassifierOutput:
        batch = dict(batch)
        positions = batch.pop(MASK_POSITIONS)
        labels = batch.pop("labels", None)
        logits = method(**batch).logits  # [B, T, V]: the method's own forward (adapters, hooks)
        at_mask = logits[torch.arange(logits.shape[0], device=logits.device), positions.to(logits.device)]
        cls = at_mask[:, self.verbalizer_ids].float()  # [B, classes]
        loss = None
        # "vocabulary": every token competes; the target is the label's verbalizer
        if labels is not None and self.loss == "vocabulary":
            loss = nn.functional.cross_entropy(at_mask.float(), self.verbalizer_ids[labels.to(cls.device)])
        elif labels is not None:
            loss = nn.functional.cross_entropy(cls, labels.to(cls.device))
        return SequenceClassifierOutput(loss=loss, logits=cls)
