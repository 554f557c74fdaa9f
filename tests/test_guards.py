"""Guards that keep the tree honest as methods and configs are added."""

from __future__ import annotations

import pytest

from conftest import CONF, compose
from embexp import EmbexpError
from embexp.config import validate
from embexp.methods import METHODS
from test_methods import CASES
from test_spine import cli


def test_the_method_matrix_covers_every_registered_method():
    registered = {name for name in METHODS if not name.startswith("_")}  # '_' = test-only toys
    assert registered == {c.method for c in CASES}, "add a row to tests/test_methods.py CASES"


def test_every_method_has_a_config_file():
    assert {n for n in METHODS if not n.startswith("_")} == {p.stem for p in (CONF / "method").glob("*.yaml")}


@pytest.mark.parametrize("experiment", sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")))
def test_every_experiment_file_composes_and_validates(experiment):
    cfg = compose(f"experiment={experiment}", "debug=smoke")
    validate(cfg)
    assert cfg.method.name and cfg.task.name


@pytest.mark.parametrize("override", ["trainer.optimizer=sgd", "trainer.scheduler=step", "trainer.mixed_precision=tf32",
                                      "model.dtype=int8", "model.kind=seq2seq", "model.source=s3",
                                      "task.source=web", "task.eval_mode=judge"])
def test_choice_fields_are_checked_when_composed(override):
    with pytest.raises(EmbexpError, match=rf"unknown {override.split('=')[0]} '{override.split('=')[1]}' \(choose from: "):
        validate(compose("debug=smoke", override))


def test_choice_field_error_from_the_cli_is_one_line(tmp_path):
    r = cli("debug=smoke", "trainer.optimizer=sgd", f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == ["embexp: error: unknown trainer.optimizer 'sgd' (choose from: adam, adamw)"]
    assert not (tmp_path / "run").exists()  # refused before anything was written
