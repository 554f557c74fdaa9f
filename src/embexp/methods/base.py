"""The method contract.

A method is an ``nn.Module`` that owns the backbone (``self.model``) and an explicit dict of its
trainable tensors. At initialisation it changes nothing (outputs equal the backbone's, bit for bit
in fp32) unless its docstring says what it preserves instead. It saves and loads its trainable
state as safetensors, and where the math allows it exports a plain transformers model.
Build one with ``build_method``: ``__init__`` freezes the backbone and creates the method's
tensors; the builder then switches their gradients on (``mark_trainable``), once.

Three extension points reach past the plain forward (docs/architecture.md shows one example each):

1. **Embedding output** (:func:`embedding_hook`): change what the embedding module returns, same
   shape (TinyTE). Generation and its KV cache need nothing else.
2. **Inside the layers** (:func:`embexp.models.after_attention`): add a module's output to the
   hidden states between attention and FFN of every layer; the per-family placement lives in
   ``models.py`` alone.
3. **Replaced inputs / another sequence length** (``prefix_mode`` + :meth:`Method.prefix`): the
   backbone reads embeddings the method builds instead of (``replace``) or before (``prepend``)
   the prompt's own. Training, left-padded generation with the KV cache, log-likelihood scoring
   (:meth:`Method.score_continuations`) and token counting then go through one shared path here.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar, Sequence

import torch
from torch import nn
from tqdm.auto import tqdm

from embexp import EmbexpError
from embexp.config import f
from embexp.data import IGNORE, pad
from embexp.sentence import PAIR_KEY, mean_pool

# Batch keys that describe the examples for methods (data.collate adds them) and that the
# backbone's forward never receives.
METHOD_KEYS = ("prompt_lengths", "mask_positions")
PREFIX_MODES = ("", "prepend", "replace")


@dataclass
class MethodConfig:
    name: str = f("", "Method name (the file under conf/method).")
    train_head: bool = f(True, "Encoders: also train the task head (classifier), which starts random.")


class Method(nn.Module):
    Config: ClassVar[type] = MethodConfig
    trains: ClassVar[bool] = True  # False for zero_shot: no optimisation at all
    export_blocker: ClassVar[str] = ""  # why this method cannot export a plain model ("": it can)
    shard_blocker: ClassVar[str] = ""  # why this method cannot train under trainer.strategy=fsdp ("": it can; sharding.check)
    # Extension point 3 (decoders): "" = the backbone reads its own embeddings of input_ids;
    # "prepend" = prefix() goes before the whole input (prompt tuning); "replace" = prefix() takes
    # the place of the prompt (K-Token merging), so the backbone sees another sequence length.
    prefix_mode: str = ""

    @classmethod
    def composable(cls) -> bool:
        """Can another method run this one inside its own forward (K-Token merging's ``method.inner``)?
        Yes when it works through the backbone's modules alone (hooks, adapters, rows): no prefix,
        forward or generate of its own, which the outer method's shared path would bypass."""
        return not cls.prefix_mode and cls.forward is Method.forward and cls.generate is Method.generate

    def __init__(self, cfg, backbone):
        super().__init__()
        self.cfg = cfg
        self.model = backbone.model  # registered submodule: DDP sees one module
        object.__setattr__(self, "backbone_model", backbone.model)  # the transformers model, even once wrapped (peft)
        self.tokenizer = backbone.tokenizer
        self.is_decoder = backbone.is_decoder
        self.embed_scale = backbone.embed_scale  # what the embedding module multiplies rows by (models.py)
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
        (``inference.evaluate`` scores them as generations), for baselines whose output is not
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

    # ---- sentence embeddings (embexp.sentence) ------------------------------------------------
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
        if self.prefix_mode and self.is_decoder:
            return self._prefix_generate(**kw)
        return self.model.generate(**kw)

    @property
    def changes_input_length(self) -> bool:
        """Whether the backbone reads another number of positions than the prompt's tokens (a
        ``replace`` or ``prepend`` prefix on a decoder): such runs record their length reduction."""
        return bool(self.prefix_mode) and self.is_decoder

    @torch.no_grad()
    def prompt_positions(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Per row of LEFT-padded prompts [B, n]: the positions the backbone reads for the prompt
        (its real tokens; a ``replace`` prefix's length; a ``prepend`` prefix's plus the tokens).
        What the evaluation's length reduction compares with the prompt's own tokens."""
        own = attention_mask.sum(1)
        if not (self.prefix_mode and self.is_decoder):
            return own
        if self.prefix_mode == "replace":
            return self.prefix(input_ids, attention_mask)[1].sum(1)
        return self.prefix(input_ids[:, :0], attention_mask[:, :0])[1].sum(1) + own

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

    @torch.no_grad()
    def score_continuations(self, requests: Sequence[tuple[Sequence[int], Sequence[int]]], batch_size: int,
                            progress: bool = False) -> list[float]:
        """Summed log-probability of each continuation given its context, for (context ids,
        continuation ids) pairs; what log-likelihood scoring calls.

        As in lm-eval, the model reads (context + continuation)[:-1]: the last continuation token
        is only a target. Identical inputs run once (one-token choices that share a context cost one
        forward), longest first so that similar lengths share a batch. With a ``replace`` prefix the
        context goes through ``prefix()`` and the continuation follows it as tokens; in every
        layout the last ``len(continuation)`` positions of a row predict the continuation.
        """
        needed: dict[tuple, list[tuple[int, list[int]]]] = {}
        for r, (ctx, cont) in enumerate(requests):
            cont = list(cont)
            if not cont:
                raise EmbexpError(f"continuation {r} is empty: nothing to score")
            key = (tuple(ctx), tuple(cont[:-1])) if self.prefix_mode == "replace" else ((), tuple(ctx) + tuple(cont[:-1]))
            needed.setdefault(key, []).append((r, cont))
        keys = sorted(needed, key=lambda k: len(k[0]) + len(k[1]), reverse=True)
        out = [0.0] * len(requests)
        pad_id = self.tokenizer.pad_token_id
        self.eval()
        device = next(self.parameters()).device
        for s in tqdm(range(0, len(keys), batch_size), desc="loglik", disable=not progress, leave=False, dynamic_ncols=True):
            chunk = keys[s:s + batch_size]
            tokens = pad([list(k[1]) for k in chunk], pad_id).to(device)
            tmask = pad([[1] * len(k[1]) for k in chunk], 0).to(device)
            if self.prefix_mode and self.is_decoder:
                prompts = pad([list(k[0]) for k in chunk], pad_id, left=True).to(device)
                pmask = pad([[1] * len(k[0]) for k in chunk], 0, left=True).to(device)
                x, mask, width = self._assemble(prompts, pmask, tokens, tmask)
                logits = self.backbone_model(inputs_embeds=x, attention_mask=mask, position_ids=positions(mask)).logits
            else:
                logits, width = self(input_ids=tokens, attention_mask=tmask).logits, 0
            for row, key in enumerate(chunk):
                end = width + len(key[1]) - 1  # the last real position of the row
                for r, cont in needed[key]:
                    lp = torch.log_softmax(logits[row, end - len(cont) + 1:end + 1].float(), dim=-1)
                    out[r] = float(lp[torch.arange(len(cont)), torch.tensor(cont, device=lp.device)].sum())
        return out

    # ---- the shared path of extension point 3 -------------------------------------------------
    def _assemble(self, prompt_ids, prompt_mask, token_ids, token_mask):
        """[prefix (left-padded) | tokens embedded by the model's own embedding module
        (right-padded)] -> (inputs_embeds, attention_mask, prefix width)."""
        n = 0 if self.prefix_mode == "prepend" else prompt_ids.shape[1]
        px, pmask = self.prefix(prompt_ids[:, :n], prompt_mask[:, :n])
        tx = self.backbone_model.get_input_embeddings()(token_ids)
        x = torch.cat([px.to(tx.dtype), tx], 1)
        return x, torch.cat([pmask.to(token_mask.dtype), token_mask], 1), px.shape[1]

    def _prefix_forward(self, input_ids, attention_mask=None, labels=None, prompt_lengths=None, **rest):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        rest = backbone_batch(rest)
        if self.prefix_mode == "replace":
            if prompt_lengths is None:
                raise EmbexpError(f"method {self.cfg.name} replaces the prompt and needs 'prompt_lengths' in the batch (data.collate adds it)")
            (prompt, pmask), (tokens, tmask, tlabels) = split_prompt(input_ids, attention_mask, labels, prompt_lengths,
                                                                   self.tokenizer.pad_token_id)
        else:
            prompt, pmask, tokens, tmask, tlabels = input_ids[:, :0], attention_mask[:, :0], input_ids, attention_mask, labels
        x, mask, width = self._assemble(prompt, pmask, tokens, tmask)
        if tlabels is not None:
            rest["labels"] = torch.cat([tlabels.new_full((tlabels.shape[0], width), IGNORE), tlabels], 1)
        out = self.backbone_model(inputs_embeds=x, attention_mask=mask, position_ids=positions(mask), **rest)
        if self.prefix_mode == "prepend":
            out.logits = out.logits[:, width:]  # aligned with input_ids again
        return out

    def _prefix_generate(self, input_ids, attention_mask=None, **kw):
        """Prefill from ``inputs_embeds``, then continue with ids on the KV cache (new tokens go
        through the embedding module, so extension point 1 still applies to them). Every row is
        laid out as ``[pad..., prefix, tokens]`` (a stable sort of the mask moves all padding to
        the front) and the positions come from the mask, so a row is generated as if alone.
        Returns ``input_ids`` + the new tokens, like ``generate``."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if self.prefix_mode == "replace":
            empty = input_ids[:, :0]
            x, mask, _ = self._assemble(input_ids, attention_mask, empty, attention_mask[:, :0])
        else:
            x, mask, _ = self._assemble(input_ids[:, :0], attention_mask[:, :0], input_ids, attention_mask)
        order = torch.sort(mask, dim=1, stable=True).indices  # padding (0) first, the rest in order
        x = torch.gather(x, 1, order.unsqueeze(-1).expand_as(x))
        mask = torch.gather(mask, 1, order)
        out = self.backbone_model.generate(inputs_embeds=x, attention_mask=mask, **kw)
        if isinstance(out, torch.Tensor):
            return torch.cat([input_ids, out], 1)
        out.sequences = torch.cat([input_ids, out.sequences], 1)  # return_dict_in_generate=True
        return out

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


def backbone_batch(batch: dict) -> dict:
    """The batch without the keys only methods read (``METHOD_KEYS``)."""
    return {k: v for k, v in batch.items() if k not in METHOD_KEYS}


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids counted from each row's first real token, for rows whose real tokens are
    contiguous: left padding does not move a row's positions, and a right-padded row gets the
    default ``arange`` (so its logits equal a plain forward's, padding included)."""
    first = mask.long().argmax(-1, keepdim=True)
    return (torch.arange(mask.shape[-1], device=mask.device)[None] - first).clamp(min=0)


def split_prompt(input_ids, attention_mask, labels, prompt_lengths, pad_id: int):
    """Right-padded rows ``[prompt target pad]`` -> (LEFT-padded prompts, mask) and (right-padded
    targets, mask, labels): the layout :meth:`Method.prefix` and the shared path expect."""
    dev = input_ids.device
    plen = prompt_lengths.to(dev).long()
    lens = attention_mask.sum(1).long()
    width_p, width_t = int(plen.max()), int((lens - plen).max())
    src = torch.arange(width_p, device=dev)[None] - (width_p - plen[:, None])
    pvalid = src >= 0
    prompt = input_ids.gather(1, src.clamp(min=0)).masked_fill(~pvalid, pad_id)
    src = plen[:, None] + torch.arange(width_t, device=dev)[None]
    tvalid = src < lens[:, None]
    src = src.clamp(max=input_ids.shape[1] - 1)
    tokens = input_ids.gather(1, src).masked_fill(~tvalid, pad_id)
    tlabels = labels.gather(1, src).masked_fill(~tvalid, IGNORE) if labels is not None else None
    return (prompt, pvalid.long()), (tokens, tvalid.long(), tlabels)


def embedding_hook(module: nn.Module, fn):
    """Register ``fn(input_ids, embeds) -> embeds`` on an embedding module's output.

    Working on the embedding module's output (rather than calling the model with
    ``inputs_embeds``) keeps ``generate()`` and its KV cache untouched and keeps tied
    input/output embeddings tied: the weight itself is never modified.
    """

    def hook(mod, args, output):
        return fn(args[0], output)

    return module.register_forward_hook(hook)
