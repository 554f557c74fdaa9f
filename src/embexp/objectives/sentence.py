"""Sentence embeddings: the task kinds ``pairs`` (contrastive training on text pairs) and
``similarity`` (zero-shot evaluation by the cosine of two embeddings), for every encoder and method:
mean pooling, the contrastive objective and similarity scoring. Where they plug in (model, data,
``Method.embed``, the routed loss, evaluation): docs/architecture.md, "Sentence embeddings".
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm
from transformers.modeling_outputs import SequenceClassifierOutput

SENTENCE_KINDS = ("pairs", "similarity")
PAIR_KEY = "input_ids_b"  # a batch with this key holds text pairs (data.collate)


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of the hidden states [B, L, d] over the positions where ``mask`` [B, L] is 1, in fp32."""
    m = mask.to(torch.float32).unsqueeze(-1)
    return (hidden.float() * m).sum(1) / m.sum(1).clamp(min=1.0)


class ContrastiveObjective(nn.Module):
    """Symmetric InfoNCE over in-batch negatives with a learnable temperature (the PETE code's
    objective): ``S = norm(a) norm(b)^T / tau``, ``loss = CE(S, diag) + CE(S^T, diag)`` (the two
    directions summed, as the authors' code). ``tau`` starts at ``temperature`` (0.07) and is
    learned as ``log tau`` (ours: positive by construction; the authors learn tau itself)."""

    key = PAIR_KEY  # Method.__call__ routes a batch carrying this key to the objective

    def __init__(self, temperature: float = 0.07, learn: bool = True):
        super().__init__()
        self.log_temperature = nn.Parameter(torch.tensor(math.log(temperature)), requires_grad=learn)

    @property
    def temperature(self) -> float:
        return float(self.log_temperature.detach().exp())

    def forward(self, method, batch: dict) -> SequenceClassifierOutput:
        a = method.embed(batch["input_ids"], batch["attention_mask"])
        b = method.embed(batch[PAIR_KEY], batch["attention_mask_b"])
        logits = F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T / self.log_temperature.exp()
        target = torch.arange(logits.shape[0], device=logits.device)
        loss = F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)
        return SequenceClassifierOutput(loss=loss, logits=logits)  # logits: the [B, B] similarities / temperature


@torch.no_grad()
def embed_texts(method, featurizer, texts: Sequence[str], batch_size: int, device,
                progress: bool = False) -> torch.Tensor:
    """Pooled embeddings [N, d] (fp32, CPU) of ``texts``, longest first in batches (fewer pads)."""
    from embexp.featurize import padded

    tok = featurizer.tokenizer
    ids = [list(tok(t, truncation=True, max_length=featurizer.max_source_tokens)["input_ids"]) for t in texts]
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    method.eval()
    chunks = []
    for s in tqdm(range(0, len(order), batch_size), desc="embed", disable=not progress, leave=False,
                  dynamic_ncols=True):
        rows = [ids[i] for i in order[s:s + batch_size]]
        x, mask = padded(rows, tok.pad_token_id, device=device)
        chunks.append(method.embed(x, mask).float().cpu())
    return torch.cat(chunks)[torch.tensor(order).argsort()]


def evaluate_similarity(method, task, examples, featurizer, batch_size: int, device,
                        progress: bool = True) -> tuple[dict, list[dict]]:
    """Cosine similarity of the two texts' embeddings per example, scored by the task."""
    a = embed_texts(method, featurizer, [ex.text[0] for ex in examples], batch_size, device, progress)
    b = embed_texts(method, featurizer, [ex.text[1] for ex in examples], batch_size, device, progress)
    cos = F.cosine_similarity(a, b, dim=-1).tolist()
    metrics = task.score_similarity([ex.label for ex in examples], cos)
    records = [{"text": list(ex.text), "label": ex.label, "prediction": c} for ex, c in zip(examples, cos)]
    return metrics, records
