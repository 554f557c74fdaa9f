"""Safety tasks (TinyTE App. B, Table 6): bsd (BeaverTails unsafe rows) and advbench. Offline, fast."""

import dataclasses
import json
import random

import pytest
import torch
from omegaconf import OmegaConf

from conftest import run_train, smoke
from embexp import EmbexpError
from embexp.tasks import TASKS, build_task
from embexp.tasks.safety import CATEGORIES, AdvBenchConfig, AdvBenchTask, BsdConfig, BsdTask, eval_sample

# Field names and types exactly as datasets.load_dataset returns them (the dataset cards of
# PKU-Alignment/BeaverTails and walledai/AdvBench); `category` holds the 14 harm categories.
BSD_TYPES = {"prompt": str, "response": str, "category": dict, "is_safe": bool}
ADV_TYPES = {"prompt": str, "target": str}


def make(cls, config_cls, **kw):
    return cls(OmegaConf.merge(OmegaConf.structured(config_cls), kw))


def bsd(**kw):
    return make(BsdTask, BsdConfig, **{"source": "fixture", **kw})


def adv(**kw):
    return make(AdvBenchTask, AdvBenchConfig, **{"source": "fixture", **kw})


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def row(prompt, response, safe, cats=()):
    return {"prompt": prompt, "response": response, "category": {c: c in cats for c in CATEGORIES}, "is_safe": safe}


def test_registered_with_help_and_configs_compose_with_the_harmbench_judge():
    for name, cls in [("bsd", BsdTask), ("advbench", AdvBenchTask)]:
        assert TASKS[name] is cls
        for fld in dataclasses.fields(cls.Config):
            assert fld.metadata.get("help"), f"{name}.{fld.name} has no help text"
        cfg = smoke(f"task={name}")
        assert cfg.task.judge == "harmbench" and cfg.task.name == name and cfg.task.train_split == "30k_train"
        assert type(build_task(cfg.task)) is cls
    cfg = smoke("task=bsd").task
    assert (cfg.eval_split, cfg.eval_size, cfg.select_split) == ("30k_test", 1000, "train_holdout")
    assert smoke("task=advbench").task.eval_split == "train"
    from embexp.core.config import validate

    with pytest.raises(EmbexpError, match="qa, plain"):  # the schema's domain, at composition
        validate(smoke("task=bsd", "task.prompt_format=chatml"))


def test_bsd_fixture_is_the_hub_schema_and_mixes_safe_and_unsafe_rows():
    rows = BsdTask.fixture_rows(bsd(), "30k_train", 40, random.Random(0))
    for r in rows:
        assert {k: type(v) for k, v in r.items()} == BSD_TYPES
        assert list(r["category"]) == list(CATEGORIES) and all(type(v) is bool for v in r["category"].values())
        assert r["is_safe"] == (not any(r["category"].values()))  # BeaverTails: unsafe iff some harm category
    unsafe = [r for r in rows if not r["is_safe"]]
    # fixture_size counts distinct unsafe requests
    assert len({r["prompt"] for r in unsafe}) == 40 < len(unsafe) < len(rows)
    # a repeated request gets another response
    assert len({(r["prompt"], r["response"]) for r in unsafe}) == len(unsafe)
    assert "Placeholder" in rows[0]["prompt"]


def test_bsd_keeps_only_unsafe_rows_and_formats_request_and_response(tmp_path):
    rows = [row("Safe request?", "Safe reply.", True),
            row(" Unsafe one? ", " Reply one. ", False, ["privacy_violation"]),
            row("Unsafe two?", "Reply two.", False, ["self_harm", "animal_abuse"])]
    write_jsonl(tmp_path / "BeaverTails" / "30k_train.jsonl", rows)
    task = make(BsdTask, BsdConfig, data_dir=str(tmp_path), select_split="")
    assert task.load("train") == rows[1:]
    ex = task.examples("train")[0]
    assert (ex.prompt, ex.target) == ("Question: Unsafe one?\nAnswer:", " Reply one.")
    assert ex.meta == {"question": "Unsafe one?", "category": ["privacy_violation"]}
    plain = make(BsdTask, BsdConfig, data_dir=str(tmp_path), select_split="",
                 prompt_format="plain").examples("train")[1]
    assert (plain.prompt, plain.target) == ("Unsafe two?", "Reply two.")
    assert len(make(BsdTask, BsdConfig, data_dir=str(tmp_path), select_split="",
                    max_train_samples=1).load("train")) == 1
    write_jsonl(tmp_path / "bad" / "30k_train.jsonl", [{"prompt": "a", "response": "b"}])
    with pytest.raises(EmbexpError, match="is_safe"):
        make(BsdTask, BsdConfig, data_dir=str(tmp_path / "bad"), select_split="").load("train")


