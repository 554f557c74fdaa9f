"""TinyTE: steer an LLM by adding one learned vector to its input token embeddings.

The TinyTE paper (Tavares et al., EMNLP 2025), Sec. 3: ``T(e) = e + b`` on every non-special token
(Eq. 2). One class, :class:`TinyTE`, does the four variants; each registered name picks a config
schema and a :class:`Variant`, which says the dims ``b`` reaches: full (Sec. 3.1), half (first k
ranked dims, Sec. 3.2), gated (a length gate, Sec. 3.3) and hybrid (full plus a prompt token, Sec. 4.1).
Why ``b`` lives in the rows' space and is added as ``embed_scale * b``, and the choices that are
ours: docs/methods_tinyte.md.
"""

from __future__ import annotations

import copy
import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from embexp import EmbexpError, import_extra
from embexp.core.config import option
from embexp.methods.base import Comparison, Method, MethodConfig, embedding_hook
from embexp.methods.peft_baselines import init_prompt, prompt_tuning_model, virtual_tokens
from embexp.methods.registry import register_method
from embexp.models import untie_embeddings

RANKINGS = ("variance", "random", "integrated_gradients")
SELECTS = ("lowest", "highest")
LENGTH_SOURCES = ("prompt", "sequence")


# ---- config schemas (one per registered name) --------------------------------------------------
@dataclass
class TinyTEConfig(MethodConfig):
    shift_special: bool = option(False, "Also shift special tokens (never in the paper; for ablations only).")


@dataclass
class TinyTERankedConfig(TinyTEConfig):
    ranking: str = option("variance", "Order of the embedding dims: variance (across the vocabulary of the frozen "
                          "input table, non-special rows, fp32; the paper's choice), random (seeded by rank_seed) or "
                          "integrated_gradients (captum; needs a decoder and training data; recipe ours, see "
                          "docs/methods_tinyte.md).", choices=RANKINGS)
    select: str = option("lowest", "Which end of the ranking comes first: lowest (the paper: lowest variance) or "
                         "highest score. Ignored by ranking=random.", choices=SELECTS)
    rank_seed: int = option(0, "Seed of ranking=random (ours: a torch.Generator permutation).")
    ig_batches: int = option(4, "ranking=integrated_gradients: number of training batches attributed (ours).", ge=1)
    ig_batch_size: int = option(4, "ranking=integrated_gradients: sequences per batch (ours).", ge=1)
    ig_steps: int = option(16, "ranking=integrated_gradients: Riemann steps of the path integral (ours).", ge=1)


@dataclass
class TinyTEHalfConfig(TinyTERankedConfig):
    p: float = option(0.5, "Portion of dims shifted: k = floor(p*d) dims, the first k of the ranking (paper: p = 0.5).",
                      gt=0, le=1)


@dataclass
class TinyTEGatedConfig(TinyTERankedConfig):
    steepness: float = option(1000.0, "h in G_i = sigmoid(h*(d_i - p(l))) (paper: 1000).", gt=0)
    length_scale: float = option(1.0, "Ours, not in the paper: p(l) = sigmoid(alpha*l/length_scale + beta). 1 = the "
                                 "paper's p(l) = sigmoid(alpha*l + beta) with l in tokens; 100 = embexp's former "
                                 "default (l in hundreds of tokens, so alpha*l stays of order 1).", gt=0)
    alpha_init: float = option(0.0, "Initial alpha (ours, the paper gives none: 0, so p does not depend on the length "
                               "at init).")
    beta_init: float = option(0.0, "Initial beta (ours, the paper gives none: 0, so p = sigmoid(0) = 0.5 at init for "
                              "every length, as TinyTE-half).")
    length_source: str = option(
        "prompt", "What l counts (ours): prompt = the prompt's tokens (the batch's prompt_lengths, "
        "which the trainer passes whatever task.loss_on is; without it, the non-pad tokens whose "
        "labels are -100, else every non-pad token); sequence = every non-pad token. Generation "
        "always uses the prompt's length, kept during decoding.", choices=LENGTH_SOURCES)


@dataclass
class TinyTEHybridConfig(TinyTEConfig):
    init_token: str = option("bos", "Initial value of the prompt token (ours): bos = the embedding row of the "
                             "tokenizer's BOS token (CLS, then EOS when it has none); any other text = the embedding "
                             "row of that text's first token.")


