"""What the ledger's rows compute with, cached per process: trainable-parameter counts of the real
architectures on the ``meta`` device (studies/params.py), model shapes for the GPU estimates."""

from __future__ import annotations

from functools import lru_cache

from embexp.report.ledger.gpu import Arch


@lru_cache(maxsize=None)
def count(model: str, *overrides: str, num_labels: int = 2) -> dict:
    """``studies.params.count`` of one cell (tp: trainable incl. an encoder head, method, total)."""
    from embexp.studies import params

    return params.count(model, list(overrides), num_labels)


def tp(model: str, *overrides: str, num_labels: int = 2) -> int:
    return count(model, *overrides, num_labels=num_labels)["tp"]


@lru_cache(maxsize=None)
def spec_config(model: str):
    import transformers as tf

    from embexp.models.specs import SPECS

    spec = SPECS[model]
    return tf.AutoConfig.for_model(spec["family"], **spec["config"])


@lru_cache(maxsize=None)
def arch(model: str) -> Arch:
    """The shape of a stored architecture (models/specs.py) for an estimate."""
    from embexp.models.specs import SPECS

    c = spec_config(model)
    decoder = SPECS[model]["kind"] == "decoder"
    d = getattr(c, "hidden_size", None) or c.n_embd
    layers = getattr(c, "num_hidden_layers", None) or c.n_layer
    emb_dim = getattr(c, "embedding_size", d)
    total = count(model, "method=full_ft", num_labels=0)["total"]
    table = c.vocab_size * emb_dim
    tied = bool(getattr(c, "tie_word_embeddings", False)) and decoder
    heads = getattr(c, "num_attention_heads", None) or c.n_head
    kv = (getattr(c, "num_key_value_heads", None) or heads) * (getattr(c, "head_dim", None) or d // heads)
    return Arch(model, total, total - table + (table if tied else 0), d, layers, c.vocab_size if decoder else 0, kv)


def arch_of(name: str, n: int, d: int, layers: int, vocab: int, kv: int, table: int, tied: bool = False) -> Arch:
    """An architecture given by its numbers (judges, PEMA's registry models)."""
    return Arch(name, n, n - table + (table if tied else 0), d, layers, vocab, kv)


@lru_cache(maxsize=None)
def composed(*overrides: str):
    """The train config ``python -m embexp.train`` composes for these overrides (cached)."""
    from embexp.core.cli import compose_train

    return compose_train(list(overrides))
