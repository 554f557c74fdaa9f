"""The Tiny-Attention paper's GLUE and FewGLUE tables from run records:
``python -m embexp.report paper=tinyattn table=<name>``.

    python -m embexp.report paper=tinyattn table=table8 seeds=[0]              # tables/tinyattn/table8.md + .csv
    python -m embexp.report paper=tinyattn table=table8 select_on=heldout      # only the held-out cells (ours)
    python -m embexp.report paper=tinyattn table=table1 seeds=[1,2,3,4]        # FewGLUE CB and RTE, mean of 4 seeds

The tables, the runs each cell reads (method tinyattn, tagged by setting), the selection protocols
(``select_on``, a row each; † marks a cell selected on the reported split) and the paper-protocol records left
out: docs/methods_tinyattn.md ("Paper tables") and docs/fidelity.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from embexp.core.config import option
from embexp.core.records import Runs, collect_runs
from embexp.core.tables import table_dirs, write_text_table
from embexp.report.base import ReportConfig
from embexp.report.cells import MARK, PAPER_TAG
from embexp.report.ledger.core import printed_numbers

TABLES = ("table1", "table2", "table8", "table10", "table11", "table12")
GLUE = ["sst2", "cola", "mnli", "qqp", "rte", "mrpc", "qnli", "stsb"]
FOUR_H = ["cola", "rte", "mrpc", "qnli"]  # Table 5: the tasks where 4H improved on 1H
STALE = ("stale", "")  # gather's count of paper-protocol records left out
PROTOCOLS = ("heldout", "reported", "both")
MARK_NOTE = f"{MARK} paper protocol: selected on the reported split"
STALE_NOTE = ("{n} paper-protocol run(s) left out: kept by another signal than the dev metric (select_metric "
              "in metrics.json; older runs kept the lowest dev loss); delete and rerun them")
# the paper's validation metric per task (Table 8; accuracy for MNLI is matched only here)
METRIC = {"cb": "accuracy", "sst2": "accuracy", "cola": "mcc", "mnli": "accuracy", "qqp": "accuracy", "rte": "accuracy",
          "mrpc": "accuracy", "qnli": "accuracy", "stsb": "pearson"}
# where each setting's paper figures are printed (ledger/printed/tinyattn.csv): a row per task (Table 8), or one
# row whose ' / '-separated cells are these tasks in order
PRINTED = {
    ("1h", "roberta"): ("tinyattn.t8.1h", None),
    ("4h", "roberta"): ("tinyattn.t8.4h", None),
    ("4h_noavg", "roberta"): ("tinyattn.t11.4h-noavg", ("cola", "rte")),
    ("1h4d", "roberta"): ("tinyattn.t12.1h-4d", ("cola", "rte")),
    ("1h_seq", "roberta_base"): ("tinyattn.t10.sequential", ("sst2", "mnli")),
    ("1h_para", "roberta_base"): ("tinyattn.t10.parallel", ("sst2", "mnli")),
    ("fewglue", "albert_xxlarge"): ("tinyattn.t1.1h", ("cb", "rte")),  # Table 1, mean of 4 seeds
}
PART = {"mnli": 1}  # a Table 8 cell of two metrics ("89.3/89.6"): the one METRIC is (else the first)


def paper_figure(setting: str, model: str, task: str):
    """The paper's figure of a setting on a task, as printed (ledger/printed/tinyattn.csv); None where it prints
    none."""
    if (setting, model) not in PRINTED:
        return None
    rid, tasks = PRINTED[(setting, model)]
    if tasks is None:
        return printed_numbers("tinyattn", f"{rid}.{task}")[PART.get(task, 0)] if task in GLUE else None
    return printed_numbers("tinyattn", rid)[tasks.index(task)] if task in tasks else None


@dataclass
class Config(ReportConfig):
    table: str = option("all", "Which table: table1 (FewGLUE), table2, table8, table10, table11, table12, or all.",
                        choices=TABLES + ("all",))
    out: str = option("", "Folder for <table>.md/.csv ('' = tables/tinyattn, or <output_root>/tables/tinyattn "
                          "with debug=...).")
    seeds: list[int] = option([], "Seeds to read, e.g. [0] or [1,2,3,4] (Table 1: the paper's mean of 4 seeds); "
                             "[] = every seed found.", ge=0)
    select_on: str = option("both", "GLUE tables: rows of the held-out cells (heldout, ours), of the paper's protocol "
                            "(reported: selected on the reported dev split, tags <setting>_paper), or both. "
                            "Table 1 selects nothing.",
                            choices=PROTOCOLS)


def cells(table: str) -> list[tuple[str, str, str]]:
    """(task, model, setting tag) in the sweep's order (a 4H cell after the 1H run it warm-starts from)."""
    one = lambda tasks, m="roberta": [(t, m, "1h") for t in tasks]  # noqa: E731
    if table == "table1":  # FewGLUE, PET cloze pattern 3 scored by the masked-LM head
        return [(t, "albert_xxlarge", "fewglue") for t in ("cb", "rte")]
    if table == "table8":
        return one(GLUE) + [(t, "roberta", "4h") for t in FOUR_H]
    if table == "table2":  # and Fig. 4: roberta-base vs roberta-large on MNLI and SST-2
        return one(["mnli", "sst2"]) + [(t, "roberta_base", "1h_seq") for t in ("mnli", "sst2")]
    if table == "table10":
        return [(t, "roberta_base", f"1h_{p}") for t in ("sst2", "mnli") for p in ("seq", "para")]
    if table == "table11":
        return one(["cola", "rte"]) + [(t, "roberta", s) for t in ("cola", "rte") for s in ("4h", "4h_noavg")]
    if table == "table12":
        return one(["cola", "rte"]) + [(t, "roberta", "1h4d") for t in ("cola", "rte")]


