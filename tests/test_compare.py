"""The comparison of every method (python -m embexp.report table=compare; conf/sweep/compare/sst2.yaml, make compare)."""

from __future__ import annotations

import csv
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


def compare_commands(*assignments: str, extra: tuple = ()) -> list[list[str]]:
    """The train commands of the comparison's spec (module arguments, the runner's additions included)."""
    _, cmds = sweep.commands("compare/sst2", list(assignments), list(extra))
    return [sweep.with_extra(c, list(extra), "compare") for c in cmds if c["kind"] == "train"]


def methods_of(model: str) -> list[str]:
    return [a.split("=", 1)[1] for c in compare_commands() if f"model={model}" in c for a in c if a.startswith("method=")]


DECODER, ENCODER = methods_of("smollm2"), methods_of("minilm")


def test_the_sweep_covers_every_registered_method():
    covered = set(DECODER) | set(ENCODER) | set(ELSEWHERE)
    assert covered == {n for n in METHODS if not n.startswith("_")}
    lrs = {a.split("=", 1)[1]: c for c in compare_commands() for a in c if a.startswith("method=")}
    assert all(any(a.startswith("trainer.lr=") for a in c) for m, c in lrs.items() if m != "zero_shot")


def test_make_compare_dry_run_prints_one_command_per_method_and_model():
    r = subprocess.run(["make", "-s", "compare", "DRY_RUN=1", f"PY={sys.executable}"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cmds = [shlex.split(line) for line in r.stdout.splitlines()]
    train = [c for c in cmds if c[1:3] == ["-m", "embexp.train"]]
    assert len(train) == len(DECODER) + len(ENCODER)
    assert cmds[-1][1:4] == ["-m", "embexp.report", "table=compare"]
    steps = {c for cmd in train for c in cmd if c.startswith(("trainer.max_steps=", "trainer.batch_size="))}
    assert steps == {"trainer.max_steps=100", "trainer.batch_size=8"}  # the same footing for every method


def test_the_smoke_sweep_gives_one_row_per_method_and_no_unexplained_empty_cell(tmp_path):
    root = tmp_path / "runs"
    for args in compare_commands("steps=2", extra=("debug=smoke",)):
        cfg = compose(*args)
        run_train(cfg, root / args[0].split("=")[1] / args[1].split("=")[1])
    from embexp.report import compare
    from omegaconf import OmegaConf

    out = tmp_path / "tables"
    done = compare.render(OmegaConf.merge(OmegaConf.structured(compare.Config), {"runs": str(root), "out": str(out)}))
    assert len(done) == 2  # the decoder table and the encoder table
    for path in out.glob("compare_*.csv"):
        rows = list(csv.DictReader(path.open()))
        model = "smollm2" if "smollm2" in path.name else "minilm"
        want = DECODER if model == "smollm2" else ENCODER
        assert sorted(r["method"] for r in rows) == sorted(want)
        for r in rows:
            empty = {k for k, v in r.items() if v == "" and not k.endswith((" se", " seeds"))}
            allowed = {"#TP", "% of backbone", "train state MB", "train tok/s"} if r["method"] == "zero_shot" else set()
            assert empty <= allowed, (r["method"], empty)
        assert path.with_suffix(".png").stat().st_size > 0
        assert r["exports"] in ("yes", "no")


def test_an_unknown_metric_is_one_clear_line(tmp_path):
    from embexp.report.compare import quality_metric

    with pytest.raises(EmbexpError, match=r"metric 'bleu' is in none of these runs \(choose from: accuracy\)"):
        quality_metric([{"metrics": {"accuracy": 50.0, "eval_seconds": 1.0}}], "bleu")
