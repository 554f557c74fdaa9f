"""Run records, and the one API every table reads them through: write, find and load runs,
standard errors, Markdown + CSV + PNG output.

*Write.* One directory per run (``core.config.run_name``), written atomically, with an explicit status.
A directory is complete only when ``status.json`` says so; ``metrics.json`` is written (by rename)
just before that, and removed when a run starts, so a killed run is never mistaken for a finished
one. Statuses: running, failed, interrupted (a preemption notice; resumable), complete.

*Find and load.* ``run_dirs`` (a run directory, a folder holding runs, or a glob of either),
``load_run`` / ``collect_runs`` (metrics.json + the resolved config, with ``task_name``, ``subset``
and ``tag`` read from it) and ``Runs``, the index by (task, subset, model, method, tag) and seed:
tables name the runs they want by those keys, never by rebuilding directory names.

*Standard errors* (``SE``): seeds = the standard error of the mean across seeds (needs >= 2
seeds); examples = the uncertainty from the test examples of each run: the task's recorded
``<metric>_stderr`` (ROUGE), a bootstrap over sentences for corpus BLEU/TER (sacreBLEU's sentence
statistics, ``bootstrap_iters`` resamples, cached in ``<out>/.se_cache.json``), the binomial s.e.
for accuracies; with several seeds, their mean / sqrt(n). auto = seeds where a cell has >= 2
seeds, else examples.

*Output.* ``markdown`` (the text of a table), ``emit`` / ``write_table`` / ``write_text_table``
(<stem>.md + <stem>.csv), ``pyplot`` / ``save_png`` (figures). The display names of methods are
their classes' (``embexp.methods.registry.method_label``).
"""

from __future__ import annotations

import csv
import glob
import json
import math
import os
import subprocess
import time
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from embexp import EmbexpError

STATUS, METRICS, CONFIG = "status.json", "metrics.json", "config.yaml"


# ---- write ---------------------------------------------------------------------------------------------
def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


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

    def start(self, cfg, resume: bool = False) -> None:
        if not self.is_main:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / METRICS).unlink(missing_ok=True)
        if not resume:
            (self.dir / "predictions.jsonl").unlink(missing_ok=True)
        atomic_write(self.dir / CONFIG, OmegaConf.to_yaml(cfg, resolve=True))
        write_json(self.dir / STATUS, {"status": "running", "started": time.strftime("%Y-%m-%dT%H:%M:%S")})

    def write_jsonl(self, name: str, rows: list[dict]) -> None:
        if self.is_main:
            atomic_write(self.dir / name,
                         "".join(json.dumps(r, ensure_ascii=False, default=_default) + "\n" for r in rows))

    def finish(self, metrics: dict) -> None:
        if not self.is_main:
            return
        write_json(self.dir / METRICS, metrics)
        write_json(self.dir / STATUS, {"status": "complete", "finished": time.strftime("%Y-%m-%dT%H:%M:%S")})

    def interrupt(self, message: str) -> None:
        """Stopped on a preemption notice with a checkpoint: never ``complete``; resume continues it."""
        if self.is_main and self.dir.is_dir():
            write_json(self.dir / STATUS, {"status": "interrupted", "reason": message,
                                           "at": time.strftime("%Y-%m-%dT%H:%M:%S")})

    def fail(self, message: str) -> None:
        if self.is_main and self.dir.is_dir():
            write_json(self.dir / STATUS, {"status": "failed", "error": message})


# ---- find and load -------------------------------------------------------------------------------------
def is_complete(run_dir: Path) -> bool:
    try:
        return (json.loads((Path(run_dir) / STATUS).read_text())["status"] == "complete"
                and (Path(run_dir) / METRICS).is_file())
    except (OSError, ValueError, KeyError):
        return False


def run_dirs(spec: str) -> list[Path]:
    """Complete run directories named by `spec`: a run directory, a folder holding runs (searched
    recursively), or a glob of either."""
    roots = [Path(p) for p in sorted(glob.glob(spec))] if any(c in spec for c in "*?[") else [Path(spec)]
    found: dict[str, Path] = {}
    for root in roots:
        if not root.exists():
            continue
        for status in ([root / STATUS] if (root / STATUS).is_file() else sorted(root.rglob(STATUS))):
            if is_complete(status.parent):
                found[str(status.parent.resolve())] = status.parent
    return list(found.values())


