"""K-Token Merging: each block of K prompt token embeddings is merged into one embedding by a small
encoder, and a LoRA-adapted backbone reads the merged prefix followed by the answer tokens.

The paper: Xu et al., "Compressing Sequences in the Latent Embedding Space: K-Token Merging for Large
Language Models" (arXiv 2604.15153); the authors' code: shsjxzh/K-Token-Merging @8d29f47.
Training, generation, scoring and token counting go through the contract's shared path for
``prefix_mode = "replace"``. The encoder, the learning rates, the batch layout and the choices that
are ours: docs/methods_ktoken.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from embexp import EmbexpError
from embexp.core.config import option
from embexp.methods.base import Comparison, Method, cpu_copies, load_tensors
from embexp.methods.inner import InnerMethodConfig, WrapsInner, build_inner
from embexp.methods.registry import register_method

HIDDEN_FACTOR = {2: 2.0, 3: 2.0, 4: 1.5}  # the authors' DEFAULT_HIDDEN_DIM_FACTOR
INITS = ("average", "random")


@dataclass
class KTokenConfig(InnerMethodConfig):
    k: int = option(2, "Tokens merged into one embedding: 2, 3 or 4 (the authors' encoder sizes); the prompt shrinks "
                    "to ceil(n/K) positions.", choices=tuple(HIDDEN_FACTOR))
    pad_id: int = option(-1, "Token id that pads each prompt at its end to a multiple of K; -1 = the tokenizer's space "
                         "token (the authors).", ge=0, also=(-1,))
    zero_init: bool = option(True, "init=average: zero the encoder's last layer, so each merged embedding starts at "
                             "exactly its block's mean (the paper: the MLP is 'initialized close to zero so that, at "
                             "the beginning of training, its contribution is negligible'). false = PyTorch's default "
                             "init (the authors' code), whose output scale is set by the layer widths, not by the "
                             "embeddings: on small embedding tables it outweighs the block mean "
                             "(docs/methods_ktoken.md). init=random always uses the default init.")
    init: str = option(
        "average", "average: mean(block) + MLP(concat(block)) (the paper's average-initialised encoder); "
        "random: MLP(concat(block)) alone (the ablation's random initialisation; ours).", choices=INITS)
    encoder_lr: float = option(1e-4, "Peak learning rate of the merging encoder (the schedule scales it like "
                               "trainer.lr, which the inner method's tensors use). 1e-4 = the authors' single AdamW "
                               "lr, kept whatever trainer.lr the backbone's adapter uses (ours: at trainer.lr=1e-3 one "
                               "shared lr lets the 6M-parameter MLP's output outgrow the token embeddings within 40 "
                               "steps and the run diverge; docs/methods_ktoken.md); -1 = trainer.lr (one group, as the "
                               "authors' code).", gt=0, also=(-1,))


class MergingEncoder(nn.Module):
    """``mean(block) + MLP(concat(block))`` on [..., K*d] inputs -> [..., d]."""

    def __init__(self, k: int, d: int, zero_init: bool = False, average: bool = True):
        super().__init__()
        self.k, self.d, self.average = k, d, average
        h = int(HIDDEN_FACTOR[k] * k) * d
        self.net = nn.Sequential(nn.Linear(k * d, h), nn.ReLU(), nn.Linear(h, k * d), nn.ReLU(), nn.Linear(k * d, d))
        if zero_init and average:
            nn.init.zeros_(self.net[-1].weight)
            nn.init.zeros_(self.net[-1].bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net(x)
        if self.average:
            out = x.view(*x.shape[:-1], self.k, self.d).mean(-2) + out
        return out


def block_layout(input_ids: torch.Tensor, attention_mask: torch.Tensor, k: int, pad_id: int):
    """LEFT-padded prompts [B, n] -> (ids [B, M*K], block mask [B, M]): row i's n_i real tokens,
    padded at their end with ``pad_id`` to ``m_i = ceil(n_i/K)`` blocks, right-aligned; M = max m_i.
    Positions of the blocks left of a row's own are ``pad_id`` with mask 0."""
    dev = input_ids.device
    n = attention_mask.sum(1).long()
    m = (n + k - 1) // k
    width = int(m.max()) if m.numel() else 0
    pos = torch.arange(width * k, device=dev)[None]
    j = pos - (width - m[:, None]) * k  # index into the row's own tokens
    valid = (j >= 0) & (j < n[:, None])
    src = (input_ids.shape[1] - n[:, None] + j).clamp(0, max(input_ids.shape[1] - 1, 0))
    ids = input_ids.gather(1, src) if input_ids.shape[1] else input_ids.new_zeros(src.shape)
    ids = torch.where(valid, ids, torch.full_like(ids, pad_id))
    mask = (torch.arange(width, device=dev)[None] >= (width - m)[:, None]).long()
    return ids, mask


