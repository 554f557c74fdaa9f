"""trainer.strategy=fsdp (src/embexp/run/sharding.py): real `torchrun --nproc_per_node 2 -m embexp.train` jobs (gloo).

Each launch costs ~13 s on 2 cores (process start and imports: the launcher and two workers), so make test
launches once: FSDP on 2 processes against one process with the same global batch (trainer.grad_accum=2), which
also gives the memory ratio and the one-run-dir check. The DDP/FSDP equality launches and the per-method matrix
run in `make test-slow`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from conftest import run_cli
from embexp.eval import reevaluate
from test_methods import CASES, DECODERS

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
TORCHRUN = Path(sys.executable).with_name("torchrun")


def free_port() -> int:
    """A port no one listens on (a fixed 29500 collides with other launches on a shared machine)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(run_dir: Path, *args: str, wait: bool = True, check: bool = True):
    cmd = [str(TORCHRUN), "--nproc_per_node", "2", "--master_port", str(free_port()), "-m", "embexp.train",
           "debug=smoke", *args, f"hydra.run.dir={run_dir}"]
    if not wait:
        return subprocess.Popen(cmd, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=ENV, timeout=600)
    if not check:
        return r
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads((run_dir / "metrics.json").read_text())


def scores(m: dict) -> dict:
    return {k: v for k, v in m["metrics"].items() if not k.endswith("seconds")}


def assert_same_run(a: dict, b: dict, dir_a: Path, dir_b: Path, tol: float = 1e-5) -> None:
    assert a["train"]["final_train_loss"] == pytest.approx(b["train"]["final_train_loss"], abs=tol, rel=0)
    assert scores(a).keys() == scores(b).keys()
    for k, v in scores(a).items():
        assert v == pytest.approx(scores(b)[k], abs=tol, rel=0), k
    x, y = load_file(dir_a / "adapter.safetensors"), load_file(dir_b / "adapter.safetensors")
    assert x.keys() == y.keys()
    for k in x:
        torch.testing.assert_close(x[k], y[k], atol=tol, rtol=0, msg=k)


@pytest.mark.serial
def test_fsdp_trains_as_one_process_with_the_same_global_batch(tmp_path):
    """full_ft under FSDP on 2 processes (batch b each) against one process accumulating 2 micro-batches of b:
    the same micro-batches, so the same losses (the logged one is the global batch's), metrics and weights
    (to 1e-5), with clipping on. Each FSDP process holds at most 0.55x of the one process's parameter +
    gradient + optimizer bytes (a DDP process holds all of them), and the launch writes one run directory."""
    args = ("method=full_ft", "model=tiny_llama", "task=wmt16", "trainer.max_steps=6", "trainer.max_grad_norm=0.5",
            "trainer.lr=1e-3")
    fsdp = launch(tmp_path / "fsdp", *args, "trainer.strategy=fsdp")
    r = run_cli("debug=smoke", *args, "trainer.grad_accum=2", f"hydra.run.dir={tmp_path / 'one'}")
    assert r.returncode == 0, r.stderr[-3000:]
    one = json.loads((tmp_path / "one" / "metrics.json").read_text())
    assert (fsdp["train"]["strategy"], fsdp["train"]["world_size"], one["train"]["world_size"]) == ("fsdp", 2, 1)
    assert fsdp["train"]["examples"] == one["train"]["examples"]
    assert_same_run(fsdp, one, tmp_path / "fsdp", tmp_path / "one")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fsdp", "one"]  # one run dir per launch, not one per process
    new, old = reevaluate(tmp_path / "fsdp")  # the FSDP run's adapter, on one process
    assert {k: v for k, v in new.items() if not k.endswith("seconds")} == scores(fsdp)
    mem_1, mem_f = one["train"]["state_memory"], fsdp["train"]["state_memory"]
    assert mem_f["total_bytes"] <= 0.55 * mem_1["total_bytes"], (mem_f, mem_1)


