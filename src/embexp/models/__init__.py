"""Backbones: load a model and its tokenizer, and know each family's quirks.

Family quirks handled here and nowhere else:
- Gemma-2 scales embeddings inside its embedding module (``embed_scale``); :attr:`Backbone.embed_scale`
  reports the factor, so methods can work in the raw row space and scale what they add.
- Some families tie input and output embeddings (SmolLM2, Qwen-2.5 small, Gemma-2);
  :func:`untie_embeddings` gives the output head its own copy where a method needs that.
- Decoders without a pad token get ``pad = eos``; generation is always left-padded.
- Where "after attention, before the FFN" is in each layer (:func:`attention_sites`), for methods
  that add modules inside the layers (:func:`after_attention`).

Modules: ``loading`` (:func:`load_backbone`, :class:`Backbone`, encoder heads), ``sites`` (the
family sites inside the layers), ``offline`` (MiniLM, SmolLM2, tiny and from-scratch models). This
package's namespace holds their API.
"""

from embexp.models.loading import (
    LINEAR_HEAD_FAMILIES,
    Backbone,
    FirstToken,
    FirstTokenLinear,
    cache_kwarg,
    check_head,
    load_backbone,
    output_cache,
    pretrained_model,
    resolve_dtype,
    text_config,
    untie_embeddings,
    use_linear_head,
)
from embexp.models.offline import (
    CACHE,
    DECODER_FAMILIES,
    ENCODER_FAMILIES,
    TINY,
    attn_kwargs,
    byte_tokenizer,
    encoder_special_ids,
    from_config,
    minilm_path,
    scratch_config,
    scratch_model,
    scratch_tokenizer,
                                   smollm2_path,
    tiny_model,
)
from embexp.models.sites import SITES, SiteCall, SiteSpec, after_attention, attention_sites

__all__ = [
    "CACHE", "DECODER_FAMILIES", "ENCODER_FAMILIES", "LINEAR_HEAD_FAMILIES", "SITES", "TINY", "Backbone", "FirstToken",
    "FirstTokenLinear", "SiteCall", "SiteSpec", "after_attention", "attention_sites", "attn_kwargs", "byte_tokenizer",
    "cache_kwarg", "check_head", "encoder_special_ids", "from_config", "load_backbone", "minilm_path", "output_cache",
    "pretrained_model", "resolve_dtype", "scratch_config", "scratch_model", "scratch_tokenizer", "smollm2_path",
    "text_config", "tiny_model", "untie_embeddings", "use_linear_head",
]
