"""What embexp reads of Hydra beyond its public API, in one place: the text of Hydra's composition errors,
turned into one line. Written against Hydra 1.3.8 (:data:`HYDRA`); ``tests/test_hydra_compat.py`` asserts the
shapes of the messages read here, so that a Hydra that words them otherwise fails there, not in a user's
terminal.
"""

from __future__ import annotations

import re

HYDRA = "1.3.8"

# Hydra's lines that carry no news for a person at a terminal (OmegaConf's location lines, Hydra's hint)
NOISE = ("full_key", "object_type", "reference_type", "Set the environment")
# ConfigCompositionException for a key the tree lacks: "Could not override 'trainer.lrr'.\nTo append ..."
UNKNOWN_KEY = re.compile(r"^Could not override '([^']+)'\.")


def compose(config_dir: str, config_name: str, overrides: list[str]):
    """Hydra's compose of ``config_name`` from ``config_dir`` with ``overrides`` (Hydra's own errors raised)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose(config_name, overrides=list(overrides))


def unknown_key(e: BaseException) -> str | None:
    """The dotted key of an override Hydra refused because the tree has no such key, else None."""
    m = UNKNOWN_KEY.match(str(e))
    return m.group(1) if m else None


def error_line(e: BaseException) -> str:
    """Hydra's message and its cause (OmegaConf's) as one line: the first three lines that say something,
    joined by ': ' (e.g. 'Error merging override trainer.max_steps=many: Value 'many' of type 'str' could not be
    converted to Integer')."""
    text = f"{e}\n{e.__cause__ or ''}"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(NOISE)]
    return ": ".join(dict.fromkeys(lines[:3]))
