"""The sweep runner: ``python -m embexp.sweep <paper>/<table> [--dry-run] [--extra "..."] [name=value ...]``.

A paper table's sweep is a Python function in ``embexp/sweep/papers/<paper>.py`` that yields its
commands in order (train, analyze, judge, report, and notes), read top to bottom; its variables
(seeds, models, ...) are plain data beside it (:class:`Var`: a default and the allowed choices).
``name=value`` on the command line replaces one (a list: ``seeds="0 1 2"`` or ``seeds=[0,1,2]``).
Besides its own variables a table sees ``smoke`` (the extra selects ``debug=smoke``), ``output_root``
(the extra's ``output_root=``, else ''), ``data`` (``$EMBEXP_DATA``: the folder of local datasets)
and ``py``.

What the runner adds: ``--extra`` is appended to every train and analyze command; every train
command gets ``trainer.resume=true`` (an interrupted cell continues from its checkpoint); a train cell
whose run directory is complete, or owned by another live process (one ``# ... running (host, pid)``
line; a cell left ``running`` by a dead process is resumed), an ablation whose summary holds the
command's metrics and a judge's reference scoring already recorded are skipped (``--force`` reruns
them); a train cell that is complete and carries ``when_complete`` is judged instead of skipped; the
report step gets the extra's ``debug=`` and, with ``output_root=X``, ``runs=X out=X/tables/<paper>``.
A train command built by :func:`chosen` takes the learning rate (or any value) whose candidate cell
scored best on its held-out rows, once those cells have finished (the dry run prints a placeholder).
A failed command does not stop the sweep: the report is rendered from what finished and the runner
exits 1 listing the failures. A stop signal does (Ctrl-C, SIGTERM, SIGUSR1): it is passed on to the
running command, a train cell checkpoints its step, and no later command starts (:func:`execute`).
``--dry-run`` prints every command and runs nothing.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from embexp import EmbexpError, RunBusy, SweepStopped
from embexp.core import cli
from embexp.core.plugins import discover
from embexp.run.stops import passing_on
from embexp.sweep import probes
from embexp.sweep import train as train_kind

GRID = (0.3, 1.0, 3.0)  # compare_grid: the learning rates tried around a method's comparison lr
EXTEND = 2  # extended: grid steps a choice may take past the end of its grid


# ---- what a table declares and yields ------------------------------------------------------------
@dataclass(frozen=True)
class Var:
    """A table's variable: its default (a list, or one value) and, where it has one, its domain:
    ``choices`` is a list or the name of a config group (``"method"``: its config names). A variable
    whose default is whole numbers (seeds) takes whole numbers. ``None`` as the default: the table
    computes the value (e.g. from ``smoke``) unless the command line sets it."""

    default: object
    choices: list | str | None = None
    help: str = ""


@dataclass
class Choice:
    """A value chosen when the command runs: among ``candidates`` (value, train arguments of the
    candidate's cell), the one whose cell scored best on its held-out rows."""

    var: str
    candidates: list[tuple[str, list[str]]]
    cell: Callable[[str], list[str]] | None = None  # any value's candidate cell: the grid may grow past an end
    most: int = 0  # how many grid steps past an end it may grow (``extended``)
    step: int = 0  # an extension command: which of those steps it is


@dataclass
class Command:
    """One command of a sweep. ``build`` makes the arguments when they depend on what ran before: the
    chosen value (``choice``) or the run directory of ``run_dir_of`` (a train cell's overrides)."""

    kind: str  # train, analyze, judge, report, note
    args: list[str]
    extra: bool = True  # False: the command does not get --extra (an analysis with no train config)
    when_complete: list[str] | None = None  # judge arguments: a complete train cell is judged instead
    choice: Choice | None = None
    run_dir_of: list[str] | None = None
    build: Callable[[str], list[str]] | None = None
    extends: bool = False  # a grid step past the end the held-out best sits at, or nothing (``extended``)


def train(*args: str, when_complete: list[str] | None = None) -> Command:
    return Command("train", [a for a in args if a != ""], when_complete=when_complete)


def chosen(var: str, candidates: dict[str, list[str]], build: Callable[[str], list[str]],
           cell: Callable[[str], list[str]] | None = None, most: int = 0) -> Command:
    """A train command whose ``var`` is chosen on held-out rows among the finished candidate cells
    (value -> the cell's train arguments); ``build(value)`` gives its arguments. With ``cell`` and ``most``
    (those of ``extended``), the cells its grid grew by are candidates too."""
    cells = [(value, [a for a in args if a != ""]) for value, args in candidates.items()]
    return Command("train", [], choice=Choice(var, cells, cell, most), build=build)


def extended(var: str, candidates: dict[str, list[str]], cell: Callable[[str], list[str]],
             most: int = EXTEND) -> list[Command]:
    """The grid rule: when the candidate that scored best on its held-out rows is an end of the grid (its
    smallest or largest value), one more cell a grid step past that end (the ratio of the two values at
    that end), again while the best stays at the end, at most ``most`` times. A choice at the edge of its
    grid is not a choice: the optimum may lie beyond it. ``cell(value)``: the candidate cell of a value."""
    cells = [(value, [a for a in args if a != ""]) for value, args in candidates.items()]
    return [Command("train", [], choice=Choice(var, cells, cell, most, step), build=cell, extends=True)
            for step in range(1, most + 1)]


def analyze(*args: str, extra: bool = True) -> Command:
    return Command("analyze", [a for a in args if a != ""], extra=extra)


def judge_run(run_dir_of: list[str], build: Callable[[str], list[str]]) -> Command:
    """A judge command reading a train cell's run directory (``build(run_dir)`` gives its arguments)."""
    return Command("judge", [], run_dir_of=list(run_dir_of), build=build)


def report(*args: str) -> Command:
    return Command("report", [a for a in args if a != ""])


def note(text: str) -> Command:
    return Command("note", [text])


@dataclass
class Table:
    name: str  # <paper>/<table>
    paper: str
    commands: Callable[[Values], Iterator[Command]]
    vars: dict[str, Var] = field(default_factory=dict)
    trains: bool = True  # a table that trains: variables leaving it no train cell are an error


TABLES: dict[str, Table] = {}


def table(trains: bool = True, **variables: Var):
    """Register a function of ``embexp.sweep.papers.<paper>`` as the sweep ``<paper>/<function name>``."""

    def register(fn):
        paper = fn.__module__.rsplit(".", 1)[-1]
        TABLES[f"{paper}/{fn.__name__}"] = Table(f"{paper}/{fn.__name__}", paper, fn, dict(variables), trains)
        return fn

    return register


class Values(dict):
    """A table's variables (lists of strings, or strings) and the built-ins, read as attributes."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def first_seed(self) -> str:
        return self["seeds"][0] if self["seeds"] else ""


# ---- helpers the tables use ------------------------------------------------------------------------
def switched_on(value: str) -> bool:
    """A switch variable: set unless '', 0, false or no."""
    return str(value).strip() not in ("", "0", "false", "False", "no")


def compare_grid(method: str) -> list[str]:
    """The three learning rates around a method's comparison lr (x 0.3, 1, 3); none where it trains
    nothing there."""
    from embexp.methods.registry import compare_lr

    lr = compare_lr(method)
    return [f"{float(lr) * k:g}" for k in GRID] if lr else []


# ---- the tables and their variables ----------------------------------------------------------------
def load_tables() -> dict[str, Table]:
    """Every table (importing each module of ``embexp.sweep.papers`` registers its functions)."""
    discover("embexp.sweep.papers")
    return TABLES


def spec_names() -> list[str]:
    return sorted(load_tables())


def get_table(name: str) -> Table:
    tables = load_tables()
    if name not in tables:
        raise EmbexpError(f"unknown sweep '{name}' (choose from: {', '.join(sorted(tables))})")
    return tables[name]


def extra_root(extra: list[str]) -> str:
    """The extra's ``output_root=`` (the last one), else ''."""
    return next((e.split("=", 1)[1] for e in reversed(extra) if e.startswith("output_root=")), "")


def builtins(extra: list[str], py: str) -> dict:
    """The variables every table sees (module doc)."""
    return {"smoke": "debug=smoke" in extra, "py": py, "data": os.environ.get("EMBEXP_DATA", ""),
            "output_root": extra_root(extra)}


def parse_vars(tab: Table, assignments: list[str]) -> dict:
    """The table's variables: defaults replaced by ``name=value`` assignments (a list variable takes
    ``[a,b]`` or ``"a b"``), checked against their domains; lists of strings, or strings."""
    values = {k: d.default for k, d in tab.vars.items()}
    for a in assignments:
        key, eq, val = a.partition("=")
        if not eq or key not in values:
            raise EmbexpError(f"unknown sweep variable '{key}' (choose from: {', '.join(sorted(values)) or 'none'})")
        if isinstance(values[key], list):
            val = val.strip()
            items = val[1:-1].split(",") if val.startswith("[") and val.endswith("]") else shlex.split(val)
            values[key] = [x for x in items if x]
        else:
            values[key] = val
    for k, d in tab.vars.items():
        check_var(k, d, values[k])
    return {k: [str(x) for x in v] if isinstance(v, list) else (None if v is None else str(v))
            for k, v in values.items()}


def check_var(name: str, decl: Var, value) -> None:
    """A variable's value inside its domain, for a list variable item by item (one line naming the
    value and what is valid)."""
    valid = decl.choices
    if isinstance(valid, str):
        valid = cli.choices(valid)
    default = decl.default
    ints = default != [] and default is not None and all(
        isinstance(x, int) and not isinstance(x, bool) for x in (default if isinstance(default, list) else [default]))
    for item in value if isinstance(value, list) else [] if value is None else [value]:
        if valid is not None and str(item) not in map(str, valid):
            raise EmbexpError(f"unknown {name}{' entry' if isinstance(value, list) else ''} '{item}' (choose from: "
                              f"{', '.join(map(str, valid))})")
        if ints and not str(item).lstrip("-").isdigit():
            raise EmbexpError(f"{name}: '{item}' is not a whole number (the table's default: {default})")


def commands(name: str, assignments: list[str] = (), extra: list[str] = (),
             py: str = sys.executable) -> tuple[Table, list[Command]]:
    """The table and its commands (module arguments without the interpreter; extra not yet added)."""
    tab = get_table(name)
    values = Values(builtins(list(extra), py))
    values.update(parse_vars(tab, list(assignments)))  # a table's own variable wins over a built-in one
    return tab, list(tab.commands(values))


def check_cells(tab: Table, cmds: list[Command], extra: list[str]) -> None:
    """Before anything runs (a dry run too): a table that trains but has no train cell for these
    variables is an error, and the first train cell's config composes and lies inside its domains
    (what the variables and --extra put into every cell: seeds, steps, a learning rate). One line."""
    cells = [c for c in cmds if c.kind == "train"]
    if not cells and tab.trains:
        raise EmbexpError(f"sweep {tab.name}: no train cell for these variables (check them against the table's "
                          f"variables: {', '.join(sorted(tab.vars))})")
    for cmd in cells:
        args = with_extra(cmd, extra, tab.paper)
        if "-m" in args or cmd.build is not None:  # a multirun, or a value chosen later
            continue
        try:
            train_kind.run_dir(args)  # composes and validates, as the cell's own command will
        except EmbexpError as e:
            raise EmbexpError(f"sweep {tab.name}: its train cell does not compose: {e}") from None
        return


def with_extra(cmd: Command, extra: list[str], paper: str) -> list[str]:
    """A command's arguments with what the runner adds (module doc); a judge command and a note as written."""
    extra = list(extra) if cmd.extra else []
    out = list(cmd.args)
    if cmd.kind == "train":
        return train_kind.args(out, extra)
    if cmd.kind == "analyze":
        return out + extra
    if cmd.kind == "report":
        root = extra_root(extra)
        out += [e for e in extra if e.startswith("debug=")]
        if root and not any(a.startswith("runs=") for a in out):
            out.append(f"runs={root}")
        if root and not any(a.startswith("out=") for a in out):
            out.append(f"out={root}/tables/{paper}")
    return out


def command_lines(name: str, assignments: list[str] = (), extra: list[str] = ()) -> list[list[str]]:
    """Every command of a table as ``["-m", "embexp.<kind>", *args]`` (what --dry-run prints after the
    interpreter), the runner's additions included; notes left out."""
    tab, cmds = commands(name, list(assignments), list(extra))
    out = []
    for cmd in cmds:
        if cmd.kind != "note":
            resolve(cmd, list(extra), dry=True)
            out.append(["-m", f"embexp.{cmd.kind}", *with_extra(cmd, list(extra), tab.paper)])
    return out


def done(kind: str, args: list[str]) -> str:
    """The folder of a command that already finished, else '' (a report is never done: it is rendered again
    from whatever finished)."""
    probe = {"train": train_kind.done, "analyze": probes.ablation_done, "judge": probes.reference_done}.get(kind)
    return probe(args) if probe else ""


def resolve(cmd: Command, extra: list[str], dry: bool = False) -> None:
    """The arguments of a command built from what ran before: the chosen value (a placeholder in a dry
    run) or a train cell's run directory."""
    if cmd.extends:
        value = train_kind.extension(cmd.choice, extra, dry)
        cmd.args = [a for a in cmd.build(value) if a != ""] if value is not None else []
    elif cmd.choice is not None:
        cmd.args = [a for a in cmd.build(train_kind.chosen(cmd.choice, extra, dry)) if a != ""]
    elif cmd.run_dir_of is not None:
        cmd.args = [a for a in cmd.build(str(train_kind.run_dir(cmd.run_dir_of + list(extra)))) if a != ""]


def execute(cmd: list[str]) -> int:
    """Run one command; its exit status (tests run the commands in-process instead). A stop signal is passed on
    to it (``run.stops.passing_on``, module doc); once it ends, :class:`SweepStopped` instead of the next."""
    proc = subprocess.Popen(cmd)
    with passing_on(proc) as got:
        rc = proc.wait()
    if got:
        raise SweepStopped(got[0], cmd, rc)
    return rc


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m embexp.sweep", description=__doc__.split("\n\n")[0])
    ap.add_argument("args", nargs="*", metavar="table | name=value",
                    help="a paper table (e.g. tinyte/table1; --list names them) and name=value: one of its "
                         "variables (embexp/sweep/papers/<paper>.py)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--extra", default="",
                    help="overrides appended to every train and analyze command (e.g. 'debug=smoke')")
    ap.add_argument("--py", default=sys.executable, help="the Python interpreter of the commands")
    ap.add_argument("--launch", default="",
                    help="prefix for train commands instead of '<py> -m' (e.g. 'accelerate launch -m')")
    ap.add_argument("--force", action="store_true",
                    help="rerun commands whose output is complete (train cells with trainer.overwrite=true)")
    ap.add_argument("--list", action="store_true", help="list the tables")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_intermixed_args(argv)
    names = [x for x in a.args if "=" not in x]
    if a.list or not names:
        print("\n".join(spec_names()))
        return 0
    if len(names) > 1:
        raise EmbexpError(f"one sweep at a time (got: {', '.join(names)})")
    extra = train_kind.split_words("--extra", a.extra)
    launch = train_kind.launcher(a.launch, a.py, a.dry_run)  # before any cell starts, a dry run too
    tab, cmds = commands(names[0], [x for x in a.args if "=" in x], extra, a.py)

    def line(cmd: Command, args: list[str]) -> list[str]:
        if launch and cmd.kind == "train":
            return launch + ["embexp.train", *args]
        return [a.py, "-m", f"embexp.{cmd.kind}", *args]

    check_cells(tab, cmds, extra)
    runnable = [c for c in cmds if c.kind != "note"]
    failed, elsewhere, t0, i = [], [], time.perf_counter(), 0
    for cmd in cmds:
        if cmd.kind == "note":
            print(f"# {cmd.args[0]}", flush=True)
            continue
        try:
            resolve(cmd, extra, dry=a.dry_run)
        except EmbexpError as e:  # e.g. a choice whose candidate cells failed: this command fails, the sweep runs on
            failed.append(str(e))
            continue
        if cmd.extends and not cmd.args:  # the held-out best is inside the grid (or the steps are spent)
            print(f"# {cmd.choice.var}: the held-out best is inside its grid, no extension", flush=True)
            continue
        args = with_extra(cmd, extra, tab.paper)
        if a.force and cmd.kind == "train":  # rerun a complete cell: replace its run, never resume it
            args = [x for x in args if not x.startswith("trainer.resume=")] + ["trainer.overwrite=true"]
        if a.dry_run:
            print(shlex.join(line(cmd, args)), flush=True)
            continue
        i += 1
        busy = train_kind.running(args) if cmd.kind == "train" else ""
        if busy:  # another live process owns the cell's run directory (another sweep, say): never twice
            print(f"[{i}/{len(runnable)}] # {busy}: skipped", flush=True)
            elsewhere.append(busy)
            continue
        prev = "" if a.force else done(cmd.kind, args)
        if prev and cmd.when_complete is not None:  # judge the finished run instead of training it again
            run = [a.py, "-m", "embexp.judge", f"run_dir={prev}", *cmd.when_complete]
            run += [e for e in extra if e.startswith("judge.")]
        elif prev:
            print(f"[{i}/{len(runnable)}] skip (complete): {prev}", flush=True)
            continue
        else:
            run = line(cmd, args)
        print(f"[{i}/{len(runnable)}] {shlex.join(run)}", flush=True)
        rc = execute(run)
        if rc == RunBusy.exit_code and cmd.kind == "train":  # taken by another process since the probe
            elsewhere.append(shlex.join(run))
        elif rc != 0:  # a report that fails fails the sweep too
            failed.append(shlex.join(run))
    if not a.dry_run:
        ok = len(runnable) - len(failed) - len(elsewhere)
        print(f"{tab.name}: {ok}/{len(runnable)} commands ok in {time.perf_counter() - t0:.0f} s")
    for f in elsewhere:
        print(f"RUNNING ELSEWHERE (rerun the sweep when it ends): {f}", file=sys.stderr)
    for f in failed:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failed else 0


@cli.one_line_errors
def entry(argv: list[str] | None = None) -> None:
    sys.exit(main(argv))