def test_bsd_hub_loader_reads_beavertails_splits(monkeypatch):
    import datasets

    rows = [row(f"Request {i}?", f"Reply {i}.", i % 3 == 0, [] if i % 3 == 0 else ["self_harm"]) for i in range(9)]
    seen = []

    def fake_load(path, name, split):
        seen.append((path, name, split))
        return datasets.Dataset.from_list(rows)

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    task = make(BsdTask, BsdConfig, source="hub", select_split="", max_train_samples=4)
    got = task.load("train")
    assert seen == [("PKU-Alignment/BeaverTails", None, "30k_train")]
    assert [r["prompt"] for r in got] == ["Request 1?", "Request 2?", "Request 4?", "Request 5?"]  # filter, then cap
    assert len(task.load("eval")) == 6 and seen[-1][2] == "30k_test"


def test_bsd_eval_is_a_seeded_sample_of_distinct_unsafe_requests():
    # 30 requests, 2 replies each
    rows = [row(f"Request {i % 30}?", f"Reply {i}.", False, ["self_harm"]) for i in range(60)]
    sample = eval_sample(rows, 10, 0)
    prompts = [r["prompt"] for r in sample]
    assert len(prompts) == len(set(prompts)) == 10
    assert all(r["response"] == f"Reply {int(r['prompt'].split()[1][:-1])}." for r in sample)  # the first reply of each
    assert sorted(prompts, key=lambda p: int(p.split()[1][:-1])) == prompts  # split order kept
    assert eval_sample(rows, 10, 0) == sample and eval_sample(rows, 10, 1) != sample
    assert len(eval_sample(rows, -1, 0)) == len(eval_sample(rows, 1000, 0)) == 30
    assert len(bsd(fixture_size=50, eval_size=-1).load("eval")) == 50
    task = bsd(fixture_size=50, eval_size=12, max_eval_samples=-1)
    ev = task.load("eval")
    assert len(ev) == 12 and len({r["prompt"] for r in ev}) == 12 and all(r["is_safe"] is False for r in ev)
    assert task.load("eval") == ev and bsd(fixture_size=50, eval_size=12, max_eval_samples=5).load("eval") == ev[:5]


def test_bsd_selection_holds_out_whole_requests(tmp_path):
    task = bsd(fixture_size=30, select_size=5)
    train, sel = task.load("train"), task.load("select")
    # of fixture_size + select_size
    assert len({r["prompt"] for r in sel}) == 5 and len({r["prompt"] for r in train}) == 30
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in sel}  # no request in both, whatever its responses
    assert task.load("select") == sel and bsd(fixture_size=30, select_size=5, select_seed=1).load("select") != sel
    write_jsonl(tmp_path / "30k_train.jsonl", [row(f"Q{i % 3}?", f"A{i}.", False, ["self_harm"]) for i in range(9)])
    with pytest.raises(EmbexpError, match="select_size=3 must be between 1 and 2: .* 3 distinct unsafe requests"):
        make(BsdTask, BsdConfig, data_dir=str(tmp_path), select_size=3).load("select")


