"""Cloze classification with a masked-LM head (PET, Schick & Schütze 2021): the encoder reads a
pattern with one mask token, and the logits of the verbalizer tokens at the mask are the class
logits. Training minimises the cross-entropy over those logits (PET's ``mlm_logits_to_cls_logits``
followed by ``CrossEntropyLoss``); prediction takes the likeliest verbalizer.

The task marks its examples as cloze (``Example.cloze``; tasks/superglue.py, ``task.cloze=true``),
``data.Featurizer`` tokenises them and records the mask position (``mask_positions`` in the batch),
``models.load_backbone(mlm=True)`` loads the encoder with its masked-LM head, and the pipeline
attaches :class:`ClozeObjective` to the method: ``Method.__call__`` routes every batch that carries
``mask_positions`` to it, so training, the evaluation loss and ``inference.head_predictions`` (the
argmax of ``logits``) work unchanged for every method.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from embexp.data import MASK_POSITIONS


class ClozeObjective(nn.Module):
    """Class logits = the masked-LM logits of the verbalizer tokens at the mask position."""

    key = MASK_POSITIONS  # Method.__call__ routes a batch carrying this key here

    def __init__(self, verbalizer_ids: list[int]):
        super().__init__()
        self.register_buffer("verbalizer_ids", torch.tensor(verbalizer_ids, dtype=torch.long), persistent=False)

    def forward(self, method, batch: dict) -> SequenceClassifierOutput:
        batch = dict(batch)
        positions = batch.pop(MASK_POSITIONS)
        labels = batch.pop("labels", None)
        logits = method(**batch).logits  # [B, T, V]: the method's own forward (adapters, hooks)
        at_mask = logits[torch.arange(logits.shape[0], device=logits.device), positions.to(logits.device)]
        cls = at_mask[:, self.verbalizer_ids].float()  # [B, classes]
        loss = nn.functional.cross_entropy(cls, labels.to(cls.device)) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=cls)
