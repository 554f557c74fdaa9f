"""The comparison of every method (python -m embexp.report paper=compare table=compare|curves;
embexp/sweep/papers/compare.py, make compare)."""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
from pathlib import Path

import pytest

from conftest import compose, make_dry, run_train
from embexp import EmbexpError, sweep
from embexp.methods import METHODS

REPO = Path(__file__).resolve().parents[1]
ELSEWHERE = {"pete": "trained from scratch with its encoder (make pete_table)",
             "repeat_prompt": "a generation-task baseline (TinyTE Table 8: Alpaca), not a classifier"}
BOTH = ["kinds=encoder decoder", "dec_methods="]  # dec_methods=: every decoder method (default: issue #37's six)
HEADLINE = ["lora", "full_ft", "tinyattn", "tinyte_full", "head_only"]
TASKS = ["sst2", "mrpc", "rte", "cola"]
SMOKE = ["tasks=sst2", "seeds=0", "steps=2", "curve=[1]"]


def compare_commands(*assignments: str, extra: tuple = ()) -> list[list[str]]:
    """The train commands of the comparison's spec (module arguments, the runner's additions included)."""
    return [c[2:] for c in sweep.command_lines("compare/curves", list(assignments), list(extra))
            if c[1] == "embexp.train"]


def methods_of(model: str) -> list[str]:
    seen = [a.split("=", 1)[1] for c in compare_commands(*BOTH) if f"model={model}" in c for a in c
            if a.startswith("method=")]
    return list(dict.fromkeys(seen))


DECODER, ENCODER = methods_of("smollm2"), methods_of("minilm")


def test_the_sweep_covers_every_registered_method():
    covered = set(DECODER) | set(ENCODER) | set(ELSEWHERE)
    assert covered == {n for n in METHODS if not n.startswith("_")}
    for c in compare_commands(*BOTH):
        if "method=zero_shot" not in c:  # a budget, a grid lr and the held-out curve for every trained cell
            assert any(a.startswith("trainer.lr=") for a in c) and "trainer.curve_select=true" in c
            assert "task.select_split=train_holdout" in c and any(a.startswith("trainer.max_steps=") for a in c)
            assert {"task.train_split=train", "task.train_sample_seed=0", "task.eval_split=validation"} <= set(c)


def make_compare(*args: str) -> list[list[str]]:
    r = make_dry("compare", *args, env={**os.environ, "EMBEXP_DATA": "/data"})
    assert r.returncode == 0, r.stderr
    return [shlex.split(line) for line in r.stdout.splitlines()]


@pytest.mark.serial
def test_make_compare_dry_run_trains_on_train_splits_and_reports_on_whole_validation_splits():
    """Issue #37: the headline methods on four tasks with every seed, the others on SST-2 with one."""
    cmds = make_compare()
    train = [c for c in cmds if c[1:3] == ["-m", "embexp.train"]]
    assert cmds[-1][1:5] == ["-m", "embexp.report", "paper=compare", "table=curves"]
    assert not any("embexp.analyze" in c for c in cmds)  # no split of validation rows any more
    first = [c for c in train if "seed=0" in c]
    rest = [c for c in train if "seed=0" not in c]
    others = len(ENCODER) - len(HEADLINE)
    # the grid of 3 and 2 extension steps (taken only when the held-out best is an end of the grid)
    grown = [c for c in first if any(a.startswith("trainer.lr=<lr one grid step past") for a in c)]
    assert len(first) == 5 * (len(TASKS) * len(HEADLINE) + others) and len(grown) == 2 * len(first) // 5
    assert len(rest) == 2 * len(TASKS) * len(HEADLINE)
    assert all(any(a.startswith("trainer.lr=<lr chosen on held-out rows among ") for a in c) for c in rest)
    assert {a for c in train for a in c if a.startswith(("trainer.max_steps=", "trainer.batch_size="))} == \
        {"trainer.max_steps=250", "trainer.batch_size=16"}  # the same budget and batch for every method
    for c in train:
        assert {"task.train_split=train", "task.eval_split=validation", "task.data_dir=/data"} <= set(c)
        assert not any(a.startswith("task.max_eval_samples=") for a in c)  # the whole validation split
    assert {a for c in train for a in c if a.startswith("task.subset=")} == {f"task.subset={t}" for t in TASKS}
    assert {a for c in train if "task.subset=sst2" not in c for a in c if a.startswith("method=")} == \
        {f"method={m}" for m in HEADLINE}


