"""Faults a run meets, each ending in one line with nothing lost (issue 35): one owner per run directory
(run/lock.py), a run killed with SIGKILL then resumed, a corrupt latest checkpoint, a write that fails
halfway, unreadable records in a report, a stale lock, a full disk during any record write (adapter,
method.json, predictions, export, metrics), a stop signal reaching a sweep. Every case checks the one
line, the exit status, the status, that no traceback reaches the user and that no complete-looking record
is wrong."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from conftest import run_cli, run_train, smoke
from embexp import EmbexpError, RunBusy
from embexp.core.records import is_complete
from embexp.run import lock

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
# checkpoints at steps 2, 4, 6 (none at the last step): a finished run keeps 6 (latest) and 4 (prev)
BASE = ("debug=smoke", "method=tinyte_full", "model=tiny_llama", "task=glue", "task.subset=sst2",
        "trainer.max_steps=8", "trainer.save_every=2", "trainer.lr=0.05", "do_eval=false")


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> tuple[Path, dict]:
    """The uninterrupted run every resumed one is compared with."""
    d = tmp_path_factory.mktemp("whole") / "run"
    return d, run_train(smoke(*BASE[1:]), d)


def errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("embexp: error:")]


def warnings_(stderr: str, needle: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if needle in ln]


def status(d: Path) -> dict:
    return json.loads((d / "status.json").read_text())


def step_of(d: Path) -> int:
    return json.loads((d / "meta.json").read_text())["step"]


def recorded(src: Path, d: Path, state: str = "interrupted") -> None:
    """``d`` holds the run record of ``src``'s config (config.yaml, fingerprint.json) with status ``state``, as
    a run of it stopped there leaves it: an embexp run that may be resumed or replaced (run/ownership.py)."""
    d.mkdir(parents=True, exist_ok=True)
    for name in ("config.yaml", "fingerprint.json"):
        shutil.copy(src / name, d / name)
    (d / "status.json").write_text(json.dumps({"status": state, "started": "then"}))


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "embexp.train", *args], cwd=REPO, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


# ---- one owner per run directory -----------------------------------------------------------------------
@pytest.mark.serial
def test_a_second_identical_run_while_the_first_holds_the_directory_stops_in_one_line(tmp_path):
    """Two runs of one config. The second starts while the first holds the directory: the first (a process)
    is frozen (SIGSTOP) once owner.json names it, so the overlap does not depend on how fast either imports
    (started together, a loaded machine let the first finish before the second reached the lock)."""
    args = (*BASE, "trainer.max_steps=24", "trainer.save_every=0", f"hydra.run.dir={tmp_path / 'run'}")
    first = start(*args)
    deadline = time.monotonic() + 240
    while not (tmp_path / "run" / "owner.json").exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.poll() is None, first.communicate()[1][-2000:]
    first.send_signal(signal.SIGSTOP)
    try:
        second = run_cli(*args)  # the entry, Hydra app and error path of the CLI, in this process (its own flock)
    finally:
        first.send_signal(signal.SIGCONT)
    out = first.communicate(timeout=300)
    assert (first.returncode, second.returncode) == (0, RunBusy.exit_code), (out[1][-2000:], second.stderr[-2000:])
    err = second.stderr
    assert "Traceback" not in err and len(errors(err)) == 1 and err.strip() == errors(err)[0], err
    line = errors(err)[0]
    assert f"run directory {tmp_path / 'run'} is in use by another run (host {socket.gethostname()}, " \
           f"pid {first.pid}, started " in line and "trainer.resume=true" in line, line
    d = tmp_path / "run"
    assert is_complete(d) and status(d)["status"] == "complete"
    m = json.loads((d / "metrics.json").read_text())
    assert m["train"]["steps"] == 24 and m["train"]["resumed_from_step"] == 0
    log = (d / "train.log").read_text()
    assert log.count("trainable parameters:") == 1  # only the winner built a run here
    assert not (d / "owner.json").exists() and lock.live_owner(d) is None  # released


def test_a_live_owner_is_seen_by_readers_refused_to_a_second_run_and_skipped_by_the_sweep(tmp_path, monkeypatch,
                                                                                          capsys):
    from embexp import sweep
    from embexp.sweep import train as sweep_train

    extra = f"debug=smoke output_root={tmp_path}"
    cells = [c[2:] for c in sweep.command_lines("tinyte/table5", [], extra.split()) if c[1] == "embexp.train"]
    d = sweep_train.run_dir(cells[0])
    calls = []  # the first cell that runs is taken by another process between the probe and its start: exit 75
    monkeypatch.setattr(sweep.runner, "execute", lambda cmd: calls.append(cmd) or (75 if len(calls) == 1 else 0))
    with lock.owning(d) as previous:
        assert previous is None
        owner = lock.live_owner(d)
        assert owner["pid"] == os.getpid() and owner["host"] == socket.gethostname()
        with pytest.raises(RunBusy, match=f"in use by another run \\(host {socket.gethostname()}, pid {os.getpid()}"):
            with lock.owning(d, wait=0.1):
                pass
        assert sweep.main(["tinyte/table5", "--extra", extra]) == 0
    out, err = capsys.readouterr()
    skipped = [ln for ln in out.splitlines() if ln.startswith("[1/7] # ")]
    assert skipped == [f"[1/7] # {d} running (host {socket.gethostname()}, pid {os.getpid()}, "
                       f"started {owner['started']}): skipped"], out
    assert len(calls) == 6 and all(c[3:] != cells[0] for c in calls)  # 5 other cells and the report
    # the cell skipped, and the next one, taken by another process between the probe and its start (exit 75)
    assert err.count("RUNNING ELSEWHERE") == 2 and "FAILED" not in err, err
    assert lock.live_owner(d) is None and not (d / "owner.json").exists() and lock.state(d) == ("", None)


@pytest.mark.serial
def test_sigkill_mid_run_reads_interrupted_and_resume_equals_an_uninterrupted_run(whole, tmp_path):
    from embexp.sweep import train as sweep_train

    args = (*BASE, f"output_root={tmp_path}")
    d = sweep_train.run_dir(list(args))
    proc = start(*args)
    deadline = time.time() + 120
    while not (d / "checkpoint" / "meta.json").is_file() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert status(d)["status"] == "running" and json.loads((d / "owner.json").read_text())["pid"] == proc.pid
    # to a reader and to the sweep runner: interrupted (its process is gone), not complete, not running
    assert lock.state(d) == ("interrupted", None)
    cell = [*args, "trainer.resume=true"]
    assert sweep_train.done(cell) == "" and sweep_train.running(cell) == ""
    r = run_cli(*args, "trainer.resume=true")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    said = warnings_(r.stderr, "stopped without updating its status")
    assert len(said) == 1 and f"pid {proc.pid}" in said[0] and "marked interrupted, now resumed" in said[0], r.stderr
    m = json.loads((d / "metrics.json").read_text())
    assert is_complete(d) and 2 <= m["train"]["resumed_from_step"] < 8
    assert m["train"]["final_train_loss"] == whole[1]["train"]["final_train_loss"]
    assert not (d / "owner.json").exists() and lock.state(d) == ("complete", None)


def test_a_stale_lock_is_taken_over_and_its_run_reported_interrupted(whole, tmp_path):
    d = tmp_path / "run"
    recorded(whole[0], d, "running")
    dead = subprocess.Popen(["true"])
    dead.wait()
    (d / "run.lock").write_text("")
    (d / "owner.json").write_text(json.dumps({"host": socket.gethostname(), "pid": dead.pid, "started": "then"}))
    assert lock.live_owner(d) is None and lock.state(d) == ("interrupted", None)
    r = run_cli(*BASE, "trainer.max_steps=2", "trainer.save_every=0", f"hydra.run.dir={d}")
    assert r.returncode == 0 and "Traceback" not in r.stderr and not errors(r.stderr), r.stderr
    said = warnings_(r.stderr, "stopped without updating its status")
    assert len(said) == 1 and f"pid {dead.pid}, started then" in said[0] and "marked interrupted" in said[0], r.stderr
    assert "started again (trainer.resume=true continues it)" in said[0]
    assert said[0].split("] ", 1)[1] in (d / "train.log").read_text()
    assert is_complete(d) and json.loads((d / "metrics.json").read_text())["train"]["steps"] == 2
    assert not (d / "owner.json").exists()


# ---- checkpoints: the previous one is kept -------------------------------------------------------------
def test_a_corrupt_latest_checkpoint_falls_back_to_the_previous_one_with_one_warning(whole, tmp_path):
    src, done = whole
    assert step_of(src / "checkpoint") == 6 and step_of(src / "checkpoint.prev") == 4
    d = tmp_path / "run"  # as a run killed after its step-6 checkpoint leaves it
    for name in ("checkpoint", "checkpoint.prev"):
        shutil.copytree(src / name, d / name)
    recorded(src, d)
    state = d / "checkpoint" / "state.safetensors"
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    r = run_cli(*BASE, "trainer.resume=true", f"hydra.run.dir={d}")
    assert r.returncode == 0 and "Traceback" not in r.stderr and not errors(r.stderr), r.stderr
    said = warnings_(r.stderr, "checkpoint unreadable")
    assert len(said) == 1 and f"{d / 'checkpoint'}: SafetensorError" in said[0], r.stderr
    assert f"resuming from the previous one, {d / 'checkpoint.prev'} (step 4)" in said[0]
    m = json.loads((d / "metrics.json").read_text())
    assert m["train"]["resumed_from_step"] == 4 and is_complete(d)
    assert m["train"]["final_train_loss"] == done["train"]["final_train_loss"]
    # the corrupt one was dropped, not kept as the previous: step 6 (rewritten) and the good step 4
    assert step_of(d / "checkpoint") == 6 and step_of(d / "checkpoint.prev") == 4
    with safe_open(d / "checkpoint" / "state.safetensors", framework="pt") as fh:
        assert fh.metadata()["step"] == "6"


def test_no_readable_checkpoint_is_one_line_and_the_run_failed(whole, tmp_path):
    src, _ = whole
    d = tmp_path / "run"
    shutil.copytree(src / "checkpoint", d / "checkpoint")
    shutil.copytree(src / "checkpoint.prev", d / "checkpoint.prev")
    recorded(src, d)
    (d / "checkpoint" / "meta.json").write_text('{"step": 1')
    (d / "checkpoint.prev" / "meta.json").write_text(
        (d / "checkpoint.prev" / "meta.json").read_text().replace('"step": 4', '"step": 2'))  # not its tensors' step
    r = run_cli(*BASE, "trainer.resume=true", f"hydra.run.dir={d}")
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(errors(r.stderr)) == 1, r.stderr
    line = errors(r.stderr)[0]
    assert line.startswith(f"embexp: error: no readable checkpoint ({d / 'checkpoint'}: JSONDecodeError: ")
    assert f"{d / 'checkpoint.prev'}: ValueError: state.safetensors is of step 4, meta.json of step 2" in line
    assert "trainer.resume=false" in line and status(d)["status"] == "failed" and not (d / "metrics.json").exists()


def test_a_checkpoint_write_that_fails_halfway_is_one_line_and_keeps_the_previous_one(tmp_path, monkeypatch):
    from embexp.run import checkpoint

    real, calls = checkpoint.save_file, []

    def disk_full_on_the_second(tensors, path, metadata=None):
        calls.append(path)
        if len(calls) == 1:
            return real(tensors, path, metadata=metadata)
        Path(path).write_bytes(b"\0" * 100)  # half a file, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(checkpoint, "save_file", disk_full_on_the_second)
    d = tmp_path / "run"
    r = run_cli(*BASE, f"hydra.run.dir={d}")
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(errors(r.stderr)) == 1, r.stderr
    line = errors(r.stderr)[0]
    assert line.startswith(f"embexp: error: cannot write checkpoint {d / 'checkpoint.tmp' / 'state.safetensors'}: "
                           f"No space left on device; run stopped and marked failed; the last checkpoint "
                           f"({d / 'checkpoint'}) is kept"), line
    assert status(d)["status"] == "failed" and "No space left on device" in status(d)["error"]
    assert not (d / "checkpoint.tmp").exists() and not (d / "metrics.json").exists() and not is_complete(d)
    assert step_of(d / "checkpoint") == 2 and not (d / "checkpoint.prev").exists()
    with safe_open(d / "checkpoint" / "state.safetensors", framework="pt") as fh:
        assert fh.metadata()["step"] == "2" and any(k.startswith("param/") for k in fh.keys())


def test_safetensors_own_io_errors_name_the_os_error():
    from safetensors import SafetensorError

    from embexp.core.records import os_error

    assert os_error(SafetensorError("Error while serializing: I/O error: File too large (os error 27)")) == \
        os.strerror(errno.EFBIG)
    assert os_error(OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))) == "Disk quota exceeded"


def test_a_record_write_that_fails_is_one_line_and_leaves_no_record_that_looks_complete(tmp_path, monkeypatch):
    real = Path.write_text

    def quota(self, *a, **kw):
        if self.name.startswith(".metrics.json.tmp"):
            real(self, "{", **kw)  # half written
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), str(self))
        return real(self, *a, **kw)

    monkeypatch.setattr(Path, "write_text", quota)
    d = tmp_path / "run"
    r = run_cli(*BASE, "trainer.max_steps=2", "trainer.save_every=0", f"hydra.run.dir={d}")
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(errors(r.stderr)) == 1, r.stderr
    assert errors(r.stderr)[0] == f"embexp: error: cannot write {d / 'metrics.json'}: Disk quota exceeded"
    assert status(d)["status"] == "failed" and not (d / "metrics.json").exists() and not is_complete(d)
    assert not list(d.glob(".metrics.json.tmp*"))


# ---- reports -------------------------------------------------------------------------------------------
def test_unreadable_records_are_named_and_skipped_or_stop_a_strict_report(tmp_path, capsys):
    from conftest import record_run
    from embexp.report import main

    runs = tmp_path / "runs"
    dirs = {seed: record_run(runs, "tree", "x3large", "qwen25_05b", "ktoken", "k2", seed,
                             {"select_on": "heldout", "metrics": {"em_accuracy": acc, "length_reduction": 50.0},
                              "train": {"effective_batch": [256, 128]}})
            for seed, acc in ((42, 90.0), (43, 96.0), (44, 93.0))}
    for seed, name in ((43, "metrics.json"), (44, "status.json")):
        path = dirs[seed] / name
        path.write_text(path.read_text()[:25])
    args = ["paper=ktoken", "table=table1", f"runs={runs}", f"out={tmp_path / 'tables'}"]
    main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    skipped = [ln for ln in err.splitlines() if ln.startswith("embexp: warning: skipped the run record ")]
    assert len(skipped) == 2 and len(err.strip().splitlines()) == 2, err
    assert f"{dirs[44] / 'status.json'}: JSONDecodeError: " in skipped[0]
    assert f"{dirs[43] / 'metrics.json'}: JSONDecodeError: " in skipped[1]
    k2 = next(ln for ln in out.splitlines() if ln.startswith("| k2 "))
    assert "90.00 ± -" in k2 and "| 1 |" in k2  # seed 42 alone: the damaged runs are left out, not guessed
    with pytest.raises(SystemExit) as e:
        main([*args, "strict=true"])
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"embexp: error: unreadable run record {dirs[44] / 'status.json'}: JSONDecodeError: ")
    assert "(strict=true; without it the run is skipped)" in err


def test_record_writes_are_one_line_errors_and_leave_the_old_file(tmp_path):
    from embexp.core.records import atomic_write

    d = tmp_path / "ro"
    d.mkdir()
    (d / "status.json").write_text("old")
    os.chmod(d, 0o500)
    try:
        if os.access(d, os.W_OK):  # root ignores permissions
            pytest.skip("running as root: the directory stays writable")
        with pytest.raises(EmbexpError, match=f"cannot write {d / 'status.json'}: Permission denied"):
            atomic_write(d / "status.json", "new")
        assert (d / "status.json").read_text() == "old"
    finally:
        os.chmod(d, 0o700)


# ---- every record is written whole or not at all -------------------------------------------
def disk_full(monkeypatch, target: str) -> None:
    """From the write of ``target`` on the disk is full: that write leaves half a file, and every later new file
    (the temporary file of any atomic write) fails too; a file rewritten in place still fits (its block)."""
    import transformers
    from safetensors import torch as st

    from embexp.run import adapter

    full = []

    def enospc(path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    def hit(path: Path) -> bool:
        path = Path(path)
        if full and path.name.startswith(".") and ".tmp" in path.name:
            enospc(path)
        if path.name.startswith(f".{target}.tmp") or path.parent.name.startswith(f".{target}.tmp"):
            full.append(path)
            path.write_bytes(b"\0" * 10) if path.parent.exists() else None
            enospc(path)
        return False

    real_text = Path.write_text
    monkeypatch.setattr(Path, "write_text", lambda self, *a, **kw: hit(self) or real_text(self, *a, **kw))
    monkeypatch.setattr(adapter, "save_file", lambda t, path, *a, **kw: hit(path) or st.save_file(t, path, *a, **kw))
    real_save = transformers.PreTrainedModel.save_pretrained
    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained",
                        lambda self, d, *a, **kw: hit(Path(d) / "model.safetensors") or real_save(self, d, *a, **kw))


@pytest.mark.parametrize("target", ["adapter.safetensors", "method.json", "predictions.jsonl", "export",
                                    "metrics.json"])
def test_a_full_disk_during_any_record_write_is_one_line_status_failed_and_no_partial_record(tmp_path, monkeypatch,
                                                                                          target):
    disk_full(monkeypatch, target)
    d = tmp_path / "run"
    r = run_cli(*BASE[:-1], "trainer.max_steps=2", "trainer.save_every=0", "export=true", f"hydra.run.dir={d}")
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(errors(r.stderr)) == 1, r.stderr
    assert errors(r.stderr)[0] == f"embexp: error: cannot write {d / target}: No space left on device"
    assert status(d)["status"] == "failed" and "No space left on device" in status(d)["error"]  # rewritten in place
    assert not (d / target).exists() and not is_complete(d) and not (d / "metrics.json").exists()
    assert not [p.name for p in d.iterdir() if ".tmp" in p.name]  # no temporary file left behind
    assert all(p.stat().st_size > 0 for p in d.rglob("*") if p.is_file() and p.name not in ("train.log", "run.lock"))


# ---- Ctrl-C, a non-finite checkpoint, a huge row ---------------------------------------------
def test_ctrl_c_during_training_checkpoints_its_step_and_marks_interrupted_in_one_line(tmp_path):
    import threading

    d = tmp_path / "run"
    args = (*BASE, "trainer.max_steps=400", f"hydra.run.dir={d}")

    def press_ctrl_c():  # once the first checkpoint is there, as a person at the terminal would
        deadline = time.time() + 120
        while not (d / "checkpoint" / "meta.json").is_file() and time.time() < deadline:
            time.sleep(0.005)
        os.kill(os.getpid(), signal.SIGINT)  # handled on the main thread, inside the training loop

    presser = threading.Thread(target=press_ctrl_c)
    presser.start()
    r = run_cli(*args)
    presser.join()
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(errors(r.stderr)) == 1, r.stderr
    assert "SIGINT received: stopped after step" in errors(r.stderr)[0] and "trainer.resume=true" in r.stderr
    assert status(d)["status"] == "interrupted" and not is_complete(d)
    stopped = step_of(d / "checkpoint")  # the step it stopped at, as a preemption notice checkpoints it
    assert 2 <= stopped < 400 and f"stopped after step {stopped}/400" in errors(r.stderr)[0]


def test_ctrl_c_outside_the_training_steps_is_one_line_and_interrupted(tmp_path, monkeypatch):
    from embexp.run import build

    def interrupted_build(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr("embexp.train.build", interrupted_build)
    d = tmp_path / "run"
    r = run_cli(*BASE, f"hydra.run.dir={d}")
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(errors(r.stderr)) == 1, r.stderr
    assert errors(r.stderr)[0].startswith("embexp: error: SIGINT (Ctrl-C) received: stopped; rerun the same command "
                                          "with trainer.resume=true")
    assert status(d)["status"] == "interrupted" and build.build is not interrupted_build


# a command that stops after its "step" on SIGTERM, as a train cell does (run/stops.py), or ignores it
CHILD = """
import pathlib, signal, sys, time
marker, obey = pathlib.Path(sys.argv[1]), sys.argv[2] == "obey"
got = []
signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
signal.signal(signal.SIGINT, lambda s, f: got.append(s))
marker.write_text("started")
while not (got and obey):
    time.sleep(0.01)
