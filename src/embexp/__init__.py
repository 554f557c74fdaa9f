"""embexp: config-driven experiments with embedding-layer methods for language models."""

__version__ = "0.1.0"


class EmbexpError(Exception):
    """A user-facing error: printed as one line by the entry points, exit status 1."""


class RunInterrupted(EmbexpError):
    """SIGTERM/SIGUSR1 (a cluster's preemption notice): the run saved a checkpoint and stopped; it
    is marked ``interrupted``, and the same command with ``trainer.resume=true`` continues it."""


class RunBusy(EmbexpError):
    """Another live process owns the run directory (``embexp.run.lock``): one line naming it, exit status
    75 (EX_TEMPFAIL: try again later), which the sweep runner reads as "running elsewhere", not failed."""

    exit_code = 75
