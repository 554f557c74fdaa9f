"""Each paper's central claim, checked on real rows: ``python -m embexp.report paper=claims``.

    python -m embexp.report paper=claims                         # docs/claims.md (+ docs/img/claims_*.png)
    python -m embexp.report paper=claims out=                    # print the page only
    python -m embexp.report paper=claims runs=/data/claims       # the claims' own runs live elsewhere
    python -m embexp.report paper=claims write_digests=true      # + docs/claims/<runs>.jsonl from the runs

One row per paper: the claim quoted with its table, the check embexp runs on this machine's scale (model,
rows, budget, how the lr was chosen, seeds), the numbers beside the majority class, zero-shot and the
baselines the paper compares with, and a verdict computed by the check's rule (report/claims.yaml says
what each rule means). Two sources, never a number typed into this module or the page:

- the comparison's rendered tables (``compare``, default docs/compare: the CSVs ``make compare`` writes
  from its run records), for the checks that reuse the comparison;
- the claims' own run records under ``runs`` (default outputs/claims; ``make claims_runs`` writes them),
  for checks the comparison cannot answer: PEMA against full FT at identical settings, PETE against the
  standard encoder, K-Token's gap against the number of training rows. Output folders do not travel with
  the repository, so each check's records are kept in a committed digest (``records``, default docs/claims:
  one JSON Lines file per check's runs, one line per run), from which a new checkout renders the same page;
  which runs a check reads and when a digest is written: report/digest.py.

A check whose table or runs are missing is rendered as pending with the command that produces it.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import yaml

from embexp.core.config import option
from embexp.core.records import LOWER, atomic_write, quality_metric
from embexp.core.tables import pyplot, save_png
from embexp.report.base import ReportConfig
from embexp.report.cells import binomial_se, sem
from embexp.report.compare_curves import candidates, choose, lr_of
from embexp.report.digest import check_folders, claim_runs

SPEC = Path(__file__).with_name("claims.yaml")
TABLES = ("all",)
HOLDS, FAILS, UNSEP, PENDING = "holds at this scale", "does not hold at this scale", "not separable", "pending"
RUNS_COMMAND = "make claims_runs"
# a check's runs folder -> the part of `make claims_runs PARTS=...` that writes it (sweep/papers/claims.py)
RUNS_PART = {"pema": "pema", "pete": "pete", "ktoken_gap": "ktoken", "ktoken_amazon": "amazon"}


def missing(check: dict, what: str) -> str:
    """A pending check's reason: what is missing, and the commands that make its records."""
    part = RUNS_PART.get(check.get("runs", ""))
    return (f"{what}: its run records are neither under the runs folder nor in its digest ({check.get('runs')}.jsonl); "
            f"`{RUNS_COMMAND}{f' PARTS={part}' if part else ''}` runs them, then `make claims` writes the digest")


@dataclass
class Config(ReportConfig):
    table: str = option("all", "The claims page (one table: all).", choices=TABLES)
    runs: str = option("outputs/claims", "Root of the claims' own run records (make claims_runs writes them).")
    compare: str = option("docs/compare", "Folder of the comparison's rendered tables (make compare writes them).")
    records: str = option(
        "docs/claims", "Folder of the committed digests of the claims' run records (<runs folder>.jsonl), "
        "read for runs that `runs` does not hold; written only with write_digests=true.")
    write_digests: bool = option(False, "Also write each check's digest under `records` from its runs (make claims), "
                                        "naming the lines added, replaced or removed; false: name them only.")
    out: Optional[str] = option("docs/claims.md", "The page; out= (empty) prints it only.")
    img: str = option("docs/img", "Folder for the figures (the K-Token gap curve); ignored when out is empty.")


@dataclass
class Verdict:
    verdict: str
    numbers: str  # the check's numbers in one line
    why: str  # how the rule read them
    rows: list  # (label, value, se) for the check's table
    figure: str = ""  # a PNG the check drew, as the page links it


