"""python -m embexp.doctor (make gpu-check): the reduced CPU form runs every CPU-able check on tiny models
and writes its report; a failed or crashed check exits 3 with the others still reported; bad input is one line."""

from __future__ import annotations

import json

import pytest
import torch

from embexp.doctor import checkup, memory, numerics, speed
from embexp.doctor.common import Section

# The reduced form, smaller still: one decoder, TinyTE-full (an fp32 vector on the embeddings: the bias check runs too)
FAST = ["device=cpu", "models=[tiny_llama]", "methods=[tinyte_full]", "memory_models=[tiny_llama]",
        "speed_methods=[tinyte_full]", "steps=2", "gen_tokens=2", "batch_size=2", "seq_len=16"]


def test_the_reduced_form_runs_every_cpu_check_and_writes_the_report(tmp_path, capsys):
    checkup.main([*FAST, f"out={tmp_path}"])  # exit status 0: returns
    out = capsys.readouterr().out
    if not torch.cuda.is_available():
        assert out.splitlines()[0].startswith("embexp gpu-check: no GPU found (torch ")
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["passed"] and rep["verdict"] == "every check passed" and rep["settings"]["reduced"]
    sec = rep["sections"]
    status = [sec[k]["status"] for k in ("environment", "numerics", "memory", "speed", "fsdp")]
    assert status == ["info", "pass", "pass", "info", "skipped"]
    assert sec["environment"]["versions"]["torch"] == torch.__version__ and sec["environment"]["attention"]["eager"]
    rows = {r["method"]: r for r in sec["numerics"]["rows"]}
    assert set(rows) == {"tinyte_full"}
    for r in rows.values():
        for what, tol in numerics.TOLERANCE.items():
            assert 0 <= r[what]["logits"] <= tol["logits"], (r["method"], what)
        assert r["bf16 autocast"]["logits"] > 0  # bf16 really ran: it rounds
        assert r["dtypes"]["own"] and set(r["dtypes"]["own"]) == {"float32"}, r["dtypes"]
    bias = sec["numerics"]["tinyte bias"]
    assert bias["ok"] and (bias["dtype"], bias["weights"]) == ("float32", "bfloat16")
    assert bias["a bf16 tensor would not move"] and 0.5 <= bias["median |step| / lr"] <= 1.5
    for r in sec["memory"]["rows"]:  # the state formula is exact; the activations formula near what autograd saved
        assert r["measured"]["state"] == r["predicted"]["state"], r["method"]
        assert 0.5 < r["measured"]["saved"] / r["predicted"]["saved"] < 2, r["method"]
        assert r["measured"]["peak"] is None  # not measured on a CPU
    (train,) = sec["speed"]["train"]
    assert train["plain tok/s"] > 0 and train["embexp tok/s"] > 0 and 0 < train["mfu"] < 1
    gen = sec["speed"]["generation"]
    assert gen["new tokens"] > 0 and gen["same outputs"] == f"{gen['prompts']}/{gen['prompts']}"
    md = (tmp_path / "report.md").read_text()
    for needle in ("## 2. Numerics: PASS", "Tolerances: bf16 autocast 0.08 / 0.06", "## 3. Memory: PASS",
                   "2 x N_matmul", "## 4. Speed: info", "## 5. FSDP: skipped"):
        assert needle in md, needle


def test_a_failed_or_crashed_check_exits_3_and_the_others_are_still_reported(tmp_path, monkeypatch, capsys):
    failed = Section("numerics", "fail", ["FAIL lora on tiny_llama: bf16 weights"], ["x"])
    monkeypatch.setattr(numerics, "check", lambda *a: failed)

    def boom(*a):
        raise RuntimeError("out of luck")

    monkeypatch.setattr(memory, "check", boom)
    monkeypatch.setattr(speed, "check", lambda *a: Section("speed", "info", ["fine"], ["fine"]))
    with pytest.raises(SystemExit) as e:
        checkup.main([*FAST, f"out={tmp_path}"])
    assert e.value.code == 3
    out = capsys.readouterr().out
    assert "2. Numerics [FAIL]" in out and "error: RuntimeError: out of luck" in out and "4. Speed [info]" in out
    rep = json.loads((tmp_path / "report.json").read_text())
    assert not rep["passed"] and rep["verdict"] == "FAILED: numerics, memory"
    assert "Traceback" in (tmp_path / "report.md").read_text()


