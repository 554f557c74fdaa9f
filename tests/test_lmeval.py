"""python -m embexp.lmeval: an embexp run as lm-evaluation-harness's model (embexp/lmeval/), offline on tiny
models and a local copy of lm-eval's sst2 task reading the rows embexp evaluates.

- an exportable run (TinyTE-full, export=true): the backend's log-likelihoods equal lm-eval's own ``hf`` model
  on the export, row by row, within 1e-5, and so does the accuracy;
- every decoder method, also those that cannot be exported (K-Token, TinyTE-gated, prompt tuning): the
  backend's accuracy equals embexp's own evaluation on the same rows and prompt;
- generate_until stops at and cuts before its ``until`` strings;
- without lm-eval, one line naming the extra."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_train, smoke

lm_eval = pytest.importorskip("lm_eval")

ROWS = 8


@pytest.fixture(autouse=True)
def _no_environment_report(monkeypatch):
    """lm-eval's results carry torch's collect_env report, which starts python and pip (seconds): not here."""
    import lm_eval.evaluator

    monkeypatch.setattr(lm_eval.evaluator, "add_env_info", lambda results: None)
SST2 = ["model=tiny_llama", "task=glue", "task.subset=sst2", f"task.max_eval_samples={ROWS}"]
METHODS = ["zero_shot", "tinyte_full", "tinyte_gated", "prompt_tuning", "lora", "ktoken"]


def train(root: Path, method: str, *extra: str) -> Path:
    cfg = smoke(f"method={method}", *SST2, "trainer.max_steps=1", f"trainer.eval_batch_size={ROWS}", *extra)
    run_dir = root / method
    run_train(cfg, run_dir)
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lmeval_runs")
    return {m: train(root, m, *(["export=true"] if m == "tinyte_full" else [])) for m in METHODS}


@pytest.fixture(scope="module")
def sst2_yaml(runs, tmp_path_factory):
    """lm-eval's own glue/sst2 task, reading the evaluation rows of the runs' fixture from a JSON-lines file."""
    from embexp.tasks import build_task

    folder = tmp_path_factory.mktemp("lmeval_tasks")
    cfg = smoke("method=zero_shot", *SST2)
    rows = build_task(cfg.task).load("eval")
    (folder / "sst2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    own = Path(lm_eval.__file__).parent / "tasks" / "glue" / "sst2" / "default.yaml"
    text = own.read_text().replace("task: sst2", "task: sst2_local").replace("tag: glue\n", "")
    text = text.replace("dataset_path: nyu-mll/glue", "dataset_path: json").replace("dataset_name: sst2\n", "")
    text += f"dataset_kwargs:\n  data_files:\n    validation: {folder / 'sst2.jsonl'}\n"
    (folder / "sst2_local.yaml").write_text(text.replace("training_split: train\n", ""))
    return folder / "sst2_local.yaml"


def evaluate(model, task_yaml: Path) -> dict:
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(task_yaml.parent), include_defaults=False)  # lm-eval's index: seconds
    return simple_evaluate(model=model, tasks=["sst2_local"], task_manager=manager, log_samples=True)


def logliks(results: dict) -> list[list[float]]:
    samples = sorted(results["samples"]["sst2_local"], key=lambda s: s["doc_id"])
    return [[r[0] for r in s["filtered_resps"]] for s in samples]


def test_an_exported_run_scores_as_lm_eval_s_own_hf_model_on_the_export(runs, sst2_yaml):
    from lm_eval.models.huggingface import HFLM

    from embexp.lmeval.model import EmbexpLM

    ours = evaluate(EmbexpLM(str(runs["tinyte_full"]), batch_size=4, cpu=True), sst2_yaml)
    theirs = evaluate(HFLM(pretrained=str(runs["tinyte_full"] / "export"), device="cpu", batch_size=4,
                           add_bos_token=True), sst2_yaml)
    a, b = logliks(ours), logliks(theirs)
    assert len(a) == ROWS and all(len(r) == 2 for r in a)
    assert max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)) < 1e-5
    assert ours["results"]["sst2_local"]["acc,none"] == theirs["results"]["sst2_local"]["acc,none"]


@pytest.mark.parametrize("method", METHODS)
def test_every_decoder_method_scores_as_embexp_s_own_evaluation(runs, sst2_yaml, method):
    from embexp.lmeval.model import EmbexpLM

    ours = evaluate(EmbexpLM(str(runs[method]), cpu=True), sst2_yaml)
    recorded = json.loads((runs[method] / "metrics.json").read_text())["metrics"]
    assert ours["results"]["sst2_local"]["acc,none"] * 100 == pytest.approx(recorded["ll_accuracy"], abs=1e-9)
    rows = [json.loads(line)["ll_scores"] for line in (runs[method] / "predictions.jsonl").read_text().splitlines()]
    got = logliks(ours)
    assert len(got) == len(rows) == ROWS
    assert max(abs(x - y) for a, b in zip(got, rows) for x, y in zip(a, b)) < 1e-5, (got, rows)


def test_generate_until_stops_at_and_cuts_before_its_until_strings(runs):
    from lm_eval.api.instance import Instance

    from embexp.lmeval.model import EmbexpLM

    lm = EmbexpLM(str(runs["zero_shot"]), cpu=True)
    ask = lambda kw: [Instance("generate_until", {}, (p, kw), i) for i, p in enumerate(["It was ", "A film "])]  # noqa
    free = lm.generate_until(ask({"max_gen_toks": 12, "until": []}))
    assert all(len(t) > 3 for t in free)
    stop = free[0][2]  # a character the free continuation writes: the stopped one ends just before it
    cut = lm.generate_until(ask({"max_gen_toks": 12, "until": [stop]}))
    assert cut[0] == free[0][:free[0].index(stop)] and stop not in cut[1] and free[1].startswith(cut[1])
    with pytest.raises(Exception, match="generates greedily"):
        lm.generate_until(ask({"do_sample": True, "temperature": 0.7}))


def test_the_command_prints_lm_eval_s_table_and_bad_input_is_one_line(runs, sst2_yaml, capsys, monkeypatch):
    import importlib.util

    from embexp import lmeval

    lmeval.main([f"run_dir={runs['ktoken']}", f"tasks=[{sst2_yaml}]", "cpu=true", "limit=4"])
    out = capsys.readouterr().out
    assert "sst2_local" in out and "|acc" in out.replace(" ", "") and "ktoken on tiny_llama" in out
    for argv, line in [([], "missing run_dir"), ([f"run_dir={runs['ktoken']}"], "missing tasks"),
                       ([f"run_dir={runs['ktoken']}", "tasks=[nope.yaml]"], "task file 'nope.yaml' does not exist"),
                       (["run_dir=/nonexistent", "tasks=[sst2]"], "run_dir '/nonexistent' does not exist")]:
        with pytest.raises(SystemExit) as e:
            lmeval.main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 1 and len(err) == 1 and line in err[0], err
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "lm_eval" else real(name, *a))
    with pytest.raises(SystemExit):
        lmeval.main([f"run_dir={runs['ktoken']}", "tasks=[sst2]"])
    assert "pip install -e '.[lmeval]'" in capsys.readouterr().err
