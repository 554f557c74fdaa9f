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


DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
SRC = REPO / "src" / "embexp"
# A repository path: src/, conf/, tests/, scripts/, docs/, mk/ or .ci/ and what follows, not preceded by another
# path's characters (the authors' `pete/src/pete.py` names a file of their checkout, not of this repository).
CITED_PATH = re.compile(r"(?<![\w./~$:@=-])((?:src|conf|tests|scripts|docs|mk|\.ci)/"
                        r"(?:\{[\w.,-]+\}|[\w./*<>-])*[\w/*>}])")
# The names whose first part is also a record or config section: metrics.json's "train" figures, the judge group.
SECTIONS = {"train": "a key of metrics.json's train record", "judge": "a field of the judge config (JudgeConfig)"}


def cited_paths(text: str) -> list[str]:
    """The repository paths a doc names, `{a,b}` expanded; a path with a placeholder (`<paper>`) names a
    pattern, not a file."""
    out = []
    for path in CITED_PATH.findall(text):
        alternatives = re.search(r"\{([^}]*)\}", path)
        if alternatives:
            out += cited_paths(" ".join(path.replace(alternatives.group(0), a, 1)
                                        for a in alternatives.group(1).split(",")))
        elif "<" not in path:
            out.append(path)
    return out


def resolves(name: str) -> bool:
    """Whether `embexp.<name>` is a module, or a module and the attributes that follow it."""
    import importlib

    parts = name.split(".")
    for i in range(len(parts), -1, -1):
        try:
            obj = importlib.import_module(".".join(["embexp", *parts[:i]]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def in_section(name: str) -> bool:
    """`train.tokens`: a string key the code writes; `judge.model`: a field of the judge's config schema."""
    import dataclasses

    from embexp.core.config import JudgeConfig

    section, key = name.split(".", 1)
    if section == "judge":
        return key in {f.name for f in dataclasses.fields(JudgeConfig)}
    return any(f'"{key}"' in p.read_text() for p in SRC.rglob("*.py"))


# Module names that are also other things the docs name: Hugging Face's evaluate library and a model's config,
# metrics.json's sections, lm-eval's model argument, the authors' packages (PEMA's `data.token_counter`).
NOT_SHORT = {"model", "evaluate", "config", "memory", "metrics", "data"}


def modules() -> dict[str, list[str]]:
    """Name -> the dotted path below embexp it means: each top-level module or package (`core`: `core`), and
    each module deeper down whose name is its own and no other module's (`sharding`: `run.sharding`)."""
    paths = [p.relative_to(SRC).with_suffix("").parts for p in SRC.rglob("*.py")]
    paths = [parts[:-1] if parts[-1] == "__init__" else parts for parts in paths]
    deeper = [parts[-1] for parts in paths if len(parts) > 1]
    out = {parts[0]: [parts[0]] for parts in paths if len(parts) == 1}
    out |= {parts[-1]: [".".join(parts)] for parts in paths if len(parts) > 1 and parts[-1] not in out
            and deeper.count(parts[-1]) == 1 and parts[-1] not in NOT_SHORT}
    return out


def cited_names(text: str) -> list[list[str]]:
    """The `module.name`s a doc cites in backticks, each as the full names below embexp it may mean: dotted
    names whose first part is embexp or one of its modules, by its path (`core.cli.compose`,
    `run.preflight.preflight()`) or its own name (`sharding.fqns`: `run.sharding.fqns`); file names
    (`train.py`) left out."""
    known, out = modules(), []
    for span in re.findall(r"`([^`\n]+)`", text):
        name = re.sub(r"\(.*\)$", "", span.strip())
        if re.fullmatch(r"[a-z_]\w*(\.[A-Za-z_]\w*)+", name) and not re.search(
                r"\.(py|md|json|jsonl|csv|yaml|txt|png|safetensors|lock)$", name):
            first, _, rest = name.removeprefix("embexp.").partition(".")
            if name.startswith("embexp.") and first not in known:
                out.append([name.removeprefix("embexp.")])
            elif first in known:
                out.append([f"{full}.{rest}" if rest else full for full in known[first]])
    return out


def test_every_repository_path_the_docs_cite_exists():
    """`src/...`, `conf/...`, `tests/...`, `scripts/...`, `docs/...`, `mk/...` in README.md and docs/ (a glob
    matches at least one file)."""
    bad = [f"{doc.relative_to(REPO)}: {p}" for doc in DOCS for p in cited_paths(doc.read_text())
           if not any(REPO.glob(p.rstrip("/")))]
    assert not bad, "paths the docs cite that do not exist:\n" + "\n".join(bad)


def test_every_module_name_the_docs_cite_resolves():
    """`core.cli.train_config`, `run.preflight.preflight`, `embexp.RunBusy`: the module imports and has the name;
    `train.<key>` and `judge.<field>` are a metrics.json key the code writes and a judge config field."""
    bad = [f"{doc.relative_to(REPO)}: {' or '.join(n)}" for doc in DOCS for n in cited_names(doc.read_text())
           if not any(resolves(m) for m in n) and not (n[0].split(".")[0] in SECTIONS and in_section(n[0]))]
    assert not bad, "names the docs cite that do not exist:\n" + "\n".join(bad)


def test_a_dangling_path_or_name_is_caught():
    text = "See `src/embexp/cloze.py`, `report.PAPERS`, `core.cli.train_config` and the authors' `pete/src/pete.py`."
    assert cited_paths(text) == ["src/embexp/cloze.py"] and not (REPO / cited_paths(text)[0]).exists()
    assert cited_paths("`conf/task/{glue,nope}.yaml`, conf/<group>/") == ["conf/task/glue.yaml", "conf/task/nope.yaml"]
    assert cited_names(text) == [["report.PAPERS"], ["core.cli.train_config"]]
    assert not resolves("report.PAPERS") and resolves("core.cli.train_config")
    assert cited_names("`sharding.fqns`, `embexp.RunBusy`") == [["run.sharding.fqns"], ["RunBusy"]]
    assert resolves("run.sharding.fqns") and resolves("RunBusy")
    assert in_section("train.tokens") and not in_section("train.no_such_figure") and in_section("judge.model")


def test_no_doc_cites_a_file_outside_the_repository():
    """Notes and paper texts outside the repository are cited by what they are (the authors' repository at a
    commit, the paper), never by a path a reader of the repository does not have."""
    outside = re.compile(r"REFERENCE(\.md)? ?§|\.\./shared/(papers|REFERENCE)")
    bad = [f"{doc.relative_to(REPO)}: {m.group(0)}" for doc in DOCS for m in outside.finditer(doc.read_text())]
    assert not bad, "citations of files outside the repository:\n" + "\n".join(bad)


def test_the_architecture_layer_table_lists_every_package_in_its_layer():
    """Every module and package of src/embexp is in docs/architecture.md's layer table, in the layer
    tests/test_layers.py gives it, and each module a row names in parentheses exists."""
    from test_layers import layer_of

    text = (REPO / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| (\d) \w+ \| (.+) \|$", text, re.M)
    listed = {}
    for layer, cell in rows:
        for name, _, inner in re.findall(r"`(\w+)(/?)`(?: \((\w+(?:, \w+)*)\))?", cell):
            listed[name] = int(layer)
            missing = [m for m in (inner.split(", ") if inner else []) if not (SRC / name / f"{m}.py").is_file()]
            assert not missing, f"the layer table names modules {name}/ does not have: {missing}"
    everything = {p.stem for p in SRC.iterdir() if (p.suffix == ".py" and p.stem != "__init__")
                  or (p / "__init__.py").is_file()} | {"embexp"}
    assert not everything - set(listed), f"the layer table omits {sorted(everything - set(listed))}"
    wrong = {n: (k, layer_of(n if n == "embexp" else f"embexp.{n}")) for n, k in listed.items()
             if n in everything and layer_of(n if n == "embexp" else f"embexp.{n}") != k}
    assert not wrong, f"the layer table's layer differs from tests/test_layers.py's (table, test): {wrong}"


def test_readme_and_running_state_the_same_test_figures():
    """The suite's figures (passed, skipped, seconds) are stated in docs/running.md; the README points there or
    states the same ones."""
    figures = re.compile(r"(\d[\d,]*)\s+passed,\s+(\d[\d,]*)\s+skipped")
    running = figures.findall((REPO / "docs" / "running.md").read_text())
    readme = figures.findall((REPO / "README.md").read_text())
    assert len(running) == 1, f"docs/running.md states the suite's figures once, not {running}"
    assert readme in ([], running), f"README's test figures {readme} differ from docs/running.md's {running}"


def test_no_diary_text_in_the_docs():
    """The docs say what the code does and what a command measures, not who ran what when."""
    diary = re.compile(r"before the fix|this change|so far\b|on this branch|this session|last round|"
                       r"no GPU figure|has not run on a GPU|not been measured yet|(measured|on) 20\d\d-\d\d-\d\d|"
                       r"the development machine|available to this task", re.I)
    bad = [f"{doc.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
           for doc in DOCS for text in [doc.read_text()] for m in diary.finditer(text)]
    assert not bad, "diary text in the docs:\n" + "\n".join(bad)
