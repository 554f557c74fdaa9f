"""embexp: config-driven experiments with embedding-layer methods for language models."""

import signal

__version__ = "0.1.0"


class EmbexpError(Exception):
    """A user-facing error: printed as one line by the entry points, exit status 1."""


def import_extra(module: str, extra: str, needed_by: str):
    """``module``, imported, from an optional extra of pyproject.toml; missing, one line naming the extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise EmbexpError(f"{needed_by} needs the package {module.split('.')[0]}: pip install 'embexp[{extra}]' "
                          "(make install installs every extra)") from e


class RunInterrupted(EmbexpError):
    """SIGTERM/SIGUSR1 (a cluster's preemption notice): the run saved a checkpoint and stopped; it
    is marked ``interrupted``, and the same command with ``trainer.resume=true`` continues it."""


class RunBusy(EmbexpError):
    """Another live process owns the run directory (``embexp.run.lock``): one line naming it, exit status
    75 (EX_TEMPFAIL: try again later), which the sweep runner reads as "running elsewhere", not failed."""

    exit_code = 75


class SweepStopped(EmbexpError):
    """A stop signal reached the sweep (Ctrl-C, a preemption notice): the running command got it and
    stopped (a train cell after its step, with a checkpoint); no later command starts. Exit status
    128 + the signal's number, as the shell reports a process the signal ended."""

    def __init__(self, signum: int, cmd: list[str], rc: int) -> None:
        name = signal.Signals(signum).name
        self.exit_code = 128 + signum
        super().__init__(f"{name} received: the running command stopped (exit {rc}: {' '.join(cmd[:4])} ...) and "
                         "no later command started; rerun the same sweep command to continue (a train cell resumes "
                         "from its checkpoint)")
