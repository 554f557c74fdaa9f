"""Extension point 3 of the method contract (docs/architecture.md): a method's own embeddings replace
the prompt (``prefix_mode="replace"``) or go before it (``"prepend"``), through one shared path for
training, generation and log-likelihood scoring. :class:`PrefixPath` is a base of
``methods.base.Method``; it reads the method's ``prefix_mode``, ``is_decoder``, ``prefix()``,
``backbone_model`` and ``tokenizer``.
"""

from __future__ import annotations

import inspect
from typing import Sequence

import torch
from tqdm.auto import tqdm

from embexp import EmbexpError
from embexp.featurize import IGNORE, padded

# Batch keys that describe the examples for methods (data.collate adds them) and that the
# backbone's forward never receives.
METHOD_KEYS = ("prompt_lengths", "mask_positions")


class PrefixPath:
    """The shared path of extension point 3, and log-likelihood scoring (see the module doc)."""

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

    @torch.no_grad()
    def score_continuations(self, requests: Sequence[tuple[Sequence[int], Sequence[int]]], batch_size: int,
                            progress: bool = False, greedy: bool = False) -> list:
        """Summed log-probability of each continuation given its context, for (context ids,
        continuation ids) pairs; what log-likelihood scoring calls.

        As in lm-eval, the model reads (context + continuation)[:-1]: the last continuation token
        is only a target. Identical inputs run once (one-token choices that share a context cost one
        forward), longest first so that similar lengths share a batch. With a ``replace`` prefix the
        context goes through ``prefix()`` and the continuation follows it as tokens; in every
        layout the last ``len(continuation)`` positions of a row predict the continuation, and only
        those positions go through the LM head (``logits_to_keep``: the same numbers, bit for bit).
        ``greedy=True`` (lm-eval's loglikelihood): (log-probability, whether every continuation token is
        the most likely one at its position) per request instead.
        """
        needed: dict[tuple, list[tuple[int, list[int]]]] = {}
        for r, (ctx, cont) in enumerate(requests):
            cont = list(cont)
            if not cont:
                raise EmbexpError(f"continuation {r} is empty: nothing to score")
            key = ((tuple(ctx), tuple(cont[:-1])) if self.prefix_mode == "replace"
                   else ((), tuple(ctx) + tuple(cont[:-1])))
            needed.setdefault(key, []).append((r, cont))
        keys = sorted(needed, key=lambda k: len(k[0]) + len(k[1]), reverse=True)
        out: list = [0.0] * len(requests)
        self.eval()
        for s in tqdm(range(0, len(keys), batch_size), desc="loglik", disable=not progress, leave=False,
                      dynamic_ncols=True):
            chunk = keys[s:s + batch_size]
            for r, v in self._score_batch(chunk, [needed[k] for k in chunk]).items():
                out[r] = v if greedy else v[0]
        return out

    def _score_batch(self, chunk: list[tuple], wanted: list[list[tuple[int, list[int]]]]) -> dict[int, tuple]:
        """{request: (summed log-probability, greedy)} for one batch of scoring keys (context, tokens read) and
        the requests of each; the LM head runs on the union of the positions that predict them."""
        call, kw, ends = self._key_inputs(chunk)
        spans = [range(end - max(len(c) for _, c in reqs) + 1, end + 1) for end, reqs in zip(ends, wanted)]
        if min(sp.start for sp in spans) < 0:
            raise EmbexpError("a continuation to score has no context before it (an empty prompt without a BOS token)")
        logits, column, _ = kept_logits(call, kw, self.backbone_model, sorted({p for sp in spans for p in sp}))
        out = {}
        for row, (end, reqs) in enumerate(zip(ends, wanted)):
            for r, cont in reqs:
                cols = [column[p] for p in range(end - len(cont) + 1, end + 1)]
                lp = torch.log_softmax(logits[row, cols].float(), dim=-1)
                ids = torch.tensor(cont, device=lp.device)
                out[r] = (float(lp[torch.arange(len(cont)), ids].sum()), bool((lp.argmax(-1) == ids).all()))
        return out

    def _key_inputs(self, chunk: list[tuple]) -> tuple:
        """(the module to call, its inputs, each row's last real position) for a batch of scoring keys
        (context, tokens read): ``[prefix | tokens]`` embedded for the backbone with a prefix, else the
        tokens, right-padded, through the method's own forward."""
        pad_id, device = self.tokenizer.pad_token_id, next(self.parameters()).device
        tokens, tmask = padded([list(k[1]) for k in chunk], pad_id, device=device)
        if self.prefix_mode and self.is_decoder:
            prompts, pmask = padded([list(k[0]) for k in chunk], pad_id, left=True, device=device)
            x, mask, width = self._assemble(prompts, pmask, tokens, tmask)
            return (self.backbone_model, {"inputs_embeds": x, "attention_mask": mask, "position_ids": positions(mask)},
                    [width + len(k[1]) - 1 for k in chunk])
        return self, {"input_ids": tokens, "attention_mask": tmask}, [len(k[1]) - 1 for k in chunk]

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
                raise EmbexpError(f"method {self.cfg.name} replaces the prompt and needs 'prompt_lengths' in the "
                                  "batch (data.collate adds it)")
            (prompt, pmask), (tokens, tmask, tlabels) = split_prompt(input_ids, attention_mask, labels, prompt_lengths,
                                                                   self.tokenizer.pad_token_id)
        else:
            prompt, pmask, tokens, tmask, tlabels = (input_ids[:, :0], attention_mask[:, :0], input_ids, attention_mask,
                                                     labels)
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



def kept_logits(call, kw: dict, model, keep: list[int]) -> tuple[torch.Tensor, dict[int, int], object]:
    """``call(**kw)``'s logits at the positions `keep` only ([B, len(keep), V]; through the LM head
    alone where the model takes ``logits_to_keep``: the same numbers, bit for bit), the column of
    each position, and the output (its KV cache where ``kw`` asks for one)."""
    device = next(iter(v for v in kw.values() if isinstance(v, torch.Tensor))).device
    extra = {"logits_to_keep": torch.tensor(keep, device=device)} if keeps_logits(model) else {}
    out = call(**kw, **extra)
    logits = out.logits if extra else out.logits[:, keep]
    return logits, {p: i for i, p in enumerate(keep)}, out


def keeps_logits(model) -> bool:
    """Whether a transformers model's forward takes ``logits_to_keep`` (every causal LM of the
    decoder families does): then the LM head runs on the kept positions only."""
    return "logits_to_keep" in inspect.signature(model.forward).parameters


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
