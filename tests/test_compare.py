"""The comparison of every method (python -m embexp.report table=compare; scripts/compare_sweep.py, make compare)."""

from __future__ import annotations

import csv
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import compose, run_train
from embexp import EmbexpError
from embexp.methods import METHODS

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import compare_sweep  # noqa: E402


def test_the_sweep_covers_every_registered_method():
    covered = set(compare_sweep.DECODER) | set(compare_sweep.ENCODER) | set(compare_sweep.ELSEWHERE)
    assert covered == {n for n in METHODS if not n.startswith("_")}
    assert set(compare_sweep.LR) == (set(compare_sweep.DECODER) | set(compare_sweep.ENCODER)) - {"zero_shot"}


def test_make_compare_dry_run_prints_one_command_per_method_and_model():
    r = subprocess.run(["make", "-s", "compare", "DRY_RUN=1", f"PY={sys.executable}"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cmds = [shlex.split(line) for line in r.stdout.splitlines()]
    train = [c for c in cmds if c[1:3] == ["-m", "embexp.train"]]
    assert len(train) == len(compare_sweep.DECODER) + len(compare_sweep.ENCODER)
    assert cmds[-1][1:4] == ["-m", "embexp.report", "table=compare"]
    steps = {c for cmd in train for c in cmd if c.startswith(("trainer.max_steps=", "trainer.batch_size="))}
    assert steps == {"trainer.max_steps=100", "trainer.batch_size=8"}  # the same footing for every method


def test_the_smoke_sweep_gives_one_row_per_method_and_no_unexplained_empty_cell(tmp_path):
    root = tmp_path / "runs"
    for cmd in compare_sweep.commands(sys.executable, [0], 2, ["debug=smoke"], str(root)):
        cfg = compose(*cmd[3:])
        run_train(cfg, root / cmd[3].split("=")[1] / cmd[4].split("=")[1])
    from embexp.report import compare
    from omegaconf import OmegaConf

    out = tmp_path / "tables"
    done = compare.render(OmegaConf.merge(OmegaConf.structured(compare.Config), {"runs": str(root), "out": str(out)}))
    assert len(done) == 2  # the decoder table and the encoder table
    for path in out.glob("compare_*.csv"):
        rows = list(csv.DictReader(path.open()))
        model = "smollm2" if "smollm2" in path.name else "minilm"
        want = compare_sweep.DECODER if model == "smollm2" else compare_sweep.ENCODER
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
