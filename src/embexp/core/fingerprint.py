"""A run's fingerprint: a hash of the config fields that define its result (every field of the resolved train
config but :data:`PRESENTATION`), so two runs with the same fingerprint are the same experiment. How a run
directory records it, what a resume may change, and how reports group runs by it without ``seed``
(:func:`config_key`, :func:`differences`): docs/architecture.md, "Run record".
"""

from __future__ import annotations

import hashlib
import json

FINGERPRINT = "fingerprint.json"
# fields that change what a run shows or where it writes, never what it computes; a resume may change them
PRESENTATION = ("notes", "output_root", "trainer.progress", "trainer.log_every", "trainer.log_with",
                "trainer.resume", "trainer.overwrite", "trainer.save_every", "judge.cache")


def flatten(node, prefix: str = "") -> dict:
    """Dotted keys -> scalar values of a (resolved) config; lists become their JSON text."""
    from omegaconf import OmegaConf

    if OmegaConf.is_config(node):
        node = OmegaConf.to_container(node, resolve=True)
    out: dict = {}
    if isinstance(node, dict):
        for k, v in node.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict) and v:
                out.update(flatten(v, key))
            else:
                out[key] = json.dumps(v, sort_keys=True, default=str) if isinstance(v, (list, tuple, dict)) else v
    return out


def result_fields(cfg, leave_out: tuple = ()) -> dict:
    """The fields of ``cfg`` that define its result (every field but :data:`PRESENTATION` and ``leave_out``)."""
    drop = PRESENTATION + tuple(leave_out)
    return {k: v for k, v in sorted(flatten(cfg).items()) if k not in drop}


def digest(fields: dict) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:16]


def fingerprint(cfg) -> str:
    return digest(result_fields(cfg))


def config_key(cfg) -> str:
    """The fingerprint without ``seed``: runs of one config that differ only in their seed share it."""
    return digest(result_fields(cfg, ("seed",)))


def differences(old: dict, new: dict) -> list[str]:
    """'key (old -> new)' for each result field both sides have whose values differ. A field only one side has
    is a field embexp added (or removed) between the two runs' versions, not a choice either run made: not
    compared, so a run recorded before a new field existed still resumes, is skipped when complete, and is
    averaged with its other seeds."""
    return [f"{k} ({old[k]} -> {new[k]})" for k in sorted(set(old) & set(new)) if old[k] != new[k]]


def seedless(run: dict) -> dict:
    """The result fields of a loaded run (``core.records.load_run``: its ``config``) without its seed."""
    return result_fields(run.get("config") or {}, ("seed",))


def record(cfg) -> dict:
    """fingerprint.json's content for ``cfg``."""
    fields = result_fields(cfg)
    return {"fingerprint": digest(fields), "presentation": list(PRESENTATION), "fields": fields}
