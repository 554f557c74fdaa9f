"""A run directory you can trust: one config per record (the fingerprint, no silent overwrite,
resume only of the same config), and reports that never average runs of different configs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from conftest import record_run, run_cli, smoke
from embexp import EmbexpError
from embexp.core import fingerprint as fp
from embexp.core.records import Runs, collect_runs, is_complete

BASE = ("debug=smoke", "method=tinyte_full", "model=tiny_llama", "task=glue", "task.subset=sst2",
        "trainer.max_steps=2", "trainer.save_every=0", "trainer.lr=0.05", "do_eval=false")


def errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("embexp: error:")]


def one_line(r, code: int = 1) -> str:
    """The one error line of a failed call (and no traceback)."""
    assert r.returncode == code and "Traceback" not in r.stderr and len(errors(r.stderr)) == 1, r.stderr
    return errors(r.stderr)[0]


@pytest.fixture(scope="module")
def complete(tmp_path_factory) -> Path:
    """A complete run (4 steps, with the checkpoint of step 2 that save_every kept): copied by each test."""
    d = tmp_path_factory.mktemp("complete") / "run"
    r = run_cli(*BASE, "trainer.max_steps=4", "trainer.save_every=2", f"hydra.run.dir={d}")
    assert r.returncode == 0 and is_complete(d), r.stderr
    return d


def copy(src: Path, tmp_path: Path) -> Path:
    d = tmp_path / "run"
    shutil.copytree(src, d)
    return d


def snapshot(d: Path) -> dict:
    return {p.name: p.read_bytes() for p in d.iterdir() if p.is_file() and p.name not in ("train.log", "run.lock")}


def test_the_fingerprint_is_recorded_and_ignores_presentation_fields(complete):
    rec = json.loads((complete / fp.FINGERPRINT).read_text())
    cfg = OmegaConf.load(complete / "config.yaml")
    assert rec["fingerprint"] == fp.fingerprint(cfg) == json.loads((complete / "metrics.json").read_text())[
        "fingerprint"]
    assert rec["fields"]["trainer.lr"] == 0.05 and "trainer.progress" not in rec["fields"]
    a = smoke(*BASE[1:])
    b = smoke(*BASE[1:], "trainer.progress=false", "trainer.log_every=1", "notes=hello", "output_root=/elsewhere")
    assert fp.fingerprint(a) == fp.fingerprint(b)
    assert fp.fingerprint(a) != fp.fingerprint(smoke(*BASE[1:], "trainer.lr=0.1"))
    assert fp.config_key(a) == fp.config_key(smoke(*BASE[1:], "seed=3")) != fp.config_key(
        smoke(*BASE[1:], "trainer.max_steps=3"))


@pytest.mark.parametrize("extra, needles", [
    (("seed=3",), ["holds a complete run of another config", "1 field: seed (0 -> 3)", "trainer.overwrite=true"]),
    (("trainer.lr=0.1", "trainer.resume=true"), ["trainer.lr (0.05 -> 0.1)", "trainer.resume=true accepts changes "
                                                 "only to: notes, output_root, trainer.progress"]),
    (("trainer.resume=true", "trainer.overwrite=true"), ["contradict each other"]),
])
def test_a_complete_run_is_never_silently_replaced(complete, tmp_path, extra, needles):
    d = copy(complete, tmp_path)
    before = snapshot(d)
    line = one_line(run_cli(*BASE, "trainer.max_steps=4", "trainer.save_every=2", *extra, f"hydra.run.dir={d}"))
    assert all(n in line for n in needles), line
    assert snapshot(d) == before and is_complete(d)  # nothing written: the complete run is as it was


def test_the_same_config_on_its_complete_run_returns_it_and_overwrite_trains_again(complete, tmp_path):
    """make's "nothing to be done": the same command twice exits 0 with the run's metrics, writing nothing."""
    d = copy(complete, tmp_path)
    before = snapshot(d)
    r = run_cli(*BASE, "trainer.max_steps=4", "trainer.save_every=2", f"hydra.run.dir={d}")
    assert r.returncode == 0 and "already complete; nothing to be done" in r.stderr and snapshot(d) == before, r.stderr
    assert not errors(r.stderr) and "metrics: " in r.stderr
    r = run_cli(*BASE, "trainer.max_steps=4", "trainer.save_every=2", "trainer.resume=true", "trainer.progress=false",
                f"hydra.run.dir={d}")
    assert r.returncode == 0 and "already complete; nothing to resume" in r.stderr and snapshot(d) == before, r.stderr
    r = run_cli(*BASE, "trainer.overwrite=true", f"hydra.run.dir={d}")  # another config (2 steps), replaced
    assert r.returncode == 0 and not errors(r.stderr), r.stderr
    assert "trainer.overwrite=true: replaced the complete run that was there" in r.stderr
    m = json.loads((d / "metrics.json").read_text())
    assert is_complete(d) and m["train"]["steps"] == 2 and not (d / "checkpoint").exists()
    assert json.loads((d / fp.FINGERPRINT).read_text())["fields"]["trainer.max_steps"] == 2


def interrupted(complete: Path, tmp_path: Path) -> Path:
    """As a run killed after its step-2 checkpoint leaves its directory."""
    d = copy(complete, tmp_path)
    (d / "metrics.json").unlink()
    assert json.loads((d / "checkpoint" / "meta.json").read_text())["step"] == 2
    (d / "status.json").write_text(json.dumps({"status": "interrupted", "reason": "preempted"}))
    return d


def test_resume_accepts_only_the_fields_safe_to_change(complete, tmp_path):
    d = interrupted(complete, tmp_path)
    config = (d / "config.yaml").read_text()
    line = one_line(run_cli(*BASE, "trainer.max_steps=8", "trainer.lr=0.1", "trainer.save_every=2",
                            "trainer.resume=true", f"hydra.run.dir={d}"))
    assert "holds a resumable run (it has a checkpoint) of another config, which differs in 2 fields: " in line
    assert "trainer.lr (0.05 -> 0.1); trainer.max_steps (4 -> 8)" in line and "accepts changes only to" in line
    assert (d / "config.yaml").read_text() == config and json.loads((d / "status.json").read_text())["status"] == \
        "interrupted"  # the record still describes the run that happened
    r = run_cli(*BASE, "trainer.max_steps=4", "trainer.save_every=2", "trainer.resume=true", "trainer.log_every=2",
                "trainer.progress=true", f"hydra.run.dir={d}")
    assert r.returncode == 0 and not errors(r.stderr), r.stderr
    assert "resumed with changed fields that are safe to change: trainer.progress, trainer.log_every" in r.stderr
    m = json.loads((d / "metrics.json").read_text())
    assert is_complete(d) and m["train"]["resumed_from_step"] == 2
    assert m["train"]["final_train_loss"] == json.loads((complete / "metrics.json").read_text())["train"][
        "final_train_loss"]


def test_a_failed_run_without_checkpoint_is_replaced_with_one_warning(complete, tmp_path):
    d = interrupted(complete, tmp_path)
    shutil.rmtree(d / "checkpoint")
    (d / "status.json").write_text(json.dumps({"status": "failed", "error": "boom"}))
    r = run_cli(*BASE, f"hydra.run.dir={d}")
    assert r.returncode == 0 and not errors(r.stderr), r.stderr
    said = [ln for ln in r.stderr.splitlines() if "replacing the failed run there" in ln]
    assert len(said) == 1 and "trainer.max_steps (4 -> 2); trainer.save_every" not in said[0], r.stderr
    assert "trainer.max_steps (4 -> 2)" in said[0] and is_complete(d)


def test_an_unreadable_record_in_the_run_directory_is_one_line(complete, tmp_path):
    d = copy(complete, tmp_path)
    (d / fp.FINGERPRINT).write_text("{")
    line = one_line(run_cli(*BASE, "trainer.max_steps=4", "trainer.save_every=2", f"hydra.run.dir={d}"))
    assert line.startswith(f"embexp: error: unreadable run record {d / fp.FINGERPRINT}: JSONDecodeError") and \
        line.endswith("trainer.overwrite=true replaces the run there")


# ---- reports never average runs of different configs --------------------------------------------------
def seed0(root: Path, lr: float, acc: float, sub: str, seed: int = 0) -> Path:
    d = record_run(root / sub, "glue", "sst2", "tiny_llama", "lora", "", seed,
                   {"metrics": {"accuracy": acc}, "n_eval_examples": 100, "n_trainable_params": 10,
                    "n_total_params": 1000})
    cfg = OmegaConf.load(d / "config.yaml")
    cfg.trainer = {"lr": lr}
    (d / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    return d


def test_compare_gives_each_config_its_row_and_cells_refuse_to_mix_configs(tmp_path, capsys):
    from embexp.report import main

    runs = tmp_path / "runs"
    for i, lr in enumerate((0.1, 0.01, 0.001)):
        seed0(runs, lr, 50.0 + 10 * i, f"r{i}")
    main(["table=compare", f"runs={runs}", f"out={tmp_path / 'tables'}", "se=none"])
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| LoRA")]
    assert len(rows) == 3, out  # never one row of "seeds 3" averaging three configs
    assert sorted(r.split("[")[1].split("]")[0] for r in rows) == ["trainer.lr=0.001", "trainer.lr=0.01",
                                                                   "trainer.lr=0.1"]
    assert all(r.rstrip(" |").endswith("1") for r in rows), rows
    idx = Runs(collect_runs(str(runs)))
    with pytest.raises(EmbexpError, match=r"runs of different configs would be averaged in one cell: .* differ in "
                                          r"trainer\.lr \(0\.1 -> 0\.01\)"):
        idx.get("glue", "tiny_llama", "lora")
    seed0(tmp_path / "one", 0.1, 50.0, "a")
    seed0(tmp_path / "one", 0.01, 60.0, "a", seed=1)
    runs1 = Runs(collect_runs(str(tmp_path / "one")))
    with pytest.raises(EmbexpError, match=r"differ in trainer\.lr \(0\.1 -> 0\.01\)"):
        runs1.find("glue", "sst2", "tiny_llama", "lora", "", (0, 1))  # seed 1 at another lr: another config
    seed0(tmp_path / "two", 0.1, 50.0, "a")
    record_run(tmp_path / "two" / "a", "glue", "sst2", "tiny_llama", "lora", "", 1, {"metrics": {"accuracy": 60.0}})
    # seed 1 recorded no trainer.lr (as a run from before a field existed): not a difference, averaged
    assert len(Runs(collect_runs(str(tmp_path / "two"))).find("glue", "sst2", "tiny_llama", "lora", "", (0, 1))) == 2


def test_a_field_added_since_a_run_was_recorded_is_not_a_difference(complete, tmp_path):
    d = copy(complete, tmp_path)
    (d / fp.FINGERPRINT).unlink()  # a run from before fingerprints, and before a field (model.init) existed
    cfg = OmegaConf.load(d / "config.yaml")
    del cfg.model["init"]
    (d / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    r = run_cli(*BASE, "trainer.max_steps=4", "trainer.save_every=2", "trainer.resume=true", f"hydra.run.dir={d}")
    assert r.returncode == 0 and "already complete; nothing to resume" in r.stderr, r.stderr
    line = one_line(run_cli(*BASE, "trainer.max_steps=4", "trainer.lr=0.1", "trainer.resume=true",
                            f"hydra.run.dir={d}"))
    assert "differs in 1 field: trainer.lr (0.05 -> 0.1)" in line


def test_the_sweep_skips_a_complete_cell_only_when_it_is_of_the_cells_config(complete, tmp_path):
    from embexp.sweep import train as sweep_train

    cell = [*BASE, "trainer.max_steps=4", "trainer.save_every=2", f"output_root={tmp_path}"]
    d = sweep_train.run_dir(cell)
    shutil.copytree(complete, d)
    assert sweep_train.done(cell) == str(d)
    assert sweep_train.done([*cell, "trainer.progress=true"]) == str(d)  # a presentation field: the same run
    assert sweep_train.done([*cell, "trainer.lr=0.1"]) == ""  # runs, and stops in one line naming trainer.lr
