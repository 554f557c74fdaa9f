"""One pass over each prompt for decoder classification (``run.predict``, ``eval_mode`` both or
loglik): the forward that scores the choices is also the prefill of greedy generation; choices of
several tokens and the rest of the generation continue its KV cache (docs/architecture.md,
extension point 3). :class:`OnePass` is a base of ``methods.base.Method``;
``run.predict.one_pass_blocker`` says when the separate passes stay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from tqdm.auto import tqdm
from transformers import DynamicCache

from embexp.featurize import padded
from embexp.methods.prefix import keeps_logits, kept_logits
from embexp.models import cache_kwarg


@dataclass(frozen=True)
class Greedy:
    """What greedy generation asks for: at most `max_new_tokens` (0: none); a row ends at a token of
    `stop_ids` or, where `newline_ids` is given, at a token whose text holds a newline."""

    max_new_tokens: int
    stop_ids: tuple[int, ...]
    pad_id: int
    newline_ids: tuple[int, ...] = ()


class WindowExceeded(Exception):
    """A batch would place tokens beyond the model's sliding window (the separate passes stay)."""


def sliding_window(model) -> int | None:
    """The model's sliding attention window where some layer uses one (Gemma-2), else None."""
    cfg = model.config
    window = getattr(cfg, "sliding_window", None)
    types = getattr(cfg, "layer_types", None)
    if not window or (types is not None and "sliding_attention" not in types):
        return None
    return int(window)


