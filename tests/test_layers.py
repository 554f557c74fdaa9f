"""The import graph of src/embexp runs one way: no module imports a module of a higher layer, and no
module imports one that imports it back, directly or through others (no import cycle, within a layer too).

Every module is parsed with ``ast`` (nothing is imported) and every ``import`` / ``from ... import``
in it counts, the ones inside functions (lazy imports) too. A module no layer names fails the test:
a new module is placed in LAYERS on purpose, not by accident.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# (layer, module prefixes, why); a module's layer is that of its longest matching prefix. Imports
# within a layer are free; upward imports fail.
LAYERS = [
    (0, ("embexp", "embexp.core"),
     "core: the package (EmbexpError), config schemas, plugin registries, entry-point plumbing, and the run records "
     "with the API that finds and loads them (core/records.py reads files only, never a model)"),
    (1, ("embexp.tasks", "embexp.metric_modules", "embexp.featurize", "embexp.models", "embexp.objectives"),
     "data: tasks (and every metric function, tasks/metrics.py, with its evaluate modules), tokenisation "
     "(featurize.py), backbones (models/: loading, the family sites inside the layers, the offline models). "
     "objectives/ (sentence, cloze) is here, not with the pipeline: the task kinds' pooling, "
     "contrastive objective and verbalizer head that methods attach (methods/base.py imports sentence), and "
     "they import only data"),
    (2, ("embexp.methods",), "methods: one file per method; a method never imports a task"),
    (3, ("embexp.run", "embexp.judge"),
     "run: the stages of one run (run/: preflight, build, adapter, loop, schedule, checkpoint, sharding, curriculum, "
     "selection, predict, results), "
     "the judges (judge/: prompts, verdict cache, backends, scoring, python -m embexp.judge)"),
    (4, ("embexp.train", "embexp.eval", "embexp.lmeval"),
     "entry points that train or evaluate one run (lmeval: a run as lm-evaluation-harness's model)"),
    (5, ("embexp.studies",), "studies: analyses that compute with models or data (python -m embexp.analyze)"),
    (6, ("embexp.report", "embexp.analyze", "embexp.sweep", "embexp.doctor", "embexp.xcheck", "embexp.__main__"),
     "top: tables from run records (one module per paper), the analyze CLI, the sweep runner (sweep/: the runner, "
     "the paper tables as Python functions, each command kind with its done probe), "
     "the machine check (doctor/: python -m embexp.doctor, make gpu-check: it builds runs through every lower layer), "
     "the check against the authors' code (xcheck/: python -m embexp.xcheck, make xcheck), the package's help"),
]


def layer_of(module: str) -> int | None:
    """The layer of the longest prefix naming `module` (the package itself, embexp, names only itself)."""
    best = max((p for _, prefixes, _ in LAYERS for p in prefixes
                if module == p or (p != "embexp" and module.startswith(p + "."))), key=len, default=None)
    return next(n for n, prefixes, _ in LAYERS if best in prefixes) if best else None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> dict[str, tuple[str, bool]]:
    """module name -> (source text, whether it is a package __init__)."""
    return {module_name(p): (p.read_text(encoding="utf-8"), p.name == "__init__.py")
            for p in sorted((SRC / "embexp").rglob("*.py"))}


def imported(module: str, source: str, is_package: bool, known: set[str]) -> set[str]:
    """The embexp modules `source` imports anywhere (a name imported from a package is the
    submodule when one exists: ``from embexp.report import tinyte`` is embexp.report.tinyte)."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else []))
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    return {m for m in out if m == "embexp" or m.startswith("embexp.")}


def upward_imports(mods: dict[str, tuple[str, bool]]) -> list[str]:
    """'a (layer i) imports b (layer j)' for every import of a higher layer, plus every unplaced module."""
    bad = [f"{m} is in no layer: add it to tests/test_layers.py LAYERS" for m in mods if layer_of(m) is None]
    for m, (src, is_package) in mods.items():
        for dep in sorted(imported(m, src, is_package, set(mods))):
            if layer_of(m) is not None and (layer_of(dep) or 0) > layer_of(m):
                bad.append(f"{m} (layer {layer_of(m)}) imports {dep} (layer {layer_of(dep)})")
    return bad


def test_no_module_imports_a_higher_layer():
    mods = sources()
    assert len(mods) > 50 and "embexp.core.records" in mods and "embexp.report.ktoken" in mods
    assert upward_imports(mods) == []


def test_an_upward_import_is_reported_even_inside_a_function():
    mods = sources()
    fake = dict(mods)
    fake["embexp.tasks.fake"] = ("def f():\n    from embexp.report import tinyte\n", False)  # lazy, in a lower layer
    fake["embexp.tasks.rel"] = ("from ..report.ktoken import render\n", False)  # relative, two levels up
    fake["embexp.run.predict"] = (mods["embexp.run.predict"][0] + "\nfrom ..studies import ablation\n", False)
    assert upward_imports(fake) == ["embexp.run.predict (layer 3) imports embexp.studies.ablation (layer 5)",
                                    "embexp.tasks.fake (layer 1) imports embexp.report.tinyte (layer 6)",
                                    "embexp.tasks.rel (layer 1) imports embexp.report.ktoken (layer 6)"]
    assert upward_imports({"embexp.newthing": ("", False)}) == [
        "embexp.newthing is in no layer: add it to tests/test_layers.py LAYERS"]


def test_the_rooms_of_the_judge_and_the_models_sit_in_their_package_s_layer():
    mods = sources()
    for package, layer in (("embexp.judge", 3), ("embexp.models", 1)):
        rooms = sorted(m for m in mods if m.startswith(package + "."))
        assert len(rooms) >= 3 and {layer_of(m) for m in rooms} == {layer}, rooms


def test_layers_of_the_modules_the_issue_names():
    assert [layer_of(m) for m in ("embexp.core.records", "embexp.tasks.metrics", "embexp.methods.ktoken",
                                  "embexp.run.predict", "embexp.train", "embexp.studies.ablation",
                                  "embexp.report.pema", "embexp.sweep")] == [0, 1, 2, 3, 4, 5, 6, 6]
    inference = imported("embexp.run.predict", sources()["embexp.run.predict"][0], False, set(sources()))
    assert not any(m.startswith(("embexp.studies", "embexp.report")) for m in inference)


def import_cycles(mods: dict[str, tuple[str, bool]]) -> list[list[str]]:
    """The import cycles among ``mods``: every strongly connected component of the import graph with more
    than one module (a module that imports one that imports it back, directly or through others),
    each sorted. A package's ``__init__`` that imports its own submodules counts too."""
    graph = {m: {d for d in imported(m, src, pkg, set(mods)) if d in mods and d != m} for m, (src, pkg) in mods.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_module_imports_one_that_imports_it_back():
    assert import_cycles(sources()) == []


def test_a_cycle_through_other_modules_is_reported():
    mods = sources()
    fake = dict(mods)
    # run.loop -> run.checkpoint (real) -> run.sharding (real) -> run.loop (planted, inside a function)
    fake["embexp.run.sharding"] = (mods["embexp.run.sharding"][0]
                                   + "\ndef f():\n    from embexp.run import loop\n", False)
    assert import_cycles(fake) == [["embexp.run.checkpoint", "embexp.run.loop", "embexp.run.sharding"]]
    # package back
    fake["embexp.tasks.registry"] = (mods["embexp.tasks.registry"][0] + "\nimport embexp.tasks\n", False)
    assert ["embexp.tasks", "embexp.tasks.registry"] in import_cycles(fake)