@pytest.mark.serial
@pytest.mark.slow  # two launches (~26 s): make test-slow
@pytest.mark.parametrize("method,model,extra", [
    ("full_ft", "tiny_llama", ("trainer.lr=1e-3",)),
    ("tinyte_full", "tiny_llama", ("trainer.lr=0.05", "trainer.grad_accum=2", "trainer.batch_size=2")),  # no-sync
    ("full_ft", "tiny_gemma2", ("trainer.lr=1e-3",)),  # tied + scaled embeddings
])
def test_fsdp_equals_ddp_with_the_same_global_batch(tmp_path, method, model, extra):
    """Same losses, metrics and adapter as DDP (to 1e-5), with clipping on; full_ft also holds at
    most 0.55x of DDP's parameter + gradient + optimizer bytes per process."""
    args = (f"method={method}", f"model={model}", "task=wmt16", "trainer.max_steps=6",
            "trainer.max_grad_norm=0.5", *extra)
    ddp, fsdp = (launch(tmp_path / s, *args, f"trainer.strategy={s}") for s in ("ddp", "fsdp"))
    assert (ddp["train"]["strategy"], fsdp["train"]["strategy"]) == ("ddp", "fsdp")
    assert ddp["train"]["world_size"] == fsdp["train"]["world_size"] == 2
    assert ddp["train"]["examples"] == fsdp["train"]["examples"]
    assert_same_run(fsdp, ddp, tmp_path / "fsdp", tmp_path / "ddp")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ddp", "fsdp"]  # one run dir per launch, not one per process
    new, old = reevaluate(tmp_path / "fsdp")  # the FSDP run's adapter, on one process
    assert {k: v for k, v in new.items() if not k.endswith("seconds")} == scores(fsdp)
    if method == "full_ft":
        mem_d, mem_f = ddp["train"]["state_memory"], fsdp["train"]["state_memory"]
        assert mem_f["total_bytes"] <= 0.55 * mem_d["total_bytes"], (mem_f, mem_d)


@pytest.mark.serial
@pytest.mark.slow
def test_activation_checkpointing_recomputes_the_same_numbers_and_refuses_dropout(tmp_path):
    args = ("method=full_ft", "model=tiny_llama", "task=wmt16", "trainer.strategy=fsdp", "trainer.lr=1e-3")
    plain = launch(tmp_path / "plain", *args)
    ac = launch(tmp_path / "ac", *args, "trainer.activation_checkpointing=true")
    assert_same_run(ac, plain, tmp_path / "ac", tmp_path / "plain")
    r = launch(tmp_path / "drop", "method=full_ft", "model=tiny_roberta", "task=glue", "trainer.strategy=fsdp",
               "trainer.activation_checkpointing=true", check=False)
    lines = {ln for ln in r.stderr.splitlines() if ln.startswith("embexp: error:")}
    assert r.returncode != 0 and len(lines) == 1 and "recomputes layers with dropout" in lines.pop(), r.stderr[-3000:]


def _workers(run_dir: Path) -> list[int]:
    """The pids of the launch's training processes (torchrun's workers: LOCAL_RANK in their environment)."""
    out = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and f"hydra.run.dir={run_dir}" in (p / "cmdline").read_text() \
                    and b"LOCAL_RANK=" in (p / "environ").read_bytes():
                out.append(int(p.name))
        except OSError:
            continue
    return out


