"""Embedding-layer ablation: the TinyTE paper (Tavares et al., EMNLP 2025), Sec. 4.2 and Eq. 6.

    python -m embexp.analyze ablation model=gemma2 task=wmt16 sorting=random
    python -m embexp.analyze ablation model=tiny_llama task=wmt16 debug=smoke     # offline, seconds

Tables 4, 9 and 10, Figures 5-7: for each portion p of the d embedding dims, the first k = floor(p * d)
dims of one ordering of the *input* embedding matrix are replaced by their mean over every row (Eq. 6),
the model generates greedily for the first n_samples evaluation prompts, and the outputs are scored
(BLEU-4 or entailment) against the unablated model's; p = 0 takes the same path and must score 100.
Design choices and how they differ from the paper: docs/reproduce_tinyte.md ("Tables: how each
is computed", 4, 9 and 10).
"""

from __future__ import annotations

import json
import logging
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from omegaconf import OmegaConf, open_dict
from torch import nn

from embexp import EmbexpError
from embexp.core.cli import compose_train
from embexp.core.config import JudgeConfig, option
from embexp.core.records import atomic_write, write_json
from embexp.core.tables import pyplot, save_png, write_table

log = logging.getLogger("embexp")

GRID = [0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
TABLE_PS = [0.01, 0.05, 0.1, 0.2, 0.5, 0.8]  # the columns of Tables 4, 9 and 10
SORTINGS = ("random", "variance", "variance_desc")
DATASETS = {"wmt16": "WMT'16", "cnndm": "Summ."}  # dataset names as the paper's tables print them
METRICS = {"bleu": ("bleu", "auc", "BLEU-4"), "nli": ("nli", "auc_nli", "NLI")}  # metric -> summary keys, label
METRIC_CHOICES = {"bleu": ["bleu"], "nli": ["nli"], "both": ["bleu", "nli"]}


@dataclass
class Config:
    model: str = option("tiny_llama",
                        "Model config name (conf/model): gemma2, qwen25, llama31, llama2, smollm2, tiny_*, ...")
    task: str = option("wmt16", "Generation task config name (conf/task): wmt16, cnndm, alpaca, ...")
    debug: str = option("", "A conf/debug preset applied to the composed config (smoke: tiny random model of the "
                        "family + the task fixture, CPU).")
    overrides: list = option([], "More train-config overrides, e.g. [task.source=fixture,model.dtype=bfloat16].")
    sorting: str = option("random", "Dimension order: random (seeded permutation), variance (lowest vocabulary "
                          "variance first; ours, see the module doc) or variance_desc.")
    seed: int = option(0, "Seed of the random permutation.", ge=0, le=2**32 - 1)
    ps: list = option(GRID, "Portions of dimensions to ablate (p = 0 is the reference and must score 100).")
    n_samples: int = option(250, "Evaluation rows used: the first n of the eval split (the paper: a sample of 250).",
                            ge=1)
    batch_size: int = option(0, "Generation batch size (0: trainer.eval_batch_size of the composed config).", ge=0)
    max_new_tokens: int = option(0, "Generation budget (0: the task's max_new_tokens).", ge=0)
    ablate_tied_output: bool = option(False, "For tied embeddings, ablate the shared matrix in place (the output head "
                                      "too) instead of the input side only.")
    auc_normalize: bool = option(False, "Divide the AUC by the p range (0-100 scale) instead of the paper-like raw "
                                 "area (max 90).")
    output_root: str = option("", "Override the composed config's output_root ('' = outputs, or the debug preset's).")
    out: str = option("", "Output folder ('' = <output_root>/analysis/ablation/<task>/<model>/<sorting>_seed<seed>).")
    progress: bool = option(True, "Show progress bars.")
    metric: str = option(
        "bleu", "What scores the ablated outputs against the unablated ones: bleu (corpus BLEU-4, Table "
        "4/10), nli (the share entailed by the unablated output, judged by judge.model: Table 9, Table "
        "10's NLI rows, Figure 6; Honovich et al. 2022) or both.", choices=tuple(METRIC_CHOICES))
    judge: JudgeConfig = field(default_factory=JudgeConfig, metadata={
        "help": "metric=nli|both: the NLI judge (judge.model: e.g. google/t5_xxl_true_nli_mixture, smollm2 offline, "
                "tiny_llama for tests; kind is always nli). Verdicts are cached in <out>/judge_cache.jsonl."})
    reuse: bool = option(True, "Reuse <out>/outputs.jsonl when <out>/summary.json has the same settings (no "
                         "generation), keeping that run's other metric (ours: adding NLI to a BLEU run only scores).")


# ---- pure functions (tested on hand-made inputs) ------------------------------------------------
def ablate(weight: torch.Tensor, dims) -> torch.Tensor:
    """Eq. 6: a copy of `weight` (|V| x d) whose columns `dims` hold their mean over the rows."""
    out = weight.detach().clone()
    dims = torch.as_tensor(dims, dtype=torch.long, device=weight.device)
    if dims.numel():
        out[:, dims] = weight.detach()[:, dims].float().mean(0).to(weight.dtype)
    return out


def dim_order(weight: torch.Tensor, sorting: str, seed: int = 0) -> torch.Tensor:
    """All d column indices in the order they are ablated."""
    d = weight.shape[1]
    if sorting == "random":
        return torch.randperm(d, generator=torch.Generator().manual_seed(seed))
    if sorting in ("variance", "variance_desc"):
        var = weight.detach().float().var(dim=0).cpu()
        return torch.sort(var, descending=sorting == "variance_desc", stable=True).indices
    raise EmbexpError(f"unknown sorting '{sorting}' (choose from: {', '.join(SORTINGS)})")


def n_dims(p: float, d: int) -> int:
    """k = floor(p * d) (Eq. 3), robust to float noise (0.29 * 100 is 28.999...)."""
    if not 0.0 <= p <= 1.0:
        raise EmbexpError(f"ablation portion {p} is outside [0, 1]")
    return int(math.floor(p * d + 1e-9))


def bleu(hyps: list[str], refs: list[str]) -> float:
    """Corpus BLEU-4 of `hyps` against `refs` (0-100); identical corpora score 100."""
    from sacrebleu.metrics import BLEU

    if list(hyps) == list(refs):
        return 100.0
    return float(BLEU().corpus_score(list(hyps), [list(refs)]).score)


def auc(ps: list[float], scores: list[float], normalize: bool = False) -> float:
    """Trapezoid area under scores(p), p as fractions; optionally divided by the p range."""
    pts = sorted(zip(ps, scores))
    area = sum((p1 - p0) * (s0 + s1) / 2 for (p0, s0), (p1, s1) in zip(pts, pts[1:]))
    width = pts[-1][0] - pts[0][0]
    return area / width if normalize and width > 0 else area


def table_row(model: str, dataset: str, ps: list[float], scores: list[float], area: float) -> dict:
    """One row in the layout of Tables 4/10: Model | Dataset | 1% ... 80% | AUC."""
    row = {"Model": model, "Dataset": dataset}
    at = {round(p, 6): s for p, s in zip(ps, scores)}
    for p in TABLE_PS:
        row[pct(p)] = at.get(round(p, 6))
    row["AUC"] = area
    return row


def pct(p: float) -> str:
    return f"{p * 100:g}%"


def plot_curves(panels: list[tuple[str, list[tuple[str, list[float], list[float]]]]], path: Path,
                ylabel: str = "BLEU-4 vs. unablated") -> None:
    """Score-vs-p curves, one panel per (title, [(label, ps, scores), ...]) side by side
    (Figures 5/7: a panel per model, a curve per dataset); a PNG written with the Agg backend."""
    fig, axes = pyplot().subplots(1, max(1, len(panels)), figsize=(4.5 * max(1, len(panels)), 3.5), squeeze=False)
    for ax, (title, curves) in zip(axes[0], panels or [("", [])]):
        for label, ps, scores in curves:
            ax.plot([p * 100 for p in ps], scores, marker="o", ms=3, label=label)
        ax.set_xlabel("ablated dimensions p (%)")
        ax.set_ylabel(ylabel)
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
        ax.set_title(title)
        if curves:
            ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path)


