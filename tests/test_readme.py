"""The README is a front page whose commands run: every `make` target it names exists and prints its
commands with DRY_RUN=1, every `python -m embexp.<x>` names an entry point and arguments that parse,
and `python -m embexp` lists every entry point. Offline, no Python of embexp started."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import compose, stub_venv

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def code_commands() -> list[list[str]]:
    """The commands of the README's bash blocks, continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                commands.append(shlex.split(line))
    return commands


def python_commands() -> list[tuple[str, list[str]]]:
    """(module, arguments) of every `python -m embexp...` command in a bash block."""
    return [(c[c.index("-m") + 1], c[c.index("-m") + 2:]) for c in code_commands() if c[0].endswith("python")]


def entry_points() -> set[str]:
    """The modules `python -m` runs: packages with a __main__.py and modules with a __main__ guard."""
    src = REPO / "src" / "embexp"
    found = {p.parent.name for p in src.glob("*/__main__.py")}
    return found | {p.stem for p in src.glob("*.py") if 'if __name__ == "__main__"' in p.read_text()} - {"__main__"}


@pytest.fixture(scope="module", name="stub_venv")
def stub_venv_fixture(tmp_path_factory) -> Path:
    """A venv whose python and pip only print their arguments: make's recipes run, embexp does not."""
    return stub_venv(tmp_path_factory.mktemp("venv"))


def test_readme_is_a_front_page():
    assert len(README.splitlines()) <= 150
    assert not re.search(r"#\d+\b|[Ii]ssue \d+|\b20\d\d-\d\d-\d\d\b", README)  # no issue numbers, no dates
    for section in ("## Quick start", "## Six commands", "## What is measured", "## Adding a method"):
        assert section in README


@pytest.mark.serial
def test_every_make_command_of_the_readme_prints_its_commands(stub_venv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    makes = [c for c in code_commands() if c[0] == "make"]
    assert len(makes) >= 4
    for cmd in makes:
        args = [a for a in cmd[1:] if a != "DRY_RUN=1"]
        r = subprocess.run(["make", "-s", *args, "DRY_RUN=1", f"VENV={stub_venv}"], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.strip(), f"{' '.join(cmd)}: {r.stderr}"
    listed = subprocess.run(["make", "-s", "help", f"VENV={stub_venv}"], cwd=REPO, env=env, capture_output=True,
                            text=True).stdout
    targets = {line.split()[0] for line in listed.splitlines() if line.startswith("  ")}
    named = set(re.findall(r"`make ([a-z][\w-]*)", README)) | {c[1] for c in makes}
    assert named <= targets, f"the README names make targets that make help does not list: {named - targets}"


def test_every_python_command_of_the_readme_names_an_entry_point_and_parses():
    from embexp.core.config import run_name

    modules = set(re.findall(r"python -m (embexp(?:\.\w+)?)", README))
    assert modules and all(importlib.util.find_spec(m) for m in modules), modules
    assert {m.split(".")[1] for m in modules if "." in m} <= entry_points()
    trained = []
    for module, args in python_commands():
        kv = dict(a.split("=", 1) for a in args if "=" in a)
        if module == "embexp.train":
            for group in ("method", "model", "task", "debug", "experiment"):
                if group in kv:
                    assert (REPO / "conf" / group / f"{kv[group]}.yaml").is_file(), f"{group}={kv[group]}"
            task = compose(f"task={kv['task']}").task  # the file's values over its schema's defaults
            root = "outputs"
            if "debug" in kv:
                root = yaml.safe_load((REPO / "conf" / "debug" / f"{kv['debug']}.yaml").read_text())["output_root"]
            trained.append(run_name(kv.get("output_root", root), task.name, task.subset,
                                    kv["model"], kv["method"], kv.get("tag", ""), int(kv.get("seed", 0))))
        elif module == "embexp.eval":  # the run directory of a train command above
            assert kv["run_dir"] in trained, f"run_dir={kv['run_dir']} is none of the README's runs {trained}"
        elif module == "embexp.report":
            import embexp.report

            embexp.report.configure(args)  # an unknown paper, table or key: one line
    assert trained


def test_python_m_embexp_lists_every_entry_point():
    from embexp.__main__ import ENTRY_POINTS

    assert {name for name, _, _ in ENTRY_POINTS} == entry_points()
