"""The stages of one run, in call order: checks, build, loop (checkpoint, sharding, curriculum, selection),
evaluate, record; ``embexp.train.run`` calls them."""