# ---- the model side -------------------------------------------------------------------------
@contextmanager
def ablated_embedding(model: nn.Module, dims, in_place: bool = False):
    """Within the block the model's input embedding has `dims` ablated (Eq. 6): an ablated copy swapped in (a tied
    head keeps its rows), or with in_place=True the shared matrix edited; restored on exit."""
    emb = model.get_input_embeddings()
    orig = emb.weight
    dims = torch.as_tensor(dims, dtype=torch.long, device=orig.device)
    if in_place:
        saved = orig.detach()[:, dims].clone()
        with torch.no_grad():
            orig[:, dims] = ablate(orig[:, dims], torch.arange(len(dims), device=orig.device))
        try:
            yield
        finally:
            with torch.no_grad():
                orig[:, dims] = saved
    else:
        emb.weight = nn.Parameter(ablate(orig, dims), requires_grad=False)
        try:
            yield
        finally:
            emb.weight = orig


def nli_scores(judge, reference: list[str], runs: list[list[str]]) -> tuple[list[float], int]:
    """Entailment (0-100) of each run's outputs by the reference outputs on the same prompts (premise: the
    reference), all pairs in one judge call, and the number of pairs the judge was asked about."""
    from embexp.judge import aggregate

    items, where = [], []
    verdicts = [[1.0] * len(hyps) for hyps in runs]
    for r, hyps in enumerate(runs):
        if len(hyps) != len(reference):
            raise EmbexpError(f"ablated run {r} has {len(hyps)} outputs for {len(reference)} references")
        for i, (ref, hyp) in enumerate(zip(reference, hyps)):
            if hyp != ref:
                items.append({"premise": ref, "hypothesis": hyp})
                where.append((r, i))
    for (r, i), v in zip(where, judge.score("nli", items) if items else []):
        verdicts[r][i] = float(v)
    return [float(aggregate("nli", v)["entailment"]) for v in verdicts], len(items)  # NaN verdicts (unparsed) left out


