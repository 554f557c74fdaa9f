"""The ledger's papers, their section titles and their rows modules: what both the ledger
(``ledger/__init__.py``) and its Markdown (``ledger/markdown.py``) read, so neither imports the other."""

from __future__ import annotations

PAPERS = {
    "tinyte": "TinyTE (papers/tinyte.md)",
    "pema": "PEMA (papers/pema.md)",
    "pete": "PETE (papers/pete.md)",
    "tinyattn": "Tiny-Attention (papers/tiny-attention.md)",
    "ktoken": "K-Token Merging (papers/k-token-merging.md)",
}
# each paper's rows modules (every one has computes(): id -> core.Compute), gathered here so none imports another's
MODULES = {
    "tinyte": ("tinyte", "tinyte_scores", "tinyte_studies"),
    "pema": ("pema", "pema_tables", "pema_gpu"),
    "pete": ("pete",),
    "tinyattn": ("tinyattn", "tinyattn_hp", "tinyattn_gpu"),
    "ktoken": ("ktoken", "ktoken_gpu"),
}
TABLES = tuple(PAPERS)
COMMAND = "python -m embexp.report paper=ledger"
