"""TinyTE (tinyte.md): steer an LLM by adding one learned vector to its input token embeddings.

``T(e) = e + b`` for every non-special token; ``b`` starts at zero, so the method is the identity
at initialisation. The bias is applied to the embedding module's *output* (after Gemma-2's
``sqrt(d)`` scaling), and the embedding weight is never touched, so tied input/output embeddings
stay tied while training. Export folds ``b / embed_scale`` into the non-special rows and unties
the output head (it keeps the original rows), giving a plain transformers model.
"""

from __future__ import annotations

import copy
import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from embexp import EmbexpError
from embexp.config import f
from embexp.methods.base import Method, MethodConfig, backbone_batch, embedding_hook
from embexp.methods.peft_baselines import init_prompt, prompt_tuning_model, virtual_tokens
from embexp.methods.registry import register_method
from embexp.models import embed_scale


@dataclass
class TinyTEConfig(MethodConfig):
    shift_special: bool = f(False, "Also shift special tokens (never in the paper; for ablations only).")


@register_method("tinyte_full")
class TinyTEFull(Method):
    Config = TinyTEConfig

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        d = backbone.hidden_size
        self.bias = nn.Parameter(torch.zeros(d, dtype=torch.float32))
        shift = ~backbone.special_mask() if not cfg.shift_special else torch.ones(backbone.vocab_size, dtype=torch.bool)
        self.register_buffer("shift_mask", shift, persistent=False)
        self._hook = embedding_hook(self.model.get_input_embeddings(), self.shift)
        self.mark_trainable()

    def method_tensors(self):
        return {"bias": self.bias}

    def delta(self) -> torch.Tensor:
        """The vector added to every shifted token (variants override this)."""
        return self.bias

    def shift(self, input_ids: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        mask = self.shift_mask[input_ids].unsqueeze(-1).to(embeds.dtype)
        return embeds + mask * self.delta().to(embeds.dtype)

    def export(self):
        model = copy.deepcopy(self.model)
        for h in list(model.get_input_embeddings()._forward_hooks):
            model.get_input_embeddings()._forward_hooks.pop(h)
        emb = model.get_input_embeddings()
        out = model.get_output_embeddings()
        with torch.no_grad():
            if out is not None and out.weight is emb.weight:
                out.weight = nn.Parameter(emb.weight.detach().clone())
                _untie(model.config)
            rows = self.shift_mask.nonzero().squeeze(-1)
            emb.weight[rows] += (self.delta().detach() / embed_scale(model)).to(emb.weight.dtype)
        return model


def _untie(config) -> None:
    config.tie_word_embeddings = False
    text = getattr(config, "get_text_config", lambda: None)()
    if text is not None and text is not config:
        text.tie_word_embeddings = False


# ---- the variants (tinyte.md §3.2-3.3 and §4.1) ----------------------------------------------------
RANKINGS = ("variance", "random", "integrated_gradients")
SELECTS = ("lowest", "highest")


@dataclass
class TinyTERankedConfig(TinyTEConfig):
    ranking: str = f("variance", "Order of the embedding dims: variance (across the vocabulary of the frozen input table, non-special rows, fp32; the paper's choice), random (seeded by rank_seed) or integrated_gradients (captum; needs a decoder and training data; recipe ours, see docs/methods_tinyte.md).")
    select: str = f("lowest", "Which end of the ranking comes first: lowest (the paper: lowest variance) or highest score. Ignored by ranking=random.")
    rank_seed: int = f(0, "Seed of ranking=random (ours: a torch.Generator permutation).")
    ig_batches: int = f(4, "ranking=integrated_gradients: number of training batches attributed (ours).")
    ig_batch_size: int = f(4, "ranking=integrated_gradients: sequences per batch (ours).")
    ig_steps: int = f(16, "ranking=integrated_gradients: Riemann steps of the path integral (ours).")


@dataclass
class TinyTEHalfConfig(TinyTERankedConfig):
    p: float = f(0.5, "Portion of dims shifted: k = floor(p*d) dims, the first k of the ranking (paper: p = 0.5).")


@dataclass
class TinyTEGatedConfig(TinyTERankedConfig):
    steepness: float = f(1000.0, "h in G_i = sigmoid(h*(d_i - p(l))) (paper: 1000).")
    length_scale: float = f(100.0, "l in p(l) = sigmoid(alpha*l + beta) counts input tokens in units of this many tokens (ours; the paper leaves the scale open).")
    alpha_init: float = f(0.0, "Initial alpha (ours: 0, so p does not depend on the length at init).")
    beta_init: float = f(0.0, "Initial beta (ours: 0, so p = 0.5 at init, as TinyTE-half).")
    length_source: str = f("prompt", "What l counts (ours): prompt = non-pad tokens not trained on (labels == -100) when token labels are given, else every non-pad token; sequence = every non-pad token. Generation always uses the prompt's length, kept during decoding.")


@dataclass
class TinyTEHybridConfig(TinyTEConfig):
    init_token: str = f("bos", "Initial value of the prompt token (ours): bos = the embedding of the tokenizer's BOS token (CLS, then EOS when it has none); any other text = the embedding of that text's first token.")


def rank_dims(weight: torch.Tensor, rows: torch.Tensor, how: str, select: str = "lowest", seed: int = 0) -> torch.Tensor:
    """All d dims in order of preference: ``ranking[:k]`` are the dims a masked variant shifts.

    variance: per-dim variance across the given vocabulary rows (fp32), stable sort, so ties
    keep the lower index first. random: a permutation seeded by ``seed``.
    """
    d = weight.shape[1]
    if how == "random":
        return torch.randperm(d, generator=torch.Generator().manual_seed(seed))
    if how == "variance":
        score = weight.detach()[rows.to(weight.device)].float().var(dim=0).cpu()
        return torch.sort(score, descending=select == "highest", stable=True).indices
    raise EmbexpError(f"unknown method.ranking '{how}' (choose from: {', '.join(RANKINGS)})")


class _RankedTinyTE(TinyTEFull):
    """TinyTE with an ordering of the embedding dims, saved with the adapter (tensor ``ranking``)."""

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        if cfg.ranking not in RANKINGS:
            raise EmbexpError(f"unknown method.ranking '{cfg.ranking}' (choose from: {', '.join(RANKINGS)})")
        if cfg.select not in SELECTS:
            raise EmbexpError(f"unknown method.select '{cfg.select}' (choose from: {', '.join(SELECTS)})")
        d = backbone.hidden_size
        self.register_buffer("ranking", torch.arange(d), persistent=False)
        self.ranked = False
        if cfg.ranking != "integrated_gradients":  # integrated gradients needs data: setup()
            rows = (~backbone.special_mask()).nonzero().squeeze(-1)
            self.set_ranking(rank_dims(self.model.get_input_embeddings().weight, rows, cfg.ranking, cfg.select, cfg.rank_seed))

    def set_ranking(self, ranking: torch.Tensor) -> None:
        ranking = torch.as_tensor(ranking).to(torch.long).flatten()
        if not torch.equal(torch.sort(ranking.cpu()).values, torch.arange(self.ranking.numel())):
            raise EmbexpError(f"method {self.cfg.name}: 'ranking' is not a permutation of the {self.ranking.numel()} embedding dims")
        self.ranking.copy_(ranking.to(self.ranking.device))
        self.ranked = True

    def check_ranked(self) -> None:
        if not self.ranked:
            raise EmbexpError(f"method {self.cfg.name}: ranking=integrated_gradients is computed in setup() from training data; call setup() or load an adapter first")

    def setup(self, token_ids):
        if self.cfg.ranking == "integrated_gradients":
            scores = self.ig_scores(token_ids.get("train") or [])
            self.set_ranking(torch.sort(scores, descending=self.cfg.select == "highest", stable=True).indices)

    def ig_scores(self, seqs: list[list[int]]) -> torch.Tensor:
        """Summed |integrated gradients| per embedding dim of the per-sequence LM loss (recipe ours).

        The first ``ig_batches * ig_batch_size`` training sequences, right-padded in batches; the
        input is the frozen embedding output (no shift), the baseline the mean non-special
        embedding (the ablation value of Eq. 6); the target is each sequence's mean next-token
        cross-entropy over its real tokens; the path integral is a midpoint Riemann sum of
        ``ig_steps`` steps; |attributions| are summed over the positions TinyTE shifts (non-pad,
        non-special) and over sequences.
        """
        from captum.attr import IntegratedGradients

        from embexp.data import IGNORE, collate

        cfg = self.cfg
        if not self.is_decoder:
            raise EmbexpError("method.ranking=integrated_gradients needs a decoder (it attributes the LM loss); use variance or random")
        seqs = [s for s in seqs if len(s) > 1][: cfg.ig_batches * cfg.ig_batch_size]
        if not seqs:
            raise EmbexpError("method.ranking=integrated_gradients needs training sequences (setup got no 'train' ids)")
        model, emb = self.model, self.model.get_input_embeddings()
        if torch.cuda.is_available() and emb.weight.device.type != "cuda":
            self.to("cuda")  # the pipeline moves the method to its device after setup anyway
        dev, was_training = emb.weight.device, model.training
        model.eval()
        scale = embed_scale(model)
        base = (emb.weight.detach()[self.shift_mask.to(dev)].float().mean(0) * scale).to(emb.weight.dtype)

        def loss(x, mask, labels):
            logits = model(inputs_embeds=x, attention_mask=mask).logits.float()
            ce = nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:], reduction="none", ignore_index=IGNORE)
            keep = (labels[:, 1:] != IGNORE).float()
            return (ce * keep).sum(1) / keep.sum(1).clamp(min=1.0)

        ig, scores = IntegratedGradients(loss), torch.zeros(emb.weight.shape[1], dtype=torch.float64)
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
        self.check_ranked()
        return {**super().trainable_state(), "ranking": self.ranking.detach().cpu().clone()}

    def load_trainable_state(self, state):
        state = dict(state)
        if "ranking" not in state:
            raise EmbexpError(f"adapter does not match method {self.cfg.name}: it has no 'ranking' tensor")
        self.set_ranking(state.pop("ranking"))
        super().load_trainable_state(state)


