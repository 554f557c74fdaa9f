"""Analyses behind the papers' tables that compute with models or data, run with
``python -m embexp.analyze <name> key=value ...`` (params, ablation, correlation, lengths, vocab;
model_specs holds the parameter counts of the papers' models).

Each module exposes a ``Config`` dataclass (help text on every field) and ``run(cfg)``. This file
holds what they share: composing the real train config (the same Hydra tree and compose API the
CLI and the tests use). Runs are found and tables written through ``embexp.core.records``; tables read
from finished runs alone are ``python -m embexp.report`` (``embexp.report``).
"""

from __future__ import annotations

from embexp import EmbexpError

from embexp.core import cli


def compose_train(overrides: list[str]):
    """The train config for these overrides, composed exactly as ``python -m embexp.train`` does."""
    from hydra import compose, initialize_config_dir

    from embexp.core.config import register_core_schemas, validate

    register_core_schemas()
    import embexp.methods  # noqa: F401  (registers the method schemas)
    import embexp.tasks  # noqa: F401  (registers the task schemas)

    for arg in overrides:  # unknown group choices: one line naming the valid ones
        key, _, value = arg.partition("=")
        key = key.lstrip("+~")
        if key in cli.GROUPS and value and value != "null" and value not in cli.choices(key):
            raise EmbexpError(f"unknown {key} '{value}' (choose from: {', '.join(cli.choices(key))})")
    try:
        with initialize_config_dir(config_dir=str(cli.conf_dir()), version_base=None):
            cfg = compose("train", overrides=list(overrides))
    except Exception as e:  # hydra/omegaconf raise many types; keep the first line
        raise EmbexpError(f"cannot compose {' '.join(overrides)}: {str(e).splitlines()[0]}") from None
    validate(cfg)  # every field's domain and the method's model kinds, as the CLI checks them
    return cfg
