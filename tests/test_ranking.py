"""TinyTE's remaining studies of issue #15 owned here: the correlation between the value at p and the
AUC (App. D, Figures 4 and 8), the §4.2 ranking table, Table 8 (low-robustness models), and the
make targets behind them (tinyte_ranking, tinyte_fig4, table8, pema_fig2)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import CONF, compose
from embexp import EmbexpError
from embexp.studies import correlation
from embexp.studies.ablation import auc

ROOT = CONF.parent
sys.path.insert(0, str(ROOT / "scripts"))
import tinyte_sweep  # noqa: E402

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
    assert {p.name for p in out.iterdir()} >= {"correlation.md", "correlation.csv", "correlation.json", "figure4.png", "figure8.png"}
    m = data["metrics"]["bleu"]
    assert m["n_curves"] == 6 and m["ps"] == [0.1, 0.3, 0.5, 0.9]
    assert data["skipped"]["bleu"] == ["m9/alpaca/variance/seed0"]
    aucs = [c["auc"] for c in curves]
    for j, p in enumerate(m["ps"][:3]):
        x = [c["bleu"][PS.index(p)] for c in curves]
        assert m["r"][j] == pytest.approx(np.corrcoef(x, aucs)[0, 1], abs=1e-12)
        slope, intercept = np.polyfit(x, aucs, 1)
        assert correlation.predict_auc("bleu", p, 50.0, out / "correlation.json") == pytest.approx(slope * 50 + intercept)
    assert m["r"][3] is None and not m["significant"][3]  # p = 0.9: every curve scores 0
    assert m["pvalue"][1] < 0.05 < m["pvalue"][0]  # the tracking column is significant, the noise one is not
    assert m["best_p"] == 0.3 and data["metrics"]["nli"]["n_curves"] == 4
    nli = curves[:4]  # its best p is the argmax of numpy's r over its columns (0.5 here, as the paper's nli peaks later)
    rs = [np.corrcoef([c["nli"][PS.index(p)] for c in nli], [c["auc_nli"] for c in nli])[0, 1] for p in (0.1, 0.3, 0.5)]
    assert data["metrics"]["nli"]["best_p"] == [0.1, 0.3, 0.5][int(np.argmax(rs))] == 0.5
    # the outline is drawn on exactly the cells whose p-value < alpha (rows: bleu, nli; columns: the union of p)
    ps = sorted({p for r in data["metrics"].values() for p in r["ps"]})
    want = sorted((i, ps.index(p)) for i, r in enumerate(data["metrics"].values())
                  for p, pv in zip(r["ps"], r["pvalue"]) if pv is not None and pv < 0.05)
    assert data["outlined"] == want and len(want) >= 2
    # a stricter alpha outlines a subset
    strict = correlation.run(correlation.Config(runs=str(tmp_path / "analysis" / "ablation"), alpha=1e-9, out=str(tmp_path / "c2")))
    assert strict["outlined"] == [] and correlation.predict_auc("nli", 0.77, 1.0, strict) is None


def test_correlation_needs_three_curves(tmp_path):
    for i in range(2):
        summary(tmp_path, f"m{i}", "wmt16", "random", 0, PS, [100.0, 50.0 + i, 40.0, 20.0, 0.0])
    with pytest.raises(EmbexpError, match=r"needs >= 3 ablation curves.*bleu: 2"):
        correlation.run(correlation.Config(runs=str(tmp_path)))
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
