"""Scripts and modules import the installed package (make install: embexp in editable mode); none edits sys.path
to reach another file's code."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_no_script_or_module_edits_sys_path():
    bad = []
    for path in sorted([*(REPO / "scripts").rglob("*.py"), *(REPO / "src").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", "") == "sys":
                bad.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not bad, f"sys.path edited (import the installed package instead): {bad}"
