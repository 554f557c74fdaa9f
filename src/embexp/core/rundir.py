"""Where a run may be written: the checks of a run directory's path before Hydra makes it (``core.cli.train_config``).

A run directory that is itself a symlink is refused, not followed: the reports and the sweep find runs by walking
output_root (``core.records.run_dirs``), which does not follow symlinks, so a run behind one would be left out of
every table; and a symlink can lead one run's records into another's folder. Symlinks above the run directory (an
output_root on a scratch disk) are followed as any path is.
"""

from __future__ import annotations

import os
from pathlib import Path

from embexp import EmbexpError


def check_path(target: Path) -> Path:
    """The nearest folder of the run directory ``target`` that exists (where Hydra's mkdir starts); raises
    :class:`EmbexpError` (one line naming the path and what is wrong) where a run cannot be written there."""
    target = Path(target)
    bad = sorted({c for c in str(target) if ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) < 0xE000})
    if bad:
        raise EmbexpError(f"cannot use the run directory {str(target)!r}: it holds {', '.join(map(repr, bad))} (no "
                          f"control characters or undecodable bytes in a run directory's path)")
    probe = check_links(target)
    if not probe.is_dir():
        raise EmbexpError(f"cannot use the run directory {target}: {probe} is not a directory")
    name_max, path_max = limits(probe)
    long = [part for part in target.parts if len(os.fsencode(part)) > name_max]
    if long:
        raise EmbexpError(f"cannot use the run directory {target}: its part {long[0][:24]!r}... is "
                          f"{len(os.fsencode(long[0]))} bytes, over the {name_max} a file name may have here (File "
                          f"name too long)")
    size = len(os.fsencode(str(target.absolute())))
    if size >= path_max:
        raise EmbexpError(f"cannot use the run directory {target}: its path is {size} bytes, over the {path_max} a "
                          f"path may have here")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise EmbexpError(f"cannot use the run directory {target}: {probe} is not writable")
    return probe


def check_links(target: Path) -> Path:
    """The nearest folder of ``target`` that exists, after one line where a part of it is a symlink that leads
    nowhere (dangling, or a loop) or where the run directory itself is a symlink."""
    here = target.absolute()
    probe = here
    while True:
        if probe.is_symlink():
            try:
                real = probe.resolve(strict=True)
            except (OSError, RuntimeError) as e:  # RuntimeError: a loop, on the Pythons before 3.13
                what = ("a symlink loop" if isinstance(e, RuntimeError) or "loop" in str(e).lower()
                        else f"a symlink to {os.readlink(probe)}, which does not exist")
                raise EmbexpError(f"cannot use the run directory {target}: {probe} is {what} (name a real "
                                  f"folder)") from None
            if probe == here:
                raise EmbexpError(f"cannot use the run directory {target}: it is a symlink (to {real}); embexp writes "
                                  f"a run only into a real folder, which the reports find by walking output_root "
                                  f"(hydra.run.dir={real} writes there)")
        if probe.exists() or probe == probe.parent:
            return probe
        probe = probe.parent


def limits(folder: Path) -> tuple[int, int]:
    """(the longest file name, the longest path) in bytes that the filesystem of ``folder`` takes."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX"), os.pathconf(folder, "PC_PATH_MAX")
    except (OSError, ValueError):
        return 255, 4096