def load_run(run_dir: Path) -> dict:
    """metrics.json of a finished run, plus run_dir, its resolved config (dict), tag, task_name, subset."""
    m = json.loads((Path(run_dir) / METRICS).read_text())
    cfg = OmegaConf.to_container(OmegaConf.load(Path(run_dir) / CONFIG)) if (Path(run_dir) / CONFIG).is_file() else {}
    m.update(run_dir=str(run_dir), config=cfg, tag=cfg.get("tag", ""))
    m["task_name"] = cfg.get("task", {}).get("name", m.get("task", ""))
    m["subset"] = cfg.get("task", {}).get("subset", "")
    return m


def collect_runs(spec: str) -> list[dict]:
    return [load_run(d) for d in run_dirs(spec)]


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


def table_dirs(runs: str, out: str, debug: str, name: str) -> tuple[str, Path]:
    """A table's (run root, output folder): `runs` or the debug preset's output_root (else outputs),
    `out` or tables/<name> (<output_root>/tables/<name> with a debug preset)."""
    root = runs or debug_output_root(debug)
    return root, Path(out or (Path(debug_output_root(debug)) / "tables" / name if debug else Path("tables") / name))


class Runs:
    """Finished runs indexed by (task family, subset, model, method, tag)."""

    def __init__(self, runs: list[dict]):
        self.by_key: dict[tuple, list[dict]] = {}
        for r in runs:
            self.by_key.setdefault((r["task_name"], r["subset"], r["model"], r["method"], r["tag"]), []).append(r)

    def get(self, task: str, model: str, method: str, tag: str = "", subset: str | None = None) -> list[dict]:
        """Every run of the key (any subset unless given), by seed."""
        return sorted((r for (t, s, mo, me, tg), rs in self.by_key.items() for r in rs
                       if t == task and mo == model and me == method and tg == tag and (subset is None or s == subset)),
                      key=lambda r: r.get("seed", 0))

    def find(self, task: str, subset: str, model: str, method: str, tag: str, seeds=()) -> list[dict]:
        """One run per seed, in the order of `seeds` (every seed found when empty). Where several runs
        hold the same key and seed (an output root nested in another, e.g. outputs/smoke in outputs),
        the one nearest the root wins."""
        by_seed: dict = {}
        for r in sorted(self.by_key.get((task, subset, model, method, tag), []),
                        key=lambda r: len(Path(r["run_dir"]).parts)):
            by_seed.setdefault(r.get("seed"), r)
        return [by_seed[s] for s in (list(seeds) or sorted(by_seed)) if s in by_seed]


# ---- standard errors -----------------------------------------------------------------------------------
SE_MODES = ("seeds", "examples", "auto", "none")


class SE:
    """Standard-error policy (see the module doc), with a cache for the bootstraps."""

    def __init__(self, mode: str, iters: int, cache: Path):
        if mode not in SE_MODES:
            raise EmbexpError(f"unknown se '{mode}' (choose from: {', '.join(SE_MODES)}, or empty for each table's "
                              "default)")
        self.mode, self.iters, self.path = mode, iters, cache
        self.cache = json.loads(cache.read_text()) if cache.is_file() else {}

    def __call__(self, runs: list[dict], metric: str, values: list[float]) -> float | None:
        if self.mode == "none" or not values:
            return None
        if self.mode == "seeds" or (self.mode == "auto" and len(values) >= 2):
            return float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) >= 2 else None
        per = [self.example_se(r, metric) for r in runs]
        per = [s for s in per if s is not None]
        return float(np.mean(per) / math.sqrt(len(per))) if per else None

    def example_se(self, run: dict, metric: str) -> float | None:
        m = run["metrics"]
        if f"{metric}_stderr" in m:
            return m[f"{metric}_stderr"]
        if metric.endswith("accuracy") and m.get(metric) is not None:
            n = max(1, run.get("n_eval_examples", 0))
            p = m[metric] / 100.0
            return 100.0 * math.sqrt(p * (1 - p) / n)
        if metric in ("bleu", "ter"):
            key = f"{run['run_dir']}|{metric}|{self.iters}|{Path(run['run_dir'], METRICS).stat().st_mtime}"
            if key not in self.cache:
                self.cache[key] = bootstrap_se(Path(run["run_dir"]), metric, self.iters)
                self.path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(self.path, json.dumps(self.cache, indent=1))
            return self.cache[key]
        return None


