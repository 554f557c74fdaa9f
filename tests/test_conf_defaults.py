"""A YAML under conf/ holds its defaults list, its name and the values that differ from what the rest of its
composition gives: the schema dataclasses are the one place a default is written.

Every option of every group is composed through the project's composition (``core.cli.compose``) without its own
keys: a group's option (method, model, task, trainer) in a copy of the tree where those files hold only their
defaults list and name, a preset (experiment, debug) as the group options it chooses. A key whose value is the same
without it is named (file and key). The keys of a preset under a group it does not choose itself (``model.*`` in an
experiment; every group in ``debug/``) are compared with that group's value under each of its options: such a key
is needed where any option gives another value.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from conftest import CONF
from embexp.core import cli
from embexp.report.digest import value_at as at  # the value at a dotted path, KeyError where it has none

GROUPS = ("method", "model", "task", "trainer")  # the files of one option each, on top of the group's schema
PRESETS = ("experiment", "debug")  # @package _global_: values for any group, after the groups
KEEP = ("defaults", "name")


def leaves(node, prefix: str = "") -> dict[str, object]:
    """Dotted path -> value of every leaf of a YAML mapping (a list or an empty mapping is one leaf)."""
    out = {}
    for k, v in node.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(leaves(v, path + "."))
        else:
            out[path] = v
    return out


def own_keys(group: str, option: str) -> dict[str, object]:
    """The composed paths and values that conf/<group>/<option>.yaml sets (not its defaults list or name)."""
    data = yaml.safe_load((CONF / group / f"{option}.yaml").read_text()) or {}
    body = {k: v for k, v in data.items() if k not in KEEP}
    return leaves(body) if group in PRESETS else leaves(body, f"{group}.")


def stripped_tree(root: Path) -> Path:
    """A copy of conf/ whose files in :data:`GROUPS` hold only their defaults list and name."""
    tree = root / "conf"
    shutil.copytree(CONF, tree)
    for group in GROUPS:
        for path in (tree / group).glob("*.yaml"):
            data = yaml.safe_load(path.read_text()) or {}
            path.write_text(yaml.safe_dump({k: data[k] for k in KEEP if k in data}, sort_keys=False))
    return tree


@functools.cache
def compose_in(tree: Path, overrides: tuple[str, ...]) -> dict:
    """Composed with EMBEXP_CONF set to ``tree`` (by :func:`composed`)."""
    return OmegaConf.to_container(cli.compose("train", list(overrides)), resolve=False)


def composed(tree: Path, overrides: list[str], monkeypatch) -> dict:
    """The composed tree (a container, unresolved), composed once per tree and list (presets that choose the same
    group options, and the debug keys compared with every experiment, ask for the same list many times)."""
    monkeypatch.setenv("EMBEXP_CONF", str(tree))
    return compose_in(tree, tuple(overrides))


def zipped(options: dict[str, list[str]]) -> list[list[str]]:
    """Override lists that together choose every option of every group once (one compose covers an option of
    each group: the groups' nodes do not read each other)."""
    n = max(len(v) for v in options.values())
    return [[f"{g}={v[i % len(v)]}" for g, v in options.items()] for i in range(n)]


def chosen_groups(group: str, option: str) -> dict[str, str]:
    """The group options a preset chooses itself (``- override /task: glue`` -> task: glue)."""
    data = yaml.safe_load((CONF / group / f"{option}.yaml").read_text()) or {}
    return {k.removeprefix("override ").strip("/"): v for d in data.get("defaults", []) if isinstance(d, dict)
            for k, v in d.items()}


def test_no_yaml_key_equals_what_its_composition_gives_without_it(tmp_path, monkeypatch):
    cli.compose_train([])  # registers every schema
    options = {g: cli.choices(g) for g in GROUPS + PRESETS}
    assert all(options.values()), options
    # each option's composed config in the tree as it is (real) and with its file's own keys removed (bare)
    real, bare = {g: {} for g in GROUPS}, {}
    tree = stripped_tree(tmp_path)
    for ovr in zipped({g: options[g] for g in GROUPS}):
        full, base = composed(CONF, ovr, monkeypatch), composed(tree, ovr, monkeypatch)
        for o in ovr:
            g, option = o.split("=")
            real[g][option], bare[o] = full, base
    for g in PRESETS:  # a preset without its own keys composes as the group options it chooses
        for option in options[g]:
            chosen = [f"{k}={v}" for k, v in chosen_groups(g, option).items()]
            bare[f"{g}={option}"] = composed(CONF, chosen, monkeypatch)
    # a debug preset comes after any experiment: its keys meet every experiment's values too (composed when the
    # other values leave the key looking repeated)
    exp = lambda: [composed(CONF, [f"experiment={e}"], monkeypatch) for e in options["experiment"]]  # noqa: E731

    repeated = []
    for g in GROUPS + PRESETS:
        for option in options[g]:
            chosen = chosen_groups(g, option)
            for path, value in own_keys(g, option).items():
                group = path.split(".")[0]
                without = [at(bare[f"{g}={option}"], path)]
                if g in PRESETS and group in GROUPS and group not in chosen:
                    without += [at(full, path) for full in real[group].values()]
                same = all(w is not KeyError and w == value for w in without)
                if same and g == "debug":
                    same = all(at(full, path) == value for full in exp())
                if same:
                    repeated.append(f"conf/{g}/{option}.yaml: {path}={value!r}")
    assert not repeated, f"{len(repeated)} keys equal what the composition gives without them:\n" + "\n".join(repeated)