class OnePass:
    """Scoring and greedy generation from one forward per prompt (see the module doc)."""

    @property
    def shares_prompt_cache(self) -> bool:
        """Whether a prompt's positions read the same whatever follows them, so that the choices of
        several tokens can continue the prompt's KV cache (causal attention: yes). A method whose
        forward reads the whole input's length (TinyTE-gated) says no: its choices keep their own pass."""
        return True

    @torch.no_grad()
    def score_and_generate(self, contexts: Sequence[Sequence[int]], choices: Sequence[Sequence[Sequence[int]]],
                           batch_size: int, greedy: Greedy | None = None,
                           progress: bool = False) -> tuple[list[list[float]], list[list[int]] | None]:
        """(summed log-probability of each choice's ids given its example's context, per example;
        the greedy ids generated from each context, per example, or None without `greedy`).
        Identical contexts run once. Raises :class:`WindowExceeded` before any forward of a batch
        that would cross the model's sliding window."""
        index: dict[tuple, int] = {}
        for ctx in contexts:
            index.setdefault(tuple(ctx), len(index))
        uniq = list(index)
        wanted: list[dict[tuple, None]] = [{} for _ in uniq]  # per distinct context: its choices, in order
        for ctx, chs in zip(contexts, choices):
            wanted[index[tuple(ctx)]].update({tuple(c): None for c in chs})
        order = sorted(range(len(uniq)), key=lambda k: len(uniq[k]), reverse=True)
        scores: dict[tuple[int, tuple], float] = {}
        gens: dict[int, list[int]] = {}
        self.eval()
        for s in tqdm(range(0, len(order), batch_size), desc="one pass", disable=not progress, leave=False,
                      dynamic_ncols=True):
            chunk = order[s:s + batch_size]
            got, new = self._one_pass_batch([uniq[k] for k in chunk], [list(wanted[k]) for k in chunk], greedy)
            scores.update({(chunk[row], c): v for (row, c), v in got.items()})
            gens.update({chunk[row]: ids for row, ids in enumerate(new)})
        out = [[scores[index[tuple(ctx)], tuple(c)] for c in chs] for ctx, chs in zip(contexts, choices)]
        return out, ([gens[index[tuple(ctx)]] for ctx in contexts] if greedy is not None else None)

    def _one_pass_batch(self, ctxs: list[tuple], wanted: list[list[tuple]], greedy: Greedy | None):
        """One batch of distinct contexts: ({(row, choice): log-probability}, [generated ids per row])."""
        keys = [(c, ()) if self.prefix_mode == "replace" else ((), c) for c in ctxs]
        call, kw, ends = self._key_inputs(keys)
        mask = kw["attention_mask"]
        longest = max([len(c) - 1 for w in wanted for c in w] + [greedy.max_new_tokens if greedy else 0])
        window = sliding_window(self.backbone_model)
        if window is not None and mask.shape[1] + longest > window:
            raise WindowExceeded(f"{mask.shape[1]} + {longest} positions > sliding window {window}")
        step = self.backbone_model if self.prefix_mode and self.is_decoder else self.model
        prompts = dict(zip(("input_ids", "attention_mask"),
                           padded([list(c) for c in ctxs], self.tokenizer.pad_token_id, device=mask.device)))
        with self.generating(prompts):
            # the cache is given, as generate gives it (Tiny-Attention keeps its own keys only beside a given one)
            cache = DynamicCache(config=self.backbone_model.config)
            logits, column, _ = kept_logits(call, {**kw, "use_cache": True, cache_kwarg(self.backbone_model): cache},
                                            self.backbone_model, sorted(set(ends)))
            last = logits[torch.arange(len(ends)), [column[e] for e in ends]].float()
            seen = mask.sum(1)
            scores = self._choice_scores(step, cache, mask, seen, torch.log_softmax(last, -1), wanted)
            new = self._greedy(step, cache, mask, seen, last, greedy) if greedy is not None else []
        return scores, new

    def _choice_scores(self, step, cache, mask, seen, first: torch.Tensor, wanted: list[list[tuple]]) -> dict:
        """{(row, choice): log-probability}: the first token from the prompt's last position, the
        others from the choice's tokens read on the prompt's cache, one choice per row at a time
        (the cache is cropped back after each)."""
        out = {(row, c): first[row, c[0]].reshape(1) for row, w in enumerate(wanted) for c in w}
        longer = [[c for c in w if len(c) > 1] for w in wanted]
        device = mask.device
        for slot in range(max(map(len, longer))):
            conts = [w[slot][:-1] if slot < len(w) else () for w in longer]
            ids, tmask = padded([list(c) for c in conts], self.tokenizer.pad_token_id, device=device)
            width = ids.shape[1]
            pos = seen[:, None] + torch.arange(width, device=device)[None]
            logits = step(input_ids=ids, attention_mask=torch.cat([mask, tmask.to(mask.dtype)], 1), position_ids=pos,
                          use_cache=True, **{cache_kwarg(self.backbone_model): cache}).logits
            cache.crop(-width)
            for row, w in enumerate(longer):
                if slot < len(w):
                    c = w[slot]
                    lp = torch.log_softmax(logits[row, :len(c) - 1].float(), -1)
                    lp = lp[torch.arange(len(c) - 1), torch.tensor(c[1:], device=device)]
                    out[row, c] = torch.cat([out[row, c], lp])
        return {k: float(v.sum()) for k, v in out.items()}  # summed in fp32 as score_continuations sums

    def _greedy(self, step, cache, mask, seen, last: torch.Tensor, greedy: Greedy) -> list[list[int]]:
        """Greedy ids per row from the prompt's last logits and its cache, as ``generate`` picks them
        (argmax of the fp32 logits; an ended row reads the pad id until every row has ended)."""
        device = mask.device
        stops = torch.tensor(greedy.stop_ids + greedy.newline_ids, dtype=torch.long, device=device)
        done = torch.zeros(len(seen), dtype=torch.bool, device=device)
        new: list[list[int]] = [[] for _ in range(len(seen))]
        nxt = last.argmax(-1)
        keep = {"logits_to_keep": 1} if keeps_logits(self.backbone_model) else {}
        for k in range(greedy.max_new_tokens):
            if k:
                mask = torch.cat([mask, mask.new_ones(len(seen), 1)], 1)
                logits = step(input_ids=nxt[:, None], attention_mask=mask, position_ids=(seen + k - 1)[:, None],
                              use_cache=True, **{cache_kwarg(self.backbone_model): cache}, **keep).logits
                nxt = logits[:, -1].float().argmax(-1).masked_fill(done, greedy.pad_id)
            for row in torch.nonzero(~done).flatten().tolist():
                new[row].append(int(nxt[row]))
            done = done | torch.isin(nxt, stops)
            if bool(done.all()):
                break
        return new