# ---- the rules -------------------------------------------------------------------------------------------
def judge(rule: str, diff: float, se: float | None, tol: float = 0.0, alone: str = "one run each") -> tuple[str, str]:
    """(verdict, reason) for method - reference = diff (points) with standard error se (None: one seed,
    judged on the point value alone; ``alone`` says which side had one run)."""
    noise = 2 * se if se else 0.0
    band = f"2 s.e. = {noise:.2f}" if se else f"no s.e.: {alone}"
    if rule == "beats":
        if diff > noise:
            return HOLDS, f"ahead by {diff:+.2f} points, more than {band}"
        if -diff > noise:
            return FAILS, f"behind by {diff:+.2f} points, more than {band}"
        return UNSEP, f"{diff:+.2f} points is within {band}"
    if -diff <= tol:
        return HOLDS, f"{diff:+.2f} points is within the tolerance {tol:g}"
    # the arithmetic spelled out, so "2 + 2 s.e. = 0.11" cannot read as a sum of 0.11
    bound = f"-{tol + noise:.2f}, the tolerance {tol:g} plus 2 s.e. ({noise:.2f})" if se else \
        f"-{tol:g}, the tolerance (no s.e.: {alone})"
    if -diff <= tol + noise:
        return UNSEP, f"{diff:+.2f} points is past the tolerance {tol:g} but not below {bound}"
    return FAILS, f"{diff:+.2f} points is below {bound}"


def diff_se(a: float | None, b: float | None) -> float | None:
    return math.sqrt(a * a + b * b) if a is not None and b is not None else None


# ---- checks on the comparison's rendered tables ----------------------------------------------------------
def read_table(path: Path) -> dict[str, dict]:
    with path.open(newline="") as fh:
        return {r["Method"]: r for r in csv.DictReader(fh)}


def num(v) -> float | None:
    return float(v) if v not in (None, "") else None


def value(row: dict, metric: str) -> tuple[float | None, float | None]:
    """(metric, its s.e. over the seeds) of a rendered table's row."""
    return num(row.get(metric)), num(row.get(f"{metric} se"))


def edge(row: dict) -> bool:
    """The chosen lr sits at either end of the grid it was chosen from."""
    lrs, lr = (row.get("lrs tried") or "").split(), row.get("lr") or ""
    return bool(lrs) and lr in (lrs[0], lrs[-1])


def table_check(check: dict, cfg: Config) -> Verdict:
    path = Path(cfg.compare) / check["table"]
    if not path.is_file():
        return Verdict(PENDING, "", f"{path} is missing: `make compare` renders it", [])
    rows, metric = read_table(path), check["metric"]
    missing = [m for m in (check["method"], check["against"]) if m not in rows]
    if missing:
        return Verdict(PENDING, "", f"{path} has no row {', '.join(missing)}", [])
    m, ref = rows[check["method"]], rows[check["against"]]
    (mv, mse), (rv, rse) = value(m, metric), value(ref, metric)
    verdict, why = judge(check["rule"], mv - rv, diff_se(mse, rse), float(check.get("tol", 0.0)))
    shown = [check["method"], check["against"], *check.get("context", []),
             *[k for k in rows if k.startswith("Majority class")]]
    out = []
    for label in dict.fromkeys(shown):
        if label in rows:
            v, se = value(rows[label], metric)
            mark = " (lr at the grid's edge)" if edge(rows[label]) else ""
            out.append((label + mark, v, se, rows[label].get("seeds") or "", rows[label].get("#TP") or ""))
    numbers = f"{check['method']} {fmt(mv, mse)} vs {check['against']} {fmt(rv, rse)}"
    return Verdict(verdict, numbers, why, out)


# ---- checks on the claims' own runs ----------------------------------------------------------------------
def label(run: dict) -> str:
    method = run["config"].get("method") or {}
    k = method.get("k")
    return f"{run['method']} K={k}" if k is not None and run["method"] == "ktoken" else run["method"]