def read_previous(out: Path, settings: dict, n_ps: int):
    """(summary, reference outputs, outputs per p) of an earlier run in `out` with the same settings, else None."""
    try:
        prev = json.loads((out / "summary.json").read_text())
        lines = [json.loads(x) for x in (out / "outputs.jsonl").read_text().splitlines() if x.strip()]
    except (OSError, ValueError):
        return None
    if prev.get("settings") != settings or len(lines) != n_ps + 1 or lines[0].get("p") is not None:
        return None
    if [x.get("p") for x in lines[1:]] != settings["ps"]:
        return None
    return prev, lines[0]["outputs"], [x["outputs"] for x in lines[1:]]


def train_config(cfg: Config):
    """The composed train config of the plain model the study ablates (method=zero_shot, as in the paper)."""
    overrides = [f"model={cfg.model}", f"task={cfg.task}", "method=zero_shot"]
    overrides += [f"debug={cfg.debug}"] if cfg.debug else []
    overrides += [f"output_root={cfg.output_root}"] if cfg.output_root else []
    return compose_train(overrides + list(cfg.overrides))


def output_dir(cfg: Config, tcfg=None) -> Path:
    """cfg.out, else <output_root>/analysis/ablation/<task>[_<subset>]/<model>/<sorting>_seed<seed>."""
    if cfg.out:
        return Path(cfg.out)
    tcfg = tcfg if tcfg is not None else train_config(cfg)
    task_dir = f"{tcfg.task.name}_{tcfg.task.subset}" if tcfg.task.subset else tcfg.task.name  # Task.display_name
    return (Path(tcfg.output_root) / "analysis" / "ablation" / task_dir / tcfg.model.name
            / f"{cfg.sorting}_seed{cfg.seed}")


