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
package's namespace holds what the rest of embexp imports of them.
"""

from embexp.models.loading import (
    Backbone,
    FirstTokenLinear,
    cache_kwarg,
    load_backbone,
    output_cache,
    resolve_dtype,
    untie_embeddings,
    use_linear_head,
)
from embexp.models.offline import (
    DECODER_FAMILIES,
    TINY,
    byte_tokenizer,
    minilm_path,
    scratch_config,
    scratch_tokenizer,
    smollm2_path,
)
from embexp.models.sites import after_attention, attention_sites

__all__ = [
    "DECODER_FAMILIES", "TINY", "Backbone", "FirstTokenLinear", "after_attention", "attention_sites", "byte_tokenizer",
    "cache_kwarg", "load_backbone", "minilm_path", "output_cache", "resolve_dtype", "scratch_config",
    "scratch_tokenizer", "smollm2_path", "untie_embeddings", "use_linear_head",
]