def run_se(run: dict, metric: str) -> float | None:
    """The sampling s.e. (points) of one run's metric over its eval rows, where it has a closed form: an
    accuracy (binomial), a correlation (Fisher's z: (1 - r^2) / sqrt(n - 3)); else None."""
    v, n = final(run, metric), run.get("n_eval_examples") or 0
    if v is None or n < 4:
        return None
    if "accuracy" in metric:
        return binomial_se(v, n)
    if metric in ("spearman", "pearson", "mcc"):
        return 100.0 * (1.0 - (v / 100.0) ** 2) / math.sqrt(n - 3)
    return None


def final(run: dict, metric: str) -> float | None:
    v = (run.get("metrics") or {}).get(metric)
    return float(v) if v is not None else None


def state_mb(run: dict) -> float | None:
    b = ((run.get("train") or {}).get("state_memory") or {}).get("total_bytes")
    return b / 2**20 if b else None


def paired_check(check: dict, runs: list[dict]) -> Verdict:
    """Runs of method and against at identical settings (task, lr, seed, rows), paired on those."""
    key = lambda r: (r["subset"] or r["task"], float(r["config"]["trainer"]["lr"]), r["seed"])  # noqa: E731
    by = {m: {key(r): r for r in runs if r["method"] == m} for m in (check["method"], check["against"])}
    pairs = sorted(set(by[check["method"]]) & set(by[check["against"]]))
    if not pairs:
        return Verdict(PENDING, "", missing(check, "no paired runs yet"), [])
    metric = check.get("metric") or quality_metric(runs, "")
    diffs, rows = [], []
    for k in pairs:
        a, b = by[check["method"]][k], by[check["against"]][k]
        va, vb = final(a, metric), final(b, metric)
        diffs.append(va - vb)
        rows.append((f"{k[0]}, lr {k[1]:g}, seed {k[2]}", va, vb, va - vb, state_mb(a), state_mb(b)))
    mean, se = float(np.mean(diffs)), sem(diffs)
    verdict, why = judge("matches", mean, se, float(check.get("tol", 0.0)))
    mem = [(r[4], r[5]) for r in rows if r[4] and r[5]]
    ratio = f"; trainable state {np.mean([a for a, _ in mem]):.0f} MB vs {np.mean([b for _, b in mem]):.0f} MB" if mem \
        else ""
    plural = "s" if len(pairs) > 1 else ""
    numbers = (f"{check['method']} - {check['against']} = {fmt(mean, se)} points over {len(pairs)} pair{plural} "
               f"({metric}){ratio}")
    return Verdict(verdict, numbers, why, rows)


def matches_runs_check(check: dict, runs: list[dict]) -> Verdict:
    """Trained runs of method and against (one config each): their final metric; untrained (tag untrained)
    beside them."""
    metric = check.get("metric") or quality_metric(runs, "")
    got = {(r["method"], r.get("tag") == "untrained"): r for r in runs}
    m, ref = got.get((check["method"], False)), got.get((check["against"], False))
    if not (m and ref):
        return Verdict(PENDING, "", missing(check, "runs missing"), [])
    mv, rv = final(m, metric), final(ref, metric)
    verdict, why = judge("matches", mv - rv, diff_se(run_se(m, metric), run_se(ref, metric)),
                         float(check.get("tol", 0.0)))
    rows = [(f"{meth}{' (untrained)' if un else ''}", final(r, metric), r.get("n_trainable_params"), state_mb(r))
            for (meth, un), r in sorted(got.items())]
    numbers = (f"{check['method']} {fmt(mv, run_se(m, metric))} vs {check['against']} {fmt(rv, run_se(ref, metric))} "
               f"({metric}, one seed; s.e. over the eval rows)")
    return Verdict(verdict, numbers, why, rows)


