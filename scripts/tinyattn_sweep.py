"""The Tiny-Attention paper's GLUE and FewGLUE sweeps: the commands behind one table, then the table from the records.

    python scripts/tinyattn_sweep.py table8                         # run what is missing, print the table
    python scripts/tinyattn_sweep.py table8 --dry-run               # print the exact commands only
    python scripts/tinyattn_sweep.py table8 --extra "debug=smoke"   # append to every command (offline check)

`make tinyattn_table8 [DRY_RUN=1] [EXTRA=...] [SEEDS="0"]` calls this (mk/tinyattn.mk). Every cell is an
experiment file conf/experiment/tinyattn_<setting>_<task>.yaml (the paper's per-task hyperparameters,
Tables 4-7) run as ``python -m embexp.train experiment=... model=... seed=... trainer.resume=true``,
so a complete run is skipped and tables that share cells share runs. 4H cells warm-start from the
1H run of the same task, model and seed, which is listed first. Table 1 (FewGLUE CB and RTE, PET
cloze prompts on ALBERT-xxlarge) reads the local FewGLUE files (``--fewglue-data``, default: the
``shared/data`` folder next to the checkout); the paper reports the mean of 4 seeds (SEEDS="1 2 3 4").
Not here: Table 9 (GLUE test set: needs the GLUE server).

Selection protocol (``--select-on``, ``make ... SELECT_ON=``): the GLUE tables run every cell twice
by default (``both``): held-out (ours, the experiment files: the state with the lowest loss on a
carve of the training split is kept) and the paper's protocol (tag ``<setting>_paper``:
``trainer.select_on=reported``, the whole training split trained on and the state kept by the
reported dev split itself, evaluated every half epoch). Cells selected on the reported split are
marked in the table ("paper protocol: selected on the reported split"), read from each record's
``select_on``. Table 1 (FewGLUE) selects nothing and has one protocol.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FEWGLUE_DATA = next((str(p / "shared/data") for p in REPO.parents
                     if (p / "shared/data/super_glue/cb/train_fewglue32.jsonl").is_file()), "../shared/data")
GLUE = ["sst2", "cola", "mnli", "qqp", "rte", "mrpc", "qnli", "stsb"]
FOUR_H = ["cola", "rte", "mrpc", "qnli"]  # Table 5: the tasks where 4H improved on 1H
# GLUE training rows (the hub's train splits): the paper-protocol cells train on all of them
GLUE_TRAIN = {"sst2": 67349, "cola": 8551, "mnli": 392702, "qqp": 363846, "rte": 2490, "mrpc": 3668, "qnli": 104743, "stsb": 5749}
BATCH, EPOCHS = 16, 20  # conf/trainer/tinyattn_paper.yaml
PAPER_TAG = "_paper"  # tag suffix of the paper-protocol cells
PROTOCOLS = ("heldout", "reported", "both")
MARK = "†"
MARK_NOTE = f"{MARK} paper protocol: selected on the reported split"
# the paper's validation metric per task (Table 8; accuracy for MNLI is matched only here)
METRIC = {"cb": "accuracy", "sst2": "accuracy", "cola": "mcc", "mnli": "accuracy", "qqp": "accuracy", "rte": "accuracy",
          "mrpc": "accuracy", "qnli": "accuracy", "stsb": "pearson"}
PAPER = {  # tiny-attention.md, as printed
    ("1h", "roberta"): {"sst2": 96.6, "cola": 68.8, "mnli": 89.6, "qqp": 90.1, "rte": 88.8, "mrpc": 92.4, "qnli": 94.3, "stsb": 92.3},
    ("4h", "roberta"): {"sst2": 96.6, "cola": 69.4, "mnli": 89.6, "qqp": 90.1, "rte": 89.2, "mrpc": 92.6, "qnli": 94.5, "stsb": 92.3},
    ("4h_noavg", "roberta"): {"cola": 68.8, "rte": 88.8},
    ("1h4d", "roberta"): {"cola": 68.0, "rte": 87.4},
    ("1h_seq", "roberta_base"): {"sst2": 94.5, "mnli": 86.1},
    ("1h_para", "roberta_base"): {"sst2": 94.4, "mnli": 86.1},
    ("fewglue", "albert_xxlarge"): {"cb": 88.57, "rte": 68.38},  # Table 1, mean of 4 seeds
}


def cells(table: str) -> list[tuple[str, str, str]]:
    """(experiment, model, tag) in run order."""
    one = lambda tasks, m="roberta": [(f"tinyattn_1h_{t}", m, "1h") for t in tasks]  # noqa: E731
    if table == "table1":  # FewGLUE, PET cloze pattern 3 scored by the masked-LM head
        return [(f"tinyattn_fewglue_{t}", "albert_xxlarge", "fewglue") for t in ("cb", "rte")]
    if table == "table8":
        return one(GLUE) + [(f"tinyattn_4h_{t}", "roberta", "4h") for t in FOUR_H]
    if table == "table2":  # and Fig. 4: roberta-base vs roberta-large on MNLI and SST-2
        return one(["mnli", "sst2"]) + [(f"tinyattn_base_seq_{t}", "roberta_base", "1h_seq") for t in ("mnli", "sst2")]
    if table == "table10":
        return [(f"tinyattn_base_{p}_{t}", "roberta_base", f"1h_{p}") for t in ("sst2", "mnli") for p in ("seq", "para")]
    if table == "table11":
        return one(["cola", "rte"]) + [(f"tinyattn_{s}_{t}", "roberta", s) for t in ("cola", "rte") for s in ("4h", "4h_noavg")]
    if table == "table12":
        return one(["cola", "rte"]) + [(f"tinyattn_1h4d_{t}", "roberta", "1h4d") for t in ("cola", "rte")]
    raise SystemExit(f"embexp: error: unknown table '{table}' (choose from: {', '.join(TABLES)})")


TABLES = ["table1", "table2", "table8", "table10", "table11", "table12"]


def protocols(table: str, select_on: str) -> list[str]:
    """The selection protocols a table runs: FewGLUE (Table 1) selects nothing."""
    if table == "table1":
        return ["heldout"]
    return ["heldout", "reported"] if select_on == "both" else [select_on]


def experiment_values(exp: str) -> dict:
    """The trainer values of an experiment file that depend on the number of training rows."""
    import yaml

    doc = yaml.safe_load((REPO / "conf" / "experiment" / f"{exp}.yaml").read_text())
    return doc.get("trainer", {}) | {"tag": doc.get("tag", "")}


def paper_protocol(exp: str) -> list[str]:
    """Overrides turning a held-out cell into the paper's protocol: select on the reported dev split
    (trainer.select_on=reported), so no training rows are held out (task.select_split=''); the
    half-epoch evaluation interval and the 10% warm-up (where the experiment has one) recomputed for
    the whole training split; 4H warm-starts from the paper-protocol 1H run."""
    task = exp.rsplit("_", 1)[1]
    vals = experiment_values(exp)
    steps_per_epoch = -(-GLUE_TRAIN[task] // BATCH)
    out = ["trainer.select_on=reported", "task.select_split=", f"trainer.eval_every={steps_per_epoch // 2}"]
    if vals.get("warmup_steps", 0) > 0:
        out.append(f"trainer.warmup_steps={steps_per_epoch * EPOCHS // 10}")
    if exp.startswith("tinyattn_4h"):
        out.append("method.init_from=${output_root}/glue_${task.subset}/${model.name}/tinyattn_1h" + PAPER_TAG + "/seed${seed}")
    return out + [f"tag={vals['tag']}{PAPER_TAG}"]


def command(py: str, exp: str, model: str, seed: int, extra: list[str], fewglue_data: str = FEWGLUE_DATA,
            protocol: str = "heldout") -> list[str]:
    data = [f"task.data_dir={fewglue_data}"] if "_fewglue_" in exp else []  # FewGLUE's 32 rows: local files only
    paper = paper_protocol(exp) if protocol == "reported" else []
    return [py, "-m", "embexp.train", f"experiment={exp}", f"model={model}", f"seed={seed}", "trainer.resume=true", *data,
            *paper, *extra]


def output_root(extra: list[str]) -> Path:
    root = next((a.split("=", 1)[1] for a in extra if a.startswith("output_root=")), None)
    return REPO / (root or ("outputs/smoke" if "debug=smoke" in extra else "outputs"))


def result(root: Path, exp: str, model: str, tag: str, seed: int) -> tuple[float | None, bool]:
    """(the cell's metric, whether the record says it was selected on the reported split)."""
    task = exp.rsplit("_", 1)[1]
    family = "superglue" if "_fewglue_" in exp else "glue"
    path = root / f"{family}_{task}" / model / f"tinyattn_{tag}" / f"seed{seed}" / "metrics.json"
    if not path.is_file():
        return None, False
    rec = json.loads(path.read_text())
    return rec["metrics"].get(METRIC[task]), rec.get("select_on") == "reported"


def render(table: str, root: Path, seeds: list[int], select_on: str = "both") -> str:
    rows: dict[tuple[str, str], dict[str, tuple[list[float], bool]]] = {}
    for protocol in protocols(table, select_on):
        suffix = PAPER_TAG if protocol == "reported" else ""
        for exp, model, tag in cells(table):
            task = exp.rsplit("_", 1)[1]
            got = [result(root, exp, model, tag + suffix, s) for s in seeds]
            vals = [v for v, _ in got if v is not None]
            rows.setdefault((tag + suffix, model), {})[task] = (vals, any(r for v, r in got if v is not None))
    tasks = [t for t in GLUE + ["cb"] if any(t in r for r in rows.values())]
    out = [f"{table} (mean over seeds {seeds}; paper in brackets; {', '.join(f'{t}: {METRIC[t]}' for t in tasks)})", "",
           "| setting | model | " + " | ".join(tasks) + " |", "|---|---|" + "---:|" * len(tasks)]
    marked = False
    for (tag, model), by_task in rows.items():
        base = tag.removesuffix(PAPER_TAG)
        cells_ = []
        for t in tasks:
            vals, reported = by_task.get(t, (None, False))
            if vals is None and base == "4h":  # Table 8: 4H = 1H where the paper did not run 4H
                vals, reported = rows.get((tag.replace("4h", "1h", 1), model), {}).get(t, (None, False))
            ours = f"{sum(vals) / len(vals):.1f}" if vals else "-"
            if vals and reported:
                ours, marked = ours + MARK, True
            paper = PAPER.get((base, model), {}).get(t)
            cells_.append(ours + (f" [{paper}]" if paper is not None else ""))
        label = f"{base} (paper protocol)" if tag.endswith(PAPER_TAG) else tag
        out.append(f"| {label} | {model} | " + " | ".join(cells_) + " |")
    if marked:
        out += ["", MARK_NOTE]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", choices=TABLES)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--py", default=sys.executable)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--extra", default="")
    ap.add_argument("--fewglue-data", default=FEWGLUE_DATA, help="folder holding super_glue/<cb|rte>/train_fewglue32.jsonl (Table 1)")
    ap.add_argument("--select-on", default="both", choices=PROTOCOLS,
                    help="GLUE tables: heldout (ours), reported (the paper's protocol: selected on the dev split it reports) or both")
    a = ap.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split()]
    extra = shlex.split(a.extra)
    failed = []
    for protocol in protocols(a.table, a.select_on):
        for seed in seeds:
            for exp, model, _ in cells(a.table):
                cmd = command(a.py, exp, model, seed, extra, a.fewglue_data, protocol)
                print(shlex.join(cmd), flush=True)
                if not a.dry_run and subprocess.run(cmd, cwd=REPO).returncode != 0:
                    failed.append(shlex.join(cmd))
    if a.dry_run:
        return 0
    print(render(a.table, output_root(extra), seeds, a.select_on))
    for f in failed:
        print(f"failed: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
