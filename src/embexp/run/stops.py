"""Signals that stop a training loop between optimizer steps: a preemption notice (SIGTERM, SIGUSR1) and
Ctrl-C (SIGINT) alike. While training they only set a flag, read after each optimizer step, so the step
finishes, its checkpoint is written and the run is marked ``interrupted`` (``run.loop.Trainer.fit``).
A second Ctrl-C stops at once (KeyboardInterrupt; ``run.record.recording`` still marks the run
``interrupted`` in one line). :class:`passing_on` is the other side, in a process that waits for a
command (the sweep runner): the signal goes on to the command, which stops as above."""

from __future__ import annotations

import signal
import threading


class stop_signals:  # noqa: N801 (used as a context manager, like contextlib's)
    """Within the block the stop signals set the flag it yields; the previous handlers come back afterwards;
    off the main thread (no signals there) it does nothing."""

    SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGUSR1", "SIGINT") if hasattr(signal, name))

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
