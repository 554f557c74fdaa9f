"""TinyTE's remaining studies of issue #15 owned here: the correlation between the value at p and the
AUC (App. D, Figures 4 and 8), the §4.2 ranking table, Table 8 (low-robustness models), and the
make targets behind them (tinyte_ranking, tinyte_fig4, tinyte_table8, pema_fig2)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest

from conftest import CONF, compose, make_dry
from embexp import EmbexpError
from embexp.studies import correlation
from embexp.studies.ablation import auc
from embexp.sweep import command_lines

ROOT = CONF.parent

PS = [0.0, 0.1, 0.3, 0.5, 0.9]


def summary(root: Path, model: str, task: str, sorting: str, seed: int, ps, bleu, nli=None) -> dict:
    s = {"analysis": "ablation", "model": model, "task": task, "task_name": task, "dataset": task, "sorting": sorting,
         "seed": seed, "ps": list(ps), "bleu": list(bleu), "auc": auc(ps, bleu)}
    if nli is not None:
        s.update(nli=list(nli), auc_nli=auc(ps, nli))
    d = root / "analysis" / "ablation" / task / model / f"{sorting}_seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "summary.json").write_text(json.dumps(s))
    return s


def synthetic(root: Path) -> list[dict]:
    """Six curves: at p=0.3 the value tracks robustness (strong r); at p=0.1 it is unrelated, at 0.5
    loosely related; at p=0.9 every curve scores 0 (no r). nli is on the first four only."""
    noise10 = [55.0, 90.0, 60.0, 85.0, 70.0, 75.0]  # unrelated to robustness
    at50 = [20.0, 10.0, 45.0, 30.0, 25.0, 50.0]  # loosely related
    nli10, nli50 = [80.0, 95.0, 70.0, 99.0], [3.0, 12.0, 22.0, 40.0]
    out = []
    for i, robust in enumerate([10.0, 25.0, 40.0, 55.0, 70.0, 85.0]):
        bleu = [100.0, noise10[i], robust + (-1.0) ** i, at50[i], 0.0]
        nli = [100.0, nli10[i], robust + 5, nli50[i], 1.0] if i < 4 else None
        out.append(summary(root, f"m{i}", "wmt16" if i % 2 else "cnndm", "random", 0, PS, bleu, nli))
    summary(root, "m9", "alpaca", "variance", 0, [0.0, 0.3], [100.0, 5.0])  # Table 8's two-point run: skipped
    return out


def test_correlation_pearson_outline_and_best_p(tmp_path):
    curves = synthetic(tmp_path)
    data = correlation.run(correlation.Config(runs=str(tmp_path / "analysis" / "ablation"), alpha=0.05))
    out = tmp_path / "analysis" / "correlation"
    assert {p.name for p in out.iterdir()} >= {"correlation.md", "correlation.csv", "correlation.json",
                                               "figure4.png", "figure8.png"}
    m = data["metrics"]["bleu"]
    assert m["n_curves"] == 6 and m["ps"] == [0.1, 0.3, 0.5, 0.9]
    assert data["skipped"]["bleu"] == ["m9/alpaca/variance/seed0"]
    aucs = [c["auc"] for c in curves]
    for j, p in enumerate(m["ps"][:3]):
        x = [c["bleu"][PS.index(p)] for c in curves]
        assert m["r"][j] == pytest.approx(np.corrcoef(x, aucs)[0, 1], abs=1e-12)
        slope, intercept = np.polyfit(x, aucs, 1)
        assert (correlation.predict_auc("bleu", p, 50.0, out / "correlation.json")
                == pytest.approx(slope * 50 + intercept))
    assert m["r"][3] is None and not m["significant"][3]  # p = 0.9: every curve scores 0
    assert m["pvalue"][1] < 0.05 < m["pvalue"][0]  # the tracking column is significant, the noise one is not
    assert m["best_p"] == 0.3 and data["metrics"]["nli"]["n_curves"] == 4
    # its best p is the argmax of numpy's r over its columns (0.5 here, as the paper's nli peaks later)
    nli = curves[:4]
    rs = [np.corrcoef([c["nli"][PS.index(p)] for c in nli], [c["auc_nli"] for c in nli])[0, 1] for p in (0.1, 0.3, 0.5)]
    assert data["metrics"]["nli"]["best_p"] == [0.1, 0.3, 0.5][int(np.argmax(rs))] == 0.5
    # the outline is drawn on exactly the cells whose p-value < alpha (rows: bleu, nli; columns: the union of p)
    ps = sorted({p for r in data["metrics"].values() for p in r["ps"]})
    want = sorted((i, ps.index(p)) for i, r in enumerate(data["metrics"].values())
                  for p, pv in zip(r["ps"], r["pvalue"]) if pv is not None and pv < 0.05)
    assert data["outlined"] == want and len(want) >= 2
    # a stricter alpha outlines a subset
    strict = correlation.run(correlation.Config(runs=str(tmp_path / "analysis" / "ablation"), alpha=1e-9,
                                                out=str(tmp_path / "c2")))
    assert strict["outlined"] == [] and correlation.predict_auc("nli", 0.77, 1.0, strict) is None


def test_correlation_needs_three_curves(tmp_path):
    for i in range(2):
        summary(tmp_path, f"m{i}", "wmt16", "random", 0, PS, [100.0, 50.0 + i, 40.0, 20.0, 0.0])
    with pytest.raises(EmbexpError, match=r"needs >= 3 ablation curves.*bleu: 2"):
        correlation.run(correlation.Config(runs=str(tmp_path)))
    with pytest.raises(EmbexpError, match=r"alpha=0.0 is outside"):
        correlation.run(correlation.Config(runs=str(tmp_path), alpha=0.0))
    with pytest.raises(EmbexpError, match="no summary.json|bleu: 0"):
        correlation.run(correlation.Config(runs=str(tmp_path / "nothing")))


# ---- GPT-J (Table 8): the tiny family runs TinyTE-full like the others ------------------------------
def test_tinyte_full_on_tiny_gptj_identity_generate_and_export():
    import torch

    from conftest import smoke
    from embexp.methods import build_method
    from embexp.models import load_backbone

    cfg = smoke("method=tinyte_full", "model=gptj", "task=alpaca")
    assert cfg.model.family == "gptj" and cfg.model.source == "tiny"
    bb = load_backbone(cfg.model)
    method = build_method(cfg.method, bb)
    assert method.n_trainable(include_head=False) == bb.hidden_size == 64
    ids = torch.tensor([[1, 40, 41, 42, 43]])
    with torch.no_grad():
        ref = bb.model(input_ids=ids).logits.clone()
        assert torch.equal(method(input_ids=ids).logits, ref)  # identity at init
        method.bias.normal_()
        shifted = method(input_ids=ids).logits
        assert not torch.allclose(shifted, ref)
        assert torch.allclose(method.export()(input_ids=ids).logits, shifted, atol=1e-5)
    out = method.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False)
    assert out.shape[1] == ids.shape[1] + 4


# ---- the sweeps: tinyte_ranking and tinyte_table8 ----------------------------------------------------
def test_ranking_sweep_composes_five_rankings_per_seed():
    *cmds, report = command_lines("tinyte/ranking", ["seeds=0 1"])
    assert len(cmds) == 5 * 2
    seen = {}
    for args in cmds:
        assert args[:4] == ["-m", "embexp.train", "experiment=tinyte_half_cnndm", "model=gemma2"]
        cfg = compose(*args[2:], "debug=smoke")
        assert cfg.method.name == "tinyte_half" and cfg.task.name == "cnndm" and cfg.method.p == 0.5
        seen.setdefault((cfg.method.ranking, cfg.method.select if cfg.method.ranking != "random" else "", cfg.tag),
                        []).append((cfg.seed, cfg.method.rank_seed))
    assert set(seen) == {("variance", "lowest", ""), ("variance", "highest", "rank_var_high"),
                         ("random", "", "rank_random"), ("integrated_gradients", "lowest", "rank_ig_low"),
                         ("integrated_gradients", "highest", "rank_ig_high")}
    assert seen[("random", "", "rank_random")] == [(0, 0), (1, 1)]  # each seed draws its own random half
    # variance/lowest is Table 1's TinyTE-half cell: the same command, so the run is shared
    assert cmds[0] in command_lines("tinyte/table1", ["models=gemma2"])
    assert command_lines("tinyte/ranking", [], ["debug=smoke"])[-1] == ["-m", "embexp.report",
                                                                        "table=ranking", "debug=smoke"]


def test_table8_sweep_commands():
    from omegaconf import OmegaConf

    from embexp.studies import ablation

    cmds = command_lines("tinyte/table8", ["seeds=0 1"])
    trains = [a for a in cmds if a[1] == "embexp.train"]
    abl = [a for a in cmds if a[1] == "embexp.analyze"]
    assert ([a[3] for a in trains if "experiment=tinyte_full_alpaca" in a]
            == ["model=llama2"] * 2 + ["model=gptj"] * 2 + ["model=qwen25_05b"] * 2)
    repeat = [a for a in trains if "method=repeat_prompt" in a]
    assert len(repeat) == 1 and "experiment=tinyte_base_alpaca" in repeat[0]  # the same Alpaca rows as the TinyTE runs
    for args in trains:
        cfg = compose(*args[2:], "debug=smoke")
        assert cfg.task.name == "alpaca" and cfg.model.source == "tiny"
    assert len(abl) == 3
    for args in abl:
        c = OmegaConf.merge(OmegaConf.structured(ablation.Config), OmegaConf.from_dotlist(args[3:]))
        assert c.task == "alpaca" and c.sorting == "variance" and list(c.ps) == [0, 0.3] and c.seed == 0
    assert cmds[-1] == ["-m", "embexp.report", "table=8"]
    assert compose("model=gptj").model.id == "EleutherAI/gpt-j-6b"


# ---- the tables, rendered from hand-made run directories and summaries --------------------------------
def hand_run(root: Path, task: str, model: str, method: str, seed: int, metrics: dict, tag: str = "",
             n_method: int = 0) -> Path:
    d = root / task / model / (f"{method}_{tag}" if tag else method) / f"seed{seed}"
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(f"tag: '{tag}'\ntask:\n  name: {task}\n  subset: ''\n")
    (d / "metrics.json").write_text(json.dumps({"method": method, "model": model, "task": task, "seed": seed,
                                                "n_method_params": n_method, "metrics": metrics}))
    (d / "status.json").write_text(json.dumps({"status": "complete"}))
    return d


def test_report_ranking_table(tmp_path):
    from embexp.report import tinyte

    for seed, vals in enumerate([(31.0, 29.0, 27.0, 28.0, 27.5), (33.0, 30.0, 28.0, 29.0, 28.5)]):
        for (_, _, tag), v in zip(tinyte.RANKING, vals):
            hand_run(tmp_path, "cnndm", "gemma2", "tinyte_half", seed, {"rougeLsum": v}, tag, n_method=1152)
    hand_run(tmp_path, "cnndm", "qwen25", "tinyte_half", 0, {"rougeLsum": 1.0}, "rank_ig_low")  # another model: ignored
    md = tinyte.render(tinyte.Config(table="ranking", runs=str(tmp_path), out=str(tmp_path / "t")))["ranking"]
    lines = [ln for ln in md.splitlines() if ln.startswith("| ") and "Ranking" not in ln]
    assert lines[0] == "| variance | bottom half | 1152 | 32.00 ± 1.00 | 30.71 | 2 |"
    assert lines[2] == "| random | random half | 1152 | 27.50 ± 0.50 | 27.70 | 2 |"
    assert lines[4].startswith("| integrated gradients | top half | 1152 | 28.00 ± 0.50 | 27.94 |")
    csv = (tmp_path / "t" / "ranking.csv").read_text().splitlines()
    assert csv[0].startswith("Ranking,Dims,#TP,R-L,paper R-L,seeds") and "R-L se" in csv[0]


def test_report_table8_with_and_without_a_correlation_fit(tmp_path):
    from embexp.report import tinyte

    for model, n, rl in (("llama2", 4096, 35.0), ("gptj", 4096, 12.0), ("qwen25_05b", 896, 15.0)):
        hand_run(tmp_path, "alpaca", model, "tinyte_full", 0, {"rougeL": rl, "rougeLsum": rl + 1}, n_method=n)
    hand_run(tmp_path, "alpaca", "llama2", "repeat_prompt", 0, {"rougeL": 18.0})
    summary(tmp_path, "llama2", "alpaca", "variance", 0, [0.0, 0.3], [100.0, 10.0])
    summary(tmp_path, "gptj", "alpaca", "variance", 0, [0.0, 0.3], [100.0, 4.0])
    cfg = tinyte.Config(table="table8", runs=str(tmp_path), out=str(tmp_path / "t"))
    md = tinyte.render(cfg)["8"]
    assert "Est. AUC empty: no correlation fit" in md
    rows = {ln.split(" | ")[0][2:]: ln.split(" | ") for ln in md.splitlines()
            if ln.startswith("| ") and "Method" not in ln}
    assert rows["TinyTE-all (Llama-2-7b)"][1:5] == ["4096", "10.00", "", "35.00"]
    assert (rows["Repeating the question"][1:5] == ["0", "", "", "18.00"]
            and rows["Repeating the question"][-1] == "18.58 |")
    assert rows["TinyTE-all (Qwen-2.5-0.5b)"][1:5] == ["896", "", "", "15.00"]  # no ablation summary: empty
    # with the correlation of six curves, Est. AUC is the linear fit at p = 30%
    synthetic(tmp_path)
    data = correlation.run(correlation.Config(runs=str(tmp_path / "analysis" / "ablation"), tasks=["wmt16", "cnndm"]))
    md = tinyte.render(cfg)["8"]
    rows = {ln.split(" | ")[0][2:]: ln.split(" | ") for ln in md.splitlines()
            if ln.startswith("| ") and "Method" not in ln}
    fit = data["metrics"]["bleu"]["fit"][data["metrics"]["bleu"]["ps"].index(0.3)]
    assert rows["TinyTE-all (GPT-J-6b)"][3] == f"{fit['slope'] * 4.0 + fit['intercept']:.2f}"
    assert "least-squares fit" in md


# ---- make DRY_RUN=1 ------------------------------------------------------------------------------------
def make_printed(target: str, *more: str) -> list[list[str]]:
    out = make_dry(target, *more)
    assert out.returncode == 0, out.stderr
    return [shlex.split(line) for line in out.stdout.splitlines() if " -m embexp." in line]


@pytest.mark.serial
def test_make_targets_dry_run():
    cmds = make_printed("tinyte_ranking", "EXTRA=debug=smoke")
    assert len(cmds) == 6 and cmds[-1][1:] == ["-m", "embexp.report", "table=ranking", "debug=smoke"]
    assert all(c[-1] == "debug=smoke" and "experiment=tinyte_half_cnndm" in c for c in cmds[:-1])
    cmds = make_printed("tinyte_table8", "EXTRA=debug=smoke")
    assert cmds[-1][1:] == ["-m", "embexp.report", "table=8", "debug=smoke"] and len(cmds) == 3 * 2 + 1 + 1
    assert make_printed("tinyte_fig4", "EXTRA=debug=smoke output_root=/tmp/x")[0][1:] == [
        "-m", "embexp.analyze", "correlation", "tasks=[wmt16,cnndm]", "debug=smoke", "runs=/tmp/x/analysis/ablation"]
    fig2 = make_printed("pema_fig2", "PEMA_FIG2_ARGS=tokenizer=smollm2 source=local")[0]
    assert (fig2[1:5] == ["-m", "embexp.analyze", "vocab", "what=heaps"]
            and fig2[-2:] == ["tokenizer=smollm2", "source=local"])
