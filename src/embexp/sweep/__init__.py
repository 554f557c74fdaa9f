"""Paper tables as sweeps: ``python -m embexp.sweep <spec> [--dry-run] [--extra "..."] [name=value ...]``.

A spec is a YAML file under ``conf/sweep/`` (``tinyte/table1`` is ``conf/sweep/tinyte/table1.yaml``):
data, never code. It names the commands behind one table, in order:

    vars:              the spec's variables and their defaults (seeds, models, judges, ...);
                       ``name=value`` on the command line replaces one (a list: ``seeds="0 1 2"`` or ``seeds=[0,1,2]``);
                       ``name: {default: v, choices: [...]}`` (or ``choices: method``, a config group) is its domain
    steps:             a list of steps; each step is one command per combination of its ``for`` axes

A step has one command key, ``train`` / ``analyze`` / ``judge`` / ``report`` / ``note`` (its
arguments: ``python -m embexp.<key> <args>``; a note prints ``# <its pieces joined>``), and optionally:

    for:     ordered axes (the first is the outermost loop): ``name: [a, b]``, ``name: $var`` (a list
             variable; ``$var:rest`` filtered), or items that are mappings binding several variables at once, e.g.
             ``cell: [{cell: base, seeds: "{seeds:first}"}, full]`` (the base cell sees one seed); a
             mapping's value ``$var`` binds the list variable itself (``{model: minilm, methods: $compare_encoder}``)
    let:     variables of this step (templates, read when used; ``{if: <cond>, then: a, else: b}`` chooses one)
    if:      a condition; the command runs only where it holds
    do:      nested steps that share this step's axes
    run_dir_of:     train overrides whose run directory becomes ``{run_dir}`` (e.g. to judge a cell's run)
    when_complete:  judge arguments: a train cell that is already complete is judged instead of skipped
    extra:   false: the command does not get --extra (an analysis with no train config, e.g. params)
    choose:  ``{var: lr, over: {lr: $grid}}``: before the command runs, ``{lr}`` becomes the candidate whose
             train cell (this step's train arguments with that binding, e.g. an earlier step's run at
             each lr of the grid) scored best on its held-out rows at any point of its curve
             (trainer.curve_select; the task's headline metric); the dry run prints a placeholder

Arguments and texts are templates: ``{name}`` is a variable; ``{name:csv}`` joins a list with commas,
``{name:ssv}`` with spaces, ``{name:first}`` takes its first item (``rest`` the others), ``{name:len}``
counts them, ``{name:without=a+b}`` /
``{name:only=a+b}`` filter it, ``{name:hub_id}`` is the ``id`` of ``conf/model/<name>.yaml`` and
``{name:settings=trainer}`` the top-level settings of ``conf/trainer/<name>.yaml``, ``{name:compare_lr}`` the
learning rate of method ``<name>`` in the comparison of every method (its class's ``comparison``; '' where
it trains nothing there) and ``{name:compare_grid}`` the three around it (× 0.3, 1, 3); filters chain with
``|``. ``${...}`` is Hydra's interpolation, passed through. An argument that renders empty is
dropped; ``$name`` splices a list variable (one argument per item); an argument may be ``{if:
<cond>, then: [...], else: [...]}``. A condition is a template, true when it renders non-empty
(``A == B``, ``A != B``, ``A in B C`` compare; ``not C`` negates; ``C and D``, ``C or D``). A variable
may declare its choices (``name: {default:
v, choices: [...]}``). Built-in variables: ``smoke`` (``1`` when the extra overrides select
``debug=smoke``), ``output_root`` (the extra's ``output_root=``, else empty), ``py``, ``data``
(``$EMBEXP_DATA``: the folder of local datasets), and
``compare_decoder`` / ``compare_encoder`` / ``compare_scratch``: the methods that take part in the
comparison on a model of that kind, in its order (lists read from the method classes,
``Method.comparison`` and ``Method.model_kinds``; ``embexp.methods.registry.compared``).

What the runner adds: ``--extra`` is appended to every train and analyze command; every train
command gets ``trainer.resume=true`` (an interrupted cell continues from its checkpoint); a train cell
whose run directory is complete, or owned by another live process (one ``# ... running (host, pid)``
line; a cell left ``running`` by a dead process is resumed), an ablation whose summary holds the command's metrics and a
judge's reference scoring already recorded are skipped (``--force`` reruns them); the report step
gets the extra's ``debug=`` and, with ``output_root=X``, ``runs=X out=X/tables/<paper>``. A failed
command does not stop the sweep: the report is rendered from what finished and the runner exits 1
listing the failures. ``--dry-run`` prints every command and runs nothing.

The package: this file is the runner; ``language.py`` the template language above; ``train.py``,
``analyze.py``, ``judge.py`` and ``report.py`` each command kind's additions and its "done" probe.
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import yaml

from embexp import EmbexpError, RunBusy
from embexp.core import cli
from embexp.core.config import MODEL_KINDS
from embexp.sweep import analyze, judge, report, train
from embexp.sweep.language import Scope, args_of, combinations, holds

KINDS = {"train": train, "analyze": analyze, "judge": judge, "report": report}  # each: args(), done()
COMMANDS = (*KINDS, "note")
STEP_KEYS = set(COMMANDS) | {"for", "let", "if", "do", "run_dir_of", "when_complete", "extra", "choose"}


def spec_dir() -> Path:
    return cli.conf_dir() / "sweep"


def spec_names() -> list[str]:
    root = spec_dir()
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))


def load_spec(name: str) -> dict:
    path = spec_dir() / f"{name}.yaml"
    if not path.is_file():
        raise EmbexpError(f"unknown sweep '{name}' (choose from: {', '.join(spec_names())})")
    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise EmbexpError(f"sweep spec {path}: not valid YAML ({' '.join(str(e).split())})") from None
    unknown = set(spec) - {"paper", "vars", "steps"}
    if unknown or not isinstance(spec.get("steps"), list):
        raise EmbexpError(f"sweep spec {path}: needs 'steps' (a list) and only the keys paper, vars, steps "
                          f"(got: {', '.join(sorted(spec))})")
    spec.setdefault("vars", {})
    return spec


def compared(kind: str) -> list[str]:
    """The built-in ``compare_<kind>``: read from the method classes (imported only when a spec uses it)."""
    from embexp.methods.registry import compared as of_kind

    return of_kind(kind)


def builtins(extra: list[str], py: str) -> dict:
    """The variables every spec sees (module doc)."""
    root = [e.split("=", 1)[1] for e in extra if e.startswith("output_root=")]
    out = {"smoke": "1" if "debug=smoke" in extra else "", "py": py, "data": os.environ.get("EMBEXP_DATA", ""),
           "output_root": root[-1] if root else ""}
    return out | {f"compare_{k}": functools.partial(compared, k) for k in MODEL_KINDS}


# ---- the commands of a spec --------------------------------------------------------------------
def expand(steps: list, scope: Scope) -> list[dict]:
    """Each step's commands in order: {kind, args, step, scope}."""
    out = []
    for step in steps:
        bad = set(step) - STEP_KEYS
        kinds = [k for k in COMMANDS if k in step]
        if bad or len(kinds) + ("do" in step) != 1:
            raise EmbexpError(f"sweep: a step needs exactly one of {', '.join(COMMANDS)}, do "
                              f"(got keys: {', '.join(step)})")
        for s in combinations(step.get("for") or {}, scope.child(step.get("let") or {})):
            if "if" in step and not holds(step["if"], s):
                continue
            if "do" in step:
                out += expand(step["do"], s)
            elif kinds[0] == "note":
                out.append({"kind": "note", "args": ["".join(args_of(step["note"], s))], "step": step, "scope": s})
            else:  # a step reading a cell's run directory (or a chosen value) renders its arguments when it runs
                args = [] if "run_dir_of" in step or "choose" in step else args_of(step[kinds[0]], s)
                out.append({"kind": kinds[0], "args": args, "step": step, "scope": s})
    return out


