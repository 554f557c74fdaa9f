"""Shared test helpers: compose the real Hydra configs with CPU/tiny overrides."""

from __future__ import annotations

import ast
import copy
import functools
import gc
import os
import sys
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# task.data_dir defaults to $EMBEXP_DATA: the tests never read it (nor do their subprocesses), so a
# developer's setting cannot turn the hub or fixture cells into local ones; the few checks on real
# rows read DATA and skip without it
DATA = Path(os.environ.pop("EMBEXP_DATA")) if os.environ.get("EMBEXP_DATA") else None
# make test runs a pytest-xdist worker per core: each computes on its share of the cores (two workers of
# two threads each on two cores spin against each other); OMP_NUM_THREADS=1 beside another job
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or max(1, min(2, os.cpu_count() or 1) // WORKERS)))

import embexp.train  # noqa: E402,F401  (registers every schema)
from embexp.core.cli import conf_dir  # noqa: E402

CONF = conf_dir()
# what is imported by now (torch, transformers, hydra, embexp) lives for the whole session: the collector need
# not walk it again on each of the many collections that Hydra's and OmegaConf's deep copies trigger
gc.freeze()

# Tests that start processes (python, make, accelerate launch, torchrun) or bind ports are marked
# @pytest.mark.serial: under pytest-xdist (--dist loadgroup) they form one group that a single worker runs one at
# a time, first (the longest unit of work; the other worker meanwhile takes the in-process tests). A test that
# starts such a process without the mark fails at the start, so that the rule holds for new tests.
# The other tests go to the workers file by file: a file's tests compose the same config trees, which a
# worker keeps (compose below); spread test by test, both workers composed most of them
# (make test: 317 s of CPU where it took 363 s, one run each).
# The groups are the scheduler's own (pytest_xdist_make_scheduler, xdist's hook for a scheduler): xdist's loadgroup
# reads an xdist_group mark through a suffix it writes into the test's node id, which pytest 9.2 no longer takes
# (pytest-xdist issue #1386), so that every test went to the next free worker.
LAUNCHERS = ("python", "make", "accelerate", "torchrun")
# handed out first, in this order: the serial unit (the longest), then files whose few tests take long (seconds at
# -n 2: test_conf_defaults 14 in one test, test_compare 10 in four), which as the last unit left one worker idle
FIRST = ("serial", "test_conf_defaults.py", "test_compare.py")
TESTS = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=None)
def serial_tests() -> frozenset[str]:
    """``<file>::<function>`` of each test function decorated ``@pytest.mark.serial``, read from the test files'
    source: the controller of pytest-xdist, which schedules, collects no test itself."""
    out = set()
    for path in sorted(TESTS.glob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and "pytest.mark.serial" in map(ast.unparse, node.decorator_list):
                out.add(f"{path.name}::{node.name}")
    return frozenset(out)


def group(nodeid: str) -> str:
    """The unit of work of a test (its node id, from any rootdir) under pytest-xdist: 'serial', else its file."""
    file, _, test = nodeid.partition("::")
    return "serial" if f"{Path(file).name}::{test.split('[')[0]}" in serial_tests() else file


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup: xdist's scope scheduler over :func:`group`, the units of :data:`FIRST` first, then the
    files with the most tests."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group(nodeid)

        def _assign_work_unit(self, node) -> None:
            # the units wait in xdist's OrderedDict, the files with most tests first; the serial unit and the files
            # of few long tests go before them, so that the last units the two workers take are short
            for name in reversed(FIRST):
                for unit in [u for u in self.workqueue if Path(u).name == name]:
                    self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

    return Groups(config, log)


def pytest_collection_modifyitems(config, items):
    """A serial mark that :func:`serial_tests` cannot read (not a decorator of the test function) is an error:
    its test would share a worker's turn with another serial one."""
    unread = [i.nodeid for i in items if i.get_closest_marker("serial") and group(i.nodeid) != "serial"
              and i.path.parent == TESTS]
    if unread:
        raise pytest.UsageError(f"@pytest.mark.serial goes on the test function itself: {', '.join(unread)}")


class Launches:
    """The test that runs now, unless it is marked serial: the audit hook below fails it when it starts a launcher.
    Python's audit hooks (``sys.addaudithook``, event ``subprocess.Popen``) see every process start, through
    subprocess and everything built on it, and replace nothing."""

    guarded: str | None = None

    @staticmethod
    def hook(event: str, args: tuple) -> None:
        if event != "subprocess.Popen" or Launches.guarded is None:
            return
        argv = [str(a) for a in args[1]]  # (executable, args, cwd, env); shell=True: ["/bin/sh", "-c", command]
        shell = len(argv) > 2 and Path(argv[0]).name in ("sh", "bash") and argv[1] == "-c"
        line = argv[2] if shell else argv[0] if argv else ""
        name = Path(line.split()[0]).name if line.split() else ""
        if name.startswith(LAUNCHERS):
            pytest.fail(f"{Launches.guarded} starts {name}: mark it @pytest.mark.serial", pytrace=False)


sys.addaudithook(Launches.hook)


@pytest.fixture(autouse=True)
def _serial_starts_processes(request):
    Launches.guarded = None if request.node.get_closest_marker("serial") else request.node.nodeid
    yield
    Launches.guarded = None


def compose(*overrides: str):
    """The train config exactly as the CLI composes it (minus hydra's own keys), a copy of the test's own. Each
    worker composes each list of overrides once, through Hydra's compose (``core.cli.compose_train``), and keeps
    the validated result for the session (LHT's conftest keeps its composed config the same way); a list that
    fails to compose raises each time. The store is the sweep's (``sweep.train.composed``, per process and config
    tree): a cell that a sweep run in this process composed is not composed again here, nor the other way."""
    from embexp.sweep.train import composed

    return copy.deepcopy(composed(str(conf_dir()), tuple(overrides)))


def smoke(*overrides: str):
    return compose("debug=smoke", *overrides)


def run_train(cfg, run_dir: Path) -> dict:
    from embexp.train import run

    return run(cfg, Path(run_dir))


@pytest.fixture
def tmp_run(tmp_path):
    return tmp_path / "run"


class CliResult:
    """What a CLI call gave: ``returncode``, ``stdout``, ``stderr`` (the fields of CompletedProcess)."""

    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def in_process(call, argv: list[str]) -> CliResult:
    """``call()`` as a command with ``argv`` (sys.argv while it runs), its stdout, stderr and exit status captured:
    SystemExit is its return code; an exception it does not turn into one line propagates and fails the test, as a
    traceback would in a subprocess. Hydra's global state is cleared before and after, embexp's log handlers
    closed after."""
    import contextlib
    import io
    import logging

    from hydra.core.global_hydra import GlobalHydra

    out, err = io.StringIO(), io.StringIO()
    saved, code = sys.argv, 0
    sys.argv = argv
    GlobalHydra.instance().clear()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            call()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = saved
        GlobalHydra.instance().clear()
        log = logging.getLogger("embexp")
        for h in log.handlers:
            h.close()
        log.handlers.clear()
    return CliResult(code, out.getvalue(), err.getvalue())


def run_cli(*args: str, module: str = "embexp.train") -> CliResult:
    """``python -m <module> *args`` in this process: the same entry function, argv handling, Hydra
    app and one-line error path as the console script, without paying a fresh interpreter's imports
    (~10 s each on 2 cores). Tables of bad inputs use it; tests/test_spine.py keeps real
    subprocesses for what only a process shows (exit status of the interpreter, signals, launchers)."""
    import importlib

    return in_process(importlib.import_module(module).entry, [f"{module}.py", *args])


def execute_in_process(cmd: list[str]) -> int:
    """A sweep's ``execute`` in this process (``python -m embexp.<module> args``): train, judge and sweep through
    their entries, the other modules through their main. For tests of what a sweep does with its runs."""
    import contextlib
    import importlib
    import io

    module, args = cmd[2], cmd[3:]
    if module in ("embexp.train", "embexp.judge", "embexp.sweep"):
        return run_cli(*args, module=module).returncode
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            importlib.import_module(module).main(args)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    return 0


def record_run(root: Path, task: str, subset: str, model: str, method: str, tag: str, seed: int, record: dict) -> Path:
    """A finished run written by the results API (config.yaml, metrics.json, status.json) in the
    directory a training run of these keys gets; `record` is the rest of its metrics.json."""
    from omegaconf import OmegaConf

    from embexp.core.config import run_name
    from embexp.core.records import RunRecord

    rec = RunRecord(Path(run_name(str(root), task, subset, model, method, tag, seed)))
    rec.start(OmegaConf.create({"task": {"name": task, "subset": subset}, "model": {"name": model},
                                "method": {"name": method}, "tag": tag, "seed": seed}))
    rec.finish({"method": method, "model": model, "task": f"{task}_{subset}" if subset else task,
                "seed": seed, **record})
    return rec.dir


def stub_venv(root: Path) -> Path:
    """A venv under ``root`` whose python, pip and accelerate print their arguments (shell-quoted, one call
    a line) instead of running: make's recipe lines show through it without running anything. Its
    .installed stamp is newer than pyproject.toml, so `make install` has nothing to do."""
    venv = root / "stub_venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    for tool in ("python", "pip", "accelerate"):
        exe = venv / "bin" / tool
        exe.write_text('#!/bin/bash\n[ -n "$STUB_LOG" ] && echo "' + tool + ' $*" >> "$STUB_LOG"\n'
                       "printf '%q' \"$0\"; printf ' %q' \"$@\"; printf '\\n'\n")
        exe.chmod(0o755)
    (venv / ".installed").touch()
    return venv


def make_dry(target: str, *args: str, env: dict | None = None) -> CliResult:
    """``make -s <target> DRY_RUN=1 *args``: what it prints, without a Python interpreter per sweep. The venv
    is a stub (stub_venv), so each sweep's line is printed, not run; that ``python -m embexp.sweep ...`` line
    is then run through the sweep's entry in this process (run_cli, with ``env`` in os.environ), its output
    in the line's place, as the real make prints it (make stops at a sweep that fails). A sweep's dry run
    composes every cell, which imports every method's schema: ~3 s of a fresh interpreter on 2 cores."""
    import shlex
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        venv = stub_venv(Path(tmp))
        base = {k: v for k, v in (env or os.environ).items() if not k.startswith("MAKE") and k != "STUB_LOG"}
        r = subprocess.run(["make", "-s", "--no-print-directory", target, "DRY_RUN=1", *args, f"VENV={venv}"],
                           cwd=CONF.parent, env=base, capture_output=True, text=True, timeout=60)
        if r.returncode:
            return CliResult(r.returncode, r.stdout, r.stderr)
        out, err, code = [], [r.stderr], 0
        saved = dict(os.environ)
        os.environ.update({k: v for k, v in (env or {}).items() if not k.startswith("MAKE")})
        try:
            for line in r.stdout.splitlines():
                words = shlex.split(line) if line.startswith(str(venv)) else []
                if words[1:3] != ["-m", "embexp.sweep"]:
                    out.append(line.replace(str(venv), ".venv") + "\n")
                    continue
                s = run_cli(*[w.replace(str(venv), ".venv") for w in words[3:]], module="embexp.sweep")
                out.append(s.stdout)
                err.append(s.stderr)
                if s.returncode:
                    code = s.returncode
                    break
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return CliResult(code, "".join(out), "".join(err))