def protocols(table: str, select_on: str) -> list[str]:
    """The selection protocols a table shows: FewGLUE (Table 1) selects nothing."""
    if table == "table1":
        return ["heldout"]
    return ["heldout", "reported"] if select_on == "both" else [select_on]


def gather(
    idx: Runs, table: str, seeds: list, select_on: str
) -> dict[tuple[str, str], dict[str, tuple[list[float], bool, set]]]:
    """(tag, model) -> task -> (the metric of each run, whether a run selected on the reported split, its seeds);
    under the key ``STALE`` the number of paper-protocol records left out (not kept by the task's metric)."""
    family = "superglue" if table == "table1" else "glue"
    rows: dict = {STALE: 0}
    for protocol in protocols(table, select_on):
        suffix = PAPER_TAG if protocol == "reported" else ""
        for task, model, tag in cells(table):
            found = idx.find(family, task, model, "tinyattn", tag + suffix, seeds)
            kept = [r for r in found if not suffix or r.get("select_metric") == METRIC[task]]
            rows[STALE] += len(found) - len(kept)
            got = [(r["metrics"].get(METRIC[task]), r.get("select_on") == "reported", r["seed"]) for r in kept]
            have = [g for g in got if g[0] is not None]
            rows.setdefault((tag + suffix, model), {})[task] = (
                [v for v, _, _ in have], any(r for _, r, _ in have), {s for *_, s in got})
    return rows


def table_text(table: str, seeds: list, select_on: str, idx: Runs) -> tuple[str, list[dict], list[str]]:
    rows = gather(idx, table, seeds, select_on)
    stale = rows.pop(STALE)
    shown = list(seeds) or sorted(set().union(*(c[2] for r in rows.values() for c in r.values())))
    tasks = [t for t in GLUE + ["cb"] if any(t in r for r in rows.values())]
    out = [f"{table} (mean over seeds {shown}; paper in brackets; {', '.join(f'{t}: {METRIC[t]}' for t in tasks)})", "",
           "| setting | model | " + " | ".join(tasks) + " |", "|---|---|" + "---:|" * len(tasks)]
    marked, csv_rows = False, []
    for (tag, model), by_task in rows.items():
        base = tag.removesuffix(PAPER_TAG)
        label = f"{base} (paper protocol)" if tag.endswith(PAPER_TAG) else tag
        cells_, row = [], {"setting": label, "model": model}
        for t in tasks:
            vals, reported, _ = by_task.get(t, (None, False, set()))
            if vals is None and base == "4h":  # Table 8: 4H = 1H where the paper did not run 4H
                vals, reported, _ = rows.get((tag.replace("4h", "1h", 1), model), {}).get(t, (None, False, set()))
            ours = f"{sum(vals) / len(vals):.1f}" if vals else "-"
            if vals and reported:
                ours, marked = ours + MARK, True
            paper = paper_figure(base, model, t)
            cells_.append(ours + (f" [{paper}]" if paper is not None else ""))
            row |= {t: sum(vals) / len(vals) if vals else None, f"{t} paper": paper, f"{t} seeds": len(vals or []),
                    f"{t} paper protocol": bool(vals and reported)}
        out.append(f"| {label} | {model} | " + " | ".join(cells_) + " |")
        csv_rows.append(row)
    if marked:
        out += ["", MARK_NOTE]
    if stale:
        out += ["", STALE_NOTE.format(n=stale)]
    fields = ["setting", "model"] + [k for t in tasks for k in (t, f"{t} paper", f"{t} seeds", f"{t} paper protocol")]
    return "\n".join(out), csv_rows, fields


def render(cfg: Config) -> dict[str, str]:
    root, out = table_dirs(cfg.runs, cfg.out, cfg.debug, "tinyattn")
    idx = Runs(collect_runs(root, strict=cfg.strict))
    done = {}
    for n in TABLES if cfg.table == "all" else (cfg.table,):
        text, rows, fields = table_text(n, list(cfg.seeds), cfg.select_on, idx)
        stem = out / n
        write_text_table(text, rows, fields, stem)
        done[n] = text
        print(text + f"\n(written: {stem}.md, .csv)\n")
    return done
