"""The method contract: an ``nn.Module`` that owns the backbone (``self.model``) and an explicit dict
of its trainable tensors, changes nothing at initialisation unless its docstring says what it
preserves instead, saves its state as safetensors and, where the math allows, exports a plain
transformers model. Build one with ``build_method``. The contract and its three extension points
(embedding output, inside the layers, replaced inputs): docs/architecture.md, "Contracts".
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from embexp import EmbexpError
from embexp.core.config import option
from embexp.methods.onepass import OnePass
from embexp.methods.prefix import (  # noqa: F401 (re-exported)
    METHOD_KEYS,
    PrefixPath,
    backbone_batch,
    keeps_logits,
    positions,
    split_prompt,
)
from embexp.objectives.sentence import PAIR_KEY, mean_pool


@dataclass
class MethodConfig:
    name: str = option("", "Method name (the file under conf/method).")
    train_head: bool = option(True, "Encoders: also train the task head (classifier), which starts random.")


@dataclass(frozen=True)
class Comparison:
    """A method's part in the comparison of every method (the sweep compare/curves, python -m
    embexp.report table=compare): its place in the table's order (lower first), its learning rate
    there (None: it trains nothing), and the model kinds of its ``model_kinds`` it is compared on."""

    rank: int
    lr: float | None = None
    kinds: tuple[str, ...] = ("decoder", "encoder")


class Method(PrefixPath, OnePass, nn.Module):
    Config: ClassVar[type] = MethodConfig
    # ---- capabilities: what the test matrix, the comparison sweep, the smoke run, the tables and
    # the config checks read from the class (no list elsewhere names methods) ----
    label: ClassVar[str] = ""  # display name in tables ("" = the registered name)
    # the models it runs on: decoder, encoder, scratch (a model.source=scratch model: methods that train the whole body)
    model_kinds: ClassVar[tuple[str, ...]] = ("decoder", "encoder")
    # outputs equal the backbone's at init (default config), bit for bit in fp32
    identity_at_init: ClassVar[bool] = True
    trains: ClassVar[bool] = True  # False for zero_shot: no optimisation at all
    trains_embedding_matrix: ClassVar[bool] = False  # trains the input embedding's weight itself (what PEMA can wrap)
    export_blocker: ClassVar[str] = ""  # why this method cannot export a plain model ("": it can)
    comparison: ClassVar[Comparison | None] = None  # its part in the comparison of every method (None: not in it)
    # why this method cannot train under trainer.strategy=fsdp ("": it can; run.preflight.check_sharding)
    shard_blocker: ClassVar[str] = ""
    # option values that run on a decoder only ({field: value}); another model is refused by the pre-flight
    decoder_only: ClassVar[dict] = {}
    # extension point 3 (decoders): "" (the backbone reads its own embeddings), "prepend" or "replace" (prefix())
    prefix_mode: str = ""

    @classmethod
    def counted_only(cls, cfg) -> tuple[str, ...]:
        """Row sets beyond train and eval whose token ids :meth:`setup` needs, read only to be counted
        (``test``: the task's test split, hidden labels allowed; PEMA's ``method.count_splits``)."""
        return ()

    @classmethod
    def check_run(cls, cfg) -> None:
        """What this method refuses in a run's validated config (``cfg``: the whole train config) from the config
        and the files it names alone (a warm start's run directory): one line (EmbexpError). ``run.preflight`` asks
        the run's method, before the rows or the model load. Here: a value of :attr:`decoder_only` on a model
        that is no decoder."""
        from embexp.core.config import choices_of

        for key, value in cls.decoder_only.items():
            if key in cfg.method and cfg.method[key] == value and cfg.model.kind != "decoder":
                meta = next(fl.metadata for fl in dataclasses.fields(cls.Config) if fl.name == key)
                others = ", ".join(str(c) for c in choices_of(meta) if c != value)
                raise EmbexpError(f"method.{key}={value} needs a decoder; model {cfg.model.name} is an "
                                  f"{cfg.model.kind} (choose from: {others})")

    @classmethod
    def composable(cls) -> bool:
        """Can another method run this one inside its own forward (K-Token merging's ``method.inner``)?
        Yes when it works through the backbone's modules alone (hooks, adapters, rows): no prefix,
        forward, generate or generation state (``generating``) of its own, which the outer method's shared path
        would bypass."""
        return (not cls.prefix_mode and cls.forward is Method.forward and cls.generate is Method.generate
                and cls.generating is Method.generating)

    def __init__(self, cfg, backbone):
        super().__init__()
        self.cfg = cfg
        self.model = backbone.model  # registered submodule: DDP sees one module
        object.__setattr__(self, "backbone_model", backbone.model)  # the transformers model, even once wrapped (peft)
        self.tokenizer = backbone.tokenizer
        self.is_decoder = backbone.is_decoder
        self.embed_scale = backbone.embed_scale  # what the embedding module multiplies rows by (models/loading.py)
        self._head = dict(backbone.head_parameters()) if (self.trains and cfg.train_head) else {}
        self.objective: nn.Module | None = None  # a training objective of the task kind (sentence.py), if any
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

    def finalize(self) -> None:
        """After training, before the adapter is saved and the model evaluated (e.g. Tiny-Attention's
        parameter averaging). Nothing by default."""

    def given_generations(self, examples) -> list[str] | None:
        """Texts that stand in for the model's generations of `examples` in evaluation
        (``run.predict.score_rows`` scores them as generations), for baselines whose output is not
        generated (``repeat_prompt``: the question). None (the default): generate with the model.
        `examples` are the task's ``Example`` objects, read by attribute only."""
        return None

    def log_values(self) -> dict[str, float]:
        """Scalars worth logging during training (e.g. a learned gate parameter)."""
        return {}

    def peak_lrs(self) -> dict[str, float]:
        """Peak learning rates of those trainable tensors (names as in :meth:`trainable_tensors`)
        that do not train at ``trainer.lr``; the schedule scales them alike. {} by default: every
        tensor trains at ``trainer.lr`` (K-Token's encoder has its own, ``method.encoder_lr``)."""
        return {}

    def prefix(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Extension point 3: the embeddings the backbone reads in place of (``replace``) or before
        (``prepend``) the prompt. Gets LEFT-padded prompt ids [B, n] (n = 0 for ``prepend``) and
        returns (embeddings [B, m, d], mask [B, m]), LEFT-padded, in the embedding module's
        output space (what it would return for real tokens)."""
        raise EmbexpError(f"method {self.cfg.name} sets prefix_mode={self.prefix_mode!r} but defines no prefix()")

    # ---- shared -------------------------------------------------------------------------------
    def trainable_tensors(self) -> dict[str, nn.Parameter]:
        out = dict(self.method_tensors())
        out.update({f"head.{n}": p for n, p in self._head.items()})
        if self.objective is not None:
            out.update({f"objective.{n}": p for n, p in self.objective.named_parameters() if p.requires_grad})
        return out

    # ---- sentence embeddings (embexp.objectives.sentence) ------------------------------------------------
    def attach_objective(self, objective: nn.Module) -> None:
        """Train with a task kind's objective (a registered submodule: DDP, ``.to()`` and the
        optimizer see it; its learnable tensors are trained and saved as ``objective.*``)."""
        self.objective = objective

    def __call__(self, *args, **kw):
        """A batch that carries the attached objective's key (``objective.key``: ``input_ids_b``, a
        batch of text pairs; ``mask_positions``, a cloze batch) goes to the objective, which runs
        this method's own ``forward`` (so every method works unchanged) and returns the loss and
        logits; any other call is ``forward``."""
        if self.objective is not None and getattr(self.objective, "key", PAIR_KEY) in kw:
            return self.objective(self, kw)
        return super().__call__(*args, **kw)

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kw) -> torch.Tensor:
        """Sentence embeddings [B, d]: the method's forward, last hidden states mean-pooled over
        the attention mask (the encoder is loaded without a head for sentence-embedding tasks)."""
        out = self(input_ids=input_ids, attention_mask=attention_mask, **kw)
        return mean_pool(out.last_hidden_state, attention_mask)

    def mark_trainable(self) -> None:
        """Switch gradients on for the trainable tensors. ``build_method`` calls it once, after
        construction; a method that replaces its tensors later (PEMA's setup) calls it again."""
        for p in self.trainable_tensors().values():
            p.requires_grad_(True)

    def n_trainable(self, include_head: bool = True) -> int:
        tensors = self.trainable_tensors() if include_head else self.method_tensors()
        return sum(p.numel() for p in {id(p): p for p in tensors.values()}.values())

    def forward(self, **batch):
        if self.prefix_mode and self.is_decoder:
            return self._prefix_forward(**batch)
        return self.model(**backbone_batch(batch))

    @torch.no_grad()
    def generate(self, **kw):
        with self.generating(kw):
            if self.prefix_mode and self.is_decoder:
                return self._prefix_generate(**kw)
            return self.model.generate(**kw)

    @contextmanager
    def generating(self, kw: dict):
        """What the method holds while it generates from the prompts of `kw` (``generate``'s keyword
        arguments: ``input_ids`` and ``attention_mask`` of the prompts, the generation options), around
        ``generate`` and the one pass of ``methods/onepass.py`` alike (TinyTE-gated: each prompt's
        length; Tiny-Attention: its own KV cache, cleared after). Nothing by default."""
        yield

    @contextmanager
    def counting_backbone_tokens(self):
        """Count the positions the backbone itself reads (its attention mask) while the block runs:
        with a prefix or a shortened prompt this differs from the tokens of the input. Yields a
        one-element list holding the running count."""
        count = [0]

        def hook(module, args, kwargs):
            mask = kwargs.get("attention_mask")
            if mask is not None and mask.dim() == 2:
                count[0] += int(mask.sum())
                return
            x = kwargs.get("input_ids", args[0] if args else None)
            x = kwargs.get("inputs_embeds") if x is None else x
            count[0] += int(x.shape[0] * x.shape[1])

        handle = self.backbone_model.register_forward_pre_hook(hook, with_kwargs=True)
        try:
            yield count
        finally:
            handle.remove()

    def trainable_state(self) -> dict[str, torch.Tensor]:
        return cpu_copies(self.trainable_tensors())

    def load_trainable_state(self, state: dict[str, torch.Tensor]) -> None:
        load_tensors(self.cfg.name, self.trainable_tensors(), state)


def cpu_copies(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Detached, contiguous CPU copies of named tensors: what an adapter saves."""
    return {n: p.detach().to("cpu").contiguous().clone() for n, p in tensors.items()}


def load_tensors(method: str, own: dict[str, torch.Tensor], state: dict[str, torch.Tensor]) -> None:
    """Copy a saved ``state`` into the tensors ``own`` of ``method``, which must have the same names and shapes
    (else one line naming what differs)."""
    if set(state) != set(own):
        raise EmbexpError(f"adapter does not match method {method}: missing {sorted(set(own) - set(state))[:5]}, "
                          f"unexpected {sorted(set(state) - set(own))[:5]}")
    with torch.no_grad():
        for n, p in own.items():
            if p.shape != state[n].shape:
                raise EmbexpError(f"adapter tensor {n} has shape {tuple(state[n].shape)}, expected {tuple(p.shape)}")
            p.copy_(state[n].to(p.device, p.dtype))


def embedding_hook(module: nn.Module, fn):
    """Register ``fn(input_ids, embeds) -> embeds`` on an embedding module's output (extension point 1:
    docs/architecture.md, "Three extension points")."""

    def hook(mod, args, output):
        return fn(args[0], output)

    return module.register_forward_hook(hook)