def parse_vars(spec: dict, assignments: list[str]) -> dict:
    """The spec's variables: defaults (``name: value``, or ``name: {default: v, choices: [...]}``)
    replaced by ``name=value`` assignments. A list variable takes ``[a,b]`` or ``"a b"``."""
    decl = {k: v if isinstance(v, dict) and "default" in v else {"default": v} for k, v in spec["vars"].items()}
    values = {k: d["default"] for k, d in decl.items()}
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
    for k, d in decl.items():
        check_var(k, d, values[k])
    return values


def check_var(name: str, decl: dict, value) -> None:
    """A variable's value inside its domain: ``choices`` (a list, or the name of a config group such as
    ``method``: its config names), for a list variable item by item; a variable whose default is whole
    numbers (seeds) takes whole numbers. One line naming the value and what is valid."""
    valid = decl.get("choices")
    if isinstance(valid, str):
        valid = cli.choices(valid)
    default = decl["default"]
    ints = all(isinstance(x, int) and not isinstance(x, bool) for x in (default if isinstance(default, list)
                                                                        else [default])) and default != []
    for item in value if isinstance(value, list) else [value]:
        if valid is not None and str(item) not in map(str, valid):
            raise EmbexpError(f"unknown {name}{' entry' if isinstance(value, list) else ''} '{item}' (choose from: "
                              f"{', '.join(map(str, valid))})")
        if ints and not str(item).lstrip("-").isdigit():
            raise EmbexpError(f"{name}: '{item}' is not a whole number (the spec's default: {default})")


