"""The stages of one run, in call order: preflight, build, loop (checkpoint, sharding, curriculum, selection),
evaluate, adapter, record; ``embexp.train.run`` calls them."""
