"""The comparison of every method (python -m embexp.report paper=compare table=compare|curves;
conf/sweep/compare/curves.yaml, make compare)."""

from __future__ import annotations

import csv
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import compose, run_train
from embexp import EmbexpError, sweep
from embexp.methods import METHODS

REPO = Path(__file__).resolve().parents[1]
ELSEWHERE = {"pete": "trained from scratch with its encoder (make pete_table)",
             "repeat_prompt": "a generation-task baseline (TinyTE Table 8: Alpaca), not a classifier"}
BOTH = ["kinds=encoder decoder"]
SMOKE = ["tasks=sst2", "seeds=0", "steps=2", "curve=[1]"]


def compare_commands(*assignments: str, extra: tuple = ()) -> list[list[str]]:
    """The train commands of the comparison's spec (module arguments, the runner's additions included)."""
    return [c[2:] for c in sweep.command_lines("compare/curves", list(assignments), list(extra)) if c[1] == "embexp.train"]


def methods_of(model: str) -> list[str]:
    seen = [a.split("=", 1)[1] for c in compare_commands(*BOTH) if f"model={model}" in c for a in c if a.startswith("method=")]
    return list(dict.fromkeys(seen))


DECODER, ENCODER = methods_of("smollm2"), methods_of("minilm")


def test_the_sweep_covers_every_registered_method():
    covered = set(DECODER) | set(ENCODER) | set(ELSEWHERE)
    assert covered == {n for n in METHODS if not n.startswith("_")}
    for c in compare_commands(*BOTH):
        if "method=zero_shot" not in c:  # a budget, a grid lr and the held-out curve for every trained cell
            assert any(a.startswith("trainer.lr=") for a in c) and "trainer.curve_select=true" in c
            assert "task.select_split=train_holdout" in c and "trainer.max_steps=500" in c


def test_make_compare_dry_run_prints_the_grid_then_the_other_seeds_at_the_chosen_lr():
    r = subprocess.run(["make", "-s", "compare", "DRY_RUN=1", f"PY={sys.executable}"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cmds = [shlex.split(line) for line in r.stdout.splitlines()]
    train = [c for c in cmds if c[1:3] == ["-m", "embexp.train"]]
    assert cmds[-1][1:5] == ["-m", "embexp.report", "paper=compare", "table=curves"]
    first = [c for c in train if "seed=0" in c]
    rest = [c for c in train if "seed=0" not in c]
    assert len(first) == 2 * 3 * len(ENCODER) and len(rest) == 2 * 2 * len(ENCODER)  # 2 tasks, 3 lrs / 2 more seeds
    assert all(any(a.startswith("trainer.lr=<lr chosen on held-out rows among ") for a in c) for c in rest)
    assert {a for c in train for a in c if a.startswith(("trainer.max_steps=", "trainer.batch_size="))} == \
        {"trainer.max_steps=500", "trainer.batch_size=8"}  # the same budget and batch for every method


@pytest.mark.slow
def test_every_method_runs_in_the_comparison_and_gets_one_row(tmp_path):
    """Every method of both kinds, first lr of its grid, debug=smoke: one row each in table=curves."""
    from embexp.report import configure

    root, seen = tmp_path / "runs", set()
    for args in compare_commands(*BOTH, *SMOKE, extra=("debug=smoke",)):
        key = next(a for a in args if a.startswith("method=")), next(a for a in args if a.startswith("model="))
        if key in seen:
            continue
        seen.add(key)
        cfg = compose(*args)
        run_train(cfg, root / key[0].split("=")[1] / key[1].split("=")[1])
    module, cfg = configure(["paper=compare", "table=curves", f"runs={root}", f"out={tmp_path / 'tables'}"])
    assert len(module.render(cfg)) == 2  # the decoder table and the encoder table
    for path in (tmp_path / "tables").glob("curves_*.csv"):
        rows = list(csv.DictReader(path.open()))
        want = DECODER if "smollm2" in path.name else ENCODER
        assert sorted(r["method"] for r in rows) == sorted(want)
        for r in rows:
            empty = {k for k, v in r.items() if v == "" and not k.endswith((" se", " seeds"))}
            allowed = {"#TP", "% of backbone", "train state MB", "train tok/s", "held-out", "lr", "step", "lrs tried"} \
                if r["method"] == "zero_shot" else {"em_accuracy se", "accuracy se"}
            assert empty <= allowed, (r["method"], empty)
        assert path.with_suffix(".png").stat().st_size > 0


def test_the_other_seeds_run_at_the_lr_the_first_seed_chose_and_the_table_reports_it(tmp_path, monkeypatch, capsys):
    """The curve sweep through the runner, in this process: LoRA on both kinds, two seeds."""
    from test_sweep import in_process

    from embexp.report.curves import best_held_out

    monkeypatch.setattr(sweep, "execute", in_process)
    monkeypatch.chdir(tmp_path)
    assert sweep.main(["compare/curves", "--extra", f"debug=smoke output_root={tmp_path}", *BOTH, *SMOKE, "seeds=0 1",
                       "only=lora"]) == 0, capsys.readouterr().err
    for model in ("minilm", "smollm2"):
        runs = {p.parent.parent.name + "/" + p.parent.name: json.loads(p.read_text())
                for p in (tmp_path / "glue_sst2" / model).rglob("metrics.json")}
        first = sorted(((v["config"]["trainer"]["lr"] if "config" in v else float(k.split("lr")[1].split("/")[0]), k, v)
                        for k, v in runs.items() if k.endswith("seed0")), key=lambda t: t[0])
        assert len(first) == 3 and len(runs) == 4
        best = max(first, key=lambda t: best_held_out(t[2]))[1]  # ties: the smallest lr, as the runner
        (second,) = [k for k in runs if k.endswith("seed1")]
        assert second.split("/")[0] == best.split("/")[0]  # the same lr tag as the first seed's best held-out run
        table = (tmp_path / "tables" / "compare" / f"curves_glue_sst2_{model}.csv").read_text()
        assert next(csv.DictReader(table.splitlines()))["seeds"] == "2"


def test_an_unknown_metric_is_one_clear_line(tmp_path):
    from embexp.report.compare import quality_metric

    with pytest.raises(EmbexpError, match=r"metric 'bleu' is in none of these runs \(choose from: accuracy\)"):
        quality_metric([{"metrics": {"accuracy": 50.0, "eval_seconds": 1.0}}], "bleu")
