"""Guards that keep the tree honest as methods and configs are added."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from conftest import CONF, compose, run_cli
from embexp import EmbexpError
from embexp.core.config import validate
from embexp.methods import METHODS
from embexp.methods.registry import registered
from test_methods import CASES, ROWS


def test_the_method_matrix_covers_every_registered_method():
    assert set(registered()) == {c.method for c in CASES}  # a row per method, from its class
    assert {r.method for r in ROWS} <= set(registered()), "a row of tests/test_methods.py ROWS names no method"


def test_every_capability_is_declared_in_its_domain():
    from embexp.core.config import MODEL_KINDS

    for name, cls in registered().items():
        assert cls.model_kinds and set(cls.model_kinds) <= set(MODEL_KINDS), name
        assert cls.label, f"{name}: set its display name (Method.label)"
        if cls.comparison is not None:
            assert (set(cls.comparison.kinds) <= set(MODEL_KINDS)
                    and (cls.comparison.lr is None) == (not cls.trains)), name


def test_every_method_has_a_config_file():
    assert {n for n in METHODS if not n.startswith("_")} == {p.stem for p in (CONF / "method").glob("*.yaml")}


@pytest.mark.parametrize("experiment", sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")))
def test_every_experiment_file_composes_and_validates(experiment):
    cfg = compose(f"experiment={experiment}", "debug=smoke")  # compose() validates, as the CLI does
    assert cfg.method.name and cfg.task.name


def hydra_tree(overrides: list[str]):
    """Hydra's own compose of the whole list, as YAML (the reference core.cli.compose must equal)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return OmegaConf.to_yaml(hydra_compose("train", overrides=overrides))


@pytest.mark.parametrize("overrides", [
    ["method=ktoken", "model=tiny_llama", "task=wmt16", "debug=smoke", "method.k=4", "trainer.lr=1e-3", "seed=3",
     "trainer.curve_at=[2,4]", "trainer.cpu=true", "tag=a_b", "output_root=${oc.env:HOME}/x"],
    ["experiment=pema_glue", "trainer.max_steps=7", "debug=smoke", "task.subset=rte"],  # group choice after a value
    ["debug=smoke", "++trainer.lr=0.5", "seed=2"],
])
def test_compose_is_hydras_compose_of_the_whole_list_and_the_callers_own(overrides):
    """core.cli.compose is Hydra's compose (initialize_config_dir + compose), afresh on every call: a struct
    config that the caller may change without changing the next one."""
    from omegaconf import OmegaConf

    from embexp.core.cli import compose as cli_compose

    expected = hydra_tree(overrides)
    first = cli_compose("train", overrides)
    assert OmegaConf.to_yaml(first) == expected and OmegaConf.is_struct(first)
    first.seed = 99
    assert OmegaConf.to_yaml(cli_compose("train", overrides)) == expected


