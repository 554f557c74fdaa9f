"""One owner per run directory: an exclusive lock on ``<run_dir>/run.lock`` and ``owner.json``.

A run's main process takes the lock (``fcntl.flock``, non-blocking) before it touches the directory
and holds it to the end (:func:`owning`); then it writes ``owner.json`` (host, pid, start time). The
kernel releases the lock when the process exits, however it exits, so a lock that can be taken means no
live owner, whatever the files say. :func:`live_owner` probes the lock without keeping it and :func:`state`
reads a directory's status the same way (a ``running`` run without a live owner reads ``interrupted``): the
sweep runner and anyone reading a status go through them. A second run, a dead owner's run and filesystems
shared across hosts: docs/running.md, "Runs that stop". Where the filesystem refuses ``flock`` (ENOLCK,
EOPNOTSUPP) the run warns once and goes on without an owner check.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import time
from pathlib import Path

from embexp import EmbexpError, RunBusy
from embexp.core.records import STATUS, atomic_write, checkpoint_note, read_json, write_json

LOCK, OWNER = "run.lock", "owner.json"
UNSUPPORTED = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)
log = logging.getLogger("embexp")


def describe(owner: dict | None) -> str:
    """'host h, pid p, started t' for messages (what owner.json holds, or that it could not be read)."""
    if not owner:
        return "owner unknown: no readable owner.json"
    return f"host {owner.get('host', '?')}, pid {owner.get('pid', '?')}, started {owner.get('started', '?')}"


def live_owner(run_dir: Path) -> dict | None:
    """The owner of ``run_dir`` if a live process holds its lock (owner.json's content, {} where it cannot
    be read), else None. A shared probe: it never keeps the lock and two probes do not conflict."""
    path = Path(run_dir) / LOCK
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None  # no lock file: never owned
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return read_json(path.with_name(OWNER)) or {}
        return None  # flock unsupported here: nothing can be said
    finally:
        os.close(fd)  # closing releases a shared lock it took
    return None


def state(run_dir: Path) -> tuple[str, dict | None]:
    """(status, live owner or None) of a run directory as a reader should see it: ``status.json``'s
    status, except that ``running`` without a live owner is ``interrupted`` (its process died), and
    ``unreadable`` where status.json exists but cannot be parsed; '' where there is no status."""
    run_dir = Path(run_dir)
    owner = live_owner(run_dir)
    status = read_json(run_dir / STATUS)
    if status is None:
        return ("unreadable" if (run_dir / STATUS).exists() else ""), owner
    s = str(status.get("status", ""))
    if s == "running" and owner is None:
        return "interrupted", None
    return s, owner


def _acquire(path: Path, wait: float) -> int | None:
    """A descriptor holding the exclusive lock on ``path``, or None where another process holds it (tried
    for ``wait`` seconds: a reader's shared probe holds it for microseconds)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise
        if time.monotonic() >= deadline:
            os.close(fd)
            return None
        time.sleep(0.05)


def _take_over(run_dir: Path) -> dict | None:
    """Under the lock: a ``running`` status left by a dead owner becomes ``interrupted`` (with a note naming
    that owner); returns the note, or None where the previous run ended by itself."""
    status = read_json(run_dir / STATUS)
    if not status or status.get("status") != "running":
        return None
    prev = read_json(run_dir / OWNER) or {}
    note = {"status": "interrupted",
            "reason": f"its process ({describe(prev)}) stopped without updating the status (killed?)",
            "previous_owner": prev, "at": time.strftime("%Y-%m-%dT%H:%M:%S"), **checkpoint_note(run_dir)}
    write_json(run_dir / STATUS, note)
    return note


@contextlib.contextmanager
def owning(run_dir: Path, is_main: bool = True, wait: float = 2.0):
    """Hold ``run_dir`` for this run (the main process only; the others yield None at once). Yields the
    note of a previous run taken over (``_take_over``) or None; raises :class:`embexp.RunBusy` (one line
    naming the owner) where a live process holds it. Released on every exit path."""
    if not is_main:
        yield None
        return
    run_dir = Path(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = _acquire(run_dir / LOCK, wait)
    except OSError as e:
        if e.errno not in UNSUPPORTED:
            raise EmbexpError(f"cannot use the run directory {run_dir}: {e.strerror or e}"
                              + (f" ({e.filename})" if e.filename and str(e.filename) != str(run_dir) else "")
                              ) from None
        log.warning("cannot lock %s (%s): running without an owner check", run_dir / LOCK, e.strerror)
        yield None
        return
    if fd is None:
        raise RunBusy(f"run directory {run_dir} is in use by another run ({describe(read_json(run_dir / OWNER))}): "
                      f"wait for it to finish, or stop that process and rerun with trainer.resume=true; a second run "
                      f"of the same config needs another seed, tag or hydra.run.dir")
    try:
        previous = _take_over(run_dir)
        atomic_write(run_dir / OWNER, json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                                  "started": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
        yield previous
    finally:
        with contextlib.suppress(OSError):
            (run_dir / OWNER).unlink()  # while still locked: a left owner.json means its process died
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