@pytest.mark.serial
@pytest.mark.slow  # ~50 s of three 2-process launches: make test-slow
def test_preempted_fsdp_run_resumes_to_the_same_result(tmp_path):
    """SIGTERM to the workers after the first checkpoint (as SLURM preempts every task): they finish the
    step, write the gathered checkpoint (with select_best's kept state) and stop; the resumed run ends
    as an uninterrupted one."""
    args = ("method=full_ft", "model=tiny_llama", "task=wmt16", "trainer.strategy=fsdp", "trainer.max_steps=40",
            "trainer.save_every=2", "trainer.lr=1e-3", "trainer.eval_every=2",
            "trainer.select_best=true", "do_eval=false")
    part = tmp_path / "part"
    proc = launch(part, *args, wait=False)
    deadline = time.time() + 300
    while not (part / "checkpoint" / "meta.json").is_file() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    for pid in _workers(part):
        os.kill(pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode != 0, err[-3000:]
    assert json.loads((part / "status.json").read_text())["status"] == "interrupted", err[-3000:]
    stopped = json.loads((part / "checkpoint" / "meta.json").read_text())["step"]
    assert 2 <= stopped < 40
    resumed = launch(part, *args, "trainer.resume=true")
    whole = launch(tmp_path / "whole", *args)
    assert resumed["train"]["resumed_from_step"] == stopped
    assert_same_run(resumed, whole, part, tmp_path / "whole", tol=0)


def matrix():
    """One 2-process FSDP job per case of the shared matrix (tests/test_methods.py CASES): decoders on
    tiny_llama, encoder methods on tiny_roberta. full_ft and tinyte_full on tiny_llama run in the
    equality test above (make test); every case here is `slow` (make test-slow)."""
    out = []
    for c in CASES:
        for model in ("tiny_llama", "tiny_roberta"):
            if (c.decoder_only and model != "tiny_llama") or (c.encoder_only and model == "tiny_llama"):
                continue
            out.append(pytest.param(c, model, id=f"{c}-{model}", marks=pytest.mark.slow))
    return out


@pytest.mark.serial
@pytest.mark.parametrize("case,model", matrix())
def test_every_method_trains_under_fsdp(tmp_path, case, model):
    from embexp.methods import METHODS

    task = "wmt16" if model in DECODERS else "glue"
    args = (f"method={case.method}", f"model={model}", f"task={task}", "trainer.strategy=fsdp", *case.overrides)
    blocker = METHODS.get_class(case.method).shard_blocker
    if blocker:  # refused in one line, before the data and the model load
        r = launch(tmp_path / "run", *args, check=False)
        lines = {ln for ln in r.stderr.splitlines() if ln.startswith("embexp: error:")}  # one per process
        assert r.returncode != 0 and lines == {f"embexp: error: method {case.method} cannot train under "
                                               f"trainer.strategy=fsdp: {blocker} "
                                               "(use trainer.strategy=ddp)"}, r.stderr[-3000:]
        return
    m = launch(tmp_path / "run", *args)
    assert m["train"]["strategy"] == "fsdp"
    if case.trains:
        assert m["train"]["world_size"] == 2 and m["train"]["steps"] == 4
        assert (tmp_path / "run" / "adapter.safetensors").is_file()
    assert scores(m)


@pytest.mark.parametrize("args,needle", [
    (("method=tinyte_full", "trainer.strategy=fsdp"),
     "trainer.strategy=fsdp shards over processes, but this run has 1"),
    (("method=tinyte_full", "trainer.activation_checkpointing=true"), "needs trainer.strategy=fsdp"),
    (("trainer.strategy=zero3",), "unknown trainer.strategy 'zero3' (choose from: ddp, fsdp)"),
])
def test_what_cannot_shard_is_one_line_before_training(tmp_path, args, needle):
    r = run_cli("debug=smoke", "model=tiny_llama", "task=wmt16", *args, f"hydra.run.dir={tmp_path / 'run'}")
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("embexp: error:")]
    assert r.returncode != 0 and len(lines) == 1 and needle in lines[0], r.stderr
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_a_method_that_cannot_shard_says_why_in_one_line(tmp_path, monkeypatch):
    """A method declares it on its class (Method.shard_blocker); the run stops before the data and the model load."""
    from embexp.methods import METHODS

    monkeypatch.setattr(METHODS.get_class("tinyte_full"), "shard_blocker", "its tensors live outside its module")
    r = run_cli("debug=smoke", "model=tiny_llama", "task=wmt16", "method=tinyte_full", "trainer.strategy=fsdp",
                f"hydra.run.dir={tmp_path / 'run'}")
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("embexp: error:")]
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert lines[0] == ("embexp: error: method tinyte_full cannot train under trainer.strategy=fsdp: its tensors live "
                        "outside its module (use trainer.strategy=ddp)")


def test_an_fsdp_accelerate_config_without_strategy_fsdp_is_one_line(tmp_path, monkeypatch):
    """An accelerate config of distributed_type FSDP exports ACCELERATE_USE_FSDP; embexp shards only by its own
    setting."""
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    r = run_cli("debug=smoke", "model=tiny_llama", "task=wmt16", "method=tinyte_full",
                f"hydra.run.dir={tmp_path / 'run'}")
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("embexp: error:")]
    assert r.returncode != 0 and len(lines) == 1 and "but trainer.strategy=ddp" in lines[0], r.stderr
