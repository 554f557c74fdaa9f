"""Signals that stop a run: a preemption notice (SIGTERM, SIGUSR1), Ctrl-C (SIGINT) and a closed terminal
(SIGHUP) alike. :class:`run_signals` holds them for the whole of a run (``train.run_owned``), by phase: before
the training steps the run stops at once (``RunInterrupted``); during them (:func:`training_steps`) they only
set a flag, read after each optimizer step, so the step's checkpoint is written and the run is marked
``interrupted`` (``run.loop.Trainer.fit``); after the last step they are held and the run finishes first. What
each phase covers: docs/running.md, "Clusters: SLURM sweeps and preemption". :class:`passing_on` is the other
side, in a process that waits for a command (the sweep runner): the signal goes on to the command, which stops
as above."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading

from embexp import RunInterrupted

log = logging.getLogger("embexp")


class stop_signals:  # noqa: N801 (used as a context manager, like contextlib's)
    """Within the block the stop signals set the flag it yields; the previous handlers come back afterwards;
    off the main thread (no signals there) it does nothing."""

    SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGUSR1", "SIGINT", "SIGHUP")
                    if hasattr(signal, name))

    def __enter__(self) -> list[int]:
        self.flag: list[int] = []
        self.previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self.previous[sig] = signal.signal(sig, self._note)
        return self.flag

    def _note(self, signum, frame) -> None:
        if signum == signal.SIGINT and signum in self.flag:
            raise KeyboardInterrupt  # Ctrl-C twice: now, not after the step
        self.flag.append(signum)

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


class run_signals(stop_signals):  # noqa: N801
    """The stop signals of one whole run, by phase (the module's docstring): ``now`` when the block opens,
    ``steps`` within :func:`training_steps`, ``hold`` after them (:func:`phase` sets it)."""

    active: run_signals | None = None  # the run's, while its block is open on the main thread

    def __enter__(self) -> list[int]:
        self.phase = "now"
        flag = super().__enter__()
        if self.previous:
            run_signals.active = self
        return flag

    def __exit__(self, *exc) -> None:
        if run_signals.active is self:
            run_signals.active = None
        super().__exit__(*exc)

    def _note(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        if self.phase == "steps":
            return super()._note(signum, frame)
        if signum == signal.SIGINT and (self.phase == "now" or signum in self.flag):
            raise KeyboardInterrupt  # as Python's own Ctrl-C: run.results.recording says it in one line
        if self.phase == "now":
            raise RunInterrupted(f"{name} received: stopped; rerun the same command with trainer.resume=true to "
                                 "continue (from the last checkpoint, if one was written)")
        if not self.flag:
            self.held(signum)
        self.flag.append(signum)

    @staticmethod
    def held(signum: int) -> None:
        log.warning("%s received after the training steps: held while the run finishes its evaluation and records; "
                    "it then ends complete (a second Ctrl-C stops it at once, interrupted)",
                    signal.Signals(signum).name)


def phase(name: str) -> None:
    """The run's signals from here on: ``now`` (stop at once) or ``hold`` (finish first); a no-op outside a run."""
    if run_signals.active is not None:
        run_signals.active.phase = name


@contextlib.contextmanager
def training_steps():
    """The flag of the training steps: the run's (:class:`run_signals`, in its ``steps`` phase, ``hold`` after
    the block), or, with no run's handler (a Trainer used on its own), :class:`stop_signals`'."""
    run = run_signals.active
    if run is None:
        with stop_signals() as flag:
            yield flag
        return
    run.phase = "steps"
    try:
        yield run.flag
    finally:
        run.phase = "hold"
    if run.flag:  # a signal in a step that ended training (trainer.curve_patience): held from here
        run.held(run.flag[0])


class passing_on(stop_signals):  # noqa: N801
    """Within the block a stop signal is passed on to the child process ``proc`` as SIGTERM, once (a
    training run finishes its step and checkpoints), and recorded in the flag it yields; a second Ctrl-C
    kills the child at once. SIGTERM, not the signal itself: a Ctrl-C at the terminal reached the child
    too, and a second SIGINT would stop it without its checkpoint."""

    def __init__(self, proc) -> None:
        self.proc = proc

    def _note(self, signum, frame) -> None:
        if signum == signal.SIGINT and signum in self.flag:
            self.proc.kill()
        elif not self.flag:
            self.proc.send_signal(signal.SIGTERM)
        self.flag.append(signum)
