"""The stages of one run, in call order: preflight, build, loop (checkpoint, sharding, curriculum, selection),
predict, adapter, results; ``embexp.train.run`` calls them."""