def check_cells(name: str, cmds: list[dict], extra: list[str], paper: str) -> None:
    """Before anything runs (a dry run too): a spec with train steps whose variables leave it no train
    cell is an error, and the first train cell's config composes and lies inside its domains (what the
    variables and --extra put into every cell: seeds, steps, a learning rate). One line."""
    spec = load_spec(name)
    cells = [c for c in cmds if c["kind"] == "train"]
    if not cells and any("train" in step or "do" in step for step in spec["steps"]):
        raise EmbexpError(f"sweep {name}: no train cell for these variables (check them against the spec's vars: "
                          f"{', '.join(sorted(spec['vars']))})")
    for cmd in cells:
        args = with_extra(cmd, extra, paper)
        if "-m" in args or not args or any("<" in a for a in args):  # a multirun, or a value chosen later
            continue
        try:
            train.run_dir(args)  # composes and validates, as the cell's own command will
        except EmbexpError as e:
            raise EmbexpError(f"sweep {name}: its train cell does not compose: {e}") from None
        return


def commands(name: str, assignments: list[str] = (), extra: list[str] = (),
             py: str = sys.executable) -> tuple[dict, list[dict]]:
    """The spec and its commands (module arguments without the interpreter; extra not yet added)."""
    spec = load_spec(name)
    scope = Scope(builtins(list(extra), py))
    scope.update(parse_vars(spec, list(assignments)))  # a spec's own variable wins over a built-in one
    return spec, expand(spec["steps"], scope)


def with_extra(cmd: dict, extra: list[str], paper: str) -> list[str]:
    """The arguments the runner adds (module doc): its kind's ``args`` (a note's text as it is)."""
    if cmd["kind"] not in KINDS:
        return list(cmd["args"])
    extra = list(extra) if cmd["step"].get("extra", True) else []
    return KINDS[cmd["kind"]].args(cmd["args"], extra, paper)


def command_lines(name: str, assignments: list[str] = (), extra: list[str] = ()) -> list[list[str]]:
    """Every command of a spec as ``["-m", "embexp.<kind>", *args]`` (what --dry-run prints after the
    interpreter), the runner's additions included; notes left out."""
    spec, cmds = commands(name, list(assignments), list(extra))
    paper = spec.get("paper", name.split("/")[0])
    out = []
    for cmd in cmds:
        if cmd["kind"] != "note":
            resolve(cmd, list(extra), dry=True)
            out.append(["-m", f"embexp.{cmd['kind']}", *with_extra(cmd, list(extra), paper)])
    return out


def done(kind: str, args: list[str]) -> str:
    """The folder of a command that already finished, else '' (its kind's probe)."""
    return KINDS[kind].done(args)


def resolve(cmd: dict, extra: list[str], dry: bool = False) -> None:
    """Bind {run_dir} for a step that reads a train cell's directory (run_dir_of), and a chosen value
    (choose) from the finished candidate cells (a placeholder in a dry run, or while one is missing)."""
    step, scope = cmd["step"], cmd["scope"]
    if "choose" in step:
        var = step["choose"]["var"]
        scope = scope.child({var: train.chosen(step, scope, extra, dry)})
    if "run_dir_of" in step:
        scope = scope.child({"run_dir": str(train.run_dir(args_of(step["run_dir_of"], scope) + list(extra)))})
    if "choose" in step or "run_dir_of" in step:
        cmd["args"] = args_of(step[cmd["kind"]], scope)


def execute(cmd: list[str]) -> int:
    """Run one command; its exit status (tests run the commands in-process instead)."""
    return subprocess.run(cmd).returncode


