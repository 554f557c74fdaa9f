"""The sweep's report command: the extra's ``debug=`` and, with ``output_root=X``, ``runs=X
out=X/tables/<paper>``. Never done: a report is rendered again from whatever finished."""

from __future__ import annotations


def args(cmd_args: list[str], extra: list[str], paper: str) -> list[str]:
    out = list(cmd_args)
    root = [e.split("=", 1)[1] for e in extra if e.startswith("output_root=")]
    out += [e for e in extra if e.startswith("debug=")]
    if root and not any(a.startswith("runs=") for a in out):
        out.append(f"runs={root[-1]}")
    if root and not any(a.startswith("out=") for a in out):
        out.append(f"out={root[-1]}/tables/{paper}")
    return out


def done(cmd_args: list[str]) -> str:
    return ""
