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


LOCAL_TASK = """task: {name}
dataset_path: {source}
{kwargs}output_type: multiple_choice
validation_split: validation
doc_to_text: "{{{{sentence}}}}\\nAnswer:"
doc_to_target: label
doc_to_choice: ["negative", "positive"]
metric_list:
  - metric: acc
"""


def task_yaml(folder: Path, file: str, name: str, source: str = "json", data: str | None = "rows.jsonl") -> Path:
    kwargs = f"dataset_kwargs:\n  data_files:\n    validation: {folder / data}\n" if data else ""
    (folder / file).write_text(LOCAL_TASK.format(name=name, source=source, kwargs=kwargs))
    return folder / file


def test_bad_task_files_outputs_and_hub_tasks_offline_are_one_line_before_the_model_loads(runs, tmp_path, capsys,
                                                                                         monkeypatch):
    """Every input the evaluation reads or writes is checked before EmbexpLM is built (here it would raise), and
    a single task name (tasks=sst2, tasks=a,b: lm-eval's --tasks) is a list of tasks."""
    import datasets.config
    import huggingface_hub.constants

    import embexp.lmeval.model
    from embexp import lmeval

    def no_model(*a, **kw):
        raise AssertionError("the model loaded")

    monkeypatch.setattr(embexp.lmeval.model, "EmbexpLM", no_model)
    for module in (datasets.config, huggingface_hub.constants):  # a hub dataset is looked for offline: no network
        monkeypatch.setattr(module, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    (tmp_path / "rows.jsonl").write_text('{"sentence": "good", "label": 1, "idx": 0}\n')
    good = task_yaml(tmp_path, "good.yaml", "good_local")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "broken.yaml").write_text("task: [unclosed\n")
    (tmp_path / "bad" / "list.yaml").write_text("- task: sst2_local\n  dataset_path: json\n")
    (tmp_path / "bad" / "noname.yaml").write_text("dataset_path: json\n")
    missing = task_yaml(tmp_path / "bad", "missing.yaml", "missing_local", data="nope.jsonl")
    nodata = task_yaml(tmp_path / "bad", "nodata.yaml", "nodata_local", data=None)
    hub = task_yaml(tmp_path / "bad", "hub.yaml", "hub_local", source="embexp-no-such-user/no-such-dataset", data=None)
    (tmp_path / "twin").mkdir()
    twin = task_yaml(tmp_path / "twin", "b.yaml", "twin_local", data="../rows.jsonl")
    task_yaml(tmp_path / "twin", "a.yaml", "twin_local", data="../rows.jsonl")  # the index names a.yaml
    run = f"run_dir={runs['zero_shot']}"
    for argv, line in [
        ([f"tasks={tmp_path / 'bad' / 'broken.yaml'}"], "does not parse as YAML (line 2, column 1)"),
        ([f"tasks={tmp_path / 'bad' / 'list.yaml'}"], "it holds a list, not a mapping of a task's fields"),
        ([f"tasks={tmp_path / 'bad' / 'noname.yaml'}"], "names no task: lm-eval reads a task's name from 'task: NAME'"),
        ([f"tasks=[{missing}]"], f"the data file '{tmp_path / 'bad' / 'nope.jsonl'}' of split 'validation' does not"),
        ([f"tasks={nodata}"], "dataset_path: json reads local files, but dataset_kwargs.data_files names none"),
        ([f"tasks={good},{missing}"], f"task file '{missing}': the data file"),
        ([f"tasks={hub}"], "lm-eval task 'hub_local' could not be loaded: Couldn't reach"),
        ([f"tasks={twin}"], f"names task 'twin_local', and so does {tmp_path / 'twin' / 'a.yaml'} beside it"),
        ([f"tasks={good}", f"output={tmp_path / 'no' / 'r.json'}"], f"the folder {tmp_path / 'no'} does not exist"),
        ([f"tasks={good}", f"output={tmp_path}"], f"output='{tmp_path}' is a directory: name the JSON file"),
        ([f"tasks={good}", f"output={good}/r.json"], f"{good} is not a directory"),
        ([f"tasks={good}", "output=/proc/embexp_results.json"], "output='/proc/embexp_results.json' cannot be written"),
        ([f"tasks={good}", f"include_path={tmp_path / 'none'}"], f"include_path '{tmp_path / 'none'}' is not a folder"),
        ([f"tasks={good}", "limit=0"], "limit=0 is out of range"),
        (["run_dir=/nonexistent", "tasks=sst2"], "run_dir '/nonexistent' does not exist"),
        ([f"run_dir={tmp_path}", "tasks=sst2"], f"run_dir '{tmp_path}' has no config.yaml"),
    ]:
        with pytest.raises(SystemExit) as e:
            lmeval.main(argv if argv[0].startswith("run_dir=") else [run, *argv])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 1 and len(err) == 1 and line in err[0], (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "good.yaml", "rows.jsonl", "twin"]  # nothing written
    with pytest.raises(AssertionError, match="the model loaded"):  # one task without brackets: every check passes
        lmeval.main([run, f"tasks={good}", f"output={tmp_path / 'r.json'}"])
    assert lmeval.configure([run, "tasks=sst2"]).tasks == ["sst2"]
    assert lmeval.configure([run, "tasks=sst2,boolq"]).tasks == ["sst2", "boolq"]
    assert lmeval.configure([run, "tasks=[sst2,boolq]"]).tasks == ["sst2", "boolq"]
