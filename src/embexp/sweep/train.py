"""The sweep's train commands: the runner's additions (``trainer.resume=true``, the extra overrides),
the run directory a cell writes, whether it is done or running in another live process (``run.lock``),
and a chosen value: the one whose train cell scored best on its held-out rows
(``embexp.core.records.best_held_out``, what the comparison reports)."""

from __future__ import annotations

import functools
import json
import shlex
import shutil
from pathlib import Path

from embexp import EmbexpError
from embexp.core.cli import warn
from embexp.core.records import METRICS, STATUS, best_held_out, is_complete
from embexp.run import lock


def args(cmd_args: list[str], extra: list[str]) -> list[str]:
    """Resumed (an interrupted cell continues from its checkpoint), the extra overrides appended."""
    out = list(cmd_args)
    if not any(a.startswith("trainer.resume=") for a in out):
        out.append("trainer.resume=true")
    return out + extra


def split_words(option: str, text: str) -> list[str]:
    """An option's value split as a shell splits it (``--extra``, ``--launch``): an unclosed quote is one line."""
    try:
        return shlex.split(text)
    except ValueError as e:
        raise EmbexpError(f"{option} {text!r}: {e} (valid: words as a shell splits them, every quote closed)") \
            from None


def launcher(launch: str, py: str, dry: bool) -> list[str]:
    """The words of ``--launch`` (train commands start with them), checked before any cell starts, a dry run
    too: the first is a program on PATH, or beside the interpreter ``--py`` (a venv's bin/accelerate: run by that
    path). A real run checks ``--py`` itself as well (a dry run prints it: make passes .venv/bin/python)."""
    if not dry and not shutil.which(py):
        raise EmbexpError(f"--py '{py}' is not an executable file (valid: the Python interpreter of the commands, "
                          "e.g. .venv/bin/python)")
    words = split_words("--launch", launch)
    if not words:
        return []
    found = shutil.which(words[0]) and words[0] or shutil.which(words[0], path=str(Path(py).parent))
    if not found:
        raise EmbexpError(f"--launch '{launch}': '{words[0]}' is not a program on PATH, beside --py {py} or an "
                          "executable file (valid: a launcher whose last words run a module, e.g. 'accelerate "
                          "launch -m', 'torchrun --nproc_per_node 2 -m')")
    return [found, *words[1:]]


def overrides(cmd_args: list[str]) -> list[str]:
    """The config overrides of a train command (no -m, no hydra launcher keys)."""
    return [a for a in cmd_args if "=" in a and not a.lstrip("+~").startswith(("hydra/", "hydra."))]


@functools.lru_cache(maxsize=None)
def composed(conf: str, cell_overrides: tuple[str, ...]):
    """A cell's config (``core.cli.compose_train``), composed once per sweep process and config tree: its
    dry run, its "done" probe and its run directory all read it, and the tree does not change while a sweep runs.
    Read only; a config that does not compose raises each time."""
    from embexp.core.cli import compose_train

    return compose_train(list(cell_overrides))


def composed_cell(cmd_args: list[str]):
    from embexp.core.cli import conf_dir

    return composed(str(conf_dir()), tuple(overrides(cmd_args)))


def run_dir(train_args: list[str], cfg=None) -> Path:
    """The run directory of a train command (``cfg``: its composed config, where the caller has it)."""
    from embexp.core.config import run_name

    c = cfg if cfg is not None else composed_cell(train_args)
    return Path(run_name(c.output_root, c.task.name, c.task.subset, c.model.name, c.method.name, c.tag, c.seed))


def cell(cmd_args: list[str]):
    """(run directory, composed config) of a cell, or None: a multirun (-m) or a config that does not compose
    (e.g. a method this checkout lacks: run it, and let the run say why)."""
    if "-m" in cmd_args:
        return None
    try:
        cfg = composed_cell(cmd_args)
    except EmbexpError:
        return None
    return run_dir(cmd_args, cfg), cfg


