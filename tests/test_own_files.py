"""embexp's hands only on its own files: trainer.overwrite=true, sweep --force and a resume remove or rewrite
only the records embexp wrote for that run (run/ownership.py); a record embexp cannot read or trust stops the run
in one line instead of a guess; and the same command twice is safe (make's "nothing to be done": the run's
metrics, nothing trained), so `make demo` and `make smoke` work a second time."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from conftest import run_cli
from embexp.core import fingerprint as fp
from embexp.core.records import CHECKPOINT_STEP, is_complete

ROOT = Path(__file__).resolve().parents[1]
BASE = ("debug=smoke", "method=tinyte_full", "model=tiny_llama", "task=glue", "task.subset=sst2",
        "trainer.max_steps=4", "trainer.save_every=2", "trainer.lr=0.05", "do_eval=false")
USER = {"thesis.tex": b"\\section{mine}\n", "notes/plan.md": b"# not embexp's\n", "export.bak/w.bin": b"\x00\x01",
        "checkpoint.mine": b"keep"}


def errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("embexp: error:")]


def one_line(r, code: int = 1) -> str:
    assert r.returncode == code and "Traceback" not in r.stderr and len(errors(r.stderr)) == 1, r.stderr
    return errors(r.stderr)[0]


def plant(d: Path, files: dict = USER) -> None:
    for name, data in files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)


def intact(d: Path, files: dict = USER) -> bool:
    return all((d / name).is_file() and (d / name).read_bytes() == data for name, data in files.items())


def tree(d: Path) -> dict:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def complete(tmp_path_factory) -> Path:
    """A complete 4-step run with the checkpoint of step 2: copied by each test."""
    d = tmp_path_factory.mktemp("complete") / "run"
    r = run_cli(*BASE, f"hydra.run.dir={d}")
    assert r.returncode == 0 and is_complete(d), r.stderr
    return d


def copy(src: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(src, tmp_path / "run"))


# ---- overwrite, force, resume: the user's files survive ----------------------------------------------------
def test_overwrite_refuses_a_folder_that_holds_no_run_and_removes_nothing(tmp_path):
    d = tmp_path / "run"
    plant(d)
    before = tree(d)
    line = one_line(run_cli(*BASE, "trainer.overwrite=true", f"hydra.run.dir={d}"))
    assert f"{d} holds none (no config.yaml and status.json) but checkpoint.mine, export.bak/, notes/, thesis.tex" \
        in line and "nothing removed" in line
    assert tree(d) == before  # not a file added: no lock, no log, no status


@pytest.mark.parametrize("strays", [{"export/model.safetensors": b"theirs"}, {"config.yaml": b"lr: 3\n"},
                                    {"checkpoint/meta.json": b"{}", "status.json": b"{\"status\": \"complete\"}"}])
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_run_s_names_without_its_record_are_refused_with_or_without_overwrite(tmp_path, strays, overwrite):
    d = tmp_path / "run"
    plant(d, {**USER, **strays})
    before = tree(d)
    line = one_line(run_cli(*BASE, *(["trainer.overwrite=true"] if overwrite else []), f"hydra.run.dir={d}"))
    assert f"run directory {d} holds " in line and "but no run record" in line
    assert "nothing is written or removed" in line
    assert ("(trainer.overwrite=true neither)" in line) == overwrite
    assert tree(d) == before


def test_overwrite_and_a_fresh_run_keep_every_file_that_is_not_embexp_s(complete, tmp_path):
    d = copy(complete, tmp_path)
    plant(d)
    r = run_cli(*BASE, "trainer.max_steps=2", "trainer.overwrite=true", f"hydra.run.dir={d}")
    assert r.returncode == 0 and "replaced the complete run that was there" in r.stderr and is_complete(d), r.stderr
    assert intact(d) and json.loads((d / "metrics.json").read_text())["train"]["steps"] == 2
    fresh = tmp_path / "fresh"
    plant(fresh)  # a folder of the user's files and no run: a run starts beside them
    r = run_cli(*BASE, "trainer.max_steps=2", f"hydra.run.dir={fresh}")
    assert r.returncode == 0 and is_complete(fresh) and intact(fresh), r.stderr


def test_a_resume_keeps_every_file_that_is_not_embexp_s(complete, tmp_path):
    d = copy(complete, tmp_path)
    (d / "metrics.json").unlink()
    (d / "status.json").write_text(json.dumps({"status": "interrupted", "reason": "preempted", CHECKPOINT_STEP: 2}))
    plant(d)
    r = run_cli(*BASE, "trainer.resume=true", f"hydra.run.dir={d}")
    assert r.returncode == 0 and is_complete(d) and intact(d), r.stderr
    assert json.loads((d / "metrics.json").read_text())["train"]["resumed_from_step"] == 2


def test_sweep_force_replaces_only_embexp_s_records(tmp_path, monkeypatch, capsys):
    from conftest import execute_in_process
    from embexp import sweep
    from embexp.sweep import runner

    cmds = []
    monkeypatch.setattr(runner, "execute", lambda cmd: cmds.append(cmd) or 0)
    extra = f"debug=smoke do_eval=false output_root={tmp_path / 'o'}"
    assert sweep.main(["tinyte/table5", "--force", "--extra", extra]) == 0
    train = [c for c in cmds if c[2] == "embexp.train"]
    assert train and all("trainer.overwrite=true" in c for c in train)
    cell = train[0]
    assert execute_in_process(cell) == 0
    d = next(p.parent for p in (tmp_path / "o").rglob("status.json"))
    plant(d)
    assert execute_in_process(cell) == 0 and is_complete(d) and intact(d)  # forced again: the user's files stay
    theirs = tmp_path / "theirs"
    plant(theirs)
    assert execute_in_process([*cell, f"hydra.run.dir={theirs}"]) == 1  # a folder without a run: refused
    assert tree(theirs) == {k: v for k, v in sorted(USER.items())}
    capsys.readouterr()


# ---- a record embexp cannot read or trust: one line, nothing trained over it ----------------------------------
@pytest.mark.parametrize("status", ["{", "[]", json.dumps({"status": "done?"})])
@pytest.mark.parametrize("overwrite", [False, True])
def test_an_unreadable_status_stops_in_one_line_and_the_complete_run_stays(complete, tmp_path, status, overwrite):
    d = copy(complete, tmp_path)
    (d / "status.json").write_text(status)
    before = tree(d)
    line = one_line(run_cli(*BASE, *(["trainer.overwrite=true"] if overwrite else []), f"hydra.run.dir={d}"))
    assert f"unreadable run record {d / 'status.json'}" in line and "nothing is written or removed" in line
    assert tree(d) == {k: v for k, v in before.items()}


def test_a_fingerprint_that_lacks_a_field_or_was_edited_stops_in_one_line(complete, tmp_path):
    d = copy(complete, tmp_path)
    record = json.loads((d / fp.FINGERPRINT).read_text())
    del record["fields"]["trainer.lr"]
    (d / fp.FINGERPRINT).write_text(json.dumps(record))
    line = one_line(run_cli(*BASE, "trainer.lr=0.1", f"hydra.run.dir={d}"))  # would pass as "complete" otherwise
    assert f"unreadable run record {d / fp.FINGERPRINT}" in line and "lacks trainer.lr" in line
    record["fields"]["trainer.lr"] = 0.1  # every field there, but not the fields it hashed
    (d / fp.FINGERPRINT).write_text(json.dumps(record))
    line = one_line(run_cli(*BASE, "trainer.lr=0.1", f"hydra.run.dir={d}"))
    assert "do not hash to its fingerprint" in line and is_complete(d)


def test_a_resume_whose_checkpoints_are_gone_stops_in_one_line(complete, tmp_path):
    assert json.loads((complete / "status.json").read_text())[CHECKPOINT_STEP] == 2  # the run noted its checkpoint
    d = copy(complete, tmp_path)
    (d / "metrics.json").unlink()
    (d / "status.json").write_text(json.dumps({"status": "interrupted", "reason": "preempted", CHECKPOINT_STEP: 2}))
    shutil.rmtree(d / "checkpoint")
    before = tree(d)
    line = one_line(run_cli(*BASE, "trainer.resume=true", f"hydra.run.dir={d}"))
    assert "has no checkpoint to resume, though its run wrote one (step 2)" in line
    assert tree(d) == before
    r = run_cli(*BASE, "trainer.overwrite=true", f"hydra.run.dir={d}")  # the way out the line names
    assert r.returncode == 0 and is_complete(d), r.stderr


# ---- the same command twice --------------------------------------------------------------------------------
def script(name: str):
    spec = importlib.util.spec_from_file_location(f"embexp_{name}_script", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_smoke_twice_passes_both_times(tmp_path, capsys):
    smoke = script("smoke")
    for _ in range(2):
        assert smoke.main([f"output_root={tmp_path}", "do_eval=false"], methods=["tinyte_full"]) == 0
        out = capsys.readouterr().out
        assert out.count("ok    ") == 2 and "all smoke runs passed" in out, out


def test_make_demo_twice_trains_afresh_both_times(tmp_path, capsys):
    demo = script("demo")
    small = ["model=tiny_llama", "task.fixture_size=24", "task.max_eval_samples=8", "trainer.max_steps=2",
             "trainer.batch_size=4", "trainer.eval_batch_size=8"]
    for _ in range(2):
        assert demo.main(["--out", str(tmp_path), *small]) == 0
        out = capsys.readouterr().out
        assert all(f"\n{m} " in out for m in ("zero_shot", "tinyte_full", "prompt_tuning")), out
        assert "trainer.overwrite=true" in out and "majority class" in out
        plant(tmp_path / "tinyte_full", {"mine.txt": b"kept"})  # a file of the user's beside the demo's run
    assert intact(tmp_path / "tinyte_full", {"mine.txt": b"kept"})
