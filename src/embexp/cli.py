"""Entry-point plumbing: find the config tree, check group choices early, print one-line errors."""

from __future__ import annotations

import functools
import logging
import os
import sys
import warnings
from pathlib import Path

from embexp import EmbexpError

GROUPS = ("method", "model", "task", "trainer", "experiment", "debug")


def conf_dir() -> Path:
    """The Hydra config tree: $EMBEXP_CONF, else conf/ of the source checkout."""
    env = os.environ.get("EMBEXP_CONF")
    d = Path(env) if env else Path(__file__).resolve().parents[2] / "conf"
    if not (d / "train.yaml").is_file():
        die(f"config tree not found at {d} (set EMBEXP_CONF to the embexp conf/ folder)")
    return d


def choices(group: str) -> list[str]:
    return sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))


def die(message: str, code: int = 2) -> None:
    print(f"embexp: error: {message}", file=sys.stderr)
    sys.exit(code)


def check_overrides(argv: list[str]) -> None:
    """Reject unknown group choices (method=foo) with one line naming the valid ones."""
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        key = key.lstrip("+~")
        if key not in GROUPS:
            continue
        for v in value.split(","):
            if v and v != "null" and v not in choices(key):
                die(f"unknown {key} '{v}' (choose from: {', '.join(choices(key))})")


def quiet_libraries() -> None:
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    logging.getLogger("accelerate").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=UserWarning, module="torch")


def setup_logging(run_dir: Path | None, is_main: bool) -> None:
    log = logging.getLogger("embexp")
    log.setLevel(logging.INFO if is_main else logging.WARNING)
    log.propagate = False
    log.handlers.clear()
    fmt = logging.Formatter("[%(asctime)s] %(message)s", "%H:%M:%S")
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(fmt)
    log.addHandler(h)
    if run_dir is not None and is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        fh = logging.FileHandler(run_dir / "train.log")
        fh.setFormatter(fmt)
        log.addHandler(fh)


def one_line_errors(fn):
    """Turn EmbexpError (and config errors) raised by an entry point into one stderr line, exit 1."""

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        try:
            return fn(*a, **kw)
        except EmbexpError as e:
            die(str(e), code=1)

    return wrapper
