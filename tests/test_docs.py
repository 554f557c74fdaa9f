"""Docs that match the code: generated config reference, YAML headers, links (README commands: test_readme.py)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_config_reference_is_current():
    """docs/config.md and the table of docs/methods.md say what the classes say for every method and
    task they document; one added since (one file + one YAML) is named in a warning, not a failure.
    scripts/gen_config_docs.py --check runs the same check() as a script."""
    spec = importlib.util.spec_from_file_location("gen_config_docs", REPO / "scripts" / "gen_config_docs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    stale, missing = gen.check()
    assert not stale, f"{' and '.join(stale)} stale: {gen.REGEN}"
    for what in missing:
        warnings.warn(f"undocumented: {what} ({gen.REGEN})", UserWarning, stacklevel=1)


def test_readme_method_table_names_the_registered_methods():
    """Every `method=` name in the README's method table is a registered method; a method it does
    not list is named in a warning (the table groups the methods by paper, by hand)."""
    from embexp.methods.registry import registered

    readme = (REPO / "README.md").read_text()
    rows = readme[readme.index("| method | `method=` |"):].split("\n\n")[0].splitlines()[2:]
    listed = {n for row in rows for n in re.findall(r"`(\w+)`", row.split(" | ")[1])}
    assert listed <= set(registered()), f"README's method table names no such method: {listed - set(registered())}"
    for name in sorted(set(registered()) - listed):
        warnings.warn(f"README's method table does not list method {name}", UserWarning, stacklevel=1)


def test_every_yaml_starts_with_the_command_that_uses_it():
    for p in sorted((REPO / "conf").rglob("*.yaml")):
        lines = [ln for ln in p.read_text().splitlines() if ln.strip()]
        header = [ln for ln in lines[:3] if ln.startswith("#")]
        assert any("python -m embexp" in ln or "make " in ln for ln in header), \
            f"{p.relative_to(REPO)} lacks its command"


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_in_the_readme_and_docs_resolves():
    """Every relative link of README.md and docs/ names a file (or folder) that exists, and its #anchor
    a heading of that file."""
    files = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    bad = []
    for doc in files:
        text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                bad.append(f"{doc.relative_to(REPO)}: {target}")
            elif anchor and dest.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", dest.read_text(), flags=re.S), re.M)
                if anchor not in {slug(h) for h in headings}:
                    bad.append(f"{doc.relative_to(REPO)}: {target} (no such heading)")
    assert not bad, "links that do not resolve:\n" + "\n".join(bad)


def test_no_merge_conflict_markers_in_tracked_files():
    """A merge left `<<<<<<< HEAD` in the README and a method doc once; nothing caught it."""
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.split()
    marker = re.compile(r"^(<<<<<<< |>>>>>>> |=======$)", re.M)
    bad = [f for f in files if f.endswith((".md", ".py", ".yaml", ".mk", ".toml", ".txt")) or f == "Makefile"
           if (REPO / f).is_file() and marker.search((REPO / f).read_text(errors="replace"))]
    assert not bad, f"merge conflict markers in {bad}"
