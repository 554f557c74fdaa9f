"""The lookups of the ledger's GPU rows in finished runs (``Row.measure``, ledger/measured.py): each
computes its cells with the paper's report module's own functions (``embexp.report.<paper>``: the
same run filters, metrics and means over seeds as ``python -m embexp.report paper=<paper>``), so the
ledger and the report tables never disagree. Each returns a closure (records.Runs) -> a value per
printed cell, None where no finished run holds it. The report modules are imported when a lookup runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace


def no_se():
    """The report's standard-error policy, off: the ledger compares means only."""
    from embexp.report.cells import SE

    return SE("none", 0, Path(os.devnull))


def mean(vals):
    return sum(vals) / len(vals) if vals else None


# TinyTE: the ledger's method labels -> (method, tag) of the runs (report/tinyte.py TABLE11)
TINYTE = {
    "base": ("zero_shot", ""),
    "Emb. Tuning": ("emb_tuning", ""),
    "LoRA (r=8)": ("lora", ""),
    "PT (1 tok)": ("prompt_tuning", "tk1"),
    "PT (2 toks)": ("prompt_tuning", "tk2"),
    "PT (20 toks)": ("prompt_tuning", "tk20"),
    "TinyTE-full": ("tinyte_full", ""),
    "TinyTE-half": ("tinyte_half", ""),
    "TinyTE-gated": ("tinyte_gated", ""),
    "TinyTE-hybrid": ("tinyte_hybrid", ""),
}


def tinyte_nlg(model: str, method: str, names: tuple):
    """Tables 1, 2, 11: R-L, BLEU-4, TER (the report's column names) of one model and method, mean over seeds
    (``report.tinyte.gen_row``)."""

    def get(idx):
        from embexp.report import tinyte as rep

        cols = [c for c in (rep.RL, rep.BLEU, rep.TER) if c[2] in names]
        row = rep.gen_row(idx, no_se(), model, *TINYTE[method], cols)
        return [row[n] for n in names]

    return get


def tinyte_superglue(model: str, label: str, which: tuple):
    """Table 3: the row `label` of ``report.tinyte.table_3`` for one model; `which` picks its columns by
    position (BoolQ, Copa, CB, RTE, WiC, Avg.)."""

    def get(idx):
        from embexp.report import tinyte as rep

        rows, cols, *_ = rep.table_3(SimpleNamespace(models=[model]), idx, no_se())
        row = next(r for r in rows if r["Method"] == label)
        return [row[cols[2 + i]] for i in which]

    return get


def pema_t10(model: str, pema: bool):
    """Table 10: the ✗ (inner method) or ✓ (PEMA) row of ``report.pema.table10`` for one model over the
    nine GLUE tasks, mean over seeds, and its Mean (over the seeds that have all nine)."""

    def get(idx):
        from embexp.report import pema as rep

        runs = [r for rs in idx.by_key.values() for r in rs if r["task_name"] == "glue" and r["model"] == model]
        runs.sort(key=lambda r: (rep.GLUE.index(r["subset"]) if r["subset"] in rep.GLUE else 99, r.get("seed", 0)))
        rows, _ = rep.table10(runs, list(rep.GLUE))
        row = next((r for r in rows if r["PEMA"] == ("✓" if pema else "✗")), {})
        return [row.get(rep.LABELS[s]) for s in rep.GLUE] + [float(row["Mean"].split()[0]) if row.get("Mean") else None]

    return get


def tinyattn(table: str, tag: str, model: str, tasks: tuple, seeds: tuple = ()):
    """Tiny-Attention: the mean over seeds of each task's metric for one setting (``report.tinyattn.gather``,
    the held-out protocol); Table 8's 4H reads the 1H run where 4H was not trained, as the report does."""

    def get(idx):
        from embexp.report import tinyattn as rep

        got = rep.gather(idx, table, list(seeds), "heldout")
        out = []
        for t in tasks:
            vals = got.get((tag, model), {}).get(t, ([],))[0]
            if not vals and table == "table8" and tag == "4h":
                vals = got.get(("1h", model), {}).get(t, ([],))[0]
            out.append(mean(vals))
        return out

    return get


def ktoken(table: str, column: str):
    """K-Token Tables 1-3: the best of N runs' accuracy (perplexity: the lowest) and the measured length
    reduction (mean over the N), ``report.ktoken.compression_table``."""

    def get(idx):
        from embexp.report import ktoken as rep

        _, rows, _ = rep.compression_table(idx, table, [], "")
        row = next(r for r in rows if r["column"] == column)
        return [row.get("best"), row.get("reduction")]

    return get