def bootstrap_se(run_dir: Path, metric: str, iters: int, seed: int = 0) -> float | None:
    """Bootstrap s.e. of corpus BLEU/TER over the sentences of predictions.jsonl (stripped, as the
    wmt16 task scores them): sentence statistics are extracted once and resampled."""
    from sacrebleu.metrics import BLEU, TER

    recs = [r for r in read_predictions(run_dir) if "generation" in r]
    if len(recs) < 2:
        return None
    scorer = BLEU() if metric == "bleu" else TER()
    stats = np.array(scorer._extract_corpus_statistics([r["generation"].strip() for r in recs],
                                                       [[r["target"].strip() for r in recs]]))
    rng = np.random.default_rng(seed)
    n = len(recs)
    scores = [scorer._compute_score_from_stats(stats[rng.integers(0, n, n)].sum(0).tolist()).score
              for _ in range(iters)]
    return float(np.std(scores, ddof=1))


def cell(runs: list[dict], metric: str, se: SE) -> tuple[float | None, float | None]:
    """The mean of `metric` over the runs that hold it, and its standard error under `se`."""
    values = [r["metrics"][metric] for r in runs if r["metrics"].get(metric) is not None]
    if not values:
        return None, None
    return float(np.mean(values)), se([r for r in runs if r["metrics"].get(metric) is not None], metric, values)


def n_params(*groups: list[dict]):
    """The first run's ``n_method_params`` among the groups (None without runs)."""
    for runs in groups:
        for r in runs:
            return r.get("n_method_params")
    return None


# ---- output --------------------------------------------------------------------------------------------
def markdown(rows: list[dict], columns: list[str], title: str = "") -> str:
    """A Markdown table (floats with two decimals, None empty), under `title` as a ### heading."""
    fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else ("" if v is None else str(v))  # noqa: E731
    lines = (([f"### {title}", ""] if title else [])
             + ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"])
    return "\n".join(lines + ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]) + "\n"


def write_csv(rows: list[dict], fields: list[str], path: Path) -> None:
    """`rows` as CSV with these columns (others left out), written by rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def write_table(rows: list[dict], columns: list[str], stem: Path, title: str = "") -> str:
    """Write `rows` as <stem>.md (Markdown) and <stem>.csv (these columns); returns the Markdown text."""
    stem = Path(stem)
    md = markdown(rows, columns, title)
    stem.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(stem.with_suffix(".md"), md)
    write_csv(rows, columns, stem.with_suffix(".csv"))
    return md


def write_text_table(text: str, rows: list[dict], fields: list[str], stem: Path) -> None:
    """A table whose Markdown is composed cell by cell (e.g. ours beside the paper's figure in
    brackets): <stem>.md holds `text`, <stem>.csv the rows' plain values."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(stem.with_suffix(".md"), text + "\n")
    write_csv(rows, fields, stem.with_suffix(".csv"))


def emit(rows: list[dict], cols: list[str], stem: Path, title: str, pm: bool) -> str:
    """<stem>.md (cols; value ± se where pm) and <stem>.csv (cols + every other key of the rows,
    e.g. '<col> se' and '<col> seeds')."""
    def show(r, c):
        v, s = r.get(c), r.get(f"{c} se")
        if pm and isinstance(v, float) and isinstance(s, float):
            return f"{v:.2f} ± {s:.2f}"
        return v
    md = markdown([{c: show(r, c) for c in cols} for r in rows], cols, title)
    stem.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(stem.with_suffix(".md"), md)
    extra = [k for r in rows for k in r if k not in cols]
    write_csv(rows, cols + list(dict.fromkeys(extra)), stem.with_suffix(".csv"))
    return md


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig, path: Path, dpi: int = 120) -> None:
    """Write a figure as PNG (its folder made) and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
