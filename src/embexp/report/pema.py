"""PEMA's tables from finished runs (the PEMA paper's Tables 9 and 10):
``python -m embexp.report paper=pema table=<name>``.

    python -m embexp.report paper=pema table=table9 runs=outputs/glue_cola model=roberta_base
    python -m embexp.report paper=pema table=table10 runs=outputs         # tables/pema/table10.md + .csv + .json

Tables 2-4 (parameters removed, from tokenizers and model configs) are ``python -m embexp.analyze vocab``'s. The
columns of each table (table10's Mean: over the sub-tasks, its s.d. over the seeds that have every sub-task) and
the files each writes: docs/pema.md ("Tables 9 and 10").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embexp import EmbexpError
from embexp.core.config import option
from embexp.core.records import atomic_write, collect_runs, debug_output_root
from embexp.core.tables import emit
from embexp.report.base import ReportConfig
from embexp.studies.vocab import GLUE
from embexp.studies.vocab import GLUE_LABELS as LABELS

METRIC = {"cola": "mcc", "qqp": "f1", "stsb": "spearman"}  # the paper's Table 10 metric; accuracy otherwise
TABLES = ("table9", "table10")


@dataclass
class Config(ReportConfig):
    table: str = option("all", "table9 (preprocessing vs fine-tuning time, and measured memory), table10 (task metric "
                               "with and without PEMA), or all.",
                        choices=TABLES + ("all",))
    task: str = option("glue", "Task family of the runs to tabulate (glue or xnli).")
    model: str = option("", "Only runs of this model config name ('' = all; the paper's Table 9 is roberta_base).")
    out: str = option("tables/pema", "Folder for <table>.md/.csv/.json.")
    debug: str = option(
        "", "A conf/debug preset whose output_root holds the runs when runs is '' (smoke: outputs/smoke).")


def _ms(xs: list[float], fmt: str = "{:.1f}") -> str:
    if not xs:
        return ""
    return (fmt + " ({})").format(float(np.mean(xs)), fmt.format(float(np.std(xs, ddof=1)) if len(xs) > 1 else 0.0))


def _inner(run: dict) -> str:
    return run["config"].get("method", {}).get("inner", "")


def table9(runs: list[dict]) -> tuple[list[dict], list[str]]:
    rows = []
    for s in dict.fromkeys(r["subset"] for r in runs):
        pema = [r for r in runs if r["subset"] == s and r["method"] == "pema" and r["train"].get("steps")]
        if not pema:
            continue
        base = [r for r in runs
                if r["subset"] == s and r["method"] == _inner(pema[0]) and r["model"] == pema[0]["model"]]
        setup = [r["method_values"]["pema_setup_seconds"] for r in pema]
        train = [r["train"]["wall_seconds"] for r in pema]
        mem = lambda rs: [r["train"]["state_memory"]["total_bytes"] / 2**20  # noqa: E731
                          for r in rs if r["train"].get("state_memory")]
        cuda = lambda rs: [r["memory"]["peak_cuda_allocated_bytes"] / 2**20  # noqa: E731
                           for r in rs if "peak_cuda_allocated_bytes" in r["memory"]]
        predicted = float(np.mean([4 * r["method_values"]["pema_removed_param_bytes"] / 2**20 for r in pema]))
        m_pema, m_base = mem(pema), mem(base)
        saved = float(np.mean(m_base) - np.mean(m_pema)) if m_pema and m_base else None
        rows.append({
            "Dataset": LABELS.get(s, s), "runs": len(pema), "PEMA (s)": _ms(setup, "{:.2f}"),
            "Fine-tuning (s)": _ms(train),
            "%": 100.0 * float(np.mean(setup)) / float(np.mean(train)),
            "state MiB (inner)": _ms(m_base), "state MiB (PEMA)": _ms(m_pema),
            "saved MiB": saved, "predicted MiB": predicted,
            "saved / predicted": saved / predicted if saved is not None and predicted else None,
            "peak CUDA MiB (inner)": _ms(cuda(base)), "peak CUDA MiB (PEMA)": _ms(cuda(pema)),
        })
    cols = ["Dataset", "runs", "PEMA (s)", "Fine-tuning (s)", "%", "state MiB (inner)", "state MiB (PEMA)", "saved MiB",
            "predicted MiB", "saved / predicted", "peak CUDA MiB (inner)", "peak CUDA MiB (PEMA)"]
    return rows, cols


def table10(runs: list[dict], subsets: list[str]) -> tuple[list[dict], list[str]]:
    rows = []
    for model in dict.fromkeys(r["model"] for r in runs):
        pema = [r for r in runs if r["model"] == model and r["method"] == "pema"]
        inner = _inner(pema[0]) if pema else "full_ft"
        for method, mark in ((inner, "✗"), ("pema", "✓")):
            rs = [r for r in runs if r["model"] == model and r["method"] == method]
            if not rs:
                continue
            row = {"Model": model, "PEMA": mark}
            per_seed: dict[int, list[float]] = {}
            for s in subsets:
                vals = {r["seed"]: r["metrics"].get(METRIC.get(s, "accuracy")) for r in rs if r["subset"] == s}
                vals = {k: v for k, v in vals.items() if v is not None}
                if vals:
                    row[LABELS.get(s, s)] = float(np.mean(list(vals.values())))
                for k, v in vals.items():
                    per_seed.setdefault(k, []).append(v)
            full = [float(np.mean(v)) for v in per_seed.values() if len(v) == len(subsets)]
            row["Mean"] = _ms(full) if full else ""
            rows.append(row)
    return rows, ["Model", "PEMA"] + [LABELS.get(s, s) for s in subsets] + ["Mean"]


TITLES = {"table9": "Table 9: PEMA preprocessing vs fine-tuning, seconds (sd over seeds), and memory of parameters + "
                    "gradients + optimizer state",
          "table10": "Table 10: validation results without (✗) and with (✓) PEMA, mean over seeds"}


def render(cfg: Config) -> dict[str, str]:
    root = cfg.runs or debug_output_root(cfg.debug)
    runs = [r for r in collect_runs(root, strict=cfg.strict)
            if r["task_name"] == cfg.task and (not cfg.model or r["model"] == cfg.model)]
    if not runs:
        raise EmbexpError(f"no finished {cfg.task} runs under '{root}'"
                          + (f" for model {cfg.model}" if cfg.model else ""))
    order = GLUE if cfg.task == "glue" else tuple(dict.fromkeys(r["subset"] for r in runs))
    subsets = [s for s in order if any(r["subset"] == s for r in runs)]
    runs.sort(key=lambda r: (r["model"], order.index(r["subset"]) if r["subset"] in order else 99, r["seed"]))
    done = {}
    for name in TABLES if cfg.table == "all" else (cfg.table,):
        rows, cols = table9(runs) if name == "table9" else table10(runs, subsets)
        stem = Path(cfg.out) / name
        done[name] = emit(rows, cols, stem, TITLES[name] + (f" ({cfg.model})" if cfg.model else ""), pm=False)
        atomic_write(stem.with_suffix(".json"),
                     json.dumps({"rows": rows, "runs": [r["run_dir"] for r in runs]}, indent=1))
        print(done[name] + f"(written: {stem}.md, .csv, .json)\n")
    return done
