"""One config per run directory: what a new run may do with the record it finds there.

A run directory records the fingerprint of the config that wrote it (``core.fingerprint``,
``fingerprint.json``). Before a run writes anything (under the lock of ``run.lock``), :func:`claim`
compares the record there with the new config:

- no record: the run starts;
- ``trainer.overwrite=true``: the old record (metrics, predictions, adapter, export, checkpoints,
  config, status) is removed and the run starts again (the Hugging Face Trainer's ``overwrite_output_dir``);
- a complete or resumable run (one with a checkpoint) of another fingerprint: one line naming the
  differing fields, nothing written; under ``trainer.resume=true`` the same, with the fields a resume
  may change (:data:`core.fingerprint.SAFE_TO_CHANGE`);
- the same complete run without ``trainer.resume=true``: one line (its result is already there);
- a failed or interrupted run without a checkpoint: replaced, with one warning line when its config differs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
from pathlib import Path

from embexp import EmbexpError
from embexp.core import fingerprint as fp
from embexp.core.records import CONFIG, METRICS, STATUS, UnreadableRecord, is_complete
from embexp.run.lock import read_status

log = logging.getLogger("embexp")
# what a run writes into its directory, removed by trainer.overwrite=true (train.log and the verdict cache stay:
# a log is appended to, and a verdict does not depend on the run that asked for it)
RECORDS = (METRICS, STATUS, CONFIG, fp.FINGERPRINT, "predictions.jsonl", "adapter.safetensors", "method.json",
           "export", "checkpoint", "checkpoint.prev", "checkpoint.tmp", "trackers")
FRESH, CONTINUE, DONE = "fresh", "continue", "done"


def resumable(run_dir: Path) -> bool:
    return any((Path(run_dir) / d / "meta.json").is_file() for d in ("checkpoint", "checkpoint.prev"))


def has_record(run_dir: Path) -> bool:
    return any((Path(run_dir) / name).exists() for name in (STATUS, CONFIG, fp.FINGERPRINT))


def claim(cfg, run_dir: Path, is_main: bool = True) -> str:
    """FRESH (start from nothing), CONTINUE (the same config's unfinished run: resumed or started again) or
    DONE (``trainer.resume=true`` on the same config's complete run); raises :class:`EmbexpError` (one line)
    where the directory holds another config's run or the same complete run without resume or overwrite."""
    run_dir = Path(run_dir)
    resume, overwrite = bool(cfg.trainer.resume), bool(cfg.trainer.overwrite)
    if resume and overwrite:
        raise EmbexpError("trainer.resume=true and trainer.overwrite=true contradict each other: resume continues "
                          "the run in the directory, overwrite replaces it (choose one)")
    if not has_record(run_dir):
        return FRESH
    status = (read_status(run_dir) or {}).get("status", "unreadable")
    if overwrite:
        if is_main:
            clear(run_dir)
        log.warning("run %s: trainer.overwrite=true: replaced the %s run that was there", run_dir, status)
        return FRESH
    try:
        old = recorded_fields(run_dir)
    except UnreadableRecord as e:
        raise EmbexpError(f"{e}; trainer.overwrite=true replaces the run there") from None
    diff = fp.differences(old, fp.result_fields(cfg)) if old is not None else ["(no readable config)"]
    complete, keeps = is_complete(run_dir), resumable(run_dir)
    if diff and (complete or keeps):
        what = "complete run" if complete else "resumable run (it has a checkpoint)"
        hint = (f"; trainer.resume=true accepts changes only to: {', '.join(fp.SAFE_TO_CHANGE)}" if resume else "")
        raise EmbexpError(f"run directory {run_dir} holds a {what} of another config, which differs in "
                          f"{len(diff)} field{'s' if len(diff) > 1 else ''}: {'; '.join(shown(diff))}{hint}; use "
                          f"another seed, tag or hydra.run.dir, or trainer.overwrite=true to replace it")
    if complete and not resume:
        raise EmbexpError(f"run directory {run_dir} already holds this complete run: trainer.resume=true returns its "
                          f"metrics, trainer.overwrite=true trains it again")
    if diff:
        log.warning("run %s: replacing the %s run there (no checkpoint to resume), whose config differed in: %s",
                    run_dir, status, "; ".join(shown(diff)))
        return FRESH
    changed = safe_changes(cfg, run_dir)
    if changed and resume:
        log.info("run %s: resumed with changed fields that are safe to change: %s", run_dir, ", ".join(changed))
    return DONE if complete else CONTINUE


def recorded_fields(run_dir: Path) -> dict | None:
    """The result fields a run directory recorded: fingerprint.json's, else (a run from before it) those of
    its config.yaml; None where it holds neither. An unreadable file raises ``core.records.UnreadableRecord``."""
    from omegaconf import OmegaConf

    run_dir = Path(run_dir)
    path = run_dir / fp.FINGERPRINT
    try:
        if path.is_file():
            fields = json.loads(path.read_text())["fields"]
            if not isinstance(fields, dict):
                raise ValueError("'fields' is not an object")
            return fields
        path = run_dir / CONFIG
        if path.is_file():
            cfg = OmegaConf.load(path)
            if not OmegaConf.is_dict(cfg):
                raise ValueError("expected a mapping")
            return fp.result_fields(cfg)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UnreadableRecord(path, e) from None
    except Exception as e:  # yaml's and omegaconf's parse errors
        text = str(e).splitlines()[0] if str(e) else ""
        raise UnreadableRecord(path, ValueError(f"{type(e).__name__}: {text}")) from None
    return None


def shown(diff: list[str], most: int = 6) -> list[str]:
    """The first ``most`` differences, and how many more."""
    return diff[:most] + ([f"and {len(diff) - most} more"] if len(diff) > most else [])


def safe_changes(cfg, run_dir: Path) -> list[str]:
    """The presentation fields (safe to change on resume) whose value the run's config.yaml records otherwise."""
    from omegaconf import OmegaConf

    try:
        old = fp.flatten(OmegaConf.load(Path(run_dir) / CONFIG))
    except Exception:  # config.yaml is rewritten by the run; an unreadable one only loses this note
        return []
    new = fp.flatten(cfg)
    return [k for k in fp.SAFE_TO_CHANGE if k in old and k in new and old[k] != new[k]]


def clear(run_dir: Path) -> None:
    """Remove the records of the run in ``run_dir`` (trainer.overwrite=true); a failure is one line."""
    for name in RECORDS:
        path = Path(run_dir) / name
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        except OSError as e:
            raise EmbexpError(f"trainer.overwrite=true cannot remove {path}: {e.strerror or e}") from None
