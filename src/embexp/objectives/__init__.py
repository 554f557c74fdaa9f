"""Training objectives of the task kinds that methods attach: sentence embeddings (``sentence.py``: pooling,
the contrastive objective, similarity scoring) and cloze classification (``cloze.py``: PET's verbalizers)."""