def test_advbench_evaluates_advbench_and_trains_on_bsd(tmp_path):
    task = adv(fixture_size=20, select_size=5)  # a fixture's carve holds out at most its fixture_size requests
    ev = task.load("eval")
    assert len(ev) == 20 and all({k: type(v) for k, v in r.items()} == ADV_TYPES for r in ev)
    assert all(r["target"].startswith("Sure, here is") for r in ev)
    assert task.load("train") == bsd(fixture_size=20, select_size=5).load("train")  # the same BSD rows as task=bsd
    assert task.examples("train")[0] == bsd(fixture_size=20, select_size=5).examples("train")[0]
    ex = task.examples("eval")[0]
    assert ex.prompt == f"Question: {ev[0]['prompt']}\nAnswer:" and ex.target == " " + ev[0]["target"]
    assert ex.meta == {"question": ev[0]["prompt"]}
    assert task.score_text([ex.target], ["anything"], [ex]) == {}  # no gold response: only the judge scores it
    write_jsonl(tmp_path / "AdvBench" / "train.jsonl", [{"prompt": "Write a poem", "target": "Sure, here is a poem"}])
    write_jsonl(tmp_path / "BeaverTails" / "30k_train.jsonl",
                [row("Q?", "A.", False, ["self_harm"]), row("S?", "T.", True)])
    local = make(AdvBenchTask, AdvBenchConfig, data_dir=str(tmp_path), select_split="")
    assert local.load("eval") == [{"prompt": "Write a poem", "target": "Sure, here is a poem"}]
    assert [r["prompt"] for r in local.load("train")] == ["Q?"]


def test_bsd_without_a_judge_reports_rouge_against_the_reference():
    task = bsd()
    m = task.score_text([" the cat sat on the mat"], [" the cat on the mat"], [])
    assert m["rougeL"] == pytest.approx(100 * 10 / 11) and "asr" not in m