def done(cmd_args: list[str]) -> str:
    """The run directory of a cell that already finished, else '' (a multirun, -m, is never skipped; an unreadable
    status.json: one warning line; a complete run of another config: docs/running.md)."""
    from embexp.core.fingerprint import differences, result_fields
    from embexp.run.ownership import recorded_fields

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
    """'<run dir> running (host h, pid p, ...)' for a cell whose directory a live process owns, else '' (a dead
    owner's cell reads ``interrupted``, ``run.lock.state``, and is resumed)."""
    found = cell(cmd_args)
    owner = lock.live_owner(found[0]) if found else None
    return f"{found[0]} running ({lock.describe(owner)})" if owner is not None else ""


def scores(choice, candidates: list, extra: list[str]) -> list[tuple]:
    """(held-out score, value) of each candidate cell; one that has not finished stops the choice."""
    scored = []
    for value, cell_args in candidates:
        d = run_dir(list(cell_args) + list(extra))
        if not is_complete(d):
            raise EmbexpError(f"sweep: cannot choose {choice.var}: the candidate run {d} is not complete")
        scored.append((best_held_out(json.loads((d / METRICS).read_text())), value))
    return scored


def best(scored: list[tuple]) -> str:
    """The best-scoring value; a tie goes to the smaller value (the comparison report's rule: ties, the smaller
    lr), else to the earlier candidate."""
    def smaller(value: str) -> float:
        try:
            return -float(value)
        except ValueError:
            return 0.0
    return max(scored, key=lambda sv: (sv[0], smaller(sv[1])))[1]  # max keeps the earlier candidate on a full tie


def past_the_end(value: str, values: list[str]) -> str | None:
    """One grid step past the end of ``values`` that ``value`` is (the ratio of the two values at that end),
    or None when it is inside the grid."""
    v = sorted(values, key=float)
    if len(v) < 2 or value not in (v[0], v[-1]):
        return None
    lo, hi = (float(v[1]) / float(v[0]), None) if value == v[0] else (None, float(v[-1]) / float(v[-2]))
    return f"{float(v[0]) / lo:g}" if lo else f"{float(v[-1]) * hi:g}"


def tried(choice, extra: list[str]) -> list:
    """The candidates of a choice: its grid, then each finished cell the grid grew by (``runner.extended``)."""
    cands = list(choice.candidates)
    if choice.cell is None:
        return cands
    for _ in range(choice.most):
        nxt = past_the_end(best(scores(choice, cands, extra)), [v for v, _ in cands])
        if nxt is None or not is_complete(run_dir(list(choice.cell(nxt)) + list(extra))):
            break
        cands.append((nxt, [a for a in choice.cell(nxt) if a != ""]))
    return cands


def extension(choice, extra: list[str], dry: bool) -> str | None:
    """The value of an extension step (``runner.extended``): a grid step past the end the held-out best is at,
    or None (the best is inside the grid, or an earlier step has not been taken); a placeholder in a dry run."""
    values = [value for value, _ in choice.candidates]
    if dry:
        return (f"<{choice.var} one grid step past the held-out best, if it is an end of {' '.join(values)} "
                f"(step {choice.step} of {choice.most})>")
    cands = tried(choice, extra)
    if len(cands) - len(choice.candidates) != choice.step - 1:
        return None  # an earlier step was not needed (or did not finish)
    return past_the_end(best(scores(choice, cands, extra)), [v for v, _ in cands])


def chosen(choice, extra: list[str], dry: bool) -> str:
    """The value of ``choice`` (a ``runner.Choice``) whose candidate cell scored best on its held-out rows
    (a placeholder in a dry run); with an extended grid, its extension cells are candidates too."""
    values = [value for value, _ in choice.candidates]
    if dry:
        grown = " (and the cells its grid grew by)" if choice.cell is not None else ""
        return f"<{choice.var} chosen on held-out rows among {' '.join(values)}{grown}>"
    return best(scores(choice, tried(choice, extra), extra))
