"""Hydra, Accelerate and subprocess are used through their public APIs: nothing in src/ or tests/ replaces one of
their attributes (``monkeypatch.setattr``, ``setattr``, ``mock.patch``, an assignment), and no test swaps the
train entry's Hydra app (``train.main``). Tests that must not start launchers are held by an audit hook
(tests/conftest.py ``Launches``), which replaces nothing; what embexp assumes of Accelerate's internals is in
src/embexp/run/accelerate_compat.py, held by tests/test_accelerate_compat.py.

Every file is parsed with ``ast``: a name bound by ``import hydra``, ``from accelerate.utils import X``,
``import subprocess`` (at any depth, as any alias) counts as the library's, and so does a dotted string naming it
(``monkeypatch.setattr("hydra.main", ...)``).
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIBRARIES = ("hydra", "accelerate", "subprocess")


def library_names(tree: ast.AST) -> set[str]:
    """The names a module binds to one of LIBRARIES or to something imported from it."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] in LIBRARIES}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in LIBRARIES and not node.level:
            names |= {a.asname or a.name for a in node.names}
    return names


def root(node: ast.AST) -> str | None:
    """The name at the root of ``a.b.c`` (or of ``a.b()``), else None."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def is_patcher(func: ast.AST) -> bool:
    """setattr / delattr (bare, or monkeypatch's), mock.patch, patch.object, patch.dict."""
    name = ast.unparse(func)
    return name.split(".")[-1] in ("setattr", "delattr", "patch") or name.endswith(("patch.object", "patch.dict"))


def patches(source: str) -> list[tuple[int, str]]:
    """(line, the code) for every attribute of a library that ``source`` replaces, and every replaced ``main`` of a
    train module."""
    tree = ast.parse(source)
    libs = library_names(tree)

    def named(target: ast.AST, attr: ast.AST | None = None) -> bool:
        """Whether ``target`` (with ``attr``, setattr's second argument) is a library's or a train module's main."""
        if isinstance(target, ast.Constant) and isinstance(target.value, str):
            return target.value.split(".")[0] in LIBRARIES or target.value.endswith("train.main")
        whole = ast.unparse(target) + (f".{attr.value}" if isinstance(attr, ast.Constant) else "")
        return root(target) in libs or whole.endswith("train.main")

    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in (t for tgt in targets for t in (tgt.elts if isinstance(tgt, (ast.Tuple, ast.List)) else [tgt])):
                if isinstance(t, ast.Attribute) and named(t):
                    found.append((node.lineno, ast.unparse(node)[:120]))
        elif isinstance(node, ast.Call) and node.args and is_patcher(node.func):
            if named(node.args[0], node.args[1] if len(node.args) > 1 else None):
                found.append((node.lineno, ast.unparse(node)[:120]))
    return found


def files() -> list[Path]:
    return sorted([*(REPO / "src").rglob("*.py"), *(REPO / "tests").rglob("*.py"), *(REPO / "scripts").rglob("*.py")])


def test_no_file_replaces_an_attribute_of_hydra_accelerate_or_subprocess():
    bad = [f"{p.relative_to(REPO)}:{line}: {what}" for p in files()
           for line, what in patches(p.read_text(encoding="utf-8"))]
    assert not bad, "replaces a library's attribute (use its public API):\n" + "\n".join(bad)


@pytest.mark.parametrize("source", [
    "import subprocess\nsubprocess.Popen.__init__ = guarded",
    "import subprocess\ndef t(monkeypatch):\n    monkeypatch.setattr(subprocess.Popen, '__init__', f)",
    "import subprocess as sp\nsetattr(sp, 'run', f)",
    "def t(monkeypatch):\n    monkeypatch.setattr('hydra.main', f)",
    "from hydra.core.global_hydra import GlobalHydra\nGlobalHydra.instance = f",
    "from accelerate import Accelerator\ndef t(monkeypatch):\n    monkeypatch.setattr(Accelerator, 'prepare', f)",
    "from accelerate.utils import launch\nlaunch.prepare_simple_launcher_cmd_env = f",
    "from unittest import mock\nwith mock.patch('accelerate.Accelerator.prepare'):\n    pass",
    "from unittest import mock\nimport hydra\nwith mock.patch.object(hydra, 'main'):\n    pass",
    "import embexp.train as train\nhydra_main, train.main = train.main, main",
    "from embexp import train\ndef t(monkeypatch):\n    monkeypatch.setattr(train, 'main', f)",
    "def t(monkeypatch):\n    monkeypatch.setattr('embexp.train.main', f)",
], ids=lambda s: s.splitlines()[-1].strip()[:40])
def test_the_scan_finds_each_kind_of_patch(source):
    assert patches(source), source


@pytest.mark.parametrize("source", [
    "import subprocess\nsubprocess.run(['ls'])",
    "def t(monkeypatch):\n    monkeypatch.setattr('embexp.run.checkpoint.save_file', f)",
    "from accelerate import Accelerator\nacc = Accelerator()\nacc.state.distributed_type = x",
    "import os\nos.environ['ACCELERATE_USE_FSDP'] = 'true'",
])
def test_the_scan_leaves_ordinary_code_alone(source):
    assert not patches(source), patches(source)


def test_a_test_without_the_serial_mark_cannot_start_a_launcher():
    """The audit hook refuses the start (no process runs) and fails the test, naming the mark; other programs run."""
    outcome = pytest.fail.Exception
    for argv in (["python", "-c", "pass"], "make --version", ["torchrun", "--help"]):
        with pytest.raises(outcome, match=r"starts (python|make|torchrun): mark it @pytest.mark.serial"):
            subprocess.run(argv, shell=isinstance(argv, str), capture_output=True)
    assert subprocess.run(["true"]).returncode == 0


def test_serial_tests_are_one_xdist_unit_and_every_other_test_goes_with_its_file():
    """make test's units of work (conftest.group, read by its pytest_xdist_make_scheduler): the decorated serial
    tests, parametrized ones too, are one unit; any other test is its file's."""
    from conftest import FIRST, TESTS, group, serial_tests

    spine = "test_spine.py::test_sigterm_checkpoints_marks_interrupted_and_resume_matches_an_uninterrupted_run"
    assert spine in serial_tests() and len(serial_tests()) >= 30
    assert group(f"tests/{spine}") == group(spine) == "serial"
    assert group("tests/test_make.py::test_dry_run_checks_the_variables_a_python_command_takes[gpu-check]") == "serial"
    assert group("tests/test_spine.py::test_bad_input_is_one_clear_line[args0-unknown]") == "tests/test_spine.py"
    assert FIRST[0] == "serial" and all((TESTS / name).is_file() for name in FIRST[1:])  # no stale name
