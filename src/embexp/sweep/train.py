"""The sweep's train commands: the runner's additions (``trainer.resume=true``, the extra overrides),
the run directory a cell writes, whether it is done or running in another live process (``run.lock``),
and a chosen value: the one whose train cell scored best on its held-out rows
(``embexp.core.records.best_held_out``, what the comparison reports)."""

from __future__ import annotations

import json
from pathlib import Path

from embexp import EmbexpError
from embexp.core.cli import warn
from embexp.core.records import METRICS, STATUS, best_held_out, is_complete
from embexp.run import lock


def args(cmd_args: list[str], extra: list[str], paper: str) -> list[str]:
    """Resumed (an interrupted cell continues from its checkpoint), the extra overrides appended."""
    out = list(cmd_args)
    if not any(a.startswith("trainer.resume=") for a in out):
        out.append("trainer.resume=true")
    return out + extra


def overrides(cmd_args: list[str]) -> list[str]:
    """The config overrides of a train command (no -m, no hydra launcher keys)."""
    return [a for a in cmd_args if "=" in a and not a.lstrip("+~").startswith(("hydra/", "hydra."))]


def run_dir(train_args: list[str], cfg=None) -> Path:
    """The run directory of a train command (``cfg``: its composed config, where the caller has it)."""
    from embexp.core.cli import compose_train
    from embexp.core.config import run_name

    c = cfg if cfg is not None else compose_train(overrides(train_args))
    return Path(run_name(c.output_root, c.task.name, c.task.subset, c.model.name, c.method.name, c.tag, c.seed))


def cell(cmd_args: list[str]):
    """(run directory, composed config) of a cell, or None: a multirun (-m) or a config that does not compose
    (e.g. a method this checkout lacks: run it, and let the run say why)."""
    from embexp.core.cli import compose_train

    if "-m" in cmd_args:
        return None
    try:
        cfg = compose_train(overrides(cmd_args))
    except EmbexpError:
        return None
    return run_dir(cmd_args, cfg), cfg


def cell_dir(cmd_args: list[str]) -> Path | None:
    found = cell(cmd_args)
    return found[0] if found else None


def done(cmd_args: list[str]) -> str:
    """The run directory of a cell that already finished, else '' (a multirun, -m, is never skipped). A
    status.json that cannot be read is named in one warning line, and the cell runs again (resumed). A
    complete run of another config (its fingerprint, run.claim) is not this cell's: the cell runs, and
    stops in one line naming the fields that differ."""
    from embexp.core.fingerprint import differences, result_fields
    from embexp.run.claim import recorded_fields

    found = cell(cmd_args)
    if found is None:
        return ""
    d, cfg = found
    status, _ = lock.state(d)
    if status == "unreadable":
        warn(f"{d / STATUS} cannot be read: the cell runs again (trainer.resume=true)")
    if status != "complete" or not is_complete(d):
        return ""
    try:
        same = not differences(recorded_fields(d), result_fields(cfg))
    except EmbexpError:  # an unreadable record: the cell's own run names it
        same = False
    return str(d) if same else ""


def running(cmd_args: list[str]) -> str:
    """'<run dir> running (host h, pid p, ...)' for a cell whose directory a live process owns (another
    sweep, a launch of the same cell), else ''. A cell left ``running`` by a dead process reads
    ``interrupted`` (``run.lock.state``) and is resumed."""
    d = cell_dir(cmd_args)
    owner = lock.live_owner(d) if d is not None else None
    return f"{d} running ({lock.describe(owner)})" if owner is not None else ""


def chosen(choice, extra: list[str], dry: bool) -> str:
    """The value of ``choice`` (a ``runner.Choice``) whose candidate cell scored best on its held-out rows
    (a placeholder in a dry run)."""
    values = [value for value, _ in choice.candidates]
    placeholder = f"<{choice.var} chosen on held-out rows among {' '.join(values)}>"
    if dry:
        return placeholder
    scored = []
    for value, cell_args in choice.candidates:
        d = run_dir(list(cell_args) + list(extra))
        if not is_complete(d):
            raise EmbexpError(f"sweep: cannot choose {choice.var}: the candidate run {d} is not complete")
        scored.append((best_held_out(json.loads((d / METRICS).read_text())), value))
    return max(scored, key=lambda sv: sv[0])[1]  # max of (score, ...): ties keep the first candidate's order
