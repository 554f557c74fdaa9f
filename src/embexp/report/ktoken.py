"""The K-Token Merging paper's tables from run records: ``python -m embexp.report paper=ktoken table=<name>``.

    python -m embexp.report paper=ktoken table=table1 seeds=[42,43,44]    # tables/ktoken/table1.md + .csv
    python -m embexp.report paper=ktoken table=table1 select_on=reported  # the cells gated on the test split
    python -m embexp.report paper=ktoken table=ablation debug=smoke       # Fig. 6 from outputs/smoke (+ ablation.png)

The tables, the runs each column reads (by task, subset, model, method, tag and seed), best of N beside
the mean ± s.e., ``select_on`` and ``questions``: docs/methods_ktoken.md ("The paper's tables").
"""

from __future__ import annotations

from dataclasses import dataclass

from embexp import EmbexpError
from embexp.core.config import option
from embexp.core.records import Runs, collect_runs
from embexp.core.tables import pyplot, save_png, table_dirs, write_text_table
from embexp.report.base import ReportConfig
from embexp.report.cells import MARK, PAPER_TAG, mean, sem
from embexp.report.ledger.core import inputs
from embexp.tasks.metrics import pl_from_accuracy, pl_from_perplexity

MODEL = "qwen25_05b"
TABLES = ("table1", "table2", "table3", "ablation")
TREE = ("table1", "ablation")  # the tables whose curriculum gate selects (select_on)
TASKS = {"table1": ("tree", "x3large"), "table2": ("amazon", "Amazon_Fashion"), "table3": ("commitpack", "python"),
         "ablation": ("tree", "x3large")}
COLUMNS = [("uncompressed", "lora"), ("selective_context", "prompt_compress"), ("llmlingua2", "prompt_compress"),
           ("k2", "ktoken"), ("k3", "ktoken"), ("k4", "ktoken")]
ABLATION, EPOCHS = ("init_average", "init_random"), 10
# trainer.select_on=reported: the authors' curriculum gate on the stage's test split (tree tables only;
# tags get PAPER_TAG, the table marks the cells with MARK)
MARK_NOTE = f"{MARK} paper protocol: the curriculum gate selected on the reported split (trainer.select_on=reported)"
# each column's P–L row in ledger/printed/ktoken.csv: its printed inputs are the paper's figures of the column (each
# the best of three runs): accuracy or perplexity (Table 3: and the uncompressed perplexity), length reduction
PL_ROWS = {"uncompressed": "uncompressed", "selective_context": "selectivecontext", "llmlingua2": "llmlingua2",
           "k2": "2-token", "k3": "3-token", "k4": "4-token"}
NOTES = ["best of N: the paper's protocol (each cell the best of three runs), i.e. the run chosen by its reported "
         "score; mean \u00b1 s.e. over the same N runs (s.e. = sample s.d./sqrt(N), '-' below two) is the figure "
         "that does not select on the reported split.",
         "eff. batch: per-device batch x trainer.grad_accum x devices, from each record "
         "(a/b/...: per curriculum stage).",
         "reduction: measured on the evaluated prompts (mean over the N runs; P-L uses the best run's). For "
         "selective_context and llmlingua2, method.rate is an input set to the paper's measured reduction for that "
         "baseline and task, so their reduction is near the paper's by construction, not a finding."]
TREE_NOTE = ("balanced accuracy: the mean of the two answers' recalls; majority class: the accuracy of always giving "
             "the scored set's commoner answer (the paper prints neither; on the released code's uniform pairs the "
             "majority class is ~99.5% at x3large, above every accuracy the paper reports but uncompressed's, "
             "which is why make ktoken_table1 asks balanced questions: docs/fidelity.md).")
CSV = ["column", "paper protocol", "best", "paper", "mean", "se", "N", "eff. batch", "reduction", "paper reduction",
       "P-L", "paper P-L"]
TREE_CSV = CSV[:4] + ["balanced", "majority"] + CSV[4:]  # table1: the best run's balanced accuracy, the majority
UNIFORM_TAG = "_uniform"  # table1 cells asked the released code's uniform pairs (questions=random)