# ---- the variants' strategy ---------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    """What makes a TinyTE variant; everything else is shared.

    mask: which dims b reaches. ``all`` every dim (b in R^d); ``first_k`` the first k = floor(p*d)
    dims of a ranking (b in R^k, Eq. 3); ``gate`` every dim, weighted by 1 - G_i(l) (Eq. 5).
    prompt_tokens: learned prompt tokens prepended to the input (hybrid: 1).
    """

    mask: str = "all"
    prompt_tokens: int = 0

    @property
    def ranked(self) -> bool:
        """Needs an order of the embedding dims (saved with the adapter as ``ranking``)."""
        return self.mask in ("first_k", "gate")


def rank_dims(weight: torch.Tensor, rows: torch.Tensor, how: str, select: str = "lowest",
              seed: int = 0) -> torch.Tensor:
    """All d dims in order of preference: ``ranking[:k]`` are the dims a masked variant shifts."""
    d = weight.shape[1]
    if how == "random":
        return torch.randperm(d, generator=torch.Generator().manual_seed(seed))
    if how == "variance":
        score = weight.detach()[rows.to(weight.device)].float().var(dim=0).cpu()
        return torch.sort(score, descending=select == "highest", stable=True).indices
    raise EmbexpError(f"unknown method.ranking '{how}' (choose from: {', '.join(RANKINGS)})")


class TinyTE(Method):
    """TinyTE, every variant: ``e + embed_scale * delta`` on the embedding output of each non-special
    token, ``delta`` from ``b`` and the variant's mask or gate (:meth:`delta`).

    Trainable tensors, in this order (the adapter's keys): ``bias`` (d entries, k for first_k),
    ``alpha`` and ``beta`` (gate), ``prompt`` (prompt tokens); a ranked variant also saves
    ``ranking``. b = 0 at init, so every variant without prompt tokens is the identity.
    """

    Config = TinyTEConfig
    variant: ClassVar[Variant] = Variant()
    decoder_only = {"ranking": "integrated_gradients"}  # it attributes the LM loss (the base class's check_run)

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        v, d = self.variant, backbone.hidden_size
        shift = torch.ones(backbone.vocab_size, dtype=torch.bool) if cfg.shift_special else ~backbone.special_mask()
        self.register_buffer("shift_mask", shift, persistent=False)
        self.k = d
        if v.mask == "first_k":
            if math.floor(cfg.p * d) < 1:  # the schema bounds p to (0, 1]; d is the loaded model's
                raise EmbexpError(f"method.p={cfg.p} selects no dims of d={d} (choose 0 < p <= 1 with floor(p*d) >= 1)")
            self.k = math.floor(cfg.p * d)
        self.bias = nn.Parameter(torch.zeros(self.k, dtype=torch.float32))
        self._tensors = {"bias": self.bias}
        if v.mask == "gate":
            self._init_gate(cfg, backbone)
        self.ranking_set = not v.ranked
        if v.ranked:
            self._init_ranking(cfg, backbone)
        self._hook = embedding_hook(self.model.get_input_embeddings(), self.shift)
        if v.prompt_tokens:
            self._init_prompt(cfg)

    @classmethod
    def composable(cls) -> bool:
        """full and half shift through the embedding hook alone, so K-Token merging can run them
        inside its forward; gated reads each input's length in its own forward and hybrid prepends."""
        return cls.variant.mask != "gate" and not cls.variant.prompt_tokens

    def method_tensors(self):
        return dict(self._tensors)

    # ---- the shift ----------------------------------------------------------------------------
    def delta(self, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """What is added to each shifted token's raw embedding row: [d], or [batch, d] for the gate."""
        if self.variant.mask == "all":
            return self.bias
        self.check_ranked()
        if self.variant.mask == "first_k":  # Eq. 3: m ⊙ b, the k entries on the first k ranked dims
            return self.bias.new_zeros(self.ranking.numel()).scatter(0, self.dims(), self.bias)
        return self.bias * (1.0 - self.gate(lengths))  # Eq. 5

    def shift(self, input_ids: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        """The embedding hook: ``embeds`` is the module's (scaled) output, so the shift is scaled too."""
        lengths = self._gate_lengths(input_ids, embeds.shape[0]) if self.variant.mask == "gate" else None
        delta = (self.embed_scale * self.delta(lengths)).to(embeds.dtype)
        mask = self.shift_mask[input_ids].unsqueeze(-1).to(embeds.dtype)
        return embeds + mask * delta.view(-1, 1, delta.shape[-1])

    def forward(self, **batch):
        with self._input_lengths(batch):
            return super().forward(**batch)  # hybrid: the contract's shared prefix path

    @contextmanager
    def generating(self, kw: dict):
        with self._input_lengths({k: kw.get(k) for k in ("input_ids", "attention_mask")}):
            yield

    @property
    def shares_prompt_cache(self) -> bool:  # the gate reads the whole input's length (methods/onepass.py)
        return self.variant.mask != "gate"

    def prefix(self, input_ids, attention_mask):
        """Hybrid (``prefix_mode='prepend'``): the learned prompt token(s), before the whole input."""
        return virtual_tokens(self.model, input_ids.shape[0])

    def export(self):
        self.check_export()
        model = copy.deepcopy(self.model)
        emb = model.get_input_embeddings()
        emb._forward_hooks.clear()
        untie_embeddings(model)
        with torch.no_grad():  # (e + b) * scale: the row gets b itself, the module scales it
            rows = self.shift_mask.nonzero().squeeze(-1)
            emb.weight[rows] += self.delta().detach().to(emb.weight.dtype)
        return model

    # ---- ranking (first_k, gate) --------------------------------------------------------------
    def _init_ranking(self, cfg, backbone) -> None:
        self.register_buffer("ranking", torch.arange(backbone.hidden_size), persistent=False)
        if cfg.ranking != "integrated_gradients":  # integrated gradients needs data: setup()
            rows = (~backbone.special_mask()).nonzero().squeeze(-1)
            self.set_ranking(rank_dims(self.model.get_input_embeddings().weight, rows, cfg.ranking, cfg.select,
                                       cfg.rank_seed))

    def dims(self) -> torch.Tensor:
        """first_k: the k shifted dims, in ranking order."""
        return self.ranking[: self.k]

    def set_ranking(self, ranking: torch.Tensor) -> None:
        ranking = torch.as_tensor(ranking).to(torch.long).flatten()
        if not torch.equal(torch.sort(ranking.cpu()).values, torch.arange(self.ranking.numel())):
            raise EmbexpError(f"method {self.cfg.name}: 'ranking' is not a permutation of the {self.ranking.numel()} "
                              "embedding dims")
        self.ranking.copy_(ranking.to(self.ranking.device))
        self.ranking_set = True
        if self.variant.mask == "gate":
            self._set_position()

    def check_ranked(self) -> None:
        if not self.ranking_set:
            raise EmbexpError(f"method {self.cfg.name}: ranking=integrated_gradients is computed in setup() from "
                              "training data; call setup() or load an adapter first")

    def setup(self, token_ids):
        if self.variant.ranked and self.cfg.ranking == "integrated_gradients":
            scores = self.ig_scores(token_ids.get("train") or [])
            self.set_ranking(torch.sort(scores, descending=self.cfg.select == "highest", stable=True).indices)

    def ig_scores(self, seqs: list[list[int]]) -> torch.Tensor:
        """Summed |integrated gradients| per embedding dim of the per-sequence LM loss (the recipe, ours:
        docs/methods_tinyte.md, "Integrated-gradients ranking")."""
        from embexp.featurize import IGNORE, collate

        captum_attr = import_extra("captum.attr", "attribution", "method.ranking=integrated_gradients")

        cfg = self.cfg  # on a decoder: the pre-flight refused another model (decoder_only)
        seqs = [s for s in seqs if len(s) > 1][: cfg.ig_batches * cfg.ig_batch_size]
        if not seqs:
            raise EmbexpError("method.ranking=integrated_gradients needs training sequences (setup got no 'train' ids)")
        model, emb = self.model, self.model.get_input_embeddings()
        if torch.cuda.is_available() and emb.weight.device.type != "cuda":
            self.to("cuda")  # run.build moves the method to its device after setup anyway
        dev, was_training = emb.weight.device, model.training
        model.eval()
        scale = self.embed_scale
        base = (emb.weight.detach()[self.shift_mask.to(dev)].float().mean(0) * scale).to(emb.weight.dtype)

        def loss(x, mask, labels):
            logits = model(inputs_embeds=x, attention_mask=mask).logits.float()
            ce = nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:], reduction="none",
                                             ignore_index=IGNORE)
            keep = (labels[:, 1:] != IGNORE).float()
            return (ce * keep).sum(1) / keep.sum(1).clamp(min=1.0)

        ig, scores = captum_attr.IntegratedGradients(loss), torch.zeros(emb.weight.shape[1], dtype=torch.float64)
        pad_id = self.tokenizer.pad_token_id
        for i in range(0, len(seqs), cfg.ig_batch_size):
            batch = collate([{"input_ids": s} for s in seqs[i:i + cfg.ig_batch_size]], pad_id)
            ids, mask = batch["input_ids"].to(dev), batch["attention_mask"].to(dev)
            x = (emb.weight.detach()[ids] * scale).to(emb.weight.dtype)  # the embedding output, no hook
            labels = ids.masked_fill(mask == 0, IGNORE)
            attr = ig.attribute(x, baselines=base.expand_as(x), additional_forward_args=(mask, labels),
                                n_steps=cfg.ig_steps, method="riemann_middle", internal_batch_size=ids.shape[0])
            keep = (mask.bool() & self.shift_mask.to(dev)[ids]).unsqueeze(-1)
            scores += (attr.detach().abs().double() * keep).sum((0, 1)).cpu()
        model.train(was_training)
        return scores.float()

    def trainable_state(self):
        state = super().trainable_state()
        if self.variant.ranked:
            self.check_ranked()
            state["ranking"] = self.ranking.detach().cpu().clone()
        return state

    def load_trainable_state(self, state):
        state = dict(state)
        if self.variant.ranked:
            if "ranking" not in state:
                raise EmbexpError(f"adapter does not match method {self.cfg.name}: it has no 'ranking' tensor")
            self.set_ranking(state.pop("ranking"))
        super().load_trainable_state(state)

    # ---- the length gate (Eq. 4-5) ------------------------------------------------------------
    def _init_gate(self, cfg, backbone) -> None:
        self.alpha = nn.Parameter(torch.tensor(float(cfg.alpha_init)))
        self.beta = nn.Parameter(torch.tensor(float(cfg.beta_init)))
        self._tensors.update(alpha=self.alpha, beta=self.beta)
        # d_i, set with the ranking
        self.register_buffer("position", torch.zeros(backbone.hidden_size), persistent=False)
        self.pad_id = backbone.tokenizer.pad_token_id
        self._lengths = None  # per-example l while a forward/generate call runs
        self._last_lengths = None

    def _set_position(self) -> None:
        """d_i = r_i / d, r_i in 1..d dim i's place in the ranking (ours: 1-based, so floor(p*d) dims have d_i < p)."""
        d = self.ranking.numel()
        pos = torch.empty(d, dtype=torch.float32, device=self.ranking.device)
        pos[self.ranking] = torch.arange(1, d + 1, dtype=torch.float32, device=self.ranking.device) / d
        self.position.copy_(pos)

    def p(self, lengths: torch.Tensor) -> torch.Tensor:
        """Eq. 4: the portion of dims shifted at input length l."""
        return torch.sigmoid(self.alpha * lengths.float() / self.cfg.length_scale + self.beta)

    def gate(self, lengths: torch.Tensor) -> torch.Tensor:
        """G [batch, d] (Eq. 5): ≈ 0 for the dims shifted at these lengths, ≈ 1 for those left alone."""
        return torch.sigmoid(self.cfg.steepness * (self.position - self.p(lengths).unsqueeze(-1)))

    def lengths(self, batch: dict) -> torch.Tensor:
        """l of each example (``length_source``)."""
        ids, mask, labels = batch.get("input_ids"), batch.get("attention_mask"), batch.get("labels")
        if self.cfg.length_source == "prompt" and batch.get("prompt_lengths") is not None:
            return batch["prompt_lengths"].to(ids.device)
        valid = mask.bool() if mask is not None else ids != self.pad_id
        if self.cfg.length_source == "prompt" and labels is not None and labels.dim() == 2:
            valid = valid & (labels == -100)  # the prompt: the positions not trained on
        return valid.sum(-1)

    def _gate_lengths(self, input_ids: torch.Tensor, batch_size: int) -> torch.Tensor:
        lengths = self._lengths
        if lengths is None:  # the backbone called directly: every non-pad token counts (ours)
            lengths = (input_ids != self.pad_id).sum(-1)
        if lengths.shape[0] != batch_size:  # beams / several return sequences per prompt
            lengths = lengths.repeat_interleave(batch_size // lengths.shape[0])
        return lengths.to(self.position.device)

    @contextmanager
    def _input_lengths(self, batch: dict):
        """gate: hold each example's l while the backbone runs (generation keeps the prompt's)."""
        if self.variant.mask != "gate":
            yield
            return
        lengths, held = self.lengths(batch), self._lengths
        self._lengths, self._last_lengths = lengths, lengths.detach()
        try:
            yield
        finally:
            self._lengths = held  # a forward inside generation's hold gives the held lengths back

    def log_values(self):
        if self.variant.mask != "gate":
            return {}
        out = {"alpha": self.alpha.item(), "beta": self.beta.item()}
        if self._last_lengths is not None:
            with torch.no_grad():
                out["p_mean"] = float(self.p(self._last_lengths.to(self.alpha.device)).mean())
        return out

    # ---- the prompt token (hybrid) ------------------------------------------------------------
    def _init_prompt(self, cfg) -> None:
        """peft prompt tuning with ``prompt_tokens`` tokens, initialised from a real token's raw row."""
        tok = self.tokenizer
        if cfg.init_token == "bos":
            tid = next((t for t in (tok.bos_token_id, tok.cls_token_id, tok.eos_token_id) if t is not None), None)
            ids = [tid] if tid is not None else []
        else:
            ids = tok(cfg.init_token, add_special_tokens=False)["input_ids"][:1]
        if not ids:
            raise EmbexpError(f"method.init_token='{cfg.init_token}' gives no token with this tokenizer (choose: bos, "
                              "or a non-empty text)")
        self.model = prompt_tuning_model(self, self.variant.prompt_tokens)
        self.prompt = init_prompt(self.model, ids)
        self._tensors["prompt"] = self.prompt


# ---- the four registered names: a config schema and a variant each -------------------------------
@register_method("tinyte_full")
class TinyTEFull(TinyTE):
    """TinyTE-full (Eq. 2): ``T(e) = e + b``, one vector b ∈ R^d (zeros at init) on every non-special token."""

    Config = TinyTEConfig
    variant = Variant("all")
    label = "TinyTE-full"
    comparison = Comparison(rank=60, lr=1e-2)


@register_method("tinyte_half")
class TinyTEHalf(TinyTE):
    """TinyTE-half (Eq. 3): ``T(e) = e + m ⊙ b`` on the first ``k = floor(p*d)`` dims of the ranking."""

    Config = TinyTEHalfConfig
    variant = Variant("first_k")
    label = "TinyTE-half"
    comparison = Comparison(rank=61, lr=1e-2)


@register_method("tinyte_gated")
class TinyTEGated(TinyTE):
    """TinyTE-gated (Eq. 4-5): ``e_i + b_i * (1 - G_i(l))`` with ``G_i = sigmoid(h*(d_i - p(l)))`` and
    ``p(l) = sigmoid(alpha * l / length_scale + beta)`` (length_scale = 1 by default: the paper's Eq. 4)."""

    export_blocker = ("its shift depends on each input's length (p(l) gates the dims), which a fixed embedding "
                      "table cannot hold")
    Config = TinyTEGatedConfig
    variant = Variant("gate")
    label = "TinyTE-gated"
    comparison = Comparison(rank=62, lr=1e-2)


@register_method("tinyte_hybrid")
class TinyTEHybrid(TinyTE):
    """TinyTE-hybrid (§4.1): TinyTE-full plus one learned prompt token (peft prompt tuning)."""

    export_blocker = "its learned prompt token is an extra input position, not a row of the embedding table"
    Config = TinyTEHybridConfig
    variant = Variant("all", prompt_tokens=1)
    prefix_mode = "prepend"
    label = "TinyTE-hybrid"
    identity_at_init = False  # the prompt token is prepended
    comparison = Comparison(rank=63, lr=1e-2)