def run(cfg: Config, judge=None) -> dict:
    """The study. `judge`: an object with the judge API (``score(kind, items)``, ``calls``) used
    instead of building ``cfg.judge`` (tests pass a fake one)."""
    from embexp.core.cli import setup_logging

    setup_logging(None, True)
    metrics = check(cfg, judge)
    ps = sorted(float(p) for p in cfg.ps)
    if 0.0 not in ps:
        ps = [0.0] + ps  # the reference point
    tcfg = train_config(cfg)
    with open_dict(tcfg):
        cap = tcfg.task.max_eval_samples
        tcfg.task.max_eval_samples = cfg.n_samples if cap < 0 else min(cap, cfg.n_samples)
    device = torch.device("cuda" if torch.cuda.is_available() and not tcfg.trainer.cpu else "cpu")
    task_dir = f"{tcfg.task.name}_{tcfg.task.subset}" if tcfg.task.subset else tcfg.task.name  # Task.display_name
    new_tokens = cfg.max_new_tokens or tcfg.task.max_new_tokens
    out = output_dir(cfg, tcfg)
    settings = {"model": tcfg.model.name, "model_source": tcfg.model.source, "task": task_dir, "debug": cfg.debug,
                "overrides": list(cfg.overrides), "sorting": cfg.sorting, "seed": cfg.seed, "ps": ps,
                "n_samples": cfg.n_samples, "max_new_tokens": new_tokens, "ablate_tied_output": cfg.ablate_tied_output}
    t0 = time.perf_counter()
    prev = read_previous(out, settings, len(ps)) if cfg.reuse else None
    if prev is not None:
        old, reference, runs = prev
        d, ks, n_prompts, gen_seconds = old["hidden_size"], old["k"], old["n_samples"], old.get("generation_seconds")
        log.info("reusing the generations in %s (same settings): nothing is generated", out)
    else:
        old = {}
        d, ks, reference, runs, n_prompts = generate_curve(cfg, tcfg, ps, device, new_tokens)
        gen_seconds = time.perf_counter() - t0
    if runs[0] != reference:
        raise EmbexpError("p=0 generated other outputs than the reference: generation is not deterministic here")
    curves, judge_calls = score_curves(cfg, metrics, reference, runs, judge, device, out)
    dataset = DATASETS.get(tcfg.task.name, task_dir)
    summary = {
        "analysis": "ablation", "model": tcfg.model.name, "model_source": tcfg.model.source, "task": task_dir,
        "task_name": tcfg.task.name, "dataset": dataset, "sorting": cfg.sorting, "seed": cfg.seed,
        "hidden_size": d, "n_samples": n_prompts, "max_new_tokens": new_tokens, "ps": ps, "k": ks,
        "auc_normalized": cfg.auc_normalize, "ablate_tied_output": cfg.ablate_tied_output, "settings": settings,
    }
    for name in METRICS:
        if name not in curves and name in old:  # the same outputs, scored by the earlier run
            curves[name] = old[name]
    for name, (key, auc_key, _) in METRICS.items():
        if name in curves:
            summary[key], summary[auc_key] = curves[name], auc(ps, curves[name], cfg.auc_normalize)
    if "nli" in curves:  # which judge gave the entailment verdicts
        summary["nli_judge"] = cfg.judge.model if "nli" in metrics else old.get("nli_judge", "")
    summary.update({"metrics": [m for m in METRICS if m in curves], "judge_calls": judge_calls,
                    "generation_seconds": gen_seconds, "seconds": time.perf_counter() - t0,
                    "reused_outputs": prev is not None})
    write_outputs(cfg, out, summary, curves, reference, runs if prev is None else None)
    return summary


def check(cfg: Config, judge=None) -> list[str]:
    """The metrics the study computes; one line for a setting it cannot run."""
    if cfg.sorting not in SORTINGS:
        raise EmbexpError(f"unknown sorting '{cfg.sorting}' (choose from: {', '.join(SORTINGS)})")
    if cfg.metric not in METRIC_CHOICES:
        raise EmbexpError(f"unknown metric '{cfg.metric}' (choose from: {', '.join(METRIC_CHOICES)})")
    metrics = METRIC_CHOICES[cfg.metric]
    if "nli" in metrics and judge is None and not cfg.judge.model:
        raise EmbexpError(f"metric={cfg.metric} needs an NLI judge: set judge.model "
                          "(e.g. google/t5_xxl_true_nli_mixture, or smollm2 offline)")
    if cfg.judge.kind not in ("", "nli"):
        raise EmbexpError(f"the ablation's judge scores entailment: judge.kind '{cfg.judge.kind}' is not nli (choose "
                          "from: '', nli)")
    return metrics


def score_curves(cfg: Config, metrics: list[str], reference: list[str], runs: list[list[str]], judge, device,
                 out: Path) -> tuple[dict[str, list[float]], int | None]:
    """(metric -> score per p against the reference outputs, judge calls or None): BLEU-4, entailment
    (the judge built from ``cfg.judge`` unless one is given); p = 0 must score 100."""
    curves: dict[str, list[float]] = {}
    judge_calls = None
    if "bleu" in metrics:
        curves["bleu"] = [bleu(hyps, reference) for hyps in runs]
    if "nli" in metrics:
        if judge is None:
            from embexp.judge import build_judge

            jcfg = OmegaConf.merge(OmegaConf.structured(JudgeConfig), cfg.judge)
            jcfg.kind = "nli"
            judge = build_judge(jcfg, device, cache_path=(out / "judge_cache.jsonl") if cfg.judge.cache else None)
        curves["nli"], asked = nli_scores(judge, reference, runs)
        judge_calls = int(getattr(judge, "calls", asked))
        log.info("NLI: %d ablated outputs differ from their reference; %d judged by the model (the rest cached)",
                 asked, judge_calls)
    for name, (_, _, label) in METRICS.items():
        if name in curves and curves[name][0] != 100.0:
            raise EmbexpError(f"p=0 scored {label} {curves[name][0]:.2f}, not 100")
    return curves, judge_calls


