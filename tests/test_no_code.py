"""No code from a run directory: a run whose config.yaml names a model folder with an ``auto_map``
(its own Python) and ``model.trust_remote_code: true`` is re-evaluated, judged and reported without that
code ever running; only ``trust_remote_code=true`` on the command line runs it, with a warning line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from conftest import run_cli, run_train, smoke

CONFIGURATION = '''import os
import pathlib

pathlib.Path(os.environ["EMBEXP_PLANTED_MARKER"]).write_text("the planted code ran")  # on import
from transformers import LlamaConfig


class PlantedConfig(LlamaConfig):
    model_type = "llama"
'''
MODELING = '''from transformers import LlamaForCausalLM

from .configuration_planted import PlantedConfig


class PlantedForCausalLM(LlamaForCausalLM):
    config_class = PlantedConfig
'''
AUTO_MAP = {"AutoConfig": "configuration_planted.PlantedConfig",
            "AutoModelForCausalLM": "modeling_planted.PlantedForCausalLM"}


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[Path, Path]:
    """(a complete run whose config loads the planted model folder with trust_remote_code: true, the folder)."""
    root = tmp_path_factory.mktemp("planted")
    trained = root / "trained"
    run_train(smoke("method=tinyte_full", "model=tiny_llama", "task=glue", "task.subset=sst2",
                    "trainer.max_steps=2", "export=true"), trained)
    model = root / "planted_model"  # the trained run's backbone as a plain folder, plus code
    shutil.copytree(trained / "export", model)
    (model / "configuration_planted.py").write_text(CONFIGURATION)
    (model / "modeling_planted.py").write_text(MODELING)
    for name in ("config.json", "tokenizer_config.json"):
        meta = json.loads((model / name).read_text())
        meta["auto_map"] = AUTO_MAP
        (model / name).write_text(json.dumps(meta))
    run = root / "run"
    shutil.copytree(trained, run, ignore=shutil.ignore_patterns("export"))
    cfg = OmegaConf.load(run / "config.yaml")
    cfg.model.source, cfg.model.id, cfg.model.trust_remote_code = "hub", str(model), True
    cfg.judge.model = str(model)  # the run's own judge: the planted folder too
    (run / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    return run, model


@pytest.fixture
def marker(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "marker"
    monkeypatch.setenv("EMBEXP_PLANTED_MARKER", str(path))
    import transformers.dynamic_module_utils as dm

    monkeypatch.setattr(dm, "HF_MODULES_CACHE", str(tmp_path / "modules"))  # a trusted load copies the code here
    return path


def clean(r) -> None:
    assert r.returncode == 0 and "Traceback" not in r.stderr and "embexp: error" not in r.stderr, r.stderr


def test_eval_of_the_planted_run_runs_no_code_and_says_so(planted, marker):
    run, _ = planted
    r = run_cli(f"run_dir={run}", module="embexp.eval")
    clean(r)
    said = [ln for ln in r.stderr.splitlines() if ln.startswith("embexp: warning:")]
    assert len(said) == 1 and "model.trust_remote_code=true: not honoured from a run directory" in said[0], r.stderr
    assert "reproduced: yes" in r.stdout and not marker.exists()


def test_judge_and_report_of_the_planted_run_run_no_code(planted, marker, tmp_path, capsys):
    run, _ = planted
    judged = tmp_path / "run"
    shutil.copytree(run, judged)
    r = run_cli(f"run_dir={judged}", "judge.kind=instruct", module="embexp.judge")  # the judge: the planted folder
    clean(r)
    assert "judge_model_instruct" in r.stdout and not marker.exists()
    from embexp.report import main

    main(["table=compare", f"runs={judged}", f"out={tmp_path / 'tables'}", "se=none"])
    assert "| TinyTE" in capsys.readouterr().out and not marker.exists()


def test_only_the_command_line_runs_the_code_with_a_warning(planted, marker):
    run, model = planted
    import transformers

    transformers.AutoConfig.from_pretrained(str(model))  # untrusted: the planted code stays unread
    assert not marker.exists()
    r = run_cli(f"run_dir={run}", "trust_remote_code=true", module="embexp.eval")
    clean(r)
    said = [ln for ln in r.stderr.splitlines() if ln.startswith("embexp: warning:")]
    assert len(said) == 1 and "trust_remote_code=true: the model's own Python code" in said[0], r.stderr
    assert marker.read_text() == "the planted code ran"  # the test can fail: the planted model does run code


def test_a_hub_attention_kernel_in_a_run_config_is_refused(planted, marker, tmp_path):
    run = shutil.copytree(planted[0], tmp_path / "run")
    cfg = OmegaConf.load(run / "config.yaml")
    cfg.model.attn_implementation = "kernels-community/flash-attn"
    (run / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    r = run_cli(f"run_dir={run}", module="embexp.eval")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip() == ("embexp: error: the run's config asks for model.attn_implementation=kernels-community/"
                                "flash-attn, a kernel from the hub (code): not run from a run directory's config; pass "
                                "trust_remote_code=true on the command line to allow it")