@dataclass
class Config(ReportConfig):
    table: str = option(
        "all", "Which table: table1, table2, table3, ablation (Fig. 6), or all.", choices=TABLES + ("all",))
    out: str = option("", "Folder for <table>.md/.csv (and ablation.png) ('' = tables/ktoken, or "
                          "<output_root>/tables/ktoken with debug=...).")
    seeds: list[int] = option([], "Seeds to read, e.g. [42,43,44] (the paper: the best of three runs); [] = every seed "
                              "found.", ge=0)
    select_on: str = option("heldout", "Tree tables (table1, ablation): the cells whose curriculum gate read held-out "
                            "trees (heldout, ours) or the stage's test split (reported, the authors'; tags "
                            "<column>_paper). Tables 2 and 3 select nothing.",
                            choices=("heldout", "reported"))
    questions: str = option("balanced", "Table 1: the cells asked balanced questions (balanced, make ktoken_table1's "
                            "default) or the released code's uniform pairs (random, ~99.5% 'false' at x3large; tags "
                            "<column>_uniform).", choices=("balanced", "random"))


def batch_text(recs: list[dict]) -> str:
    """The effective batch the records trained with (metrics.json train.effective_batch; per stage: a/b/..)."""
    effs = [r.get("train", {}).get("effective_batch") for r in recs]
    seen = dict.fromkeys("-" if e is None else "/".join(map(str, e)) if isinstance(e, list) else str(e) for e in effs)
    return " or ".join(seen) if seen else "-"


def reported(recs: list[dict]) -> bool:
    return any(r.get("select_on") == "reported" for r in recs)


def seeds_shown(seeds: list, got: dict) -> list:
    """The seeds asked for, or (none asked) every seed found in the table's cells."""
    return list(seeds) or sorted({r["seed"] for recs in got.values() for r in recs})


def column(table: str, tag: str, recs: list[dict], base_best: float | None) -> dict:
    """A column's cells: best of N, mean and s.e., reduction and P-L, beside the paper's figures."""
    ppl = table == "table3"
    metric, best_of = ("perplexity", min) if ppl else ("em_accuracy", max)
    printed = inputs("ktoken", f"ktoken.t{table[-1]}.{PL_ROWS[tag]}.pl")
    p_perf, p_red = printed[0], printed[-1]
    p_pl = pl_from_perplexity(*printed) if ppl else pl_from_accuracy(*printed)
    row = {"column": tag, "paper protocol": reported(recs), "paper": p_perf, "N": len(recs), "paper reduction": p_red,
           "paper P-L": p_pl}
    if not recs:
        return row
    vals = [r["metrics"][metric] for r in recs]
    best = next(r["metrics"] for r in recs if r["metrics"][metric] == best_of(vals))
    b_red = max(best["length_reduction"], 0.0)
    pl = ((pl_from_perplexity(best[metric], base_best, b_red) if base_best is not None else None) if ppl
          else pl_from_accuracy(best[metric], b_red))
    if table == "table1":  # the best run's balanced accuracy and the scored set's majority class
        row |= {"balanced": best.get("em_balanced_accuracy"), "majority": best.get("em_majority_baseline")}
    return row | {"best": best[metric], "mean": mean(vals), "se": sem(vals), "eff. batch": batch_text(recs),
                  "reduction": mean([r["metrics"]["length_reduction"] for r in recs]), "P-L": pl}


def column_line(r: dict, fmt: str, tree: bool = False) -> str:
    opt = lambda v: "-" if v is None else fmt.format(v)  # noqa: E731
    extra = (f" {opt(r.get('balanced'))} | {opt(r.get('majority'))} |" if tree else "")
    if not r["N"]:
        return (f"| {r['column']} | - [{r['paper']}] |{extra} - | 0 | - | - [{r['paper reduction']}] | "
                f"- [{r['paper P-L']:.3f}] |")
    mark = f" {MARK}" if r["paper protocol"] else ""
    pl = "-" if r["P-L"] is None else f"{r['P-L']:.3f}"
    return (f"| {r['column']}{mark} | {fmt.format(r['best'])} [{r['paper']}] |{extra} {fmt.format(r['mean'])} \u00b1 "
            f"{opt(r['se'])} | {r['N']} | {r['eff. batch']} | {r['reduction']:.1f} [{r['paper reduction']}] | "
            f"{pl} [{r['paper P-L']:.3f}] |")


