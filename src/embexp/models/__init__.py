"""Backbones: load a model and its tokenizer, and know each family's quirks, here and nowhere else: Gemma-2's
embedding scale (:attr:`Backbone.embed_scale`), tied embeddings (:func:`untie_embeddings`), ``pad = eos`` and left
padding for decoders (:func:`load_backbone`), and where attention ends in each layer (:func:`attention_sites`).
The modules: docs/architecture.md; this package's namespace holds what the rest of embexp imports of them.
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
