"""A task metric by input-length bucket (the TinyTE paper's Table 5: R-L on CNN/DailyMail by article length).

    python -m embexp.analyze lengths runs=outputs/cnndm/gemma2
    python -m embexp.analyze lengths runs='outputs/cnndm/*' edges=[] out=tables/lengths   # quartiles

Reads ``predictions.jsonl`` of every finished run under `runs`, buckets the examples by input length and
scores each bucket with the run's own task scorer (rebuilt from its config.yaml, so the bucket "all"
reproduces the run's metric); a row per model x method x tag, the mean over seeds. The length unit and
the buckets (ours; the paper prints the buckets but not their unit): docs/reproduce_tinyte.md
("Tables: how each is computed", 5).
"""

from __future__ import annotations

import string
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embexp import EmbexpError
from embexp.core.config import option
from embexp.core.records import collect_runs, debug_output_root, load_config, one_config, read_predictions
from embexp.core.tables import markdown, write_table
from embexp.studies.vocab import load_tokenizer


@dataclass
class Config:
    runs: str = option("", "A run directory, a folder holding runs (searched recursively) or a glob ('' = the "
                       "output_root: outputs, or the debug preset's).")
    task: str = option("cnndm", "Only runs of this task family ('' = any generation task).")
    model: str = option("", "Only runs of this model config name ('' = every model; the paper's Table 5 is gemma2).")
    metric: str = option("rougeLsum", "Metric key of the task's scorer to report per bucket (cnndm: rougeLsum, the "
                         "paper's R-L; rougeL: sentence-level; wmt16: bleu).")
    edges: list = option([300, 500, 800], "Inclusive upper bounds of the buckets (the paper's 0-300, 301-500, 501-800, "
                         "801+); [] = quartiles.")
    unit: str = option(
        "words", "words (whitespace words of the input, template removed) or tokens (the run's tokenizer).")
    debug: str = option("", "A conf/debug preset whose output_root is searched when runs='' (smoke: outputs/smoke).")
    out: str = option("", "Also write <out>.md and <out>.csv ('' = print only).")


# ---- pure functions -------------------------------------------------------------------------------
def template_words(template: str) -> int:
    """Words a prompt template adds around its fields ("Article: {article}\\nSummary:" -> 2)."""
    fields = {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(template) if name}
    return len(template.format(**{k: "" for k in fields}).split())


def bucket_edges(lengths: list[int], edges: list[int]) -> list[int]:
    """The inclusive upper bounds to use: `edges`, or the quartiles of `lengths` when empty."""
    if edges:
        return sorted(int(e) for e in edges)
    if not lengths:
        return []
    return sorted({int(np.percentile(lengths, q)) for q in (25, 50, 75)})


def bucket_labels(edges: list[int]) -> list[str]:
    lows = [0] + [e + 1 for e in edges]
    return [f"{lo}-{hi}" for lo, hi in zip(lows, edges)] + [f"{lows[-1]}+"]


def score_by_bucket(lengths: list[int], refs: list[str], hyps: list[str], edges: list[int], scorer) -> dict[str, dict]:
    """{bucket label: {"score": scorer(refs, hyps) on the bucket, "n": size}} plus "all"."""
    labels = bucket_labels(edges)
    out = {}
    for b, label in enumerate(labels):
        idx = [i for i, n in enumerate(lengths) if bisect_left(edges, n) == b]  # edges: sorted upper bounds
        out[label] = {"score": scorer([refs[i] for i in idx], [hyps[i] for i in idx]) if idx else None, "n": len(idx)}
    out["all"] = {"score": scorer(refs, hyps), "n": len(lengths)}
    return out


# ---- runs -------------------------------------------------------------------------------------------
def run_task(run: dict):
    from embexp.tasks import build_task

    return build_task(load_config(run["run_dir"]).task)  # an older run's with the values it had


def input_lengths(run: dict, records: list[dict], unit: str) -> list[int]:
    if unit == "words":
        import importlib

        mod = importlib.import_module(type(run_task(run)).__module__)
        extra = template_words(getattr(mod, "PROMPT", "")) if isinstance(getattr(mod, "PROMPT", None), str) else 0
        return [max(0, len(r["prompt"].split()) - extra) for r in records]
    if unit == "tokens":
        tok = run_tokenizer(run)
        return [len(tok(r["prompt"], add_special_tokens=False)["input_ids"]) for r in records]
    raise EmbexpError(f"unknown unit '{unit}' (choose from: words, tokens)")


def run_tokenizer(run: dict):
    """The tokenizer of a run's model: the tiny models' bytes, an offline folder (minilm, smollm2) or its hub id."""
    m = run["config"]["model"]
    if m["source"] == "tiny":
        from embexp.models import byte_tokenizer

        return byte_tokenizer(encoder=m["kind"] != "decoder")
    return load_tokenizer(m["id"] if m["source"] == "hub" else m["source"])


def bucket_table(runs: list[dict], cfg: Config) -> tuple[list[dict], list[str]]:
    """Rows (one per model x method x tag, mean over seeds) and the bucket column names."""
    per_run = []
    for run in runs:
        records = [r for r in read_predictions(Path(run["run_dir"])) if "generation" in r]
        if records:
            per_run.append((run, records, input_lengths(run, records, cfg.unit)))
    if not per_run:
        return [], []
    pooled = [n for _, _, lengths in per_run for n in lengths]
    edges = bucket_edges(pooled, list(cfg.edges))
    labels = bucket_labels(edges)
    groups: dict[tuple, list[dict]] = {}
    members: dict[tuple, list[dict]] = {}
    for run, records, lengths in per_run:
        task = run_task(run)

        def scorer(refs, hyps, task=task):
            m = task.score_text(refs, hyps, [])
            if cfg.metric not in m:
                raise EmbexpError(f"task {task.display_name} reports no metric '{cfg.metric}' (choose from: "
                                  f"{', '.join(m)})")
            return m[cfg.metric]

        res = score_by_bucket(lengths, [r["target"] for r in records], [r["generation"] for r in records], edges,
                              scorer)
        groups.setdefault((run["model"], run["method"], run["tag"]), []).append(res)
        members.setdefault((run["model"], run["method"], run["tag"]), []).append(run)
    from embexp.methods.registry import method_label

    rows = []
    for (model, method, tag), results in sorted(groups.items()):
        one_config(members[(model, method, tag)])  # the seeds averaged differ in nothing else
        row = {"Model": model, "Method": method_label(method, tag), "seeds": len(results)}
        for label in labels + ["all"]:
            vals = [r[label]["score"] for r in results if r[label]["score"] is not None]
            row[label] = float(np.mean(vals)) if vals else None
            row[f"n {label}"] = results[0][label]["n"]
        rows.append(row)
    return rows, labels


def run(cfg: Config) -> list[dict]:
    root = cfg.runs or debug_output_root(cfg.debug)
    runs = [r for r in collect_runs(root)
            if (not cfg.task or r["task_name"] == cfg.task) and (not cfg.model or r["model"] == cfg.model)]
    rows, labels = bucket_table(runs, cfg)
    if not rows:
        raise EmbexpError(f"no finished {cfg.task or 'generation'} runs with predictions under '{root}'")
    cols = ["Model", "Method"] + labels + ["all", "seeds"]
    title = (f"{cfg.metric} by input length ({cfg.unit}); bucket sizes: "
             + ", ".join(f"{lb}: {rows[0]['n ' + lb]}" for lb in labels))
    print(write_table(rows, cols, Path(cfg.out), title=title) if cfg.out else markdown(rows, cols, title))
    return rows
