"""Size limits of src/embexp: no module over 450 lines, no function over 80, no exceptions.

Every module is parsed with ``ast`` (nothing is imported); a function's length runs from its ``def``
line to its last line (docstring and nested functions included), and methods and nested functions
are measured on their own too. A module that grows past a limit is split into modules that each
hold one concern (as judge/ and models/ were), a function into steps with names.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "embexp"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80


def functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, def line, length in lines) of every function, methods and nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node.lineno, node.end_lineno - node.lineno + 1
            yield from functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def offenders(package: Path = PACKAGE) -> list[str]:
    """One line per module or function over its limit: '<module path>: <what>'."""
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        text = path.read_text(encoding="utf-8")
        n = len(text.splitlines())
        if n > MAX_MODULE_LINES:
            out.append(f"{rel}: {n} lines (limit {MAX_MODULE_LINES})")
        for name, line, length in functions(ast.parse(text)):
            if length > MAX_FUNCTION_LINES:
                out.append(f"{rel}: {name} (line {line}) has {length} lines (limit {MAX_FUNCTION_LINES})")
    return out


def test_no_module_or_function_over_the_limits():
    assert offenders() == []


def test_an_offender_is_reported(tmp_path):
    pkg = tmp_path / "embexp"
    (pkg / "sub").mkdir(parents=True)
    long_body = "".join(f"    x{i} = {i}\n" for i in range(80))  # with its def line: 81 lines
    (pkg / "sub" / "big.py").write_text("class A:\n    def step(self):\n" + long_body.replace("    ", "        ")
                                        + "\n" * (MAX_MODULE_LINES - 80))
    (pkg / "fine.py").write_text("def f():\n" + "    pass\n" * 79 + "\n\ndef g():\n    def inner():\n"
                                 + long_body.replace("    ", "        "))
    assert offenders(pkg) == ["fine.py: g (line 83) has 82 lines (limit 80)",
                              "fine.py: g.inner (line 84) has 81 lines (limit 80)",
                              "sub/big.py: 452 lines (limit 450)",
                              "sub/big.py: A.step (line 2) has 81 lines (limit 80)"]