def chosen(runs: list[dict], metric: str) -> tuple[float, float | None, int, str] | None:
    """A method's (eval metric, s.e. over seeds, step, lr) at the (lr, step) its held-out rows chose."""
    cands = candidates(runs, metric)
    pick = choose(cands, metric in LOWER)
    if pick is None:
        return None
    vals = [v for _, v in cands[pick].values()]
    return float(np.mean(vals)), sem(vals), pick[1], f"{pick[0]:g}"


def trained(runs: list[dict]) -> str:
    """How long the runs trained and why they stopped: "2,250 (flat)" when trainer.curve_patience found the
    held-out curve flat, "3,000 (cap)" when they reached trainer.max_steps; one entry per distinct outcome."""
    done = [r.get("train") or {} for r in runs]
    return " / ".join(dict.fromkeys(f"{t['steps']:,} ({'flat' if t.get('stopped_early') else 'cap'})"
                                    for t in done if t.get("steps")))


def epoch_curve(runs: list[dict], metric: str) -> list[tuple[float, float]]:
    """The eval metric against the epochs trained (step x batch / training rows, so that sizes compare),
    the mean over the runs' seeds at each curve point."""
    at: dict[float, list[float]] = {}
    for r in runs:
        per_step = r["config"]["trainer"]["batch_size"] / max(1, r.get("n_train_examples") or 1)
        for p in r.get("curve") or []:
            if p.get(metric) is not None:
                at.setdefault(round(int(p["step"]) * per_step, 4), []).append(float(p[metric]))
    return [(e, float(np.mean(v))) for e, v in sorted(at.items())]


def gap_check(check: dict, runs: list[dict], cfg: Config) -> Verdict:
    """The method's gap to `against` at each training-set size, each at its held-out choice."""
    metric = check.get("metric") or "ll_accuracy"
    sizes = sorted({r.get("n_train_examples") for r in runs if r.get("n_train_examples")})
    table, curve, steps = [], {}, {}
    for n in sizes:
        at = [r for r in runs if r.get("n_train_examples") == n]
        for lab in sorted({label(r) for r in at}):
            c = chosen([r for r in at if label(r) == lab], metric)
            if c:
                picked = [r for r in at if label(r) == lab and f"{lr_of(r):g}" == c[3]]
                curve.setdefault(lab, []).append((n, c[0]))
                steps[(lab, n)] = epoch_curve(picked, metric)
                table.append((n, lab, c[0], c[1], c[2], c[3], len({r["seed"] for r in picked}), trained(picked)))
    for r in runs:  # untrained references at 0 rows: zero-shot, and the majority class of the eval rows
        if r["method"] == "zero_shot" and final(r, metric) is not None:
            table.append((0, "zero-shot", final(r, metric), run_se(r, metric), "", "", 1, ""))
    if runs:
        majority = 50.0 if "balanced" in metric else final(runs[0], f"{metric.split('_')[0]}_majority_baseline")
        if majority is not None:
            table.append((0, "majority class", majority, None, "", "", "", ""))
    against = check["against"]
    gaps = {n: (next(r for r in table if r[0] == n and r[1] == against), [r for r in table if r[0] == n and
                                                                             r[1].startswith(check["method"])])
            for n in sizes if any(r[0] == n and r[1] == against for r in table)}
    gaps = {n: (ref, ms) for n, (ref, ms) in gaps.items() if ms}
    if not gaps:
        return Verdict(PENDING, "", missing(check, "no paired sizes yet"), table)
    top = max(gaps)
    ref, ms = gaps[top]
    best = max(ms, key=lambda r: r[2])
    single = [r[1] for r in (best, ref) if r[3] is None]  # one seed: no s.e. over seeds on that side
    alone = "one run each" if len(single) == 2 else f"{single[0]} has one run" if single else ""
    verdict, why = judge("matches", best[2] - ref[2], diff_se(best[3], ref[3]), float(check.get("tol", 0.0)), alone)
    parts = [f"{n:,} rows: {min(ref[2] - m[2] for m in ms):.1f}" for n, (ref, ms) in sorted(gaps.items())]
    numbers = f"gap to {against} ({metric}; the best {check['method']} run at each size), " + ", ".join(parts) + \
        " points"
    figure = ""
    if cfg.out and len(curve) and len(sizes) > 1:  # one PNG per check, named by its runs' folder
        png = Path(cfg.img) / f"claims_{check['runs']}.png"
        plot_gap(curve, steps, png, metric)
        figure = os.path.relpath(png, Path(cfg.out).parent)
    return Verdict(verdict, numbers, why, table, figure)


