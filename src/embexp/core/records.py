"""Run records: write, find and load runs; the one API every table and study reads them through (what a run
directory holds, its statuses, and how tables find runs: docs/architecture.md, "Run record" and "The records API").

A directory is complete only when ``status.json`` says so; ``metrics.json`` is removed when a run starts, so a
killed run is never mistaken for a finished one.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from embexp import EmbexpError
from embexp.core.fingerprint import config_key, differences, seedless
from embexp.core.upgrade import upgrade

STATUS, METRICS, CONFIG = "status.json", "metrics.json", "config.yaml"


# ---- write ---------------------------------------------------------------------------------------------
def atomic_write(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


@contextlib.contextmanager
def atomic_path(path: Path):
    """A temporary path beside ``path`` (a file or a folder) for any writer (text, safetensors,
    ``save_pretrained``): renamed into place when the block ends, an older ``path`` replaced. Where the
    writing fails the temporary path is removed, ``path`` stays as it was, and an OS error (disk full, quota,
    permissions, also as safetensors reports one) is one line naming the path."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        if tmp.is_dir() and path.is_dir():  # a folder cannot be renamed over another: the old one goes first
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
        reason = os_error(e)
        if reason is None:
            raise
        raise EmbexpError(f"cannot write {path}: {reason}") from None


def os_error(e: BaseException) -> str | None:
    """The OS error of a failed write (OSError's strerror, or what safetensors' Rust side reports as
    '... (os error 28)'); None for any other error."""
    if isinstance(e, OSError):
        return e.strerror or str(e)
    code = re.search(r"os error (\d+)", str(e)) if type(e).__name__ == "SafetensorError" else None
    return os.strerror(int(code.group(1))) if code else None


def write_json(path: Path, obj) -> None:
    atomic_write(path, json.dumps(_finite(obj), indent=2, sort_keys=False, default=_default, allow_nan=False) + "\n")


def _finite(o):
    """NaN/inf become null: metrics.json stays strict JSON."""
    if isinstance(o, float) and (o != o or o in (float("inf"), float("-inf"))):
        return None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def _default(o):
    if hasattr(o, "item"):
        return o.item()
    return str(o)


