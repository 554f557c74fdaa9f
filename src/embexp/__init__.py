"""embexp: config-driven experiments with embedding-layer methods for language models."""

__version__ = "0.1.0"


class EmbexpError(Exception):
    """A user-facing error: printed as one line by the entry points, exit status 1."""