marker.write_text("checkpointed " + " ".join(signal.Signals(g).name for g in got))
sys.exit(1)
"""


def signal_once_waiting(marker: Path, *signums: int):
    """A thread that sends ``signums`` to this process once the command runs and the sweep passes signals on."""
    import threading

    from embexp.run.stops import passing_on

    def send():
        def ready() -> bool:
            handler = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
            return marker.is_file() and isinstance(handler, passing_on)

        for s in signums:  # never outside the sweep's handler: there a SIGINT would stop pytest itself
            deadline = time.time() + 30
            while time.time() < deadline and not ready():
                time.sleep(0.005)
            if not ready():
                return
            os.kill(os.getpid(), s)
            time.sleep(0.2)

    marker.unlink(missing_ok=True)
    t = threading.Thread(target=send)
    t.start()
    return t


@pytest.mark.serial
def test_a_stop_signal_reaching_a_sweep_stops_its_command_after_the_step_and_starts_no_other(tmp_path, monkeypatch,
                                                                                           capsys):
    from embexp import SweepStopped, sweep
    from embexp.sweep.runner import execute

    before = signal.getsignal(signal.SIGTERM)
    marker = tmp_path / "marker"
    t = signal_once_waiting(marker, signal.SIGTERM)  # a preemption notice, or `kill <sweep pid>`
    with pytest.raises(SweepStopped, match="SIGTERM received: the running command stopped \\(exit 1") as e:
        execute([sys.executable, "-c", CHILD, str(marker), "obey"])
    t.join()
    assert marker.read_text() == "checkpointed SIGTERM" and e.value.exit_code == 143  # passed on, waited for
    assert signal.getsignal(signal.SIGTERM) is before  # the handlers come back
    # Ctrl-C: the command gets SIGTERM (a second SIGINT would stop it without its checkpoint) ...
    t = signal_once_waiting(marker, signal.SIGINT)
    with pytest.raises(SweepStopped) as e:
        execute([sys.executable, "-c", CHILD, str(marker), "obey"])
    t.join()
    assert marker.read_text() == "checkpointed SIGTERM" and e.value.exit_code == 130
    # ... and a second Ctrl-C kills a command that does not stop
    t = signal_once_waiting(marker, signal.SIGINT, signal.SIGINT)
    with pytest.raises(SweepStopped, match=f"exit {-signal.SIGKILL}"):
        execute([sys.executable, "-c", CHILD, str(marker), "ignore"])
    t.join()
    assert marker.read_text() == "started"
    # the sweep starts no later command and ends in one line with the signal's exit status
    calls = []

    def stopped(cmd):
        calls.append(cmd)
        raise SweepStopped(signal.SIGTERM, cmd, 1)

    monkeypatch.setattr(sweep.runner, "execute", stopped)
    with pytest.raises(SystemExit) as e:
        sweep.runner.entry(["tinyte/table5", "--extra", f"debug=smoke output_root={tmp_path}"])
    err = capsys.readouterr().err
    assert e.value.code == 143 and len(calls) == 1 and len(errors(err)) == 1 and "Traceback" not in err
    assert "no later command started; rerun the same sweep command" in errors(err)[0]


@pytest.mark.parametrize("poisoned", [("checkpoint",), ("checkpoint", "checkpoint.prev")])
def test_a_non_finite_checkpoint_is_refused_when_it_loads(whole, tmp_path, poisoned):
    from safetensors.torch import load_file, save_file

    src, done = whole
    d = tmp_path / "run"
    for name in ("checkpoint", "checkpoint.prev"):
        shutil.copytree(src / name, d / name)
    recorded(src, d)
    for name in poisoned:  # the trained tensors turned NaN, as a diverged run would leave them
        path = d / name / "state.safetensors"
        with safe_open(path, framework="pt") as fh:
            meta = fh.metadata()
        state = load_file(path)
        key = next(k for k in state if k.startswith("param/"))
        state[key] = torch.full_like(state[key], float("nan"))
        save_file(state, path, metadata=meta)
    r = run_cli(*BASE, "trainer.resume=true", f"hydra.run.dir={d}")
    assert "Traceback" not in r.stderr, r.stderr
    if len(poisoned) == 1:  # the previous one is taken, with one warning line naming the latest's NaN
        said = warnings_(r.stderr, "checkpoint unreadable")
        assert r.returncode == 0 and len(said) == 1 and "holds non-finite values (NaN or inf)" in said[0], r.stderr
        m = json.loads((d / "metrics.json").read_text())
        assert m["train"]["resumed_from_step"] == 4 and m["train"]["final_train_loss"] == \
            done["train"]["final_train_loss"]
    else:
        assert r.returncode == 1 and len(errors(r.stderr)) == 1 and "no readable checkpoint" in errors(r.stderr)[0]
        assert "holds non-finite values" in errors(r.stderr)[0] and status(d)["status"] == "failed"
        assert not (d / "metrics.json").exists()


def test_a_huge_row_is_cut_before_it_is_tokenised():
    from embexp.featurize import CHARS_PER_TOKEN, Featurizer
    from embexp.models import byte_tokenizer

    seen = []

    class Counting:  # the tokenizer, noting the length of every text it is given
        def __init__(self, tok):
            self.tok = tok

        def __call__(self, *text, **kw):
            seen.append(max(len(t) for t in text))
            return self.tok(*text, **kw)

        def __getattr__(self, name):
            return getattr(self.tok, name)

    tok = byte_tokenizer(False)
    huge = "word " * 2_000_000 + "the question?"  # 10 MB
    f = Featurizer(Counting(tok), True, max_source_tokens=64, max_target_tokens=8)
    ids = f.prompt_ids(huge)
    assert max(seen) <= 64 * CHARS_PER_TOKEN and len(ids) == 64
    assert ids[-13:] == tok("the question?", add_special_tokens=False)["input_ids"]  # the end is kept, as before
    assert ids == Featurizer(tok, True, max_source_tokens=64).prompt_ids(huge[-64 * CHARS_PER_TOKEN:])
    seen.clear()
    enc = Featurizer(Counting(byte_tokenizer(True)), False, max_source_tokens=32)._cut(huge, huge)[0]
    assert max(seen) <= 32 * CHARS_PER_TOKEN and len(enc["input_ids"]) == 32


# ---- a stop signal at every phase of a run (run/stops.py) -----------------------------------------------
# 4 steps, a checkpoint at step 2 (none at the last), evaluated, the adapter saved
SHORT = (*BASE[:-1], "trainer.max_steps=4")


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> dict:
    """The uninterrupted run of SHORT (its history: the loss of every step, debug=smoke logs each)."""
    return run_train(smoke(*SHORT[1:]), tmp_path_factory.mktemp("straight") / "run")


def signalling(monkeypatch, plan: dict[str, int]) -> list[str]:
    """At each named point of a run the signal ``plan`` names for it, sent to this process (its handler runs on
    the main thread before the point's code, as a signal from outside would); the points it was sent at.
    Sent only where the run's handler takes it: anywhere else its default action would end pytest."""
    from embexp import train
    from embexp.core import records
    from embexp.run.loop import Trainer
    from embexp.run.stops import run_signals

    sent: list[str] = []

    def send(point: str) -> None:
        if point in plan:
            handler = getattr(signal.getsignal(plan[point]), "__self__", None)
            assert handler is not None and handler is run_signals.active, f"no run's handler at {point}"
            sent.append(point)
            os.kill(os.getpid(), plan[point])

    def before(owner, name: str, point: str, when=lambda *a: True) -> None:
        real = getattr(owner, name)

        def hooked(*a, **kw):
            if when(*a):
                send(point)
            return real(*a, **kw)

        monkeypatch.setattr(owner, name, hooked)

    before(train, "build", "build")
    before(Trainer, "_micro_batch", "last step", lambda self, m, *a: m == self.total * self.cfg.grad_accum - 1)
    before(Trainer, "_select", "after the steps")
    before(train, "save_adapter", "adapter")
    before(train, "final_scores", "evaluation")
    before(records.RunRecord, "write_jsonl", "predictions")
    before(records, "write_json", "metrics", lambda path, obj: Path(path).name == "metrics.json")
    before(records, "write_json", "status", lambda path, obj: obj.get("status") == "complete")
    return sent


def same_result(m: dict, ref: dict) -> None:
    """The run's scores and losses are the uninterrupted run's (the times aside)."""
    drop = lambda d: {k: v for k, v in d.items() if k != "eval_seconds"}  # noqa: E731
    assert drop(m["metrics"]) == drop(ref["metrics"]) and m["metrics"]
    assert m["train"]["final_train_loss"] == ref["train"]["final_train_loss"]
    assert [h["loss"] for h in m["train"]["history"]] == [h["loss"] for h in ref["train"]["history"]]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_before_training_stops_at_once_in_one_line(tmp_path, monkeypatch, sig):
    assert signalling(monkeypatch, {"build": sig}) is not None
    d = tmp_path / "run"
    r = run_cli(*SHORT, f"hydra.run.dir={d}")
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(errors(r.stderr)) == 1, r.stderr
    assert errors(r.stderr)[0] == (f"embexp: error: {signal.Signals(sig).name} received: stopped; rerun the same "
                                   f"command with trainer.resume=true to continue (from the last checkpoint, if one "
                                   f"was written)")
    assert status(d)["status"] == "interrupted" and signal.getsignal(sig) is signal.SIG_DFL  # the handlers back


def test_sighup_in_the_last_step_checkpoints_it_and_signals_after_the_steps_are_held(straight, tmp_path, monkeypatch):
    """SIGHUP (its default action ended the run with no line, status running) in the last step: that step is
    checkpointed and the run interrupted; its resume trains no step, and every signal after the steps (after the
    last step, during the adapter, the evaluation, the predictions, metrics.json, the status) is held: one line,
    the run ends complete, its results the straight run's."""
    d = tmp_path / "run"
    signalling(monkeypatch, {"last step": signal.SIGHUP})
    r = run_cli(*SHORT, f"hydra.run.dir={d}")
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(errors(r.stderr)) == 1, r.stderr
    assert errors(r.stderr)[0].startswith("embexp: error: SIGHUP received: stopped after step 4/4 with a checkpoint")
    assert status(d)["status"] == "interrupted" and step_of(d / "checkpoint") == 4 and not is_complete(d)
    monkeypatch.undo()
    sent = signalling(monkeypatch, {"after the steps": signal.SIGINT, "adapter": signal.SIGTERM,
                                    "evaluation": signal.SIGHUP, "predictions": signal.SIGTERM,
                                    "metrics": signal.SIGHUP, "status": signal.SIGTERM})
    r = run_cli(*SHORT, "trainer.resume=true", f"hydra.run.dir={d}")
    assert r.returncode == 0 and "Traceback" not in r.stderr and not errors(r.stderr), r.stderr
    assert sent == ["after the steps", "adapter", "evaluation", "predictions", "metrics", "status"]
    said = warnings_(r.stderr, "received after the training steps")
    assert len(said) == 1 and "SIGINT received after the training steps: held while the run finishes" in said[0]
    assert "resumed from checkpoint at step 4" in r.stderr and " step 4/4 " not in r.stderr  # no step trained again
    m = json.loads((d / "metrics.json").read_text())
    assert is_complete(d) and m["train"]["resumed_from_step"] == 4
    same_result(m, straight)


def test_ctrl_c_twice_after_the_steps_is_interrupted_and_its_resume_logs_the_straight_runs_losses(straight, tmp_path,
                                                                                               monkeypatch):
    """Ctrl-C twice during the final evaluation stops at once: interrupted, one line; the resume continues from
    the step-2 checkpoint, and its first log line (trainer.log_every=3: steps 1-3, two of them before the
    checkpoint) is the mean over those three steps, as the straight run's would be (before: step 3's loss / 3)."""
    d = tmp_path / "run"
    sent = signalling(monkeypatch, {"evaluation": signal.SIGINT, "predictions": signal.SIGINT})
    r = run_cli(*SHORT, "trainer.log_every=3", f"hydra.run.dir={d}")
    assert sent == ["evaluation", "predictions"], sent
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(errors(r.stderr)) == 1, r.stderr
    assert errors(r.stderr)[0].startswith("embexp: error: SIGINT (Ctrl-C) received: stopped; rerun the same command "
                                          "with trainer.resume=true")
    assert status(d)["status"] == "interrupted" and not (d / "metrics.json").exists()
    assert not (d / "predictions.jsonl").exists() and not [p for p in d.iterdir() if ".tmp" in p.name]
    monkeypatch.undo()
    r = run_cli(*SHORT, "trainer.log_every=3", "trainer.resume=true", f"hydra.run.dir={d}")
    assert r.returncode == 0 and "Traceback" not in r.stderr and not errors(r.stderr), r.stderr
    m = json.loads((d / "metrics.json").read_text())
    assert is_complete(d) and m["train"]["resumed_from_step"] == 2
    drop = lambda d: {k: v for k, v in d.items() if k != "eval_seconds"}  # noqa: E731
    assert drop(m["metrics"]) == drop(straight["metrics"])
    assert m["train"]["final_train_loss"] == straight["train"]["final_train_loss"]
    losses = [h["loss"] for h in straight["train"]["history"]]  # steps 1..4
    assert [(h["step"], h["loss"]) for h in m["train"]["history"]] == [(3, (losses[0] + losses[1] + losses[2]) / 3)]


# ---- a checkpoint name that holds a file ---------------------------------------------------------------
def test_a_file_at_a_checkpoints_name_is_refused_in_one_line_kept_and_the_run_resumes_once_it_is_moved(whole,
                                                                                                     tmp_path):
    """Before: resume fell back to checkpoint.prev, then every save failed ("checkpoint.prev: Not a directory":
    the rotation renamed the file, and removing a folder never removes a file), and a rerun repeated it. The
    resume also logs the mean over the steps its first log line covers, from a checkpoint of an older embexp
    (no open log line kept): trainer.log_every=3 at step 6 covers steps 5 and 6 (before: their sum / 3)."""
    src, done = whole
    d = tmp_path / "run"
    shutil.copytree(src / "checkpoint.prev", d / "checkpoint.prev")  # step 4, of a run interrupted then
    recorded(src, d)
    meta = json.loads((d / "checkpoint.prev" / "meta.json").read_text())
    assert meta["result"].pop("log_window") == [0.0, 0]  # debug=smoke logs every step: no open line
    (d / "checkpoint.prev" / "meta.json").write_text(json.dumps(meta))
    (d / "checkpoint").write_text("a user's notes\n")
    args = (*BASE, "trainer.log_every=3", "trainer.resume=true", f"hydra.run.dir={d}")
    r = run_cli(*args)
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(errors(r.stderr)) == 1, r.stderr
    assert errors(r.stderr)[0].startswith(f"embexp: error: {d / 'checkpoint'} is a file, not a checkpoint folder")
    assert "trainable parameters" not in r.stderr  # before the model
    assert (d / "checkpoint").read_text() == "a user's notes\n" and step_of(d / "checkpoint.prev") == 4
    (d / "checkpoint").rename(tmp_path / "notes")
    (d / "checkpoint.old").symlink_to(tmp_path / "notes")  # a link at the rotation's own name: refused, kept too
    r = run_cli(*args)
    assert r.returncode == 1 and errors(r.stderr)[0].startswith(
        f"embexp: error: {d / 'checkpoint.old'} is a symbolic link, not a checkpoint folder"), r.stderr
    (d / "checkpoint.old").unlink()
    r = run_cli(*args)
    assert r.returncode == 0 and "Traceback" not in r.stderr and not errors(r.stderr), r.stderr
    m = json.loads((d / "metrics.json").read_text())
    assert m["train"]["resumed_from_step"] == 4 and m["train"]["final_train_loss"] == done["train"]["final_train_loss"]
    losses = {h["step"]: h["loss"] for h in done["train"]["history"] if "loss" in h}
    after = [(h["step"], h["loss"]) for h in m["train"]["history"] if h["step"] > 4]
    assert after == [(6, (losses[5] + losses[6]) / 2)]
    assert step_of(d / "checkpoint") == 6 and step_of(d / "checkpoint.prev") == 4 and (tmp_path / "notes").is_file()


# ---- a full disk under train.log -----------------------------------------------------------------------
def test_a_train_log_on_a_full_disk_is_one_warning_line_and_the_log_goes_on_to_stderr(tmp_path, capsys):
    import logging

    from embexp.core import cli

    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    (tmp_path / "train.log").symlink_to("/dev/full")  # every write: No space left on device
    cli.setup_logging(tmp_path, True)
    log = logging.getLogger("embexp")
    try:
        for i in range(4):
            log.info("line %d", i)
    finally:
        for h in log.handlers:
            h.close()
        log.handlers.clear()
    err = capsys.readouterr().err
    assert "Logging error" not in err and "Traceback" not in err, err
    assert [ln for ln in err.splitlines() if ln.startswith("embexp:")] == [
        f"embexp: warning: cannot write {tmp_path / 'train.log'}: No space left on device; the log goes to stderr only"]
    assert [ln.split("] ", 1)[1] for ln in err.splitlines() if "] line" in ln] == [f"line {i}" for i in range(4)]
