"""The spine end to end: run records, re-evaluation, resumption, errors, Hydra run dirs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import run_cli, run_train, smoke
from embexp import EmbexpError
from embexp.core.records import is_complete
from embexp.eval import reevaluate
from embexp.run.loop import Trainer

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def cli(*args, module="embexp.train", cwd=None):
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=cwd or REPO,
                          env=ENV, timeout=300)


def test_smoke_run_writes_a_complete_record(tmp_run):
    cfg = smoke("method=tinyte_full", "model=tiny_llama", "task=wmt16")
    m = run_train(cfg, tmp_run)
    for name in ("config.yaml", "status.json", "metrics.json", "adapter.safetensors", "method.json",
                 "predictions.jsonl", "train.log"):
        assert (tmp_run / name).is_file(), name
    assert is_complete(tmp_run)
    saved = json.loads((tmp_run / "metrics.json").read_text())
    assert {"bleu", "ter"} <= set(saved["metrics"])
    assert saved["n_trainable_params"] == 64 == cfg.model.tiny.get("hidden_size", 64)
    for key in ("method", "model", "task", "seed", "git_commit", "n_total_params"):
        assert key in saved
    assert saved["train"]["steps"] == 4 and saved["train"]["tokens"] > 0 and saved["train"]["tokens_per_second"] > 0
    assert m["metrics"] == saved["metrics"]
    preds = (tmp_run / "predictions.jsonl").read_text().splitlines()
    assert len(preds) == saved["n_eval_examples"]


def test_eval_reproduces_the_recorded_metrics(tmp_run):
    run_train(smoke("method=tinyte_full", "model=tiny_qwen2", "task=glue", "trainer.max_steps=6",
                    "trainer.lr=0.05"), tmp_run)
    new, old = reevaluate(tmp_run)
    assert {k: v for k, v in new.items() if not k.endswith("seconds")} == {k: v for k, v in old.items()
                                                                           if not k.endswith("seconds")}


# the decoder's export: test_methods' matrix
@pytest.mark.serial
@pytest.mark.parametrize("method,model,task", [
    pytest.param("tinyte_full", "tiny_llama", "wmt16", marks=pytest.mark.slow), ("tinyte_full", "tiny_bert", "glue")])
def test_eval_check_export_compares_the_plain_export_with_the_trained_run(method, model, task, tmp_run):
    """python -m embexp.eval run_dir=... check_export=true: export/ loaded by plain transformers in a
    fresh process gives the trained method's outputs (decoder: next-token logits; encoder: class
    logits); a changed export is reported with exit 3; a run without export/ is one line."""
    from safetensors.torch import load_file, save_file

    run_train(smoke(f"method={method}", f"model={model}", f"task={task}", "trainer.lr=0.05", "export=true"), tmp_run)
    r = run_cli(f"run_dir={tmp_run}", "check_export=true", module="embexp.eval")
    assert r.returncode == 0, r.stderr
    kind = "next-token logits at the last token" if model == "tiny_llama" else "class logits"
    assert (f"6 rows' {kind}, largest |export - trained| = " in r.stdout
            and r.stdout.strip().endswith(": same")), r.stdout
    if model != "tiny_llama":
        return
    weights = tmp_run / "export" / "model.safetensors"
    state = load_file(weights)
    key = next(k for k in state if "embed_tokens" in k)
    state[key] = state[key] + 0.5  # every input row moves: the export no longer is the trained run
    save_file(state, weights, metadata={"format": "pt"})
    r = run_cli(f"run_dir={tmp_run}", "check_export=true", "export_rows=2", module="embexp.eval")
    assert r.returncode == 3 and "2 rows'" in r.stdout and r.stdout.strip().endswith(": differs"), (r.stdout, r.stderr)
    (tmp_run / "export" / "config.json").unlink()
    r = run_cli(f"run_dir={tmp_run}", "check_export=true", module="embexp.eval")
    assert r.returncode != 0 and r.stderr.strip() == (f"embexp: error: run_dir '{tmp_run}' has no export/ "
                                                      "(train it with export=true)")


def test_killed_run_resumes_to_the_same_result(tmp_path, monkeypatch):
    args = ("method=tinyte_full", "model=tiny_llama", "task=wmt16", "trainer.max_steps=6", "trainer.save_every=2",
            "trainer.lr=0.05", "trainer.eval_every=2", "trainer.select_best=true")
    whole = run_train(smoke(*args), tmp_path / "whole")

    original = Trainer.save

    def killed_after_step_4(self, step):
        original(self, step)
        if step == 4:
            raise KeyboardInterrupt  # as if the job were killed right here

    monkeypatch.setattr(Trainer, "save", killed_after_step_4)
    from embexp import RunInterrupted

    with pytest.raises(RunInterrupted, match=r"SIGINT \(Ctrl-C\) received"):  # Ctrl-C: as a preemption notice
        run_train(smoke(*args), tmp_path / "part")
    assert not is_complete(tmp_path / "part")
    assert json.loads((tmp_path / "part" / "status.json").read_text())["status"] == "interrupted"
    monkeypatch.setattr(Trainer, "save", original)
    resumed = run_train(smoke(*args, "trainer.resume=true"), tmp_path / "part")
    assert resumed["train"]["resumed_from_step"] == 4
    assert _same(resumed, whole)
    assert resumed["train"]["final_train_loss"] == whole["train"]["final_train_loss"]
    from safetensors.torch import load_file

    a, b = load_file(tmp_path / "whole" / "adapter.safetensors"), load_file(tmp_path / "part" / "adapter.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.serial
def test_sigterm_checkpoints_marks_interrupted_and_resume_matches_an_uninterrupted_run(tmp_path):
    """A cluster's preemption notice, sent to a real `python -m embexp.train` after its first checkpoint."""
    import signal
    import time

    args = ["debug=smoke", "method=tinyte_full", "model=tiny_llama", "task=glue", "task.subset=sst2",
            "trainer.max_steps=40", "trainer.save_every=2", "trainer.lr=0.05", "do_eval=false"]
    part = tmp_path / "part"
    proc = subprocess.Popen([sys.executable, "-m", "embexp.train", *args, f"hydra.run.dir={part}"], cwd=REPO, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (part / "checkpoint" / "meta.json").is_file() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("embexp: error:")]
    assert (len(lines) == 1 and "SIGTERM received: stopped after step" in lines[0]
            and "trainer.resume=true" in lines[0]), err
    status = json.loads((part / "status.json").read_text())
    assert status["status"] == "interrupted" and not is_complete(part)
    stopped = json.loads((part / "checkpoint" / "meta.json").read_text())["step"]
    assert 2 <= stopped < 40
    # the signal needed a process; the resumed and the uninterrupted runs do not (the same entry, in this one)
    r = run_cli(*args, "trainer.resume=true", f"hydra.run.dir={part}")
    assert r.returncode == 0, r.stderr
    w = run_cli(*args, f"hydra.run.dir={tmp_path / 'whole'}")
    assert w.returncode == 0, w.stderr
    resumed, whole = (json.loads((d / "metrics.json").read_text()) for d in (part, tmp_path / "whole"))
    assert resumed["train"]["resumed_from_step"] == stopped
    assert resumed["train"]["final_train_loss"] == whole["train"]["final_train_loss"]
    from safetensors.torch import load_file

    a, b = load_file(part / "adapter.safetensors"), load_file(tmp_path / "whole" / "adapter.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def _same(a, b):
    drop = lambda m: {k: v for k, v in m["metrics"].items() if not k.endswith("seconds")}  # noqa: E731
    return drop(a) == drop(b)


@pytest.mark.parametrize("args,needle", [
    (("method=nope",), "unknown method 'nope' (choose from:"),
    (("model=gpt5",), "unknown model 'gpt5' (choose from:"),
    (("task=imagenet",), "unknown task 'imagenet' (choose from:"),
    (("trainer.lrr=1",), "unknown key 'trainer.lrr'"),
    (("debug=smoke", "task=glue", "task.subset=sst3"), "unknown task.subset 'sst3'"),
    (("debug=smoke", "task=glue", "task.max_train_samples=0"), "task.max_train_samples=0 is out of range"),
    (("debug=smoke", "method=tinyte_gated", "export=true"), "cannot be exported to a plain model"),  # before training
])
def test_bad_input_is_one_clear_line(args, needle, tmp_path):
    r = run_cli(*args, f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("embexp: error:")]
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert not is_complete(tmp_path / "run")
    assert not (tmp_path / "run" / "adapter.safetensors").exists()


def test_missing_field_in_local_data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / "train.jsonl").write_text(json.dumps({"sentence": "ok", "idx": 0}) + "\n")  # no label
    r = run_cli("debug=smoke", "task=glue", "task.source=local", f"task.data_dir={d}",
                       f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode == 1
    assert "train.jsonl:1: field 'label' is missing" in r.stderr.strip().splitlines()[-1]
    assert json.loads((tmp_path / "run" / "status.json").read_text())["status"] == "failed"
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_eval_cli_errors(tmp_path):
    r = run_cli(module="embexp.eval")
    assert r.returncode != 0 and r.stderr.strip() == ("embexp: error: missing run_dir "
                                                      "(usage: python -m embexp.eval run_dir=DIR)")
    r = run_cli(f"run_dir={tmp_path / 'missing'}", module="embexp.eval")
    assert r.returncode != 0 and "does not exist" in r.stderr and not (tmp_path / "missing").exists()


def test_cli_run_dir_and_multirun(tmp_path):
    """hydra.run.dir is the run dir; a multirun (Hydra's basic launcher) writes one run per job under output_root."""
    r = run_cli("debug=smoke", "method=zero_shot", "task=glue", f"hydra.run.dir={tmp_path / 'mine'}")
    assert r.returncode == 0, r.stderr
    assert is_complete(tmp_path / "mine")
    r = run_cli("-m", "debug=smoke", "method=zero_shot,tinyte_full", "task=glue", f"output_root={tmp_path / 'sweep'}")
    assert r.returncode == 0, r.stderr
    runs = sorted(p.parent.relative_to(tmp_path / "sweep") for p in (tmp_path / "sweep").rglob("metrics.json"))
    assert [str(p) for p in runs] == ["glue_sst2/tiny_llama/tinyte_full/seed0", "glue_sst2/tiny_llama/zero_shot/seed0"]


@pytest.mark.serial
@pytest.mark.slow  # 13 s; make test keeps the multirun and the sweep runner's skip of complete runs
def test_submitit_local_sweep_writes_one_complete_run_per_job_and_a_resumed_rerun_skips_them(tmp_path):
    """The SLURM launcher's local twin (hydra-submitit-launcher): each job in its own process."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    args = ("-m", "hydra/launcher=submitit_local", "debug=smoke", "method=zero_shot,tinyte_full", "task=glue",
            f"output_root={tmp_path / 'sweep'}", "hydra.launcher.timeout_min=10")
    r = cli(*args)
    assert r.returncode == 0, r.stderr[-2000:]
    runs = sorted(p.parent for p in (tmp_path / "sweep").rglob("status.json"))
    assert [str(p.relative_to(tmp_path / "sweep")) for p in runs] == ["glue_sst2/tiny_llama/tinyte_full/seed0",
                                                                      "glue_sst2/tiny_llama/zero_shot/seed0"]
    assert all(is_complete(p) for p in runs)
    stamps = [(p / "metrics.json").stat().st_mtime_ns for p in runs]
    r = cli(*args, "trainer.resume=true")
    assert r.returncode == 0, r.stderr[-2000:]
    assert [(p / "metrics.json").stat().st_mtime_ns for p in runs] == stamps  # complete runs are skipped


def free_port() -> int:
    """A port no one listens on (a fixed 29500 collides with other launches on a shared machine)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.serial
@pytest.mark.slow  # 9 s; make test launches FSDP through torchrun in tests/test_fsdp.py (one run dir)
def test_torchrun_cpu_data_parallel_writes_one_run_dir_and_accelerate_cpu_launch_is_one_line(tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    args = ["-m", "embexp.train", "debug=smoke", "method=tinyte_full", "model=tiny_llama", "task=wmt16"]
    r = subprocess.run([str(torchrun), "--nproc_per_node", "2", "--master_port", str(free_port()), *args,
                        f"hydra.run.dir={tmp_path / 'ddp' / 'run'}"],
                       capture_output=True, text=True, cwd=REPO, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert [p.name for p in (tmp_path / "ddp").iterdir()] == ["run"]
    m = json.loads((tmp_path / "ddp" / "run" / "metrics.json").read_text())
    assert m["train"]["world_size"] == 2 and m["train"]["examples"] == 2 * 4 * 4
    assert r.stderr.count("step 4/4") == 1  # only the main process logs
    accelerate = Path(sys.executable).with_name("accelerate")  # --cpu without an MPI hostfile: one process, refused
    r = subprocess.run([str(accelerate), "launch", "--cpu", "--num_processes", "2", "--main_process_port",
                        str(free_port()), *args, f"hydra.run.dir={tmp_path / 'one' / 'run'}"],
                       capture_output=True, text=True, cwd=REPO, env=ENV, timeout=300)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("embexp: error:")]
    assert r.returncode != 0 and len(lines) == 1 and "run torchrun --nproc_per_node N" in lines[0], r.stderr[-2000:]
    assert not (tmp_path / "one").exists()


def test_accelerate_cpu_launch_of_one_process_for_several_is_one_line_before_the_run(tmp_path, monkeypatch):
    """What `accelerate launch --cpu --num_processes 2` gives its single process (tests/test_accelerate_compat.py
    holds that it is so), in this process."""
    monkeypatch.setenv("ACCELERATE_USE_CPU", "True")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    for name in ("RANK", "WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    r = run_cli("debug=smoke", "method=tinyte_full", "model=tiny_llama", "task=wmt16",
                f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode == 2 and r.stderr.splitlines() == [
        "embexp: error: accelerate launch --cpu --num_processes N starts one process (Accelerate runs N CPU processes "
        "only through MPI, --mpirun_hostfile): run torchrun --nproc_per_node N -m embexp.train ... instead "
        "(docs/running.md)"], r.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("model", sorted(p.stem for p in (REPO / "conf" / "model").glob("*.yaml")))
def test_every_model_config_has_a_tiny_counterpart_for_debug_smoke(model):
    """`model=<any> debug=smoke` builds a tiny random model of the same family, offline."""
    from embexp.models import load_backbone

    cfg = smoke(f"model={model}")
    bb = load_backbone(cfg.model, num_labels=2)
    assert bb.is_decoder == (cfg.model.kind == "decoder")
    assert bb.model.config.model_type == cfg.model.family
    assert sum(p.numel() for p in bb.model.parameters()) < 2_000_000


def test_total_params_is_the_backbone_size_for_every_method():
    """n_total_params is counted before a method touches the model: LoRA's injected layers and
    PEMA's partial matrix do not change it."""
    from embexp.run.build import build, count_params

    sizes = {m: build(smoke(f"method={m}", "model=tiny_llama", "task=wmt16"), torch.device("cpu")).n_backbone_params
             for m in ("zero_shot", "lora", "pema")}
    lora = build(smoke("method=lora", "model=tiny_llama", "task=wmt16"), torch.device("cpu"))
    assert len(set(sizes.values())) == 1
    assert count_params(lora.backbone.model) == sizes["lora"] + lora.method.n_trainable(include_head=False)


def _scalars(event_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Read TensorBoard event files (TFRecord framing around Event protos) without TensorFlow."""
    import struct

    from tensorboardX.proto import event_pb2

    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(event_dir.rglob("events.out.tfevents.*")):
        data, pos = path.read_bytes(), 0
        while pos + 12 <= len(data):
            (n,) = struct.unpack("<Q", data[pos:pos + 8])
            ev = event_pb2.Event.FromString(data[pos + 12:pos + 12 + n])
            pos += 12 + n + 4
            for v in ev.summary.value:
                if v.HasField("simple_value"):
                    out.setdefault(v.tag, []).append((ev.step, v.simple_value))
    return out


def test_tensorboard_tracker_writes_the_loss_curve_and_the_metrics(tmp_run):
    m = run_train(smoke("method=tinyte_full", "model=tiny_llama", "task=glue", "task.subset=sst2",
                        "trainer.log_with=tensorboard", "trainer.log_every=1"), tmp_run)
    scalars = _scalars(tmp_run / "trackers")
    losses = scalars["train/loss"]
    assert [s for s, _ in losses] == [1, 2, 3, 4]
    assert [v for _, v in losses] == pytest.approx([h["loss"] for h in m["train"]["history"] if "loss" in h], rel=1e-6)
    assert {"train/lr", "train/tokens_per_second"} <= set(scalars)
    assert scalars["eval/em_accuracy"] == [(4, pytest.approx(m["metrics"]["em_accuracy"]))]


def test_an_unavailable_tracker_is_one_clear_line():
    """A tracker whose package Accelerate does not find here (wandb, mlflow or trackio: none is a dependency)."""
    from accelerate.tracking import get_available_trackers

    from embexp.run.preflight import TRACKER_PACKAGES
    from embexp.train import make_accelerator

    missing = sorted(set(TRACKER_PACKAGES) - {str(t) for t in get_available_trackers()})
    if not missing:
        pytest.skip(f"every tracker's package is installed: {sorted(TRACKER_PACKAGES)}")
    name, package = missing[0], TRACKER_PACKAGES[missing[0]]
    with pytest.raises(EmbexpError, match=rf"trainer.log_with={name} needs the {package} package \(pip install "
                                          rf"{package}\), or trainer.log_with=none"):
        make_accelerator(smoke(f"trainer.log_with={name}"))


def test_a_config_from_an_older_run_takes_the_schema_defaults_of_the_fields_it_lacks():
    """A run directory's config.yaml written before a field existed is read with the schema's default for it (the one
    place a default is written), so the pre-flight and build read every field without a fallback of their own."""
    from omegaconf import OmegaConf

    from embexp.core.upgrade import upgrade
    from embexp.run.preflight import preflight

    cfg = smoke("method=tinyte_full", "model=tiny_llama", "task=superglue")
    old = OmegaConf.create(OmegaConf.to_container(cfg))
    for key in ("select_on", "select_metric", "curve_select", "strategy", "log_with", "curriculum_metric"):
        del old.trainer[key]
    for node, key in ((old.model, "init"), (old.task, "loss_on"), (old.task, "cloze_loss"), (old, "judge")):
        del node[key]
    got = upgrade(old)
    assert (got.trainer.select_on, got.trainer.select_metric, got.trainer.curve_select, got.trainer.strategy,
            got.trainer.log_with, got.trainer.curriculum_metric) == ("heldout", "loss", False, "ddp", "none",
                                                                      "em_accuracy")
    assert (got.model.init, got.task.loss_on, got.task.cloze_loss, got.judge.model) == ("pretrained", "target",
                                                                                       "verbalizers", "")
    assert preflight(got, training=False).selection.on == "heldout"
