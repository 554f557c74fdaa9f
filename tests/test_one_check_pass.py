"""One check pass per command: each command composes its config once and validates it once
(``core.config.validate``), and what it reads besides (a finished run's config, the train configs an analysis
composes) is validated once too; the stages read that validated config. Counted by wrapping embexp's own
``validate`` (in every module that imported it by name)."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import embexp.core.config as config
from conftest import run_cli
from embexp.core.records import is_complete


@pytest.fixture
def passes(monkeypatch) -> list:
    """Every config ``validate`` is called on, in order (kept alive, so that no two are the same object by chance)."""
    seen: list = []
    original = config.validate

    def counted(cfg) -> None:
        seen.append(cfg)
        original(cfg)

    for module in [m for m in sys.modules.values() if getattr(m, "validate", None) is original]:
        monkeypatch.setattr(module, "validate", counted)
    return seen


def kinds(seen: list) -> list[str]:
    return [OmegaConf.get_type(c).__name__ if OmegaConf.is_config(c) else type(c).__name__ for c in seen]


def each_once(seen: list) -> bool:
    return len({id(c) for c in seen}) == len(seen)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("one_pass") / "run"
    r = run_cli("debug=smoke", "method=zero_shot", "task=glue", f"hydra.run.dir={d}")
    assert r.returncode == 0 and is_complete(d), r.stderr
    return d


def test_train_composes_and_validates_once(passes, tmp_path):
    r = run_cli("debug=smoke", "method=zero_shot", "task=glue", f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode == 0, r.stderr
    assert kinds(passes) == ["TrainConfig"]


def test_a_refused_train_config_is_validated_once_and_one_line(passes, tmp_path):
    r = run_cli("debug=smoke", "task=glue", "trainer.lr=-1", f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode == 2
    assert r.stderr.strip() == "embexp: error: trainer.lr=-1.0 is out of range (valid: > 0 and <= 10000.0)"
    assert kinds(passes) == ["TrainConfig"] and not (tmp_path / "run").exists()


def test_eval_validates_its_options_and_the_runs_config_once_each(passes, finished):
    r = run_cli(f"run_dir={finished}", module="embexp.eval")
    assert r.returncode == 0, r.stderr
    assert kinds(passes)[0] == "EvalConfig" and len(passes) == 2  # then the run's config.yaml (plain YAML)
    assert passes[1].method.name == "zero_shot" and passes[1].seed == 0


def test_report_validates_once(passes, finished, tmp_path):
    from embexp.report import main

    with contextlib.redirect_stdout(io.StringIO()):
        main(["table=compare", f"runs={finished.parent}", f"out={tmp_path / 'tables'}"])
    assert kinds(passes) == ["Config"] and passes[0].table == "compare"


def test_analyze_validates_its_options_once_and_each_train_config_it_composes_once(passes, tmp_path):
    from embexp.analyze import main

    with contextlib.redirect_stdout(io.StringIO()):
        main(["params", "models=[smollm2]", "methods=[tinyte_full,lora]", "variants={}", f"out={tmp_path / 'params'}"])
    assert kinds(passes)[0] == "Config" and kinds(passes).count("Config") == 1
    assert set(kinds(passes)[1:]) == {"TrainConfig"} and each_once(passes)


def test_judge_validates_once_before_it_reads_the_run(passes, finished):
    r = run_cli(f"run_dir={finished}", "judge.kind=nope", module="embexp.judge")
    assert r.returncode == 2 and "unknown judge.kind 'nope'" in r.stderr
    assert kinds(passes) == ["JudgeRunConfig"]


def test_a_multirun_validates_each_job_once(passes, tmp_path):
    """A multirun goes to Hydra's app: Hydra composes each job, train.main validates it once."""
    r = run_cli("-m", "debug=smoke", "method=zero_shot", "task=glue", "do_eval=false", "seed=0,1",
                f"output_root={tmp_path}")
    assert r.returncode == 0, r.stderr
    assert kinds(passes) == ["TrainConfig", "TrainConfig"] and [c.seed for c in passes] == [0, 1]
