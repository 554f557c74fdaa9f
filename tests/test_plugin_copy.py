"""A method is one file + one YAML (issue #34), tried for real: in a copy of the repository, a
throwaway method is added as exactly ``src/embexp/methods/<name>.py`` and ``conf/method/<name>.yaml``,
the method-dependent tests run there in a fresh interpreter (its matrix rows, the registry guards,
the one-line errors that list methods, the docs checks, the comparison's sweep golden and coverage), green,
and afterwards no other file of the copy differs. What would otherwise go stale is derived from the
classes at test time (tests/golden/sweep/methods.txt, the lists in the error lines) or named in a
warning until ``make docs`` (docs/config.md, docs/methods.md) or a hand edit (the README's table).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COPIED = ("src", "conf", "tests", "docs", "scripts", "mk", "Makefile", "README.md", "pyproject.toml")
NAME = "copy_probe"
METHOD = f'''"""A throwaway method (tests/test_plugin_copy.py): the input embedding matrix is trained."""

from __future__ import annotations

from embexp.methods.base import Comparison, Method
from embexp.methods.registry import register_method


@register_method("{NAME}")
class CopyProbe(Method):
    """Throwaway: only the input embedding matrix is trained (embedding tuning under another name)."""

    label = "Copy probe"
    trains_embedding_matrix = True  # PEMA may wrap it: the error line that lists PEMA's inners names it
    comparison = Comparison(rank=25, lr=1e-4)  # in the comparison sweep on both model kinds

    def method_tensors(self):
        return {{"embedding": self.model.get_input_embeddings().weight}}

    def export(self):
        return self.model
'''
YAML = f"""# python -m embexp.train method={NAME} model=tiny_llama task=wmt16 debug=smoke
# Throwaway (tests/test_plugin_copy.py): only the input embedding matrix is trained.
defaults:
  - schema_{NAME}
  - _self_
name: {NAME}
"""
ADDED = {f"src/embexp/methods/{NAME}.py": METHOD, f"conf/method/{NAME}.yaml": YAML}
# the method-dependent fast tests: its rows of the method matrix and of the valid defaults, the guards
# that every method has a row, a YAML and declared capabilities, the error lines that list methods, the
# generated docs, the sweep golden that lists the compared methods (compare/curves, the only spec that reads
# the registry: `make compare` runs it; the other specs' goldens cannot see a new method) and the
# comparison's coverage
TESTS = ["tests/test_methods.py", "tests/test_guards.py", "tests/test_capabilities.py", "tests/test_pema.py",
         "tests/test_docs.py", "tests/test_sweep.py", "tests/test_compare.py"]
SELECT = (f"{NAME} or matrix_covers or capability_is_declared or has_a_config_file or bad_value"
          " or comparison_and_the_labels or bad_inner or config_reference or readme or (golden and compare)"
          " or covers_every")
SKIP = ("__pycache__", ".pytest_cache")


def tree(root: Path) -> dict[str, str]:
    """Every file under root but caches, by relative path: the sha256 of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and not any(part in SKIP for part in p.relative_to(root).parts)
            and p.suffix != ".pyc"}


@pytest.mark.serial
def test_a_new_method_is_one_file_and_one_yaml(tmp_path):
    copy = tmp_path / "repo"
    for name in COPIED:
        src, dst = REPO / name, copy / name
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*SKIP, "*.pyc"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)  # pyproject.toml keeps its time: make's install stamp below stays newer
    (copy / ".venv").mkdir()  # a `make` a selected test may run installs nothing: the stamp is current
    (copy / ".venv" / ".installed").touch()
    before = tree(copy)
    for rel, text in ADDED.items():
        assert not (copy / rel).exists(), rel
        (copy / rel).write_text(text)

    env = {k: v for k, v in os.environ.items() if k not in ("EMBEXP_CONF", "EMBEXP_DATA", "PYTHONPATH")}
    env.update(PYTHONPATH=str(copy / "src"), PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *TESTS, "-k", SELECT],
                       cwd=copy, env=env, capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    passed = int(re.search(r"(\d+) passed", out).group(1))
    assert passed >= 40, out[-3000:]  # the method's own matrix rows ran: the copy's src was imported
    assert f"undocumented: method {NAME} (run make docs" in out  # named, not silently stale
    assert f"README's method table does not list method {NAME}" in out

    after = tree(copy)
    assert set(after) - set(before) == set(ADDED), "files other than the method's two appeared"
    changed = [p for p in before if after.get(p) != before[p]]
    assert not changed, f"adding a method changed {changed}"
