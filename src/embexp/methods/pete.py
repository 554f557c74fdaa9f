"""PETE: Parameter-Efficient Transformer Embeddings (arXiv 2505.02266; the authors' code: HMUNACHI/pete).

The V x d embedding table is replaced by deterministic Fourier features of the token id, refined by
a small residual MLP (``variant=paper``) or by the authors' ``RMSNorm(Linear(T) + T)``
(``variant=code``); :class:`PETEEmbedding` takes the place of the backbone's input embedding
module and ``export()`` gives a plain model whose table holds E(p) for every id.
The formulas and the design choices (ours where the paper and the code are silent or disagree):
docs/methods_pete.md.
"""

from __future__ import annotations

import copy
import math
from contextlib import suppress
from dataclasses import dataclass

import torch
from torch import nn

from embexp import EmbexpError
from embexp.core.config import option
from embexp.methods.base import Method, MethodConfig
from embexp.methods.pema import count_tokens
from embexp.methods.registry import register_method
from embexp.models import untie_embeddings

KERNELS = ("fourier",)  # the authors' repository also has Chebyshev/Legendre/Hermite/Laguerre kernels; unused there
NORMS = ("vocab", "seq_len")
VARIANTS = ("paper", "code")
ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU, "silu": nn.SiLU, "tanh": nn.Tanh}


@dataclass
class PETEConfig(MethodConfig):
    kernel: str = option("fourier", "Expansion of the normalised id: fourier (sin/cos pairs, the paper's and the only "
                         "kernel the authors use).", choices=KERNELS)
    norm: str = option("vocab", "Id normalisation x = 2p/D - 1: vocab (D = V-1, the paper) or seq_len (D = "
                       "max_seq_len-1, the authors' kernel).", choices=NORMS)
    max_seq_len: int = option(128, "norm=seq_len: the authors' max_seq_len (their default 128, so D = 127).", ge=2)
    variant: str = option("paper", "paper: E = MLP(T) + T; code: E = RMSNorm(Linear(T) + T) (the authors' repository).",
                          choices=VARIANTS)
    mlp_layers: int = option(2, "variant=paper: Linear layers of the MLP (1 = one Linear d->d; 2 = d->h->d). Ours: 2, "
                             "the smallest 'MLP' with a non-linearity.", ge=1)
    mlp_ratio: float = option(0.5, "variant=paper: hidden width h = round(ratio * d). Ours: 0.5 ('small'; with it the "
                              "paper's MLP has as many parameters as the code's Linear, so both give the paper's "
                              "8.9M).", gt=0)
    activation: str = option("gelu", "variant=paper: activation between the MLP's layers: gelu, relu, silu or tanh "
                             "(ours: gelu).", choices=tuple(ACTIVATIONS))
    rms_eps: float = option(1e-6, "variant=code: RMSNorm epsilon (the authors' 1e-6).", gt=0)
    zero_init: bool = option(False, "Start the MLP's last layer at zero, so E = T at initialisation (variant=paper; "
                             "ours, off: PyTorch's default init as the authors).")
    rank_by_frequency: bool = option(False, "Replace each id by its rank in the training split's token counts (most "
                                     "frequent first, ties by id) before normalising; the paper's suggestion.")
    train_backbone: bool = option(True, "Also train every other backbone parameter (the paper trains the encoder from "
                                  "scratch with PETE); false: only the PETE module (and an encoder's head).")


