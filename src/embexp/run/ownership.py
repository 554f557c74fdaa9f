"""One config per run directory, and embexp's hands only on its own files: what a new run may do with what it
finds in its directory (:func:`claim`: FRESH, CONTINUE, DONE, or one line naming the folder and what it holds).

A folder holds a run when it holds that run's record: ``config.yaml`` and ``status.json``, both readable
(beside them ``fingerprint.json``, the fingerprint of the config that wrote it, ``core.fingerprint``). Before a
run writes anything, on the main process (once before it takes the lock of ``run.lock``, so that a refusal
leaves no file behind, and again under it), :func:`claim` compares what it finds with the new config; each case
and what it does: docs/running.md, "Runs that stop". ``trainer.overwrite=true`` removes the run's own names
(:data:`RECORDS`) and nothing else.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shutil
from pathlib import Path

from embexp import EmbexpError
from embexp.core import fingerprint as fp
from embexp.core.records import CHECKPOINT_STEP, CONFIG, METRICS, STATUS, UnreadableRecord, is_complete, load_config
from embexp.run.lock import LOCK, OWNER

log = logging.getLogger("embexp")
# what a run writes into its directory, removed by trainer.overwrite=true (train.log and the verdict cache stay:
# a log is appended to, and a verdict does not depend on the run that asked for it)
RECORDS = (METRICS, STATUS, CONFIG, fp.FINGERPRINT, "predictions.jsonl", "adapter.safetensors", "method.json",
           "export", "checkpoint", "checkpoint.prev", "checkpoint.tmp", "checkpoint.old", "trackers")
# embexp's other files in a run directory: never removed, and a folder that holds only these holds no run
SIDE = ("train.log", "judge_cache.jsonl", LOCK, OWNER)
TEMPORARY = re.compile(r"\.(.+)\.tmp\d+")  # core.records.atomic_write's and atomic_path's, of a record's name
STATUSES = ("running", "failed", "interrupted", "complete")
FRESH, CONTINUE, DONE = "fresh", "continue", "done"


def resumable(run_dir: Path) -> bool:
    return any((Path(run_dir) / d / "meta.json").is_file() for d in ("checkpoint", "checkpoint.prev"))


def contents(run_dir: Path) -> tuple[list[str], list[str]]:
    """(the names of a run's records in ``run_dir``, the names there that are not embexp's), sorted; a folder
    name ends in '/'."""
    ours, others = [], []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for p in sorted(Path(run_dir).iterdir()):
            name = p.name + ("/" if p.is_dir() and not p.is_symlink() else "")
            temporary = TEMPORARY.fullmatch(p.name)
            if p.name in RECORDS:
                ours.append(name)
            elif p.name not in SIDE and not (temporary and temporary.group(1) in RECORDS + SIDE):
                others.append(name)
    return ours, others


def listed(names: list[str], most: int = 5) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def check(cfg, run_dir: Path) -> dict | None:
    """What a run of ``cfg`` finds in ``run_dir`` and may do there, without touching it: the run's status.json
    (a dict) where the folder holds a run record, None where it holds nothing of a run; raises
    :class:`EmbexpError` (one line naming the folder and what it holds) where the run may not start there."""
    run_dir = Path(run_dir)
    if cfg.trainer.resume and cfg.trainer.overwrite:
        raise EmbexpError("trainer.resume=true and trainer.overwrite=true contradict each other: resume continues "
                          "the run in the directory, overwrite replaces it (choose one)")
    ours, others = contents(run_dir)
    if not ours:
        if cfg.trainer.overwrite and others:
            raise EmbexpError(f"trainer.overwrite=true replaces only a run embexp recorded, and {run_dir} holds none "
                              f"(no config.yaml and status.json) but {listed(others)}: nothing removed (choose "
                              f"another hydra.run.dir, or empty the folder yourself)")
        return None
    missing = [n for n in (CONFIG, STATUS) if not (run_dir / n).is_file()]
    neither = " (trainer.overwrite=true neither)" if cfg.trainer.overwrite else ""
    if missing:
        raise EmbexpError(f"run directory {run_dir} holds {listed(ours)} but no run record ({' and '.join(missing)} "
                          f"missing): not a run embexp can resume or replace, so nothing is written or removed "
                          f"there{neither}; choose another hydra.run.dir, or remove those yourself")
    try:
        status = read_status(run_dir)
        load_config(run_dir)
    except UnreadableRecord as e:
        raise EmbexpError(f"{e}: embexp resumes or replaces only a run whose record it can read, so nothing is "
                          f"written or removed there{neither}; fix or remove that file yourself, or choose another "
                          f"hydra.run.dir") from None
    return status


def read_object(path: Path) -> dict:
    """A JSON object from ``path``; :class:`UnreadableRecord` naming it otherwise."""
    try:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    except (OSError, ValueError) as e:
        raise UnreadableRecord(path, e) from None
    return data


def read_status(run_dir: Path) -> dict:
    """status.json as a dict with a known ``status``; :class:`UnreadableRecord` naming it otherwise."""
    path = Path(run_dir) / STATUS
    status = read_object(path)
    if status.get("status") not in STATUSES:
        raise UnreadableRecord(path, ValueError(f"status {status.get('status')!r} is none of {', '.join(STATUSES)}"))
    return status


def claim(cfg, run_dir: Path, is_main: bool = True) -> str:
    """FRESH (start from nothing), CONTINUE (the same config's unfinished run: resumed or started again) or
    DONE (the same config's complete run: its metrics are the result); raises :class:`EmbexpError` (one line)
    where the directory holds another config's run, something that is no readable run, or (with
    ``trainer.overwrite=true``) other files and no run. Only the main process removes anything; the others
    decide alike (under overwrite they leave the checks to it)."""
    run_dir = Path(run_dir)
    if not is_main and cfg.trainer.overwrite:
        return FRESH  # the main process refuses (the launch stops) or clears the directory
    status = check(cfg, run_dir)
    if status is None:
        return FRESH
    if cfg.trainer.overwrite:
        clear(run_dir)
        log.warning("run %s: trainer.overwrite=true: replaced the %s run that was there", run_dir, status["status"])
        return FRESH
    return compare(cfg, run_dir, status)


def compare(cfg, run_dir: Path, status: dict) -> str:
    """:func:`claim`'s verdict on a run record of ``run_dir`` (its ``status``) without trainer.overwrite."""
    resume = bool(cfg.trainer.resume)
    try:
        old = recorded_fields(run_dir)
    except UnreadableRecord as e:
        raise EmbexpError(f"{e}; trainer.overwrite=true replaces the run there") from None
    diff = fp.differences(old, fp.result_fields(cfg)) if old is not None else ["(no readable config)"]
    complete, keeps = is_complete(run_dir), resumable(run_dir)
    if diff and (complete or keeps):
        what = "complete run" if complete else "resumable run (it has a checkpoint)"
        hint = (f"; trainer.resume=true accepts changes only to: {', '.join(fp.PRESENTATION)}" if resume else "")
        raise EmbexpError(f"run directory {run_dir} holds a {what} of another config, which differs in "
                          f"{len(diff)} field{'s' if len(diff) > 1 else ''}: {'; '.join(shown(diff))}{hint}; use "
                          f"another seed, tag or hydra.run.dir, or trainer.overwrite=true to replace it")
    step = written_checkpoint(status)
    if resume and not complete and not keeps and step is not None:
        raise EmbexpError(f"trainer.resume=true: run directory {run_dir} has no checkpoint to resume, though its run "
                          f"wrote one{f' (step {step})' if step else ''}: checkpoint/ and checkpoint.prev/ are gone "
                          f"or hold no meta.json; nothing written (trainer.overwrite=true starts the run again "
                          f"from step 0)")
    if diff:
        log.warning("run %s: replacing the %s run there (no checkpoint to resume), whose config differed in: %s",
                    run_dir, status["status"], "; ".join(shown(diff)))
        return FRESH
    changed = safe_changes(cfg, run_dir)
    if changed and resume:
        log.info("run %s: resumed with changed fields that are safe to change: %s", run_dir, ", ".join(changed))
    return DONE if complete else CONTINUE


def written_checkpoint(status: dict) -> int | None:
    """The step of the last checkpoint an unfinished run says it wrote (0 where it says so without the step:
    a preemption notice's status from before the step was recorded), else None."""
    step = status.get(CHECKPOINT_STEP)
    if isinstance(step, int) and not isinstance(step, bool):
        return step
    return 0 if status.get("status") == "interrupted" and "with a checkpoint" in str(status.get("reason", "")) \
        else None


def recorded_fields(run_dir: Path) -> dict | None:
    """The result fields a run directory recorded: fingerprint.json's, else (a run from before it) those of
    its config.yaml; None where it holds neither. An unreadable file raises ``core.records.UnreadableRecord``,
    and so does a fingerprint.json whose fields are not those of the run's config.yaml (written together, they
    hold the same fields) or do not hash to its fingerprint: a field removed or edited, which would let another
    config pass as this run."""
    run_dir = Path(run_dir)
    path = run_dir / fp.FINGERPRINT
    try:
        if path.is_file():
            record = json.loads(path.read_text())
            fields = record["fields"]
            if not isinstance(fields, dict):
                raise ValueError("'fields' is not an object")
            consistent(record, run_dir)
            return fields
        path = run_dir / CONFIG
        if path.is_file():
            return fp.result_fields(load_yaml(path))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UnreadableRecord(path, e) from None
    except Exception as e:  # yaml's and omegaconf's parse errors
        text = str(e).splitlines()[0] if str(e) else ""
        raise UnreadableRecord(path, ValueError(f"{type(e).__name__}: {text}")) from None
    return None


def consistent(record: dict, run_dir: Path) -> None:
    """ValueError where fingerprint.json's ``fields`` lack a field of the run's config.yaml (or hold one it lacks)
    or do not hash to its ``fingerprint``. The two files are written together from one config, so the comparison
    leaves out the presentation fields the record itself names (not today's list, which may have grown)."""
    fields, presentation = record["fields"], tuple(record.get("presentation") or fp.PRESENTATION)
    try:
        written = {k for k in fp.flatten(load_yaml(run_dir / CONFIG)) if k not in presentation}
    except Exception:  # config.yaml is checked on its own (claim.check); the hash still holds the fields
        written = None
    if written is not None:
        lacks, extra = sorted(written - set(fields)), sorted(set(fields) - written)
        if lacks or extra:
            raise ValueError("its fields are not those of the run's config.yaml: "
                             + "; ".join(([f"lacks {listed(lacks, 6)}"] if lacks else [])
                                         + ([f"has {listed(extra, 6)} that config.yaml lacks"] if extra else []))
                             + " (a damaged or edited record: embexp cannot tell whether this config's result is "
                               "there)")
    if fp.digest(fields) != record.get("fingerprint"):
        raise ValueError(f"its fields do not hash to its fingerprint {record.get('fingerprint')!r} (a damaged or "
                         f"edited record)")


def load_yaml(path: Path):
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(path)
    if not OmegaConf.is_dict(cfg):
        raise ValueError("expected a mapping")
    return cfg


def shown(diff: list[str], most: int = 6) -> list[str]:
    return diff[:most] + ([f"and {len(diff) - most} more"] if len(diff) > most else [])


def safe_changes(cfg, run_dir: Path) -> list[str]:
    """The presentation fields (safe to change on resume) whose value the run's config.yaml records otherwise."""
    try:
        old = fp.flatten(load_yaml(Path(run_dir) / CONFIG))
    except Exception:  # config.yaml is rewritten by the run; an unreadable one only loses this note
        return []
    new = fp.flatten(cfg)
    return [k for k in fp.PRESENTATION if k in old and k in new and old[k] != new[k]]


def clear(run_dir: Path) -> None:
    """Remove the records of the run in ``run_dir`` (trainer.overwrite=true): :data:`RECORDS` and their temporary
    files, nothing else; a failure is one line."""
    run_dir = Path(run_dir)
    temporary = [p.name for p in run_dir.iterdir() if (m := TEMPORARY.fullmatch(p.name)) and m.group(1) in RECORDS]
    record = (fp.FINGERPRINT, CONFIG, STATUS)  # last: a removal that fails leaves a run record, to replace again
    for name in (*temporary, *(n for n in RECORDS if n not in record), *record):
        path = run_dir / name
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        except OSError as e:
            raise EmbexpError(f"trainer.overwrite=true cannot remove {path}: {e.strerror or e}") from None