def compression_table(idx: Runs, table: str, seeds: list, suffix: str) -> tuple[str, list[dict], list[str]]:
    """Tables 1-3: one row per column (uncompressed, the two hard-compression baselines, K = 2, 3, 4)."""
    task, subset = TASKS[table]
    got = {tag: idx.find(task, subset, MODEL, method, tag + suffix, seeds) for tag, method in COLUMNS}
    ppl = table == "table3"
    metric, best_of, name, fmt = (("perplexity", min, "perplexity", "{:.3f}") if ppl
                                  else ("em_accuracy", max, "accuracy", "{:.2f}"))
    base = [r["metrics"][metric] for r in got["uncompressed"]]
    rows = [column(table, tag, recs, best_of(base) if base else None) for tag, recs in got.items()]
    tree = table == "table1"
    head = f"| column | {name}: best of N |" + (" balanced accuracy (best run) | majority class |" if tree else "")
    out = [f"{table}: {name}, length reduction %, P-L; seeds {seeds_shown(seeds, got)}; the paper's figure in brackets",
           "", head + f" {name}: mean \u00b1 s.e. | N | eff. batch | reduction (measured) | P-L (best run) |",
           "|---|---:|" + ("---:|---:|" if tree else "") + "---:|---:|---:|---:|---:|"]
    out += ([column_line(r, fmt, tree) for r in rows] + [""] + NOTES + ([TREE_NOTE] if tree else [])
            + ([MARK_NOTE] if any(r["paper protocol"] for r in rows) else []))
    return "\n".join(out), rows, TREE_CSV if tree else CSV


def ablation_table(idx: Runs, seeds: list, suffix: str) -> tuple[str, list[dict], list[str]]:
    """Fig. 6: per initialisation, the mean over its runs of the gate rows' accuracy after each epoch."""
    task, subset = TASKS["ablation"]
    got = {tag: idx.find(task, subset, MODEL, "ktoken", tag + suffix, seeds) for tag in ABLATION}
    epochs = [f"ep{i}" for i in range(1, EPOCHS + 1)]
    out = [f"ablation (Fig. 6): K=4 on tree x3large, the gate rows' generated-answer accuracy after each epoch, "
           f"mean over the runs found (seeds {seeds_shown(seeds, got)})", "",
           "| init | runs | eff. batch | " + " | ".join(epochs) + " |", "|---|---:|---:|" + "---:|" * EPOCHS]
    rows = []
    for tag, recs in got.items():
        curves = [[h["em_accuracy"] for h in r["train"]["history"] if "round" in h] for r in recs]
        points = [mean([c[i] for c in curves if len(c) > i]) for i in range(EPOCHS)]
        rows.append({"init": tag[5:], "paper protocol": reported(recs), "runs": len(recs),
                     "eff. batch": batch_text(recs), **dict(zip(epochs, points))})
        out.append(f"| {tag[5:]}{f' {MARK}' if reported(recs) else ''} | {len(recs)} | {batch_text(recs)} | "
                   + " | ".join("-" if v is None else f"{v:.1f}" for v in points) + " |")
    if any(r["paper protocol"] for r in rows):
        out += ["", MARK_NOTE]
    return "\n".join(out), rows, ["init", "paper protocol", "runs", "eff. batch"] + epochs


def plot_ablation(rows: list[dict], path) -> None:
    """Fig. 6: accuracy after each epoch, one line per initialisation."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for r in rows:
        pts = [(i, r[f"ep{i}"]) for i in range(1, EPOCHS + 1) if r[f"ep{i}"] is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{r['init']} init (n={r['runs']})")
    ax.set_xlabel("epoch")
    ax.set_ylabel("gate rows' accuracy (%)")
    ax.set_title("K-Token Fig. 6: K=4 on tree x3large, average vs random initialisation", fontsize=9)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path)


def render(cfg: Config) -> dict[str, str]:
    root, out = table_dirs(cfg.runs, cfg.out, cfg.debug, "ktoken")
    names = [cfg.table] if cfg.table != "all" else list(TREE if cfg.select_on == "reported" else TABLES)
    if cfg.select_on == "reported" and names[0] not in TREE:
        raise EmbexpError(f"select_on=reported is the tree curriculum's gate; {names[0]} selects nothing "
                          f"(choose from: {', '.join(TREE)})")
    suffix = PAPER_TAG if cfg.select_on == "reported" else ""
    uniform = UNIFORM_TAG if cfg.questions == "random" else ""
    idx = Runs(collect_runs(root, strict=cfg.strict))
    done = {}
    for n in names:
        text, rows, fields = (ablation_table(idx, list(cfg.seeds), suffix) if n == "ablation"
                              else compression_table(idx, n, list(cfg.seeds), (uniform if n == "table1" else "")
                                                     + suffix))
        stem = out / n
        write_text_table(text, rows, fields, stem)
        if n == "ablation":
            plot_ablation(rows, stem.with_suffix(".png"))
        done[n] = text
        print(text + f"\n(written: {stem}.md, .csv{', .png' if n == 'ablation' else ''})\n")
    return done
