"""Hard prompt compression before LoRA training: the K-Token Merging paper's baselines (its Tables 1-3:
SelectiveContext, LLMLingua-2; LLMLingua too), on the same backbone and LoRA recipe as ``ktoken``.

Each prompt is compressed once by a frozen compressor (cached by its token ids) and the backbone
reads the kept tokens, embedded by its own table, in place of the prompt (``prefix_mode = "replace"``),
so the measured ``length_reduction`` is what the backbone read. The compressors (``selective_context``,
ours; ``llmlingua`` and ``llmlingua2`` from the llmlingua package): docs/methods_ktoken.md, "Baselines".
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import torch

from embexp import EmbexpError
from embexp.core.config import option
from embexp.featurize import padded
from embexp.methods.base import Comparison, Method
from embexp.methods.inner import InnerMethodConfig, WrapsInner, build_inner
from embexp.methods.registry import register_method

COMPRESSORS = ("selective_context", "llmlingua", "llmlingua2")
LLMLINGUA2_MODEL = "microsoft/llmlingua-2-xlm-roberta-large-meetingbank"


@dataclass
class PromptCompressConfig(InnerMethodConfig):
    compressor: str = option("selective_context", "selective_context (self-information token dropping with the frozen "
                             "backbone; ours), llmlingua or llmlingua2 (the llmlingua package).", choices=COMPRESSORS)
    rate: float = option(0.35, "Fraction of prompt tokens to drop (selective_context; Selective Context's default "
                         "reduce_ratio 0.35), or 1 - the rate handed to llmlingua's compress_prompt.", ge=0, lt=1)
    compressor_model: str = option("", "llmlingua2: the token-classifier hub id ('' = "
                                   "microsoft/llmlingua-2-xlm-roberta-large-meetingbank, the authors'); llmlingua: a "
                                   "causal LM path or hub id ('' = the run's backbone).")


def drop_lowest(info: list[float], rate: float, keep: set[int]) -> list[int]:
    """Indices kept after dropping the ``floor(rate * n)`` lowest ``info`` values (never those in
    ``keep``; ties: the earlier index is dropped first), in their order."""
    n = len(info)
    candidates = sorted((i for i in range(n) if i not in keep), key=lambda i: (info[i], i))
    drop = set(candidates[: min(int(rate * n), len(candidates))])
    kept = [i for i in range(n) if i not in drop]
    return kept or [n - 1]


@register_method("prompt_compress")
class PromptCompress(WrapsInner, Method):
    """The prompt replaced by its compressed tokens (see the module doc); LoRA on the backbone."""

    Config = PromptCompressConfig
    label = "Prompt compression"
    model_kinds = ("decoder",)
    identity_at_init = False  # the backbone reads the kept prompt tokens only
    comparison = Comparison(rank=90, lr=1e-3)
    prefix_mode = "replace"
    export_blocker = ("the prompt is compressed by a separate compressor before the backbone reads it; the exported "
                      "model would read uncompressed prompts (export method.inner's LoRA with method=lora instead)")
    shard_blocker = ("its compressor scores each new prompt with the backbone itself, as many times as a process meets "
                     "new prompts, and a sharded backbone needs every process in every forward (the processes hang)")

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        self.backbone_cfg = backbone.cfg
        self._cache: dict[tuple[int, ...], list[int]] = {}
        self._external = self._load_llmlingua(cfg) if cfg.compressor != "selective_context" else None
        self.inner = build_inner(cfg, backbone)
        if self.inner is not None:
            self.model = self.inner.model
        self.mark_trainable()

    # ---- the compressors ------------------------------------------------------------------------
    def _load_llmlingua(self, cfg):
        try:
            from llmlingua import PromptCompressor
        except ImportError as e:
            raise EmbexpError(f"method.compressor={cfg.compressor} needs the llmlingua package "
                              f"(pip install 'embexp[compress]'): {e}") from e
        if cfg.compressor == "llmlingua2":
            name, extra = cfg.compressor_model or LLMLINGUA2_MODEL, {"use_llmlingua2": True}
        else:
            name, extra = cfg.compressor_model or self._backbone_path(), {}
        try:
            return PromptCompressor(model_name=name, device_map="cpu", model_config={"trust_remote_code": False},
                                    **extra)
        except Exception as e:  # offline: the hub model or tiktoken's encoding cannot be fetched
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise EmbexpError(f"method.compressor={cfg.compressor}: could not load the compressor '{name}' "
                              "(the llmlingua package needs the hub model and tiktoken's encoding, i.e. the network, "
                              f"once): {msg}") from e

    def _backbone_path(self) -> str:
        from embexp.models import smollm2_path

        src = self.backbone_cfg.source
        if src == "hub":
            return self.backbone_cfg.id
        if src == "smollm2":
            return str(smollm2_path())
        raise EmbexpError(f"method.compressor=llmlingua loads its scorer from a path: model {self.backbone_cfg.name} "
                          f"(source={src}) has none; set method.compressor_model or use a hub/smollm2 model")

    @torch.no_grad()
    def self_information(self, ids: list[int]) -> list[float]:
        """-log p(x_i | x_<i) under the frozen backbone (LoRA disabled); a leading BOS scores the
        first token, which otherwise gets +inf (always kept)."""
        model = self.model
        was = model.training
        model.eval()
        try:
            ctx = model.disable_adapter() if hasattr(model, "disable_adapter") else nullcontext()
            with ctx:
                x = torch.tensor([ids], device=next(self.parameters()).device)
                # .forward: the compressor's pass is not what the backbone read (Method.count_tokens hooks __call__)
                logp = torch.log_softmax(self.backbone_model.forward(input_ids=x).logits[0, :-1].float(), -1)
        finally:
            model.train(was)
        info = (-logp.gather(1, x[0, 1:, None])[:, 0]).tolist()
        return [float("inf")] + info

    def compress_ids(self, ids: list[int]) -> list[int]:
        """The token ids the backbone reads for a prompt of ``ids`` (cached)."""
        key = tuple(ids)
        if key in self._cache:
            return self._cache[key]
        if self._external is None:
            # the first id stays: a BOS, or the first token, which nothing before it scores
            out = [ids[i] for i in drop_lowest(self.self_information(ids), self.cfg.rate, {0})] if ids else []
        else:
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            short = self._external.compress_prompt(text, rate=1.0 - self.cfg.rate)["compressed_prompt"]
            out = self.tokenizer(short)["input_ids"] or ids[-1:]
        self._cache[key] = out
        return out

    # ---- extension point 3 ------------------------------------------------------------------------
    def prefix(self, input_ids, attention_mask):
        rows = [self.compress_ids(r[m.bool()].tolist()) for r, m in zip(input_ids, attention_mask)]
        ids, mask = padded(rows, self.tokenizer.pad_token_id, left=True, device=input_ids.device)
        x = self.backbone_model.get_input_embeddings()(ids)
        return x * mask.unsqueeze(-1).to(x.dtype), mask
