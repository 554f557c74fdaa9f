"""PEMA: Partial Embedding Matrix Adaptation (Williams and Aletras, arXiv 2309.08708; Sec. 4).

Before training, count the tokens of the configured splits, keep only the input-embedding rows of
the tokens that occur (plus pad and every special token), train those rows with the wrapped method
(full fine-tuning by default, or embedding tuning: ``method.inner``), and merge them back into the
full matrix, so what is saved or exported has the original shapes and vocabulary. Ids are remapped
inside the model (a pre-hook on the embedding module, which keeps its class, so Gemma-2's scaling
still applies); ids outside the kept set read their original row from a memory-mapped file.
Design choices and how they differ from the paper and the authors' code: docs/pema.md.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import torch
from torch import nn

from embexp import EmbexpError
from embexp.core.config import option
from embexp.methods.base import Comparison, Method
from embexp.methods.inner import InnerMethodConfig, build_inner
from embexp.methods.registry import register_method, registered
from embexp.models import untie_embeddings

SPLITS = ("train", "eval", "test")


def embedding_trainers() -> tuple[str, ...]:
    """What PEMA can wrap: the methods that train the input embedding matrix itself."""
    return tuple(sorted(n for n, c in registered().items() if c.trains_embedding_matrix))


@dataclass
class PEMAConfig(InnerMethodConfig):
    inner: str = option("full_ft", "The method PEMA wraps; it must train the input embedding matrix "
                        "(Method.trains_embedding_matrix: full_ft, emb_tuning). Its own fields through inner_args.",
                        choices=embedding_trainers)
    count_splits: list = option(["train"], "Splits whose tokens are counted: train, eval (the rows this run trains and "
                                "evaluates on) and test (the task's test split, only counted: hidden labels allowed). "
                                "Default train (ours): the rows a run updates, the true memory saving, and no test "
                                "text read; uncounted ids keep reading their original rows, so predictions change only "
                                "through weight decay on the extra rows. The paper's tables count train+eval+test as "
                                "the authors' run_glue_pema.py does under --do_predict (the pema make targets pass "
                                "it).", choices=SPLITS)
    keep_special: bool = option(True, "Keep the rows of every special token even when absent from the counted splits "
                                "(ours; pad is always kept).")


def count_tokens(seqs: Iterable[Sequence[int]], vocab_size: int) -> np.ndarray:
    """Occurrences of each id in `seqs` (lists of ids): one flat int64 array, one ``np.bincount``."""
    seqs = seqs if isinstance(seqs, (list, tuple)) else list(seqs)
    n = sum(map(len, seqs))
    flat = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64, count=n)
    if n and (flat.min() < 0 or flat.max() >= vocab_size):
        raise EmbexpError(f"token ids must lie in [0, {vocab_size}) (the embedding rows); got "
                          f"{flat.min()}..{flat.max()}")
    return np.bincount(flat, minlength=vocab_size)


class RowStore:
    """The original embedding rows in a memory-mapped temporary file (off the accelerator), read on demand."""

    def __init__(self, weight: torch.Tensor):
        w = weight.detach().to("cpu").contiguous()
        self.dtype, self.rows_total = w.dtype, w.shape[0]
        raw = w.view(torch.uint8).reshape(w.shape[0], -1)  # bytes: works for any dtype (bf16 too)
        self._file = tempfile.TemporaryFile(prefix="embexp-pema-")
        self._mm = np.memmap(self._file, dtype=np.uint8, mode="w+", shape=tuple(raw.shape))
        self.write(w)

    def write(self, weight: torch.Tensor) -> None:
        self._mm[:] = (weight.detach().to("cpu", self.dtype).contiguous()
                       .view(torch.uint8).reshape(self._mm.shape).numpy())
        self._mm.flush()

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(self._mm[ids.detach().cpu().numpy()])).view(self.dtype)

    def full(self) -> torch.Tensor:
        return torch.from_numpy(np.array(self._mm)).view(self.dtype)


@register_method("pema")
class PEMA(Method):
    """PEMA over an inner method: only the embedding rows of tokens in the data train, merged back after."""

    Config = PEMAConfig
    label = "PEMA"
    comparison = Comparison(rank=30, lr=1e-4)

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        self.inner = build_inner(cfg, backbone)  # composition: the inner method owns the trainable tensors
        emb = self.model.get_input_embeddings()
        if not isinstance(emb, nn.Embedding):
            raise EmbexpError(f"pema needs an nn.Embedding input embedding, got {type(emb).__name__}")
        # the schema admits only inners that claim trains_embedding_matrix; this checks the claim on the loaded model
        if self.inner is None or not any(p is emb.weight for p in self.inner.trainable_tensors().values()):
            raise EmbexpError(f"method.inner '{cfg.inner}' does not train the input embedding matrix of "
                              f"{type(self.model).__name__}")
        self.vocab_rows, self.hidden = emb.weight.shape
        self.special = backbone.special_ids() if cfg.keep_special else []
        self.pad_id = backbone.tokenizer.pad_token_id
        self.active = False
        self.store: RowStore | None = None
        self._hooks: list = []
        self.stats: dict[str, float] = {}

    # ---- the inner method owns the tensors ---------------------------------------------------
    @classmethod
    def counted_only(cls, cfg) -> tuple[str, ...]:
        return ("test",) if "test" in cfg.count_splits else ()

    def method_tensors(self):
        return self.inner.method_tensors()

    def trainable_tensors(self):
        return self.inner.trainable_tensors()

    def attach_objective(self, objective):
        super().attach_objective(objective)
        self.inner.attach_objective(objective)  # the inner method owns (and saves) the trainable tensors

    def _embedding_key(self) -> str:
        w = self.model.get_input_embeddings().weight
        return next(k for k, p in self.inner.trainable_tensors().items() if p is w)

    # ---- setup: count, build the partial matrix and the id map -------------------------------
    def setup(self, token_ids: dict[str, list[list[int]]]) -> None:
        if self.active:
            raise EmbexpError("pema: setup() was already called on this method")
        t0 = time.perf_counter()
        missing = [s for s in self.cfg.count_splits if s not in token_ids]
        if missing:
            raise EmbexpError(f"pema: no token ids for split(s) {', '.join(missing)} (given: {', '.join(token_ids)})")
        seqs = [s for split in self.cfg.count_splits for s in token_ids[split]]
        counts = count_tokens(seqs, self.vocab_rows)
        emb = self.model.get_input_embeddings()
        keep = counts > 0
        always = [i for i in [*self.special, self.pad_id, emb.padding_idx]
                  if i is not None and 0 <= i < self.vocab_rows]
        keep[np.asarray(always, dtype=np.int64)] = True
        kept = np.flatnonzero(keep)
        token_map = np.full(self.vocab_rows, -1, dtype=np.int32 if self.vocab_rows < 2**31 else np.int64)
        token_map[kept] = np.arange(len(kept))
        self.register_buffer("token_map", torch.from_numpy(token_map), persistent=False)
        self.register_buffer("kept_ids", torch.from_numpy(kept), persistent=False)

        weight = emb.weight
        self.store = RowStore(weight)
        untie_embeddings(self.model)  # tied: the head keeps its own full copy (authors' behaviour)
        self._padding_idx = emb.padding_idx
        emb.weight = nn.Parameter(weight.detach()[torch.from_numpy(kept)].clone(), requires_grad=False)
        emb.num_embeddings = len(kept)
        if emb.padding_idx is not None:
            emb.padding_idx = int(token_map[emb.padding_idx])
        del weight
        self._install_hooks(emb)
        self.active = True
        self.mark_trainable()
        self.stats = {
            "pema_setup_seconds": time.perf_counter() - t0,
            "pema_counted_tokens": float(counts.sum()),
            "pema_vocab_rows": float(self.vocab_rows),
            "pema_kept_rows": float(len(kept)),
            "pema_removed_param_bytes": float((self.vocab_rows - len(kept)) * self.hidden * emb.weight.element_size()),
        }

    def _install_hooks(self, emb: nn.Embedding) -> None:
        scale = self.embed_scale
        stash = {}

        def remap(mod, args):
            ids = args[0]
            local = self.token_map[ids]
            stash["ids"], stash["local"] = ids, local
            return (local.clamp(min=0), *args[1:])

        def fill_absent(mod, args, out):
            ids, local = stash.pop("ids"), stash.pop("local")
            absent = local < 0
            if not bool(absent.any()):
                return out
            uniq, inv = torch.unique(ids[absent], return_inverse=True)
            rows = self.store.rows(uniq).to(device=out.device, dtype=out.dtype)
            rows = rows * scale if scale != 1.0 else rows
            out = out.clone()
            out[absent] = rows[inv]
            return out

        self._hooks = [emb.register_forward_pre_hook(remap), emb.register_forward_hook(fill_absent)]

    # ---- merging, state, export --------------------------------------------------------------
    @torch.no_grad()
    def merged_weight(self) -> torch.Tensor:
        """The full (V, d) matrix on the CPU: trained kept rows over the original others."""
        emb = self.model.get_input_embeddings()
        if not self.active:
            return emb.weight.detach().to("cpu").clone()
        full = self.store.full().clone()
        full[self.kept_ids.cpu()] = emb.weight.detach().to("cpu", full.dtype)
        return full

    @torch.no_grad()
    def merge(self) -> None:
        """Fold the rows back into a full embedding weight in place and drop the hooks."""
        if not self.active:
            return
        emb = self.model.get_input_embeddings()
        full = self.merged_weight().to(emb.weight.device)
        trainable = emb.weight.requires_grad
        for h in self._hooks:
            h.remove()
        emb.weight = nn.Parameter(full, requires_grad=trainable)
        emb.num_embeddings, emb.padding_idx = self.vocab_rows, self._padding_idx
        self.active, self.store, self._hooks = False, None, []

    def trainable_state(self) -> dict[str, torch.Tensor]:
        state = self.inner.trainable_state()
        if self.active:
            state[self._embedding_key()] = self.merged_weight()
        return state

    def load_trainable_state(self, state: dict[str, torch.Tensor]) -> None:
        if self.active:
            key = self._embedding_key()
            w = state.get(key)
            if w is not None and w.shape[0] == self.vocab_rows:
                self.store.write(w)
                state = {**state, key: w[self.kept_ids.cpu()]}
        self.inner.load_trainable_state(state)

    def export(self) -> nn.Module:
        self.merge()
        return self.inner.export()

    def log_values(self) -> dict[str, float]:
        return dict(self.stats)

