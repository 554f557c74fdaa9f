"""`make help` and DRY_RUN=1: every target listed prints what it would run and writes nothing.

The targets run against a stand-in venv whose `python` and `pip` only record their arguments, so the
test starts no Python of embexp and reads in a second: a recipe line that DRY_RUN=1 does not echo
shows up as a recorded call. The calls allowed are those that only check and print: a sweep's own dry
run (`-m embexp.sweep --dry-run`), which prints its commands and writes nothing (tests/test_sweep.py
holds its output), and the `--check` of the wheelhouse and the doctor, which check WHEELHOUSE_ARGS and
GPU_CHECK and print their command.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import stub_venv

REPO = Path(__file__).resolve().parents[1]
WRITTEN = ("outputs", "multirun", "tables", "wheelhouse")  # what the targets write when they run
GROUPS = ["setup", "tests and checks", "a GPU node without internet", "every paper", "TinyTE", "PEMA", "PETE",
          "Tiny-Attention", "K-Token", "comparison", "ledger"]


def make(*args: str, venv: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in (env or os.environ).items() if not k.startswith("MAKE")}
    venv_args = [f"VENV={venv}"] if venv else []
    return subprocess.run(["make", "-s", "--no-print-directory", *args, *venv_args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


def help_groups(text: str) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith(" "):
            groups[line] = []
        elif line.startswith("  "):
            groups[list(groups)[-1]].append(line.split()[0])
    return groups


@pytest.fixture(scope="module", name="stub_venv")
def stub_venv_fixture(tmp_path_factory) -> Path:
    """A venv whose python, pip and accelerate append their arguments to $STUB_LOG, one call per line."""
    return stub_venv(tmp_path_factory.mktemp("venv"))


def checks_only(call: str) -> bool:
    """A recorded call that DRY_RUN=1 runs on purpose: it checks its arguments and prints, writing nothing."""
    return (("-m embexp.sweep" in call and "--dry-run" in call) or "scripts/wheelhouse.py --check " in call
            or "-m embexp.doctor --check" in call)


def written() -> dict:
    """Tracked files' state and every file under the folders the targets write."""
    status = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    return {"git": status, **{d: sorted(map(str, (REPO / d).rglob("*"))) for d in WRITTEN}}


@pytest.mark.serial
def test_help_groups_every_target_by_paper(stub_venv):
    r = make("help", venv=stub_venv)
    assert r.returncode == 0, r.stderr
    groups = help_groups(r.stdout)
    assert list(groups) == GROUPS
    assert all(t.startswith("tinyte_") for t in groups["TinyTE"]) and "tinyte_table1" in groups["TinyTE"]
    for group, prefix in (("PEMA", "pema_"), ("PETE", "pete_"), ("Tiny-Attention", "tinyattn_"),
                          ("K-Token", "ktoken_")):
        assert groups[group] and all(t.startswith(prefix) for t in groups[group]), group
    makefiles = (REPO / "Makefile").read_text() + "".join(p.read_text() for p in (REPO / "mk").glob("*.mk"))
    assert not re.search(r"(?m)^table\d+:", makefiles)  # the TinyTE tables carry their paper's prefix
    assert not re.search(r"#\d+|[Ii]ssue \d+", makefiles)  # target texts say what, not which issue


@pytest.mark.serial
def test_make_tables_renders_every_paper_and_never_trains(stub_venv, tmp_path):
    env = dict(os.environ, STUB_LOG=str(tmp_path / "calls"))
    r = make("tables", "DRY_RUN=1", venv=stub_venv, env=env)
    assert r.returncode == 0, r.stderr
    papers = {m.group(1) or m.group(2) for m in re.finditer(r"-m embexp\.report (?:paper=(\w+)|table=(all))", r.stdout)}
    papers |= set(re.findall(r"--dry-run .* (\w+)/tables$", r.stdout, re.M))  # pema_tables: a sweep (Tables 2-4)
    assert {p.replace("all", "tinyte") for p in papers} == {"tinyte", "pema", "pete", "tinyattn", "ktoken"}
    assert "embexp.train" not in r.stdout


@pytest.mark.serial
def test_every_target_honours_dry_run(stub_venv, tmp_path):
    log = tmp_path / "calls"
    env = dict(os.environ, STUB_LOG=str(log))
    targets = [t for ts in help_groups(make("help", venv=stub_venv).stdout).values() for t in ts]
    assert len(targets) > 50
    before = written()
    for target in targets:
        log.write_text("")
        stale = ["-W", "pyproject.toml"] if target == "install" else []  # install: a venv older than pyproject.toml
        r = make(target, "DRY_RUN=1", *stale, venv=stub_venv, env=env)
        assert r.returncode == 0, f"make {target} DRY_RUN=1: {r.stderr}"
        assert r.stdout.strip(), f"make {target} DRY_RUN=1 prints nothing"
        ran = [c for c in log.read_text().splitlines() if not checks_only(c)]
        assert not ran, f"make {target} DRY_RUN=1 ran {ran}"
        assert written() == before, f"make {target} DRY_RUN=1 wrote files"


def real_python_venv(root: Path) -> Path:
    """A venv under ``root`` whose python is this interpreter (its .installed stamp current: no install)."""
    import sys

    venv = root / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(f'#!/bin/bash\nexec {sys.executable} "$@"\n')
    (venv / "bin" / "python").chmod(0o755)
    (venv / ".installed").touch()
    return venv


@pytest.mark.serial
@pytest.mark.parametrize("target, var, says", [
    ("wheelhouse", "WHEELHOUSE_ARGS=--python-version x",
     "--python-version 'x' is not a Python version (valid: major.minor, e.g. 3.12)"),
    ("wheelhouse", "WHEELHOUSE_ARGS=--platform bad",
     "--platform 'bad' is not a Linux wheel platform tag (valid: e.g. manylinux_2_28_x86_64"),
    ("wheelhouse", "WHEELHOUSE_ARGS=--have-file {tmp}/nope.txt",
     "nope.txt' is not a file (valid: the node's `pip list --format=freeze`"),
    ("gpu-check", "GPU_CHECK=fsdp=sometimes", "unknown fsdp 'sometimes' (choose from: auto, always, never)"),
])
def test_dry_run_checks_the_variables_a_python_command_takes(tmp_path, target, var, says):
    """DRY_RUN=1 runs the script's (the doctor's) --check: a bad value is its one line and a failed make, not an
    echo; a good one prints the command and writes nothing."""
    venv = real_python_venv(tmp_path)
    before = written()
    r = make(target, "DRY_RUN=1", var.format(tmp=tmp_path), venv=venv)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("embexp: error: ")]
    assert r.returncode != 0 and len(errors) == 1 and says in errors[0], r.stderr
    assert "Traceback" not in r.stderr and not r.stdout.strip(), r.stdout
    assert written() == before
    good = {"wheelhouse": ("WHEELHOUSE_ARGS=--python-version 3.11", "scripts/wheelhouse.py --out wheelhouse "
                                                                     "--python-version 3.11"),
            "gpu-check": ("GPU_CHECK=fsdp=never", "-m embexp.doctor fsdp=never")}[target]
    ok = make(target, "DRY_RUN=1", good[0], venv=venv)
    assert ok.returncode == 0 and ok.stdout.splitlines()[0].endswith(good[1]), ok.stdout + ok.stderr
    assert ok.stdout.splitlines()[1].startswith("# ") and written() == before