def write_outputs(cfg: Config, out: Path, summary: dict, curves: dict[str, list[float]], reference: list[str],
                  runs: list[list[str]] | None) -> None:
    """summary.json, the curve and the table (Markdown + CSV), outputs.jsonl (``runs``: newly
    generated outputs, None when reused), curve.png; prints the table."""
    ps, ks, model, dataset = summary["ps"], summary["k"], summary["model"], summary["dataset"]
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "summary.json", summary)
    shown = [m for m in METRICS if m in curves]
    rows = [{"p": p, "k": k, **{METRICS[m][0]: curves[m][i] for m in shown}} for i, (p, k) in enumerate(zip(ps, ks))]
    labels = " and ".join(METRICS[m][2] for m in shown)
    write_table(rows, ["p", "k"] + [METRICS[m][0] for m in shown], out / "curve",
                title=f"{labels} vs p: {model} / {dataset} / {cfg.sorting}")
    trows = [dict(table_row(model, dataset, ps, curves[m], summary[METRICS[m][1]]), Metric=METRICS[m][2])
             for m in shown]
    tcols = ["Model"] + (["Metric"] if shown != ["bleu"] else []) + ["Dataset"] + [pct(p) for p in TABLE_PS] + ["AUC"]
    write_table(trows, tcols, out / "table",
                title=f"Embedding ablation ({cfg.sorting} sorting), {labels} vs. unablated outputs")
    if runs is not None:
        atomic_write(out / "outputs.jsonl", "".join(
            json.dumps(o, ensure_ascii=False) + "\n"
            for o in [{"p": None, "outputs": reference}]
            + [{"p": p, "k": k, "outputs": h} for p, k, h in zip(ps, ks, runs)]))
    plot_curves([(f"{model}, {cfg.sorting} sorting", [(METRICS[m][2], ps, curves[m]) for m in shown])],
                out / "curve.png",
                ylabel="BLEU-4 vs. unablated" if shown == ["bleu"] else "score vs. unablated (0-100)")
    aucs = ", ".join(f"{METRICS[m][2]} AUC {summary[METRICS[m][1]]:.2f}" for m in shown)
    print((out / "table.md").read_text()
          + f"\n{aucs} ({'normalised' if cfg.auc_normalize else 'raw, max 90'}); written to {out}")


def generate_curve(cfg: Config, tcfg, ps: list[float], device, new_tokens: int):
    """Generate the unablated reference and the outputs at every p: (d, k per p, reference,
    outputs per p, n prompts)."""
    from embexp.run.build import build
    from embexp.run.predict import generate

    torch.manual_seed(tcfg.seed)
    c = build(tcfg, device)
    if c.task.kind != "generation" or not c.backbone.is_decoder:
        raise EmbexpError(f"ablation needs a decoder and a generation task (got model {cfg.model}, task {cfg.task}: "
                          f"{c.task.kind})")
    method = c.method.to(device)
    prompts = [ex.prompt for ex in c.task.examples("eval")][: cfg.n_samples]
    bs = cfg.batch_size or tcfg.trainer.eval_batch_size
    progress = cfg.progress and tcfg.trainer.progress
    stop_nl = bool(getattr(tcfg.task, "stop_at_newline", False))  # the task's own stop rule
    gen = lambda: generate(method, c.featurizer, prompts, bs, new_tokens, device, progress, stop_nl)  # noqa: E731

    weight = c.backbone.model.get_input_embeddings().weight
    d = weight.shape[1]
    order = dim_order(weight, cfg.sorting, cfg.seed).to(weight.device)
    reference = gen()
    ks, runs = [], []
    for p in ps:
        k = n_dims(p, d)
        with ablated_embedding(c.backbone.model, order[:k], in_place=cfg.ablate_tied_output):
            hyps = gen()
        ks.append(k)
        runs.append(hyps)
        log.info("p=%.2f  k=%d/%d  BLEU-4=%.2f", p, k, d, bleu(hyps, reference))
    if c.backbone.model.get_input_embeddings().weight is not weight:
        raise EmbexpError("the embedding was not restored after ablation")
    return d, ks, reference, runs, len(prompts)