def git_commit() -> str:
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class RunRecord:
    """Writes one run directory. Only the main process writes; the others hold a no-op record."""

    def __init__(self, run_dir: Path, is_main: bool = True):
        self.dir = Path(run_dir)
        self.is_main = is_main

    def start(self, cfg, resume: bool = False, previous: dict | None = None) -> None:
        """``running``; ``previous``: the status of an earlier run of this directory that died (kept in the
        new status, ``embexp.run.lock``). A resume keeps the step of the last checkpoint written
        (:func:`note_checkpoint`)."""
        if not self.is_main:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        kept = checkpoint_note(self.dir) if resume else {}
        (self.dir / METRICS).unlink(missing_ok=True)
        if not resume:
            (self.dir / "predictions.jsonl").unlink(missing_ok=True)
        atomic_write(self.dir / CONFIG, OmegaConf.to_yaml(cfg, resolve=True))
        write_json(self.dir / STATUS, {"status": "running", "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                       **({"previous": previous} if previous else {}), **kept})

    def write_jsonl(self, name: str, rows: list[dict]) -> None:
        if self.is_main:
            text = "".join(json.dumps(r, ensure_ascii=False, default=_default) + "\n" for r in rows)
            atomic_write(self.dir / name, text)

    def finish(self, metrics: dict) -> None:
        if not self.is_main:
            return
        write_json(self.dir / METRICS, metrics)
        write_json(self.dir / STATUS, {"status": "complete", "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                       **checkpoint_note(self.dir)})

    def interrupt(self, message: str) -> None:
        """Stopped on a preemption notice with a checkpoint: never ``complete``; resume continues it."""
        self._end({"status": "interrupted", "reason": message, "at": time.strftime("%Y-%m-%dT%H:%M:%S")})

    def fail(self, message: str) -> None:
        self._end({"status": "failed", "error": message})

    def _end(self, status: dict) -> None:
        """The last status, written as well as it can be: atomically, else (a full disk: no block for the
        temporary file) over the old status.json in place, whose block it reuses; where even that fails the
        error that ended the run is the one reported, and the status left (running, no live owner) reads
        interrupted."""
        if self.is_main and self.dir.is_dir():
            status = {**status, **checkpoint_note(self.dir)}
            try:
                write_json(self.dir / STATUS, status)
            except EmbexpError:  # a full disk has no block for a new file: rewrite the old one's in place
                with contextlib.suppress(OSError):
                    (self.dir / STATUS).write_text(json.dumps(_finite(status), default=_default) + "\n")


CHECKPOINT_STEP = "checkpoint_step"  # status.json: the step of the last checkpoint the run wrote


def read_json(path: Path) -> dict | None:
    """A small JSON record (owner.json, status.json) as a dict; None where it is missing or unreadable."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def checkpoint_note(run_dir: Path) -> dict:
    """``{"checkpoint_step": N}`` where the run's status.json records the last checkpoint it wrote, else {}:
    carried into each status the run writes after it, so a resume whose checkpoint is gone is told from a
    run that never wrote one (``run.ownership``)."""
    step = (read_json(Path(run_dir) / STATUS) or {}).get(CHECKPOINT_STEP)
    return {CHECKPOINT_STEP: step} if isinstance(step, int) and not isinstance(step, bool) else {}


def note_checkpoint(run_dir: Path, step: int) -> None:
    """Record in status.json that the run wrote the checkpoint of ``step`` (called once it is in place).
    Only a note: where status.json cannot be read or written it is left as it is."""
    path = Path(run_dir) / STATUS
    try:
        status = json.loads(path.read_text())
        if isinstance(status, dict):
            write_json(path, {**status, CHECKPOINT_STEP: int(step)})
    except (OSError, ValueError, EmbexpError):
        pass


# ---- find and load -------------------------------------------------------------------------------------
def is_complete(run_dir: Path) -> bool:
    status = read_json(Path(run_dir) / STATUS) or {}
    return status.get("status") == "complete" and (Path(run_dir) / METRICS).is_file()


def check_finished(run_dir: Path) -> None:
    """A finished run directory (what eval, lmeval and the judge read), else one line saying what it is not."""
    if not Path(run_dir).is_dir():
        raise EmbexpError(f"run_dir '{run_dir}' does not exist")
    if not (Path(run_dir) / CONFIG).is_file():
        raise EmbexpError(f"run_dir '{run_dir}' has no {CONFIG}: not an embexp run directory")
    if not is_complete(run_dir):
        raise EmbexpError(f"run_dir '{run_dir}' did not finish (status.json is not 'complete'); rerun it with "
                          "trainer.resume=true")


def run_dirs(spec: str, strict: bool = False) -> list[Path]:
    """Complete run directories named by `spec`: a run directory, a folder holding runs (searched
    recursively), or a glob of either. An unreadable status.json is skipped with one warning line naming
    it (``strict``: one error line instead)."""
    roots = [Path(p) for p in sorted(glob.glob(spec))] if any(c in spec for c in "*?[") else [Path(spec)]
    found: dict[str, Path] = {}
    for root in roots:
        if not root.exists():
            continue
        for status in ([root / STATUS] if (root / STATUS).is_file() else sorted(root.rglob(STATUS))):
            try:
                s = json.loads(status.read_text())["status"]
            except (OSError, ValueError, KeyError, TypeError) as e:
                unreadable(status, e, strict)
                continue
            if s == "complete" and not (status.parent / METRICS).is_file():
                unreadable(status.parent / METRICS, ValueError("missing, though status.json says complete"), strict)
            elif s == "complete":
                found[str(status.parent.resolve())] = status.parent
    return list(found.values())


def unreadable(path: Path, error: Exception, strict: bool) -> None:
    """A run record that cannot be read: one warning line naming it (the run is skipped), or under
    ``strict`` one error line."""
    from embexp.core.cli import warn

    if strict:
        raise EmbexpError(f"unreadable run record {path}: {_reason(error)} (strict=true; without it the run is "
                          f"skipped)")
    warn(f"skipped the run record {path}: {_reason(error)}")


def load_run(run_dir: Path) -> dict:
    """metrics.json of a finished run, plus run_dir, its resolved config (dict), tag, task_name, subset.
    A file that cannot be read raises :class:`UnreadableRecord` naming it."""
    run_dir = Path(run_dir)
    try:
        m = json.loads((run_dir / METRICS).read_text())
        if not isinstance(m, dict):
            raise ValueError(f"expected a JSON object, got {type(m).__name__}")
    except (OSError, ValueError) as e:
        raise UnreadableRecord(run_dir / METRICS, e) from None
    try:
        cfg = OmegaConf.to_container(OmegaConf.load(run_dir / CONFIG)) if (run_dir / CONFIG).is_file() else {}
        if not isinstance(cfg, dict):
            raise ValueError(f"expected a mapping, got {type(cfg).__name__}")
        m.update(run_dir=str(run_dir), config=cfg, tag=cfg.get("tag", ""), config_key=config_key(cfg))
        m["task_name"] = (cfg.get("task") or {}).get("name", m.get("task", ""))
        m["subset"] = (cfg.get("task") or {}).get("subset", "")
    except (OSError, ValueError, AttributeError, yaml.YAMLError) as e:
        raise UnreadableRecord(run_dir / CONFIG, e) from None
    return m


def load_config(run_dir: Path):
    """A run directory's config.yaml as a DictConfig, checked to be a run's, with every field an older embexp did
    not write set to the value that run had (``core.upgrade.upgrade``); an unreadable or unparseable one raises
    :class:`UnreadableRecord` naming it. Read as data: nothing in it is resolved or run here."""
    path = Path(run_dir) / CONFIG
    try:
        cfg = OmegaConf.load(path)
        if not OmegaConf.is_dict(cfg) or not OmegaConf.is_dict(cfg.get("model")):
            raise ValueError("not the config of a run (no model section)")
    except Exception as e:  # noqa: BLE001 - OSError, ValueError, and yaml's and omegaconf's parse errors
        raise UnreadableRecord(path, e) from None
    return upgrade(cfg)


class UnreadableRecord(EmbexpError):
    """A run record's file that cannot be read or parsed (``path``, ``error``)."""

    def __init__(self, path: Path, error: Exception):
        self.path, self.error = path, error
        super().__init__(f"unreadable run record {path}: {_reason(error)}")


def _reason(error: Exception) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    if isinstance(error, OSError):
        return error.strerror or text
    return text if type(error) is ValueError else f"{type(error).__name__}: {text}"


def collect_runs(spec: str, strict: bool = False) -> list[dict]:
    """The finished runs of ``run_dirs(spec)``, loaded; a record that cannot be read (a truncated
    metrics.json, a broken config.yaml) is skipped with one warning line naming it (``strict``: stops)."""
    out = []
    for d in run_dirs(spec, strict):
        try:
            out.append(load_run(d))
        except UnreadableRecord as e:
            unreadable(e.path, e.error, strict)
    return out


def write_digest(path: Path, runs: list[dict]) -> None:
    """Run records as a digest to commit: one JSON object a line (keys sorted, so a rerun's diff is its own
    lines), written whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in runs))


def read_predictions(run_dir: Path) -> list[dict]:
    """The rows of a run's predictions.jsonl ([] when it has none)."""
    path = Path(run_dir) / "predictions.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def debug_output_root(debug: str, default: str = "outputs") -> str:
    """The output_root a conf/debug preset sets (smoke -> outputs/smoke); `default` when none."""
    from embexp.core import cli

    if not debug:
        return default
    path = cli.conf_dir() / "debug" / f"{debug}.yaml"
    if not path.is_file():
        raise EmbexpError(f"unknown debug '{debug}' (choose from: {', '.join(cli.choices('debug'))})")
    return str(OmegaConf.load(path).get("output_root", default))


class Runs:
    """Finished runs indexed by (task family, subset, model, method, tag)."""

    def __init__(self, runs: list[dict]):
        self.by_key: dict[tuple, list[dict]] = {}
        for r in runs:
            self.by_key.setdefault((r["task_name"], r["subset"], r["model"], r["method"], r["tag"]), []).append(r)

    def get(self, task: str, model: str, method: str, tag: str = "", subset: str | None = None) -> list[dict]:
        """Every run of the key (any subset unless given), by seed: runs of one config (an error line where
        they are of several, :func:`one_config`)."""
        found = sorted((r for (t, s, mo, me, tg), rs in self.by_key.items() for r in rs if t == task and mo == model
                        and me == method and tg == tag and (subset is None or s == subset)),
                       key=lambda r: r.get("seed", 0))
        one_config(found)
        return found

    def find(self, task: str, subset: str, model: str, method: str, tag: str, seeds=()) -> list[dict]:
        """One run per seed, in the order of `seeds` (every seed found when empty). Where several runs
        hold the same key and seed (an output root nested in another, e.g. outputs/smoke in outputs),
        the one nearest the root wins."""
        by_seed: dict = {}
        held = self.by_key.get((task, subset, model, method, tag), [])
        for r in sorted(held, key=lambda r: len(Path(r["run_dir"]).parts)):
            by_seed.setdefault(r.get("seed"), r)
        found = [by_seed[s] for s in (list(seeds) or sorted(by_seed)) if s in by_seed]
        one_config(found)
        return found


def one_config(runs: list[dict]) -> None:
    """Runs a table cell averages must differ in their seed alone (``core.fingerprint.differences`` of their
    result fields): one line naming two runs that differ and the fields where they do."""
    for r in runs[1:]:
        diff = differences(seedless(runs[0]), seedless(r))
        if diff:
            raise EmbexpError(f"runs of different configs would be averaged in one cell: {runs[0]['run_dir']} and "
                              f"{r['run_dir']} differ in {'; '.join(diff[:4])}{' ...' if len(diff) > 4 else ''} "
                              f"(keep one config per task, model, method and tag under runs=, or give them "
                              f"different tags)")


def config_groups(runs: list[dict]) -> list[list[dict]]:
    """``runs`` split by config (result fields without the seed, ``core.fingerprint``), each group one run per
    seed (where a seed repeats, the run nearest the root), in the order each config is first met."""
    groups: list[dict] = []
    for r in sorted(runs, key=lambda r: len(Path(r["run_dir"]).parts)):
        group = next((g for g in groups if not differences(seedless(next(iter(g.values()))), seedless(r))), None)
        if group is None:
            groups.append(group := {})
        group.setdefault(r.get("seed"), r)
    return [sorted(g.values(), key=lambda r: r.get("seed", 0)) for g in groups]


def config_labels(groups: list[list[dict]], most: int = 3) -> list[str]:
    """Per group of :func:`config_groups`, 'key=value, ...' of the fields in which the groups' configs differ
    ('' for a single group): what tells their table rows apart."""
    if len(groups) <= 1:
        return [""] * len(groups)
    fields = [seedless(g[0]) for g in groups]
    keys = sorted(k for k in set.intersection(*(set(f) for f in fields)) if len({str(f[k]) for f in fields}) > 1)
    return [", ".join(f"{k}={f[k]}" for k in keys[:most]) + (" ..." if len(keys) > most else "") for f in fields]


# ---- a run's headline metric ---------------------------------------------------------------------------
SKIP = ("_stderr", "_seconds")  # metric keys that are not a quality figure
SIDE = ("length_reduction", "pl_score", "n_choices")  # figures reported beside the quality metric
LOWER = ("perplexity", "ter")  # lower is better
# The headline metric where a task records several (each paper's main column), else the first one.
PREFERRED = ("rougeLsum", "bleu", "spearman", "mcc", "em_accuracy", "accuracy", "ll_accuracy", "perplexity")


def quality_metric(runs: list[dict], wanted: str) -> str:
    """`wanted` (an error naming the runs' metrics where none holds it), else the runs' headline metric."""
    if wanted:
        if not any(wanted in r["metrics"] for r in runs):
            have = sorted({k for r in runs for k in r["metrics"] if not k.endswith(SKIP)})
            raise EmbexpError(f"metric '{wanted}' is in none of these runs (choose from: {', '.join(have)})")
        return wanted
    keys = [k for r in runs for k in r["metrics"] if not k.endswith(SKIP) and k not in SIDE]
    return next((k for k in PREFERRED if k in keys), keys[0] if keys else "")


def best_held_out(run: dict) -> tuple:
    """A run's best held-out point as a sortable score (higher is better): the task's headline metric on
    the selection rows at any point of its curve (negated for perplexity-like metrics); the earliest
    step wins a tie. The sweep's ``choose`` picks a learning rate by it."""
    points = [p for p in run.get("curve") or [] if p.get("select")]
    if not points:
        raise EmbexpError(f"run {run.get('run_dir', '?')} has no held-out curve points (trainer.curve_select)")
    metric = quality_metric([{"metrics": p["select"]} for p in points], "")
    sign = -1.0 if metric in LOWER else 1.0
    return max((sign * p["select"][metric], -int(p["step"])) for p in points if p["select"].get(metric) is not None)
