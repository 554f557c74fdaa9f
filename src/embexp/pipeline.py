"""Build a run from a composed config: task, backbone, method, tokenised data, set up on its device.

Shared by ``train`` and ``eval`` so a saved run is rebuilt exactly as it was trained.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch

from embexp.cloze import ClozeObjective
from embexp.config import validate
from embexp.data import Featurizer, token_lists
from embexp.methods import build_method
from embexp.models import load_backbone
from embexp.sentence import SENTENCE_KINDS, ContrastiveObjective
from embexp.tasks import build_task

log = logging.getLogger("embexp")


@dataclass
class Components:
    """Everything a run needs, built from the config: the method is set up and on its device."""

    task: object
    backbone: object
    method: object
    featurizer: Featurizer
    n_backbone_params: int  # the pretrained model's parameters, counted before a method adds or swaps any
    train_examples: list = field(default_factory=list)
    eval_examples: list = field(default_factory=list)
    select_examples: list = field(default_factory=list)  # task.select_split: model selection, never reported
    train_features: list = field(default_factory=list)
    eval_features: list = field(default_factory=list)
    select_features: list = field(default_factory=list)


def build(cfg, device: torch.device, training: bool = True) -> Components:
    """config -> task, backbone, method -> examples -> features -> ``method.setup`` -> device.

    ``training=False`` (re-evaluation) skips the selection rows; the training rows are still read
    when the method trains, since its setup may depend on them (PEMA's token counts)."""
    validate(cfg)
    task = build_task(cfg.task)  # first: an unknown task fails before any model loads
    sentence = task.kind in SENTENCE_KINDS  # sentence embeddings: the encoder without a head (embexp/sentence.py)
    cloze = bool(getattr(task, "cloze", False))  # PET cloze: the masked-LM head scores verbalizers (embexp/cloze.py)
    backbone = load_backbone(cfg.model, num_labels=task.num_labels, sentence=sentence, mlm=cloze)
    n_backbone = count_params(backbone.model)  # before LoRA injects its layers or PEMA swaps the matrix
    method = build_method(cfg.method, backbone)
    if cfg.export:
        method.check_export()  # before hours of training, not after
    if task.kind == "pairs" and method.trains:
        method.attach_objective(ContrastiveObjective(cfg.task.temperature, cfg.task.learn_temperature))
    featurizer = Featurizer(backbone.tokenizer, backbone.is_decoder, cfg.task.max_source_tokens, cfg.task.max_target_tokens,
                      cfg.model.chat_template and backbone.is_decoder, task.loss_on, separate=sentence)
    if cloze:  # every method, trained or not (zero_shot scores the pretrained MLM head)
        method.attach_objective(ClozeObjective(featurizer.verbalizer_ids(task.verbalizers)))
    c = Components(task, backbone, method, featurizer, n_backbone)
    trains = cfg.do_train and method.trains
    c.train_examples = task.examples("train") if trains else []
    c.eval_examples = task.examples("eval") if (cfg.do_eval or trains) else []
    # selection rows: the periodic loss and select_best, never the reported split
    if training and c.train_examples and task.split_name("select") and (cfg.trainer.select_best or cfg.trainer.eval_every > 0):
        c.select_examples = task.examples("select")
    c.train_features = [featurizer.train_features(e) for e in c.train_examples]
    c.eval_features = [featurizer.train_features(e) for e in c.eval_examples]
    c.select_features = [featurizer.train_features(e) for e in c.select_examples]
    ids = lambda feats: [s for f in feats for s in token_lists(f)]  # noqa: E731  (two sequences for a text pair)
    method.setup({"train": ids(c.train_features), "eval": ids(c.eval_features)})
    if sentence:
        c.eval_features = []  # no evaluation loss: the eval split is a similarity task, scored after training
    method.to(device)
    return c


def count_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in module.parameters()}.values())