@register_method("tinyte_half")
class TinyTEHalf(_RankedTinyTE):
    """TinyTE-half (Eq. 3): ``T(e) = e + m ⊙ b`` on the first ``k = floor(p*d)`` dims of the ranking.

    Only the k shifted entries are parameters (a k-vector scattered into d dims); the ranking is
    saved with the adapter so a reloaded run shifts the same dims. Exports like TinyTE-full.
    """

    Config = TinyTEHalfConfig

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        d = backbone.hidden_size
        if not 0.0 < cfg.p <= 1.0 or math.floor(cfg.p * d) < 1:
            raise EmbexpError(f"method.p={cfg.p} selects no dims of d={d} (choose 0 < p <= 1 with floor(p*d) >= 1)")
        self.k = math.floor(cfg.p * d)
        self.bias = nn.Parameter(torch.zeros(self.k, dtype=torch.float32))  # replaces the d-vector of full
        self.mark_trainable()

    def dims(self) -> torch.Tensor:
        return self.ranking[: self.k]

    def delta(self) -> torch.Tensor:
        self.check_ranked()
        return self.bias.new_zeros(self.ranking.numel()).scatter(0, self.dims(), self.bias)


@register_method("tinyte_gated")
class TinyTEGated(_RankedTinyTE):
    """TinyTE-gated (Eq. 4-5): ``e_i + b_i * (1 - G_i(l))`` with ``G_i = sigmoid(h*(d_i - p(l)))`` and
    ``p(l) = sigmoid(alpha * l / length_scale + beta)``.

    ``d_i = r_i / d`` where ``r_i`` in 1..d is dim i's place in the ranking (ours: 1-based, so the
    dims with ``d_i < p`` number floor(p*d), as k in TinyTE-half). ``G ≈ 0`` means fully modified,
    ``G ≈ 1`` unmodified (the paper's text), so the first ~p*d ranked dims are shifted. ``l`` is
    the input length of each example (see ``length_source``); generation keeps the prompt's length
    for every new token. b = 0 at init, so the method is the identity; trainable d + 2. The shift
    depends on the input length, so no plain model can hold it: ``export()`` raises.
    """
    export_blocker = ("its shift depends on each input's length (p(l) gates the dims), which a fixed embedding "
                      "table cannot hold")

    Config = TinyTEGatedConfig

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        if cfg.length_source not in ("prompt", "sequence"):
            raise EmbexpError(f"unknown method.length_source '{cfg.length_source}' (choose from: prompt, sequence)")
        if cfg.length_scale <= 0:
            raise EmbexpError(f"method.length_scale={cfg.length_scale} must be > 0")
        self.alpha = nn.Parameter(torch.tensor(float(cfg.alpha_init)))
        self.beta = nn.Parameter(torch.tensor(float(cfg.beta_init)))
        self.register_buffer("position", torch.zeros(backbone.hidden_size), persistent=False)
        self._set_position()
        self.pad_id = backbone.tokenizer.pad_token_id
        self._lengths = None  # per-example l while a forward/generate call runs
        self._last_lengths = None
        self.mark_trainable()

    def method_tensors(self):  # hasattr: TinyTEFull.__init__ asks before alpha/beta exist
        return {n: getattr(self, n) for n in ("bias", "alpha", "beta") if hasattr(self, n)}

    def set_ranking(self, ranking):
        super().set_ranking(ranking)
        if hasattr(self, "position"):
            self._set_position()

    def _set_position(self) -> None:
        d = self.ranking.numel()
        pos = torch.empty(d, dtype=torch.float32, device=self.ranking.device)
        pos[self.ranking] = torch.arange(1, d + 1, dtype=torch.float32, device=self.ranking.device) / d
        self.position.copy_(pos)

    def p(self, lengths: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.alpha * lengths.float() / self.cfg.length_scale + self.beta)

    def gate(self, lengths: torch.Tensor) -> torch.Tensor:
        """G [batch, d]: ≈ 0 for the dims shifted at these lengths, ≈ 1 for those left alone."""
        return torch.sigmoid(self.cfg.steepness * (self.position - self.p(lengths).unsqueeze(-1)))

    def shift(self, input_ids, embeds):
        self.check_ranked()
        lengths = self._lengths
        if lengths is None:  # the backbone called directly: every non-pad token counts (ours)
            lengths = (input_ids != self.pad_id).sum(-1)
        if lengths.shape[0] != embeds.shape[0]:  # beams / several return sequences per prompt
            lengths = lengths.repeat_interleave(embeds.shape[0] // lengths.shape[0])
        delta = self.bias * (1.0 - self.gate(lengths.to(embeds.device)))  # [batch, d]
        mask = self.shift_mask[input_ids].unsqueeze(-1).to(embeds.dtype)
        return embeds + mask * delta.unsqueeze(-2).to(embeds.dtype)

    def lengths(self, batch: dict) -> torch.Tensor:
        ids, mask, labels = batch.get("input_ids"), batch.get("attention_mask"), batch.get("labels")
        valid = mask.bool() if mask is not None else ids != self.pad_id
        if self.cfg.length_source == "prompt" and labels is not None and labels.dim() == 2:
            valid = valid & (labels == -100)  # the prompt: the positions not trained on
        return valid.sum(-1)

    @contextmanager
    def _length(self, lengths):
        self._lengths, self._last_lengths = lengths, lengths.detach()
        try:
            yield
        finally:
            self._lengths = None

    def forward(self, **batch):
        with self._length(self.lengths(batch)):
            return self.model(**backbone_batch(batch))

    @torch.no_grad()
    def generate(self, **kw):
        prompt = {k: kw.get(k) for k in ("input_ids", "attention_mask")}
        with self._length(self.lengths(prompt)):
            return self.model.generate(**kw)

    def log_values(self):
        out = {"alpha": self.alpha.item(), "beta": self.beta.item()}
        if self._last_lengths is not None:
            with torch.no_grad():
                out["p_mean"] = float(self.p(self._last_lengths.to(self.alpha.device)).mean())
        return out

    def export(self):
        self.check_export()


@register_method("tinyte_hybrid")
class TinyTEHybrid(TinyTEFull):
    """TinyTE-hybrid (§4.1): TinyTE-full plus one learned prompt token (peft prompt tuning).

    The token is prepended to the (shifted) input embeddings and is not itself shifted; it starts
    from the embedding of a real vocabulary token (``init_token``). Not the identity at init: b = 0,
    so the only change is the prepended token. Logits are returned aligned with ``input_ids``
    (the prefix position is stripped); generation prefills with ``inputs_embeds`` and continues
    with ids, where the embedding hook still shifts every generated token. Trainable 2d.
    """
    export_blocker = "its learned prompt token is an extra input position, not a row of the embedding table"

    Config = TinyTEHybridConfig

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        tok = backbone.tokenizer
        if cfg.init_token == "bos":
            tid = next((t for t in (tok.bos_token_id, tok.cls_token_id, tok.eos_token_id) if t is not None), None)
            ids = [tid] if tid is not None else []
        else:
            ids = tok(cfg.init_token, add_special_tokens=False)["input_ids"][:1]
        if not ids:
            raise EmbexpError(f"method.init_token='{cfg.init_token}' gives no token with this tokenizer (choose: bos, or a non-empty text)")
        self.model = prompt_tuning_model(self, 1)
        self.prompt = init_prompt(self.model, ids)
        self.mark_trainable()

    def method_tensors(self):  # hasattr: TinyTEFull.__init__ asks before the prompt exists
        return {n: getattr(self, n) for n in ("bias", "prompt") if hasattr(self, n)}

    prefix_mode = "prepend"

    def prefix(self, input_ids, attention_mask):
        return virtual_tokens(self.model, input_ids.shape[0])

    def export(self):
        self.check_export()