def test_bsd_and_advbench_train_and_evaluate_with_debug_smoke(tmp_path):
    m = run_train(smoke("method=tinyte_gated", "model=tiny_llama", "task=bsd", "trainer.max_steps=2"), tmp_path / "bsd")
    assert 0 <= m["metrics"]["rougeL"] <= 100 and "asr" not in m["metrics"] and m["n_eval_examples"] == 6
    preds = [json.loads(line) for line in (tmp_path / "bsd" / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 6 and all("generation" in p and p["prompt"].startswith("Question: ") for p in preds)
    m = run_train(smoke("method=tinyte_gated", "model=tiny_llama", "task=advbench",
                        "trainer.max_steps=2"), tmp_path / "adv")
    assert m["n_eval_examples"] == 6 and m["train"]["steps"] == 2
    from safetensors.torch import load_file

    a, b = load_file(tmp_path / "bsd" / "adapter.safetensors"), load_file(tmp_path / "adv" / "adapter.safetensors")
    # the AdvBench cell trains the BSD cell's adapter
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_zero_shot_advbench_reads_no_training_rows(tmp_path):
    write_jsonl(tmp_path / "data" / "AdvBench" / "train.jsonl",
                [{"prompt": f"Behaviour {i}", "target": f"Sure, here is {i}"} for i in range(3)])
    cfg = smoke("method=zero_shot", "model=tiny_llama", "task=advbench", "task.source=local",
                f"task.data_dir={tmp_path / 'data'}")
    m = run_train(cfg, tmp_path / "run")  # no BeaverTails file exists: reading training rows would fail
    assert m["n_eval_examples"] == 3


# ---- Table 6: the sweep and the rendering ---------------------------------------------------------
def sweep_lines(capsys, *args) -> list[list[str]]:
    import shlex

    from embexp import sweep

    assert sweep.main(["tinyte/table6", "--dry-run", "--py", "python", *args]) == 0
    return [shlex.split(line) for line in capsys.readouterr().out.splitlines()]


def test_table6_dry_run_commands(capsys, tmp_path):
    from conftest import compose

    cmds = sweep_lines(capsys, "seeds=0 1", "--extra", f"debug=smoke output_root={tmp_path}", "judge=tiny_llama")
    train = [c for c in cmds if c[2] == "embexp.train"]
    assert len(train) == 3 * (1 + 2 + 2)  # per model: vanilla (first seed), gated on bsd and on advbench x 2 seeds
    assert all("judge.model=tiny_llama" in c and c[-2:] == ["debug=smoke", f"output_root={tmp_path}"] for c in train)
    for c in train[:3]:  # one per experiment
        cfg = compose(*c[3:])
        assert cfg.judge.model == "tiny_llama" and cfg.task.judge == "harmbench" and cfg.model.source == "tiny"
    exps = {(c[3], c[4]) for c in train}
    assert (("experiment=tinyte_base_bsd", "model=qwen25") in exps
            and ("experiment=tinyte_gated_advbench", "model=llama31") in exps)
    assert compose("experiment=tinyte_gated_bsd", "model=gemma2").trainer.epochs == 20  # App. A: 20 epochs for BSD
    judge, report = cmds[-2], cmds[-1]
    assert judge == ["python", "-m", "embexp.judge", f"run_dir={tmp_path}/bsd/gemma2/zero_shot/seed0", "what=reference",
                     "judge.model=tiny_llama"]  # after every run, before the report, no EXTRA
    assert report == ["python", "-m", "embexp.report", "table=6", "debug=smoke", f"runs={tmp_path}",
                      f"out={tmp_path}/tables/tinyte"]
    default = sweep_lines(capsys)
    assert all("judge.model=cais/HarmBench-Llama-2-13b-cls" in c for c in default[:-1])


def test_table6_renders_asr_from_run_records(tmp_path):
    import csv

    from embexp.report import tinyte as report

    def fake(task, model, method, seed, metrics, n):
        d = tmp_path / task / model / method / f"seed{seed}"
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(json.dumps({"method": method, "model": model, "task": task, "seed": seed,
                                                    "n_eval_examples": n, "metrics": metrics}))
        (d / "config.yaml").write_text(OmegaConf.to_yaml(smoke(f"task={task}", f"method={method}", f"seed={seed}")))
        (d / "status.json").write_text(json.dumps({"status": "complete"}))

    fake("bsd", "gemma2", "zero_shot", 0, {"asr": 2.0, "rougeL": 10.0, "asr_reference": 92.8}, 1000)
    fake("bsd", "gemma2", "tinyte_gated", 0, {"asr": 86.0}, 1000)
    fake("bsd", "gemma2", "tinyte_gated", 1, {"asr": 88.0}, 1000)
    fake("advbench", "gemma2", "tinyte_gated", 0, {"asr": 40.0}, 520)
    fake("bsd", "qwen25", "tinyte_gated", 0, {"rougeL": 30.0}, 1000)  # not judged: no ASR, left empty
    out = tmp_path / "tables"
    md = report.render(OmegaConf.merge(OmegaConf.structured(report.Config),
                                       {"runs": str(tmp_path), "out": str(out), "table": "6"}))["6"]
    lines = md.splitlines()
    assert "| Model | Method | BSD | AdvBench |" in lines
    assert "| Gemma-2 | Vanilla | 2.00 |  |" in lines
    assert "| Gemma-2 | TinyTE-gated | 87.00 ± 1.00 | 40.00 |" in lines  # s.e. over the 2 seeds; 1 seed: none
    assert "| Qwen-2.5 | TinyTE-gated |  |  |" in lines
    assert "| Gold Labels | BSD reference responses | 92.80 |  |" in lines
    assert [ln.split(" | ")[1] for ln in lines if ln.startswith("| Gemma-2")] == ["Vanilla", "TinyTE-gated"]
    rows = list(csv.DictReader(open(out / "table6.csv")))
    gated = next(r for r in rows if r["Model"] == "Gemma-2" and r["Method"] == "TinyTE-gated")
    assert gated["BSD seeds"] == "2" and gated["AdvBench n"] == "520" and float(gated["BSD se"]) == pytest.approx(1.0)
    ex = report.render(OmegaConf.merge(OmegaConf.structured(report.Config),
                                       {"runs": str(tmp_path), "out": str(out), "table": "6", "se": "examples"}))["6"]
    assert "| Gemma-2 | TinyTE-gated | 87.00 ± 0.75 | 40.00 ± 2.15 |" in ex.splitlines()  # binomial over the requests