def fourier_features(p: torch.Tensor, dim: int, denominator: int) -> torch.Tensor:
    """T(p) for integer ids ``p`` [...]: [..., dim] float32 with T_i = sin((i//2+1) pi x) for even
    i and cos(...) for odd i, x = 2p/D - 1. Exact range reduction in integers: with
    r = (k p) mod D, k pi x = 2 pi r / D - k pi (mod 2 pi), so sin = (-1)^k sin(2 pi r/D) and
    cos = (-1)^k cos(2 pi r/D)."""
    k = torch.arange(1, dim // 2 + 1, device=p.device, dtype=torch.long)
    r = torch.remainder(p.long().unsqueeze(-1) * k, denominator)
    theta = r.to(torch.float64 if denominator >= 2**24 else torch.float32) * (2 * math.pi / denominator)
    sign = (1 - 2 * (k % 2)).to(torch.float32)  # (-1)^k
    out = torch.stack([torch.sin(theta).float() * sign, torch.cos(theta).float() * sign], dim=-1)
    return out.reshape(*p.shape, dim)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * w, as in the authors' repository."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps))


class PETEEmbedding(nn.Module):
    """Drop-in replacement of an input embedding module: ids [...] -> E(p) [..., d] (times the
    family's embedding scale). Holds no V x d tensor; ``table()`` builds one for export only."""

    def __init__(self, cfg: PETEConfig, vocab_size: int, dim: int, scale: float = 1.0, padding_idx=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim, self.padding_idx = vocab_size, dim, padding_idx
        self.variant, self.scale = cfg.variant, scale
        self.denominator = vocab_size - 1 if cfg.norm == "vocab" else cfg.max_seq_len - 1
        if self.denominator < 1:  # norm=vocab: the loaded model's vocabulary size (the schema bounds max_seq_len)
            raise EmbexpError(f"method=pete: the normaliser D={self.denominator} must be >= 1 "
                              f"(norm={cfg.norm}, vocab size {vocab_size}, max_seq_len {cfg.max_seq_len})")
        self.rank: torch.Tensor | None = None  # id -> frequency rank (rank_by_frequency), set by setup
        if cfg.variant == "code":
            self.linear = nn.Linear(dim, dim)
            self.norm = RMSNorm(dim, cfg.rms_eps)
            last = self.linear
        else:
            hidden = max(1, round(cfg.mlp_ratio * dim))
            widths = [dim] + [hidden] * (cfg.mlp_layers - 1) + [dim]
            layers: list[nn.Module] = []
            for i in range(cfg.mlp_layers):
                layers.append(nn.Linear(widths[i], widths[i + 1]))
                if i < cfg.mlp_layers - 1:
                    layers.append(ACTIVATIONS[cfg.activation]())
            self.mlp = nn.Sequential(*layers)
            last = self.mlp[-1]
        if cfg.zero_init:
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)

    @property
    def first_weight(self) -> torch.Tensor:
        """The first layer's weight: where the module's dtype and device are read."""
        return self.linear.weight if self.variant == "code" else self.mlp[0].weight

    def positions(self, ids: torch.Tensor) -> torch.Tensor:
        """p: the id itself, or its frequency rank."""
        return ids if self.rank is None else self.rank.to(ids.device)[ids]

    def features(self, ids: torch.Tensor) -> torch.Tensor:
        """T(p) [..., d], float32."""
        return fourier_features(self.positions(ids), self.embedding_dim, self.denominator)

    def refine(self, t: torch.Tensor) -> torch.Tensor:
        """E from T."""
        t = t.to(self.first_weight.dtype)
        if self.variant == "code":
            return self.norm(self.linear(t) + t)
        return self.mlp(t) + t

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        e = self.refine(self.features(input_ids))
        return e * self.scale if self.scale != 1.0 else e

    @torch.no_grad()
    def table(self, chunk: int = 8192) -> torch.Tensor:
        """E(p) for every id, [V, d] float32 (what a plain embedding table must hold)."""
        ids = torch.arange(self.num_embeddings, device=self.first_weight.device)
        return torch.cat([self.refine(self.features(ids[i:i + chunk])).float() for i in range(0, len(ids), chunk)])


@register_method("pete")
class PETE(Method):
    """PETE: the input embedding table becomes Fourier features of the id plus a residual MLP."""

    Config = PETEConfig
    label = "PETE"
    model_kinds = ("decoder", "encoder", "scratch")
    identity_at_init = False  # the table is replaced by E(p)
    # not in the comparison: an embedding trained from scratch with its encoder (make pete_table)

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        model = self.model
        name = type(model).__name__
        emb = None
        with suppress(NotImplementedError):
            emb = model.get_input_embeddings()
        if not isinstance(emb, nn.Embedding):
            raise EmbexpError(f"method=pete replaces an nn.Embedding input table; {name} has "
                              f"{type(emb).__name__ if emb is not None else 'no input embedding'}, "
                              "which cannot be swapped")
        vocab, dim = emb.weight.shape
        if dim % 2:
            raise EmbexpError(f"method=pete needs an even embedding dimension (sin/cos pairs); {name} embeds "
                              f"tokens in d={dim}")
        pete = PETEEmbedding(cfg, vocab, dim, self.embed_scale, emb.padding_idx)
        if emb.weight.device.type != "meta":
            pete.to(emb.weight.device)
            if emb.weight.is_floating_point():
                pete.to(emb.weight.dtype)
        untie_embeddings(model)  # a tied head keeps its own (frozen) copy of the table
        with suppress(NotImplementedError):
            model.set_input_embeddings(pete)
        if model.get_input_embeddings() is not pete:
            raise EmbexpError(f"method=pete: {name}.set_input_embeddings does not swap its embedding module, so the "
                              "table cannot be replaced")
        # The original module, kept off the module tree with an empty weight: export() rebuilds a
        # plain table of the same class (and scale) from it. Its V x d weight is released here.
        emb.weight = nn.Parameter(emb.weight.new_empty(0, dim), requires_grad=False)
        object.__setattr__(self, "_orig_embedding", emb)
        object.__setattr__(self, "pete", pete)  # lives in self.model; not registered twice
        self.mark_trainable()

    # ---- tensors -----------------------------------------------------------------------------
    def method_tensors(self):
        own = {f"pete.{n}": p for n, p in self.pete.named_parameters()}
        if self.cfg.train_backbone:
            skip = {id(p) for p in self._head.values()} | {id(p) for p in own.values()}
            own.update({f"model.{n}": p for n, p in self.model.named_parameters() if id(p) not in skip})
        return own

    def log_values(self) -> dict[str, float]:
        n = lambda ps: float(sum(p.numel() for p in {id(p): p for p in ps}.values()))  # noqa: E731
        return {"pete_module_params": n(self.pete.parameters()), "model_params": n(self.model.parameters())}

    # ---- data: frequency ranks ---------------------------------------------------------------
    def setup(self, token_ids: dict[str, list[list[int]]]) -> None:
        if not self.cfg.rank_by_frequency:
            return
        seqs = token_ids.get("train") or []
        if not seqs:
            raise EmbexpError("method.rank_by_frequency=true needs training token ids to count (the train "
                              "split is empty)")
        counts = torch.from_numpy(count_tokens(seqs, self.pete.num_embeddings))
        order = sorted(range(len(counts)), key=lambda i: (-int(counts[i]), i))  # most frequent first, ties by id
        self.set_rank(torch.tensor(order, dtype=torch.long).argsort())

    def set_rank(self, rank: torch.Tensor) -> None:
        v = self.pete.num_embeddings
        rank = rank.long().cpu()
        if rank.shape != (v,) or not torch.equal(rank.sort().values, torch.arange(v)):
            raise EmbexpError(f"method=pete: a frequency ranking must be a permutation of the {v} ids")
        self.pete.rank = rank

    def trainable_state(self):
        state = super().trainable_state()
        if self.pete.rank is not None:
            state["rank"] = self.pete.rank.clone()
        return state

    def load_trainable_state(self, state):
        state = dict(state)
        if self.cfg.rank_by_frequency:
            if "rank" not in state:
                raise EmbexpError("adapter does not match method pete: rank_by_frequency=true but it has no "
                                  "'rank' tensor")
            self.set_rank(state.pop("rank"))
        super().load_trainable_state(state)

    # ---- export --------------------------------------------------------------------------------
    @torch.no_grad()
    def export(self) -> nn.Module:
        """A plain model of the backbone's class whose input table holds E(p) for every id (the
        family's embedding scale, e.g. Gemma-2's sqrt(d), applies on top as before)."""
        table = self.pete.table()
        model = copy.deepcopy(self.model)
        emb = copy.deepcopy(self._orig_embedding)
        ref = self.pete.first_weight
        emb.weight = nn.Parameter(table.to(device=ref.device, dtype=ref.dtype))
        model.set_input_embeddings(emb)
        model.train(False)
        return model
