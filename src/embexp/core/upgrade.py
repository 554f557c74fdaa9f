"""A run directory's config.yaml as today's schemas read it (:func:`upgrade`): every field an older embexp did
not write is filled in with the value that run had, so that everything downstream reads a composed config's
fields by attribute, with no fallback of its own."""

from __future__ import annotations

import dataclasses
import typing

from omegaconf import MISSING, OmegaConf

# The fields whose value in a run from before the field existed is not today's schema default, each with the
# commit that added it and what every run before it had. Every other field arrived with a default that keeps
# what runs before it did (train_sample_seed=-1: the first rows; loss_on=target; init=pretrained; ...).
BEFORE = {
    # 4e38109 (2026-11-23) added selection rows; before it no task held any out of its training rows. The
    # schemas' defaults since: train_holdout for superglue and alpaca (4e38109) and tree (c38c246, 2026-11-24),
    # a carve that would take rows out of the training set the run trained on; validation for cnndm and wmt16
    # (4e38109); '' for the others. bsd and advbench (27f12b8, train_holdout) came later: their runs all wrote it.
    ("task", "select_split"): ("4e38109", ""),
}


def upgrade(cfg):
    """``cfg`` (a run's config.yaml, ``core.records.load_config``) with the fields it lacks, in place: the value
    that run had (:data:`BEFORE`), else the schema's default, for the top level, model, trainer, judge and the
    task's and method's own schema (found by name in Hydra's ConfigStore)."""
    from hydra.core.config_store import ConfigStore

    from embexp.core.config import TrainConfig, register_core_schemas
    from embexp.core.plugins import discover

    register_core_schemas()
    for package in ("embexp.tasks", "embexp.methods"):
        discover(package)  # their schemas, by name
    for (group, name), (_, value) in BEFORE.items():
        if OmegaConf.is_dict(cfg.get(group)) and name not in cfg[group]:
            cfg[group][name] = value
    fill_defaults(cfg, TrainConfig)
    for group in ("task", "method"):
        node = cfg.get(group)
        stored = ConfigStore.instance().repo.get(group, {}).get(f"schema_{node.name}.yaml") \
            if OmegaConf.is_dict(node) and "name" in node else None
        if stored is not None:
            fill_defaults(node, OmegaConf.get_type(stored.node))
    return cfg


def fill_defaults(node, schema: type) -> None:
    """Set every field of the dataclass ``schema`` that ``node`` lacks to the schema's default, in place, nested
    dataclass fields too (a field that holds something other than a mapping is left as it is)."""
    if not OmegaConf.is_dict(node):
        return
    hints = typing.get_type_hints(schema)
    for fl in dataclasses.fields(schema):
        typ = hints.get(fl.name)
        if dataclasses.is_dataclass(typ):
            if fl.name not in node:
                node[fl.name] = OmegaConf.to_container(OmegaConf.structured(typ))
            fill_defaults(node[fl.name], typ)
        elif fl.name not in node:
            if fl.default_factory is not dataclasses.MISSING:
                node[fl.name] = fl.default_factory()
            elif fl.default not in (dataclasses.MISSING, MISSING):
                node[fl.name] = fl.default