def plot_gap(curve: dict, epochs: dict, path: Path, metric: str) -> None:
    """Left: each method's score at its held-out choice against the training rows. Right: each run's
    validation curve against the epochs trained (was it still rising when it stopped?); one colour per
    method, one line style per size."""
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    colour = {lab: f"C{i}" for i, lab in enumerate(sorted(curve))}
    sizes = sorted({n for pts in curve.values() for n, _ in pts})
    for lab, pts in sorted(curve.items()):
        xs, ys = zip(*sorted(pts))
        ax.plot(xs, ys, marker="o", color=colour[lab], label=lab)
    ax.set_xscale("log")
    ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
    ax.minorticks_off()
    ax.set_xlabel("training rows")
    ax.set_ylabel(f"{metric} (validation, at the held-out choice)")
    ax.legend(fontsize=8)
    styles = ["-", "--", ":", "-."]
    for (lab, n), pts in sorted(epochs.items()):
        if pts:
            xs, ys = zip(*pts)
            bx.plot(xs, ys, marker=".", color=colour[lab], linestyle=styles[sizes.index(n) % len(styles)],
                    label=f"{lab}, {n:,} rows")
    bx.set_xlabel("epochs trained")
    bx.set_ylabel(f"{metric} (validation)")
    bx.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))  # outside: curves run to every corner
    save_png(fig, path)


# ---- the page --------------------------------------------------------------------------------------------
def fmt(v: float | None, se: float | None) -> str:
    if v is None:
        return ""
    return f"{v:.1f} ± {se:.1f}" if se is not None else f"{v:.1f}"


def run_check(check: dict, cfg: Config, runs_by: dict, writes: list) -> Verdict:
    if "table" in check:
        return table_check(check, cfg)
    if check["runs"] not in runs_by:
        runs_by[check["runs"]] = claim_runs(check, cfg, writes)
    runs = runs_by[check["runs"]]
    runs = [r for r in runs if r.get("weights") != "random"]
    if check["rule"] == "paired":
        return paired_check(check, runs)
    if check["rule"] == "gap":
        return gap_check(check, runs, cfg)
    return matches_runs_check(check, runs)


