"""Build the pieces of a run from a composed config: task, backbone, method, tokenised data.

Shared by ``train`` and ``eval`` so a saved run is rebuilt exactly as it was trained.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from embexp.data import Encoder
from embexp.methods import build_method
from embexp.models import load_backbone
from embexp.sentence import SENTENCE_KINDS, ContrastiveObjective
from embexp.tasks import build_task

log = logging.getLogger("embexp")


@dataclass
class Components:
    task: object
    backbone: object
    method: object
    encoder: Encoder
    n_backbone_params: int  # the pretrained model's parameters, counted before a method adds or swaps any


def build(cfg, device: torch.device) -> Components:
    task = build_task(cfg.task)  # first: an unknown task fails before any model loads
    sentence = task.kind in SENTENCE_KINDS  # sentence embeddings: the encoder without a head (embexp/sentence.py)
    backbone = load_backbone(cfg.model, num_labels=task.num_labels, device=device, sentence=sentence)
    n_backbone = count_params(backbone.model)  # before LoRA injects its layers or PEMA swaps the matrix
    method = build_method(cfg.method, backbone)
    if task.kind == "pairs" and method.trains:
        method.attach_objective(ContrastiveObjective(cfg.task.temperature, cfg.task.learn_temperature))
    encoder = Encoder(backbone.tokenizer, backbone.is_decoder, cfg.task.max_source_tokens,
                      cfg.task.max_target_tokens, cfg.model.chat_template and backbone.is_decoder, separate=sentence)
    return Components(task, backbone, method, encoder, n_backbone)


def count_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in module.parameters()}.values())