def parser() -> argparse.ArgumentParser:
    """The runner's command line."""
    ap = argparse.ArgumentParser(prog="python -m embexp.sweep", description=__doc__.split("\n\n")[0])
    ap.add_argument("args", nargs="*", metavar="spec | name=value",
                    help="a spec under conf/sweep/ (e.g. tinyte/table1; --list names them) and name=value: "
                         "a variable of the spec (its vars: section)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--extra", default="",
                    help="overrides appended to every train and analyze command (e.g. 'debug=smoke')")
    ap.add_argument("--py", default=sys.executable, help="the Python interpreter of the commands")
    ap.add_argument("--launch", default="",
                    help="prefix for train commands instead of '<py> -m' (e.g. 'accelerate launch -m')")
    ap.add_argument("--force", action="store_true",
                    help="rerun commands whose output is complete (train cells with trainer.overwrite=true)")
    ap.add_argument("--list", action="store_true", help="list the specs")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_intermixed_args(argv)
    names = [x for x in a.args if "=" not in x]
    if a.list or not names:
        print("\n".join(spec_names()))
        return 0
    if len(names) > 1:
        raise EmbexpError(f"one sweep at a time (got: {', '.join(names)})")
    a.spec = names[0]
    extra = shlex.split(a.extra)
    spec, cmds = commands(a.spec, [x for x in a.args if "=" in x], extra, a.py)
    paper = spec.get("paper", a.spec.split("/")[0])

    def line(cmd: dict, args: list[str]) -> list[str]:
        if a.launch and cmd["kind"] == "train":
            return shlex.split(a.launch) + ["embexp.train", *args]
        return [a.py, "-m", f"embexp.{cmd['kind']}", *args]

    check_cells(a.spec, cmds, extra, paper)
    runnable = [c for c in cmds if c["kind"] != "note"]
    failed, elsewhere, t0, i = [], [], time.perf_counter(), 0
    for cmd in cmds:
        if cmd["kind"] == "note":
            print(f"# {cmd['args'][0]}", flush=True)
            continue
        try:
            resolve(cmd, extra, dry=a.dry_run)
        except EmbexpError as e:  # e.g. a choice whose candidate cells failed: this command fails, the sweep runs on
            failed.append(str(e))
            continue
        args = with_extra(cmd, extra, paper)
        if a.force and cmd["kind"] == "train":  # rerun a complete cell: replace its run, never resume it
            args = [x for x in args if not x.startswith("trainer.resume=")] + ["trainer.overwrite=true"]
        if a.dry_run:
            print(shlex.join(line(cmd, args)), flush=True)
            continue
        i += 1
        busy = train.running(args) if cmd["kind"] == "train" else ""
        if busy:  # another live process owns the cell's run directory (another sweep, say): never twice
            print(f"[{i}/{len(runnable)}] # {busy}: skipped", flush=True)
            elsewhere.append(busy)
            continue
        prev = "" if a.force else done(cmd["kind"], args)
        if prev and "when_complete" in cmd["step"]:  # judge the finished run instead of training it again
            run = [a.py, "-m", "embexp.judge", f"run_dir={prev}", *args_of(cmd["step"]["when_complete"], cmd["scope"])]
            run += [e for e in extra if e.startswith("judge.")]
        elif prev:
            print(f"[{i}/{len(runnable)}] skip (complete): {prev}", flush=True)
            continue
        else:
            run = line(cmd, args)
        print(f"[{i}/{len(runnable)}] {shlex.join(run)}", flush=True)
        rc = execute(run)
        if rc == RunBusy.exit_code and cmd["kind"] == "train":  # taken by another process since the probe
            elsewhere.append(shlex.join(run))
        elif rc != 0:  # a report that fails fails the sweep too
            failed.append(shlex.join(run))
    if not a.dry_run:
        ok = len(runnable) - len(failed) - len(elsewhere)
        print(f"{a.spec}: {ok}/{len(runnable)} commands ok in {time.perf_counter() - t0:.0f} s")
    for f in elsewhere:
        print(f"RUNNING ELSEWHERE (rerun the sweep when it ends): {f}", file=sys.stderr)
    for f in failed:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failed else 0


@cli.one_line_errors
def entry(argv: list[str] | None = None) -> None:
    sys.exit(main(argv))


if __name__ == "__main__":
    entry()