@register_method("ktoken")
class KTokenMerging(WrapsInner, Method):
    """K-Token Merging: the prompt replaced by ceil(n/K) merged embeddings (see the module doc).
    Not the identity at init (the backbone reads another sequence); export is impossible."""

    Config = KTokenConfig
    label = "K-Token merging"
    model_kinds = ("decoder",)
    identity_at_init = False  # the backbone reads ceil(n/K) merged positions for the prompt
    comparison = Comparison(rank=80, lr=1e-3)
    prefix_mode = "replace"
    export_blocker = ("the backbone reads merged K-token embeddings from a learned encoder, which no plain "
                      "transformers model holds (its input is a token per position)")

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        self.k = cfg.k
        self.pad_id = self._pad_id(cfg.pad_id, backbone)
        self.inner = build_inner(cfg, backbone)
        if self.inner is not None:
            self.model = self.inner.model  # e.g. the peft model; backbone_model stays the transformers model
        self.encoder = MergingEncoder(cfg.k, backbone.hidden_size, cfg.zero_init, cfg.init == "average")
        self.encoder.to(next(backbone.model.parameters()).device)
        self.mark_trainable()

    @staticmethod
    def _pad_id(pad_id: int, backbone) -> int:
        vocab = backbone.vocab_size
        if pad_id == -1:
            ids = backbone.tokenizer(" ", add_special_tokens=False)["input_ids"]
            if len(ids) != 1:
                raise EmbexpError("method.pad_id=-1 (the space token): the tokenizer encodes ' ' as "
                                  f"{len(ids)} tokens; set method.pad_id to a token id in 0..{vocab - 1}")
            return int(ids[0])
        if pad_id >= vocab:  # the schema allows -1 and >= 0; the vocabulary's size is the loaded model's
            raise EmbexpError(f"method.pad_id={pad_id} is outside the vocabulary (choose -1 for the space token, or "
                              f"0..{vocab - 1})")
        return pad_id

    # ---- tensors ------------------------------------------------------------------------------
    def peak_lrs(self):
        if self.cfg.encoder_lr == -1:
            return {}
        return {f"encoder.{n}": float(self.cfg.encoder_lr) for n, _ in self.encoder.named_parameters()}

    def log_values(self):
        """The inner method's values; the encoder's parameter norm (does it move?); and, for the
        last training batch, the mean L2 norm of the merged embeddings against that of their block
        means (a merged prefix far larger than the token embeddings the backbone was trained on
        buries the block mean: docs/methods_ktoken.md)."""
        with torch.no_grad():
            norm = torch.sqrt(sum((p.float() ** 2).sum() for p in self.encoder.parameters()))
        out = {**super().log_values(), "encoder_norm": float(norm)}
        if getattr(self, "_scale", None) is not None:
            out["merged_norm"], out["block_mean_norm"] = (float(v) for v in self._scale)
        return out

    def encoder_tensors(self) -> dict[str, torch.Tensor]:
        return {f"encoder.{n}": p for n, p in self.encoder.named_parameters()} if hasattr(self, "encoder") else {}

    def method_tensors(self):
        return {**self.encoder_tensors(), **super().method_tensors()}

    def trainable_state(self):
        """The encoder's tensors (``encoder.*``) and the inner method's own saved state (``inner.*``)."""
        return {**cpu_copies(self.encoder_tensors()), **super().trainable_state()}

    def load_trainable_state(self, state):
        encoder = {n: t for n, t in state.items() if n.startswith("encoder.")}
        load_tensors(self.cfg.name, self.encoder_tensors(), encoder)
        super().load_trainable_state({n: t for n, t in state.items() if n not in encoder})

    # ---- extension point 3 ----------------------------------------------------------------------
    def prefix(self, input_ids, attention_mask):
        ids, mask = block_layout(input_ids, attention_mask, self.k, self.pad_id)
        emb = self.backbone_model.get_input_embeddings()(ids)  # [B, M*K, d], the embedding module's output
        b, width = mask.shape
        x = emb.reshape(b, width, self.k * emb.shape[-1])
        merged = self.encoder(x.to(self.encoder.net[0].weight.dtype))
        if self.training:  # the scale the backbone reads, against the block means (log_values; detached, no sync)
            with torch.no_grad():
                real = mask.bool()
                self._scale = (merged[real].float().norm(dim=-1).mean(),
                               x.view(b, width, self.k, -1).mean(-2)[real].float().norm(dim=-1).mean())
        return merged * mask.unsqueeze(-1).to(merged.dtype), mask