@pytest.mark.parametrize("args,line", [
    (["device=tpu"], "unknown device 'tpu' (choose from: auto, cuda, cpu)"),
    (["reduced=maybe"], "unknown reduced 'maybe' (choose from: auto, true, false)"),
    (["models=[tiny_llama,nope]"], "unknown models entry 'nope' (choose from: "),
    (["speed_methods=[lorra]"], "unknown speed_methods entry 'lorra' (choose from: "),
    (["steps=-1"], "steps"),
    (["devcie=cpu"], "(valid keys: device, reduced, weights, models, methods, memory_models, speed_model"),
    (["spec={num_hiden_layers: 2}"], "spec.num_hiden_layers is not a field of any stored architecture (models/specs.py)"
                                     "; did you mean num_hidden_layers"),
])
def test_bad_input_is_one_line(args, line, capsys):
    with pytest.raises(SystemExit) as e:
        checkup.main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 1 and len(err) == 1 and err[0].startswith("embexp: error: ") and line in err[0], err


def test_a_shrinking_spec_gives_each_random_model_the_fields_its_architecture_has(monkeypatch):
    """scripts/rehearse_gpu_check.sh shrinks every random-weight model with one spec that names a decoder's
    num_key_value_heads: an encoder, whose architecture has no such field, takes the others."""
    from embexp.doctor import common

    monkeypatch.setattr(common, "SPEC", {"num_hidden_layers": 2, "num_key_value_heads": 2})
    assert common.model_overrides("roberta_base@random") == [
        "model=roberta_base", "model.init=random", "+model.spec.num_hidden_layers=2"]
    assert common.model_overrides("qwen25_05b@random")[2:] == [
        "+model.spec.num_hidden_layers=2", "+model.spec.num_key_value_heads=2"]
    assert common.model_overrides("tiny_llama") == ["model=tiny_llama"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_device_cuda_without_a_gpu_is_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        checkup.main(["device=cuda"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 1 and len(err) == 1 and "device=cuda, but torch sees no CUDA device" in err[0], err


def test_a_pretrained_encoder_gets_the_attention_implementation_it_asks_for():
    """The SDPA-vs-eager check found model.attn_implementation reaching causal LMs only: MiniLM asked for
    eager ran SDPA, so the comparison compared SDPA with itself."""
    from conftest import compose
    from embexp.models import load_backbone

    cfg = compose("method=full_ft", "model=minilm", "task=glue", "model.attn_implementation=eager")  # default: sdpa
    assert load_backbone(cfg.model, num_labels=2).model.config._attn_implementation == "eager"


def test_a_speed_run_out_of_gpu_memory_halves_its_batch_until_it_fits(monkeypatch):
    import types

    tried = []

    def fake(model, method, s, device, acc, batch=0):
        tried.append(batch)
        if batch > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return {"model": model, "method": method, "batch": [batch, 16]}

    monkeypatch.setattr(speed, "train_speed", fake)
    acc = types.SimpleNamespace(free_memory=lambda: None)
    s = types.SimpleNamespace(batch_size=8)
    row = speed.fitting_speed("m", "lora", s, torch.device("cpu"), acc)
    assert tried == [8, 4, 2] and row["batch"] == [2, 16] and row["out of memory at"] == [8, 4]
    monkeypatch.setattr(speed, "train_speed", lambda *a, **k: (_ for _ in ()).throw(torch.cuda.OutOfMemoryError()))
    assert speed.fitting_speed("m", "lora", s, torch.device("cpu"), acc) == {
        "model": "m", "method": "lora", "out of memory at": [8, 4, 2, 1]}
    assert "none fits (out of GPU memory at batch 8, 4, 2, 1)" in "\n".join(
        speed.render(types.SimpleNamespace(reduced=False, speed_model="m", seq_len=16, steps=2, repeats=1),
                     [{"model": "m", "method": "lora", "out of memory at": [8, 4, 2, 1]}], None, 1e12, "bf16").markdown)