def test_an_edited_config_file_composes_as_edited(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    monkeypatch.setenv("EMBEXP_CONF", str(conf))
    from embexp.core.cli import compose_train

    assert compose_train(["debug=smoke"]).trainer.lr != 0.25
    trainer = conf / "trainer" / "default.yaml"
    trainer.write_text(trainer.read_text() + "lr: 0.25\n")
    assert compose_train(["debug=smoke"]).trainer.lr == 0.25


def test_an_override_that_hydra_refuses_is_one_line_naming_it():
    from embexp.core.cli import compose as cli_compose

    with pytest.raises(EmbexpError) as e:
        cli_compose("train", ["debug=smoke", "trainer.no_such_key=1"])
    assert str(e.value).startswith("unknown key 'trainer.no_such_key' (valid keys of trainer: ")
    assert " lr, " in str(e.value)
    with pytest.raises(EmbexpError) as e:
        cli_compose("train", ["debug=smoke", "no_such_key=1"])
    assert str(e.value).startswith("unknown key 'no_such_key' (valid keys: ") and "seed" in str(e.value)
    with pytest.raises(EmbexpError, match="^Error merging override trainer.max_steps=many: Value 'many' of type 'str' "
                                          "could not be converted to Integer$"):
        compose("debug=smoke", "trainer.max_steps=many")


@pytest.mark.parametrize("override", ["trainer.optimizer=sgd", "trainer.scheduler=step", "trainer.mixed_precision=tf32",
                                      "model.dtype=int8", "model.kind=seq2seq", "model.source=s3",
                                      "task.source=web", "task.eval_mode=judge"])
def test_choice_fields_are_checked_when_composed(override):
    with pytest.raises(EmbexpError,
                       match=rf"unknown {override.split('=')[0]} '{override.split('=')[1]}' \(choose from: "):
        validate(compose("debug=smoke", override))


def test_choice_field_error_from_the_cli_is_one_line(tmp_path):
    r = run_cli("debug=smoke", "trainer.optimizer=sgd", f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "embexp: error: unknown trainer.optimizer 'sgd' (choose from: adam, adamw)"]
    assert not (tmp_path / "run").exists()  # refused before anything was written


# (override, the start of the one error line): numeric domains declared with option(..., ge=/gt=/also=)
BAD_NUMBERS = [
    ("trainer.batch_size=0", "trainer.batch_size=0 is out of range (valid: >= 1)"),
    ("trainer.eval_batch_size=-2", "trainer.eval_batch_size=-2 is out of range (valid: >= 1)"),
    ("trainer.grad_accum=0", "trainer.grad_accum=0 is out of range (valid: >= 1)"),
    ("trainer.lr=-1", "trainer.lr=-1.0 is out of range (valid: > 0 and <= 10000.0)"),
    ("trainer.lr=0", "trainer.lr=0.0 is out of range (valid: > 0 and <= 10000.0)"),
    ("trainer.lr=nan", "trainer.lr=nan is not a finite number (valid: > 0 and <= 10000.0)"),
    ("trainer.lr=1e38", "trainer.lr=1e+38 is out of range (valid: > 0 and <= 10000.0)"),  # float32 overflow
    ("trainer.weight_decay=-0.1", "trainer.weight_decay=-0.1 is out of range (valid: >= 0)"),
    ("trainer.eps=0", "trainer.eps=0.0 is out of range (valid: > 0)"),
    ("trainer.warmup_steps=-5", "trainer.warmup_steps=-5 is out of range (valid: >= 0)"),
    ("trainer.max_steps=0", "trainer.max_steps=0 is out of range (valid: >= 1, or -1)"),
    ("trainer.max_steps=-7", "trainer.max_steps=-7 is out of range (valid: >= 1, or -1)"),
    ("trainer.epochs=0", "trainer.epochs=0.0 is out of range (valid: > 0)"),
    ("trainer.epochs=inf", "trainer.epochs=inf is not a finite number (valid: > 0)"),
    ("trainer.max_grad_norm=-1", "trainer.max_grad_norm=-1.0 is out of range (valid: >= 0)"),
    ("trainer.eval_every=-1", "trainer.eval_every=-1 is out of range (valid: >= 0)"),
    ("trainer.save_every=-1", "trainer.save_every=-1 is out of range (valid: >= 0)"),
    ("trainer.log_every=-1", "trainer.log_every=-1 is out of range (valid: >= 0)"),
    ("trainer.max_eval_loss_batches=0", "trainer.max_eval_loss_batches=0 is out of range (valid: >= 1, or -1)"),
    ("trainer.curriculum_max_rounds=0", "trainer.curriculum_max_rounds=0 is out of range (valid: >= 1)"),
    ("seed=-3", "seed=-3 is out of range (valid: >= 0 and <= 4294967295)"),
    ("seed=4294967296", "seed=4294967296 is out of range (valid: >= 0 and <= 4294967295)"),  # NumPy's seeds: 32 bits
    ("task.max_train_samples=0", "task.max_train_samples=0 is out of range (valid: >= 1, or -1)"),
    ("task.max_eval_samples=-5", "task.max_eval_samples=-5 is out of range (valid: >= 1, or -1)"),
    ("task.max_source_tokens=0", "task.max_source_tokens=0 is out of range (valid: >= 1)"),
    ("task.max_target_tokens=-1", "task.max_target_tokens=-1 is out of range (valid: >= 1)"),
    ("task.max_new_tokens=0", "task.max_new_tokens=0 is out of range (valid: >= 1)"),
    ("task.fixture_size=0", "task.fixture_size=0 is out of range (valid: >= 1)"),
    ("task.select_size=0", "task.select_size=0 is out of range (valid: >= 1, or -1)"),
]


@pytest.mark.parametrize("override,line", BAD_NUMBERS, ids=[o for o, _ in BAD_NUMBERS])
def test_numeric_fields_are_checked_when_composed(override, line):
    with pytest.raises(EmbexpError) as e:
        validate(compose("debug=smoke", override))
    assert str(e.value) == line


def test_the_special_values_and_boundaries_stay_valid():
    validate(compose("debug=smoke", "trainer.max_steps=-1", "task.max_eval_samples=-1", "trainer.log_every=0",
                     "trainer.max_grad_norm=0", "trainer.eval_every=0", "seed=0", "trainer.warmup_steps=0"))


def test_numeric_error_from_the_cli_is_one_line_and_writes_nothing(tmp_path):
    r = run_cli("debug=smoke", "trainer.batch_size=0", f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == ["embexp: error: trainer.batch_size=0 is out of range (valid: >= 1)"]
    assert not (tmp_path / "run").exists()


def test_a_non_finite_loss_stops_the_run_marks_it_failed_and_keeps_the_checkpoint(tmp_path, monkeypatch):
    from conftest import run_train
    from embexp.core.records import is_complete
    from embexp.methods.tinyte import TinyTE

    real, calls = TinyTE.forward, []

    def forward(self, **batch):  # a loss that turns NaN at the third training forward
        out = real(self, **batch)
        calls.append(self.training)
        if sum(calls) >= 3 and self.training:
            out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(TinyTE, "forward", forward)
    run_dir = tmp_path / "run"
    cfg = compose("debug=smoke", "method=tinyte_full", "model=tiny_llama", "task=glue", "task.subset=sst2",
                  "trainer.max_steps=6", "trainer.save_every=1")
    with pytest.raises(EmbexpError, match=r"non-finite training loss \(nan\) at step 3: run stopped and marked failed; "
                                          r"the last checkpoint \(.*checkpoint\) is kept"):
        run_train(cfg, run_dir)
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "failed" and "non-finite training loss" in status["error"]
    assert not is_complete(run_dir) and not (run_dir / "adapter.safetensors").exists()
    from safetensors.torch import load_file

    assert all(torch.isfinite(t).all() for t in load_file(run_dir / "checkpoint" / "state.safetensors").values()
               if t.is_floating_point())


def test_a_wrapped_method_of_the_wrong_model_kind_is_refused_before_any_weights_load(monkeypatch):
    """K-Token's inner method is checked against the model as the outer one is: head-only is an encoder
    method, so on a decoder the command stops in one line, at composition (no backbone is loaded)."""
    import embexp.run.build

    def no_model(*a, **kw):
        raise AssertionError("a backbone was loaded")

    monkeypatch.setattr(embexp.run.build, "load_backbone", no_model)
    r = run_cli("method=ktoken", "method.inner=head_only", "model=tiny_llama", "task=tree")
    assert r.returncode != 0
    assert r.stderr.strip() == ("embexp: error: method.inner=head_only: method head_only needs an encoder model; "
                                "model tiny_llama is a decoder")
    with pytest.raises(EmbexpError, match="method.inner=head_only: method head_only needs an encoder model"):
        compose("method=ktoken", "method.inner=head_only", "model=tiny_llama", "task=tree")
    compose("method=ktoken", "method.inner=tinyte_full", "model=tiny_llama", "task=tree")  # a decoder method passes