@pytest.mark.serial
def test_make_compare_kinds_decoder_runs_the_grid_on_seed_one_and_rte_at_the_sst2_choice():
    cmds = make_compare("KINDS=decoder")
    train = [c for c in cmds if c[1:3] == ["-m", "embexp.train"]]
    assert {a for c in train for a in c if a.startswith("method=")} == \
        {f"method={m}" for m in ("zero_shot", "lora", "prompt_tuning", "tinyte_full", "tinyte_gated", "ktoken")}
    assert all("method.k=2" in c for c in train if "method=ktoken" in c)
    main = [c for c in train if "task.data_dir=/data" in c]
    assert len(main) == 1 + 5 * (3 + 2 + 1) and all("model=smollm2" in c and "task.subset=sst2" in c for c in train)
    assert {a for c in train if "method=zero_shot" not in c for a in c if a.startswith("trainer.max_steps=")} == \
        {"trainer.max_steps=300"}
    # issue #37's second sentiment set: SST-2 train rows split with seed 1; K-Token (both seeds) at the SST-2 lr
    split = ["split", "source=/data/glue/sst2/train.jsonl", "out=outputs/compare/sst2_second", "n_train=2190", "seed=1"]
    assert [c[3:] for c in cmds if "embexp.analyze" in c] == [split]
    second = [c for c in train if "task.data_dir=outputs/compare/sst2_second" in c]
    assert sorted(c[3] for c in second) == ["method=ktoken", "method=ktoken", "method=zero_shot"]
    assert all("task.max_eval_samples=872" in c for c in second)
    reports = [c[-1] for c in cmds if "embexp.report" in c]
    assert reports == ["metric=ll_accuracy", "metric=em_accuracy", "metric=ll_accuracy"]  # SST-2 twice, the second set
    rte = [c[2:] for c in sweep.command_lines("compare/curves", ["kinds=decoder", "dec_tasks=sst2 rte"])
           if "task.subset=rte" in c]
    assert len(rte) == 1 + 5 * 2 and all(any(a.startswith("trainer.lr=<lr chosen") for a in c) for c in rte[1:])


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
        assert sorted(r["method"] for r in rows if r["method"] != "majority") == sorted(want)
        assert [r["Method"] for r in rows if r["method"] == "majority"] == ["Majority class (answers it always)"]
        for r in rows:
            if r["method"] == "majority":
                continue
            empty = {k for k, v in r.items() if v == "" and not k.endswith((" se", " seeds"))}
            allowed = {"#TP", "% of backbone", "train state MB", "train tok/s", "held-out", "lr", "step", "lrs tried",
                       "lr edge"} if r["method"] == "zero_shot" else {"em_accuracy se", "accuracy se", "lr edge"}
            assert empty <= allowed, (r["method"], empty)
        assert path.with_suffix(".png").stat().st_size > 0


def test_the_other_seeds_run_at_the_lr_the_first_seed_chose_and_the_table_reports_it(tmp_path, monkeypatch, capsys):
    """The curve sweep through the runner, in this process: LoRA on both kinds, two seeds."""
    from conftest import execute_in_process
    from embexp.core.records import best_held_out

    monkeypatch.setattr(sweep.runner, "execute", execute_in_process)
    monkeypatch.chdir(tmp_path)
    assert sweep.main(["compare/curves", "--extra", f"debug=smoke output_root={tmp_path}", *BOTH, *SMOKE, "seeds=0 1",
                       "only=lora"]) == 0, capsys.readouterr().err
    for model in ("minilm", "smollm2"):
        runs = {p.parent.parent.name + "/" + p.parent.name: json.loads(p.read_text())
                for p in (tmp_path / "glue_sst2" / model).rglob("metrics.json")}
        first = sorted(((v["config"]["trainer"]["lr"] if "config" in v else float(k.split("lr")[1].split("/")[0]), k, v)
                        for k, v in runs.items() if k.endswith("seed0")), key=lambda t: t[0])
        # the grid of 3, grown past an end while its held-out best sits there (at most 2 steps)
        assert 3 <= len(first) <= 5 and len(runs) == len(first) + 1
        grid = [float(x) for x in sweep.runner.compare_grid("lora")]
        grid_best = max((t for t in first if t[0] in grid), key=lambda t: best_held_out(t[2]))[0]
        assert (len(first) > 3) == (grid_best in (min(grid), max(grid)))  # grown only from an end
        best = max(first, key=lambda t: best_held_out(t[2]))[1]  # ties: the smallest lr, as the runner
        (second,) = [k for k in runs if k.endswith("seed1")]
        assert second.split("/")[0] == best.split("/")[0]  # the same lr tag as the first seed's best held-out run
        name = f"curves_glue_sst2_{model}" + ("_ll_accuracy" if model == "smollm2" else "")
        table = (tmp_path / "tables" / "compare" / f"{name}.csv").read_text()
        assert [r["seeds"] for r in csv.DictReader(table.splitlines()) if r["method"] == "lora"] == ["2"]
        note = (tmp_path / "tables" / "compare" / f"{name}.md").read_text()
        assert re.search(rf"Wall: {len(runs)} runs, \d+\.\d\d h of training summed", note), note  # the table's cost