def detail(check: dict, v: Verdict) -> list[str]:
    protocol = check["protocol"].strip()
    lines = [f"**{check['name']}** ({check['rule']}). {protocol[:1].upper()}{protocol[1:]}.", ""]
    if check.get("tol_why"):
        lines += [f"Tolerance {check['tol']} points: {check['tol_why']}.", ""]
    if v.rows and "table" in check:
        lines += ["| | metric | seeds | #TP |", "|---|---:|---:|---:|"]
        lines += [f"| {lab} | {fmt(val, se)} | {seeds} | {tp} |" for lab, val, se, seeds, tp in v.rows]
    elif v.rows and check["rule"] == "paired":
        lines += [f"| pair | {check['method']} | {check['against']} | difference | state MB ({check['method']}) | "
                  f"state MB ({check['against']}) |", "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {k} | {a:.2f} | {b:.2f} | {d:+.2f} | {ma or 0:.0f} | {mb or 0:.0f} |"
                  for k, a, b, d, ma, mb in v.rows]
    elif v.rows and check["rule"] == "gap":
        lines += ["| rows | method | metric | step | lr | seeds | trained steps (why it stopped) |",
                  "|---:|---|---:|---:|---:|---:|---|"]
        lines += [f"| {n:,} | {lab} | {fmt(val, se)} | {step} | {lr} | {s} | {t} |"
                  for n, lab, val, se, step, lr, s, t in v.rows]
    elif v.rows:
        lines += ["| run | metric | #TP | state MB |", "|---|---:|---:|---:|"]
        lines += [f"| {lab} | {val:.2f} | {tp or ''} | {mb or 0:.0f} |" for lab, val, tp, mb in v.rows]
    if v.rows:
        lines.append("")
    if v.numbers and check["rule"] == "gap":  # the trend the verdict's largest size sits on
        lines += [f"{v.numbers[:1].upper()}{v.numbers[1:]}.", ""]
    if v.figure:
        lines += [f"![{check['name']}: {check['method']} and {check['against']} against the training rows]"
                  f"({v.figure})", ""]
    lines += [f"Verdict: **{v.verdict}**" + (f": {v.why}." if v.why else "."), ""]
    if check.get("reading") and v.verdict != PENDING:
        reading = " ".join(check["reading"].split())
        lines += [f"What the runs show: {reading}.", ""]
    return lines


def summary_row(paper: dict, verdicts: list[tuple[dict, Verdict]]) -> str:
    """The paper's row of the summary table: its headline check (``headline: true`` in claims.yaml), else
    its first check that ran, else its first check; the verdict says how many of its checks ran."""
    done = [(c, v) for c, v in verdicts if v.verdict != PENDING]
    headline = [(c, v) for c, v in done if c.get("headline")]
    check, lead = (headline or done or verdicts)[0]
    verdict = lead.verdict + ("" if len(verdicts) == 1 else f" ({len(done)} of {len(verdicts)} checks run)")
    return f"| {paper['paper']} | {paper['short']} | {check['name']} | {lead.numbers} | {verdict} | {paper['gpu']} |"


def check(cfg: Config) -> None:
    """The claims' folders, checked before any work (report/digest.py)."""
    check_folders(cfg, {fl.name: fl.default for fl in dataclasses.fields(Config)})


def render(cfg: Config) -> dict[str, str]:
    papers = yaml.safe_load(SPEC.read_text())
    runs_by: dict = {}
    writes: list = []  # the digests write_digests=true writes, once every check has read its records
    head = ["# Each paper's central claim, checked", "",
            "Generated by `python -m embexp.report paper=claims` (`make claims`) from the comparison's rendered "
            f"tables (`{cfg.compare}`) and the claims' own run records (`{cfg.runs}`, written by "
            f"`{RUNS_COMMAND}`, kept in `{cfg.records}`); never edit it by hand. The rules and the papers' quotes: "
            "`src/embexp/report/claims.yaml`. A verdict is about this machine's scale: small models, thousands "
            "of real rows, CPU budgets. The paper's scale needs a GPU: the last column's target, whose cost "
            "the reproduction ledger (docs/reproduction.md) estimates.", "",
            "| Paper | Claim | Check | Numbers | Verdict | The paper's scale |", "|---|---|---|---|---|---|"]
    body = []
    for p in papers:
        verdicts = [(c, run_check(c, cfg, runs_by, writes)) for c in p["checks"]]
        head.append(summary_row(p, verdicts))
        body += [f"## {p['paper']}", "", f"> {p['quote'].strip()}", "", f"({p['where']})", ""]
        for c, v in verdicts:
            body += detail(c, v)
    text = "\n".join(head + [""] + body).rstrip() + "\n"
    for write in writes:
        write()
    if cfg.out:
        Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
        atomic_write(Path(cfg.out), text)
    print(text)
    return {"claims": text}