def test_a_chosen_lr_at_the_end_of_its_grid_is_marked():
    from embexp.report.compare_curves import lr_edge

    grid = [6e-06, 2e-05, 6e-05]
    assert [lr_edge(x, grid) for x in grid] == ["low", "", "high"]
    assert lr_edge(1e-3, [1e-3]) == ""  # one lr tried: nothing was chosen


def test_the_majority_class_is_drawn_and_tabled_in_the_metric_s_own_terms():
    """CoLA's curves plotted the majority class's accuracy (69.1) on an MCC axis: it is MCC 0 there."""
    from embexp.report.compare_curves import majority_level, majority_row

    assert majority_level("mcc", 69.1) == 0.0 and majority_row("mcc", 69.1)["metric"] == 0.0
    assert majority_level("accuracy", 69.1) == majority_level("ll_accuracy", 69.1) == 69.1
    assert majority_level("bleu", 69.1) is None and majority_row("bleu", 69.1) is None


def test_an_unknown_metric_is_one_clear_line(tmp_path):
    from embexp.core.records import quality_metric

    with pytest.raises(EmbexpError, match=r"metric 'bleu' is in none of these runs \(choose from: accuracy\)"):
        quality_metric([{"metrics": {"accuracy": 50.0, "eval_seconds": 1.0}}], "bleu")


@pytest.mark.slow
def test_rte_and_the_second_sentiment_set_run_at_the_lr_sst2_s_first_seed_chose(tmp_path, monkeypatch, capsys):
    """Issue #37's decoder chain through the runner (debug=smoke): K-Token's grid on SST-2 seed 0, then
    every other cell (SST-2 seed 1, RTE, the second set tagged second) at the lr that seed chose."""
    from conftest import execute_in_process
    from embexp.core.records import best_held_out

    monkeypatch.setattr(sweep.runner, "execute", execute_in_process)
    monkeypatch.chdir(tmp_path)
    assert sweep.main(["compare/curves", "--extra", f"debug=smoke output_root={tmp_path}", "kinds=decoder",
                       "dec_tasks=sst2 rte", "only=ktoken", "ktoken_check=1"]) == 0, capsys.readouterr().err
    runs = {str(p.parent.relative_to(tmp_path)): json.loads(p.read_text()) for p in tmp_path.rglob("metrics.json")}
    lr = lambda k: float(k.split("lr")[-1].split("/")[0])  # noqa: E731  (<task>/smollm2/ktoken_[second_]lr<lr>/seed<n>)
    grid = {k: v for k, v in runs.items() if k.startswith("glue_sst2") and k.endswith("seed0") and "ktoken_lr" in k}
    best = lr(max(sorted(grid, key=lr), key=lambda k: best_held_out(grid[k])))  # ties: the smallest lr, as the runner
    rest = sorted(k for k in runs if k not in grid)
    assert len(grid) == 3 and len(rest) == 5, sorted(runs)  # SST-2 seed 1, RTE seeds 0 1, second set seeds 0 1
    assert all(lr(k) == best for k in rest) and sum("ktoken_second_lr" in k for k in rest) == 2


def test_every_method_s_curve_is_drawn_in_its_own_style(monkeypatch, tmp_path):
    """Eleven methods on SST-2 outran the ten default colours: two lines looked alike."""
    from embexp.report import compare_curves
    figs = []
    monkeypatch.setattr(compare_curves, "save_png", lambda fig, path: figs.append(fig))
    curves = {f"m{j}": [(50, 50.0 + j, 51.0 + j), (250, 60.0 + j, 61.0 + j)] for j in range(12)}
    compare_curves.plot(curves, 50.0, tmp_path / "c.png", "t", "accuracy")
    for ax in figs[0].axes:
        styles = [(ln.get_color(), ln.get_marker(), ln.get_linestyle()) for ln in ax.get_lines()
                  if ln.get_label() in curves]
        assert len(styles) == 12 and len(set(styles)) == 12
