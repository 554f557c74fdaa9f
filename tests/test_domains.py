"""Input domains and honest run records (issue 22): bad rows stop the run with one line before the
model loads; truncation is counted and said; metrics.json holds only the metrics that belong to the
run; embexp's metrics load as ``evaluate`` modules offline and agree with a run's metrics.json."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli, run_train, smoke
from embexp import EmbexpError
from embexp.core.records import is_complete
from embexp.featurize import CHARS_PER_TOKEN
from embexp.tasks import build_task

SST2 = [{"sentence": "a charming film", "label": 1, "idx": 0}, {"sentence": "a dull story", "label": 0, "idx": 1},
        {"sentence": "warm and clever", "label": 1, "idx": 2}, {"sentence": "tedious and weak", "label": 0, "idx": 3}]
STSB = [{"sentence1": "A cat sat.", "sentence2": "A cat sat down.", "label": 4.5, "idx": 0},
        {"sentence1": "A dog ran.", "sentence2": "A bird sang.", "label": 0.5, "idx": 1},
        {"sentence1": "The fox jumped.", "sentence2": "A fox jumped.", "label": 4.8, "idx": 2}]
TREE = [{"indent_tree": "AB\n+CD\n+EF", "parent": "AB", "child": "CD", "label": "true", "task_type": "parent_child"},
        {"indent_tree": "AB\n+CD\n+EF", "parent": "CD", "child": "EF", "label": "false", "task_type": "parent_child"},
        {"indent_tree": "GH\n+IJ", "parent": "GH", "child": "IJ", "label": "true", "task_type": "parent_child"}]
WMT = [{"translation": {"cs": "Pes vidí kočku.", "en": "The dog sees the cat."}},
       {"translation": {"cs": "Muž čte knihu.", "en": "The man reads a book."}}]


def lines(rows, bad=None, at=2, raw=None) -> bytes:
    """JSON lines of `rows` with the row at index `at` replaced by `bad` (a dict), or by the raw text `raw`."""
    out = [json.dumps(r, ensure_ascii=False) for r in rows]
    if bad is not None:
        out[at] = json.dumps(bad, ensure_ascii=False)  # allow_nan: NaN/Infinity as Python's json writes them
    if raw is not None:
        out[at] = raw
    return ("\n".join(out) + "\n").encode("utf-8")


def with_(row, **kw):
    return {**row, **kw}


# (id, task overrides, model, {file: bytes}, the needles the one error line must hold (file:line, field, value, domain))
GLUE = ["task=glue", "task.subset=sst2"]
STSB_TASK = ["task=glue", "task.subset=stsb"]
TREE_TASK = ["task=tree", "task.subset=small"]
BAD = [
    ("label_out_of_range_decoder", GLUE, "tiny_llama", {"train.jsonl": lines(SST2, with_(SST2[2], label=7))},
     ["train.jsonl:3:", "field 'label' = 7 is out of range", "0 (negative) or 1 (positive)"]),
    ("label_out_of_range_encoder", GLUE, "tiny_bert", {"train.jsonl": lines(SST2, with_(SST2[2], label=7))},
     ["train.jsonl:3:", "field 'label' = 7 is out of range", "0 (negative) or 1 (positive)"]),
    ("label_minus_one_hidden_test_label", GLUE, "tiny_llama",
     {"train.jsonl": lines(SST2, with_(SST2[1], label=-1), at=1)},
     ["train.jsonl:2:", "field 'label' = -1 is a hidden label", "split 'train' of glue_sst2",
      "never trained on or scored"]),
    ("string_label", GLUE, "tiny_llama", {"train.jsonl": lines(SST2, with_(SST2[2], label="1"))},
     ["train.jsonl:3:", "field 'label' = \"1\" is a string", "an integer class id"]),
    ("nan_regression_label", STSB_TASK, "tiny_llama",
     {"train.jsonl": lines(STSB, with_(STSB[1], label=float("nan")), at=1)},
     ["train.jsonl:2:", "field 'label' = NaN is not a finite number", "a finite number from 0 to 5"]),
    ("inf_regression_label", STSB_TASK, "tiny_bert",
     {"train.jsonl": lines(STSB, with_(STSB[1], label=float("inf")), at=1)},
     ["train.jsonl:2:", "field 'label' = Infinity is not a finite number", "a finite number from 0 to 5"]),
    ("stsb_score_of_7", STSB_TASK, "tiny_llama", {"train.jsonl": lines(STSB, with_(STSB[2], label=7.0))},
     ["train.jsonl:3:", "field 'label' = 7.0 is out of range", "a finite number from 0 to 5"]),
    ("duplicated_idx", GLUE, "tiny_llama", {"train.jsonl": lines(SST2, with_(SST2[2], idx=1))},
     ["train.jsonl:3:", "field 'idx' = 1 repeats the idx of", "train.jsonl:2", "unique within the split"]),
    ("empty_sentence", GLUE, "tiny_llama", {"train.jsonl": lines(SST2, with_(SST2[2], sentence="   "))},
     ["train.jsonl:3:", "field 'sentence' = \"   \" is empty", "a non-empty string"]),
    ("missing_field", GLUE, "tiny_llama", {"train.jsonl": lines(SST2, {"sentence": "no label here", "idx": 2})},
     ["train.jsonl:3:", "field 'label' is missing", "rows with fields sentence, label"]),
    ("wrong_json_type_of_a_field", GLUE, "tiny_llama", {"train.jsonl": lines(SST2, with_(SST2[2], sentence=5))},
     ["train.jsonl:3:", "field 'sentence' = 5 is a number", "a non-empty string"]),
    ("wrong_json_type_of_a_row", GLUE, "tiny_llama", {"train.jsonl": lines(SST2, raw='["a charming film", 1]')},
     ["train.jsonl:3:", "the row is an array, not an object", "fields sentence, label"]),
    ("label_word_not_a_verbalizer", TREE_TASK, "tiny_llama", {"train.jsonl": lines(TREE, with_(TREE[2], label="maybe")),
                                                               "test.jsonl": lines(TREE)},
     ["train.jsonl:3:", "field 'label' = \"maybe\" is not one of the label words", "one of 'true', 'false'"]),
    ("nested_field_missing", ["task=wmt16", "task.select_split=''"], "tiny_llama",
     {"train.jsonl": lines(WMT, {"translation": {"cs": "Dům."}}, at=1), "test.jsonl": lines(WMT)},
     ["train.jsonl:2:", "field 'translation.en' is missing"]),
    ("binary_file", GLUE, "tiny_llama", {"train.jsonl": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00"},
     ["train.jsonl:3: binary data (a NUL byte at byte 9 of the file", "UTF-8 text, one JSON object per line"]),
    ("not_utf8", GLUE, "tiny_llama",
     {"train.jsonl": lines(SST2)[:-1] + b"\n" + '{"sentence": "caf\xe9", "label": 1}'.encode("latin-1") + b"\n"},
     ["train.jsonl:5: byte 0xe9 at column 18 is not UTF-8 text"]),
    ("crlf_file_with_a_bad_label", GLUE, "tiny_llama",
     {"train.jsonl": lines(SST2, with_(SST2[3], label=2), at=3).replace(b"\n", b"\r\n")},
     ["train.jsonl:4:", "field 'label' = 2 is out of range"]),
    ("bad_row_in_the_eval_split", GLUE, "tiny_llama",
     {"train.jsonl": lines(SST2), "validation.jsonl": lines(SST2, with_(SST2[0], label=3), at=0)},
     ["validation.jsonl:1:", "field 'label' = 3 is out of range"]),
]


@pytest.mark.parametrize("name,task,model,files,needles", BAD, ids=[b[0] for b in BAD])
def test_a_row_outside_its_domain_is_one_line_before_the_model_loads(name, task, model, files, needles,
                                                                     tmp_path, monkeypatch):
    import embexp.run.build

    def no_model(*a, **kw):  # the rows are checked before any weights are read
        raise AssertionError("the model was loaded before the rows were checked")

    monkeypatch.setattr(embexp.run.build, "load_backbone", no_model)
    data = tmp_path / "data"
    data.mkdir()
    for fname, content in {"validation.jsonl": lines(SST2), **files}.items():
        (data / fname).write_bytes(content)
    run = tmp_path / "run"
    r = run_cli("debug=smoke", "method=tinyte_full", f"model={model}", *task, "task.source=local",
                       f"task.data_dir={data}", f"hydra.run.dir={run}")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("embexp: error: "), r.stderr
    for needle in needles:
        assert needle in err[0], (needle, err[0])
    assert str(data) in err[0]  # the file is named with its path
    assert json.loads((run / "status.json").read_text())["status"] == "failed"
    assert not is_complete(run) and not (run / "metrics.json").exists()


def test_a_crlf_file_reads_exactly_as_its_lf_twin(tmp_path):
    """CRLF line ends are accepted: each line is the same JSON (\\r is JSON whitespace), so refusing
    them would only make Windows-edited files fail; the rows are identical."""
    for name, ends in (("lf", b"\n"), ("crlf", b"\r\n")):
        d = tmp_path / name
        d.mkdir()
        (d / "train.jsonl").write_bytes(lines(SST2).replace(b"\n", ends))
    load = lambda d: build_task(smoke(*GLUE, "task.source=local", f"task.data_dir={tmp_path / d}").task).load("train")  # noqa: E731
    assert load("crlf") == load("lf") == SST2


def test_hub_rows_go_through_the_same_check(monkeypatch):
    import datasets

    rows = [dict(r) for r in SST2]
    rows[2]["label"] = 7
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **kw: datasets.Dataset.from_list(rows))
    task = build_task(smoke(*GLUE, "task.source=hub").task)
    with pytest.raises(EmbexpError) as e:
        task.load("train")
    assert str(e.value) == ("hub nyu-mll/glue/sst2 split 'train' row 2: field 'label' = 7 is out of range "
                            "(valid for glue_sst2: an integer class id, 0 (negative) or 1 (positive))")


def test_hub_rows_selected_out_of_a_whole_hub_dataset_are_checked(monkeypatch):
    import datasets

    rows = [{"rating": 4.0, "text": f"fine {i}"} for i in range(30)]
    rows[7]["rating"] = 9.0
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **kw: datasets.Dataset.from_list(rows))
    task = build_task(smoke("task=amazon", "task.source=hub", "task.test_size=29", "task.max_eval_samples=-1").task)
    with pytest.raises(EmbexpError) as e:
        task.load("eval")
    assert str(e.value) == ("hub McAuley-Lab/Amazon-Reviews-2023/raw_review_Amazon_Fashion split 'full' row 7: "
                            "field 'rating' = 9.0 is out of range "
                            "(valid for amazon_Amazon_Fashion: a finite number from 1 to 5)")


HIDDEN_SST2 = [with_(r, label=-1) for r in SST2]
HIDDEN_STSB = [with_(r, label=-1.0) for r in STSB]


@pytest.mark.parametrize("subset,rows", [("sst2", HIDDEN_SST2), ("stsb", HIDDEN_STSB)])
def test_a_hidden_label_test_split_loads_for_counting_only(subset, rows, tmp_path):
    """The hub's test splits mark hidden labels -1 (STS-B -1.0): counted (PEMA, analyze vocab), they
    load; any other bad value there is still refused; scored, they stop in one line."""
    d = tmp_path / "data"
    d.mkdir()
    (d / "test.jsonl").write_bytes(lines(rows))
    task = build_task(smoke("task=glue", f"task.subset={subset}", "task.source=local", f"task.data_dir={d}").task)
    assert task.counted_splits("test") == ["test"] and task.counted_rows("test") == rows
    (d / "test.jsonl").write_bytes(lines(rows, with_(rows[1], label=7), at=1))
    with pytest.raises(EmbexpError, match=r"test.jsonl:2: field 'label' = 7 is out of range"):
        task.counted_rows("test")
    (d / "test.jsonl").write_bytes(lines(rows))
    scored = build_task(smoke("task=glue", f"task.subset={subset}", "task.source=local", f"task.data_dir={d}",
                              "task.eval_split=test").task)
    with pytest.raises(EmbexpError, match=r"test.jsonl:1: field 'label' = -1(\.0)? is a hidden label .* split 'test' "
                                          r"of glue_\w+ can be counted .* but never trained on or scored$"):
        scored.load("eval")


def test_mnli_counts_both_validation_and_both_test_splits():
    task = build_task(smoke("task=glue", "task.subset=mnli").task)
    assert task.counted_splits("eval") == ["validation_matched", "validation_mismatched"]
    assert task.counted_splits("test") == ["test_matched", "test_mismatched"]
    with pytest.raises(EmbexpError, match=r"unknown counted split 'select' \(choose from: train, eval, test\)"):
        task.counted_splits("select")


def test_scoring_a_hidden_label_split_stops_in_one_line_before_the_model_loads(tmp_path, monkeypatch):
    """task.eval_split=test on a hub test split: one line naming the file, the row and the split."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_bytes(lines(SST2))
    (data / "test.jsonl").write_bytes(lines(HIDDEN_SST2))
    run = tmp_path / "run"
    r = run_cli("debug=smoke", "method=pema", "model=tiny_bert", *GLUE, "task.source=local",
                       f"task.data_dir={data}", "task.eval_split=test", f"hydra.run.dir={run}")
    err = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(err) == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"{data}/test.jsonl:1: field 'label' = -1 is a hidden label" in err[0] and "split 'test'" in err[0]
    assert json.loads((run / "status.json").read_text())["status"] == "failed" and not (run / "metrics.json").exists()


def test_unlabelled_snli_rows_stay_valid_where_the_task_drops_them(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    snli = [{"premise": "A man sleeps.", "hypothesis": "A man rests.", "label": 0},
            {"premise": "A man sleeps.", "hypothesis": "A man runs.", "label": -1}]
    (d / "validation.jsonl").write_bytes(lines(snli))
    task = build_task(smoke("task=nli_pairs", "task.datasets=[snli]", "task.train_split=validation",
                            "task.source=local", f"task.data_dir={d}").task)
    assert task.load("train") == [snli[0]]


def test_the_shared_real_files_pass_their_domains():
    """Every real file in $EMBEXP_DATA passes (skipped where it is unset)."""
    from conftest import DATA as root

    if root is None or not (root / "glue").is_dir():
        pytest.skip("EMBEXP_DATA is unset or holds no glue/ (the real hub-schema samples)")
    cases = [[*GLUE, "task.train_split=validation"], [*STSB_TASK, "task.train_split=validation"],
             ["task=superglue", "task.subset=wic", "task.train_split=train_fewglue32", "task.select_split=''"],
             ["task=wmt16", "task.train_split=test", "task.select_split=''"]]
    for c in cases:
        task = build_task(smoke(*c, "task.source=local", f"task.data_dir={root}", "task.max_train_samples=-1").task)
        assert task.load("train")
    for subset in ("cola", "mrpc", "rte", "sst2", "wnli"):  # the hub's test splits: hidden labels, counted only
        glue = build_task(smoke("task=glue", f"task.subset={subset}", "task.source=local",
                                f"task.data_dir={root}").task)
        assert len(glue.counted_rows("test")) == {"cola": 1063, "mrpc": 1725, "rte": 3000, "sst2": 1821,
                                                  "wnli": 146}[subset]
    alexa = build_task(smoke("task=amazon", "task.source=local", f"task.data_dir={root / 'amazon_reviews/alexa'}",
                             "task.test_size=500").task)
    assert alexa.load("eval")  # 79 of its reviews have no text: the hub schema allows it


def test_data_dir_defaults_to_embexp_data_and_the_run_records_the_resolved_path(tmp_path, monkeypatch):
    """One data-location rule: task.data_dir defaults to $EMBEXP_DATA (unset: '', the hub); an
    explicit task.data_dir, task.data_dir='' and task.source=fixture win; config.yaml holds the path;
    a task whose files are not in $EMBEXP_DATA reads the hub."""
    from omegaconf import OmegaConf

    from conftest import compose

    root = tmp_path / "mirror"
    (root / "glue" / "sst2").mkdir(parents=True)
    for split in ("train", "validation"):
        (root / "glue" / "sst2" / f"{split}.jsonl").write_bytes(lines(SST2))
    assert compose(*GLUE).task.data_dir == "" and build_task(compose(*GLUE).task).resolved_source() == "hub"
    monkeypatch.setenv("EMBEXP_DATA", str(root))
    task = build_task(compose(*GLUE).task)
    assert task.cfg.data_dir == str(root) and task.resolved_source() == "local" and task.load("train") == SST2
    assert compose(*GLUE, f"task.data_dir={tmp_path}").task.data_dir == str(tmp_path)
    assert build_task(compose(*GLUE, "task.data_dir=").task).resolved_source() == "hub"
    assert build_task(smoke(*GLUE).task).resolved_source() == "fixture"  # debug=smoke: task.source=fixture
    # a task with none of its files there reads the hub (tree: generates); one with some reads only them
    assert build_task(compose("task=wmt16").task).resolved_source() == "hub"
    assert build_task(compose("task=tree").task).resolved_source() == "generate"
    (root / "glue" / "cola").mkdir()
    (root / "glue" / "cola" / "validation.jsonl").write_bytes(b"")
    cola = build_task(compose("task=glue", "task.subset=cola").task)
    assert cola.resolved_source() == "local"
    with pytest.raises(EmbexpError, match=r"no local file for task glue_cola split 'train'"
                                          r".*comes from EMBEXP_DATA; task.source=hub"):
        cola.load("train")
    run = tmp_path / "run"
    r = run_cli("debug=smoke", "method=head_only", "model=tiny_bert", *GLUE, "task.source=auto",
                       f"hydra.run.dir={run}")
    assert r.returncode == 0, r.stderr
    assert OmegaConf.load(run / "config.yaml").task.data_dir == str(root)  # resolved, not the ${oc.env:...} default


# ---- truncation ----------------------------------------------------------------------------------
def test_an_over_long_prompt_is_counted_in_metrics_json_and_said_in_one_log_line(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    rows = [dict(r) for r in SST2]
    rows[1]["sentence"] = " ".join(["dull"] * 20000)  # ~100k byte tokens
    (d / "train.jsonl").write_bytes(lines(rows))
    (d / "validation.jsonl").write_bytes(lines(SST2))
    run = tmp_path / "run"
    r = run_cli("debug=smoke", "method=tinyte_full", "model=tiny_llama", *GLUE, "task.source=local",
                       f"task.data_dir={d}", f"hydra.run.dir={run}")
    assert r.returncode == 0, r.stderr
    data = json.loads((run / "metrics.json").read_text())["data"]
    assert data["max_source_tokens"] == 256 and data["max_target_tokens"] == 48
    train, ev = data["truncated_train"], data["truncated_eval"]
    # a text of more than CHARS_PER_TOKEN characters per kept token is cut to that before it is tokenised (memory
    # stays bounded): its length before the cut counts that part, 256 x 64 byte tokens and the BOS
    assert train["examples"] == 4 and train["source"] == 1 and train["target"] == 0
    assert train["longest_source"] == 256 * CHARS_PER_TOKEN + 1
    assert ev["source"] == 0 and ev["longest_source"] <= 256
    said = [ln for ln in (run / "train.log").read_text().splitlines() if "truncated" in ln]
    assert len(said) == 1 and "train 1/4 prompts (longest" in said[0] and "task.max_source_tokens=256" in said[0], said


def test_a_cut_classification_answer_stops_the_run_with_one_line(tmp_path):
    run = tmp_path / "run"
    r = run_cli("debug=smoke", "method=tinyte_full", "model=tiny_llama", *GLUE, "task.max_target_tokens=2",
                       f"hydra.run.dir={run}")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("embexp: error:")]
    assert len(err) == 1 and "task glue_sst2: the target of train example 0 is" in err[0]
    assert "longer than task.max_target_tokens=2" in err[0] and "raise task.max_target_tokens" in err[0]
    assert json.loads((run / "status.json").read_text())["status"] == "failed" and not (run / "metrics.json").exists()


# ---- metrics that belong to the run ------------------------------------------------------------------
def test_length_figures_and_pl_score_only_where_they_apply(tmp_path):
    plain = run_train(smoke("method=tinyte_full", "model=tiny_llama", *GLUE), tmp_path / "plain")["metrics"]
    assert "pl_score" not in plain and "length_reduction" not in plain and "ll_accuracy" in plain
    prefix = run_train(smoke("method=prompt_tuning", "model=tiny_llama", *GLUE), tmp_path / "pt")["metrics"]
    assert prefix["length_reduction"] < 0 and "pl_score" not in prefix  # it adds positions; P-L is not SST-2's
    tree = run_train(smoke("method=ktoken", "model=tiny_llama", *TREE_TASK), tmp_path / "kt")["metrics"]
    assert tree["length_reduction"] > 40 and 0 <= tree["pl_score"] <= 1


def test_a_metric_that_does_not_apply_is_an_empty_cell_never_0(tmp_path):
    from omegaconf import OmegaConf

    from embexp.report import compare

    root = tmp_path / "runs"
    for method, metrics in (("tinyte_full", {"ll_accuracy": 80.0, "eval_seconds": 1.0}),
                            ("ktoken", {"ll_accuracy": 70.0, "length_reduction": 50.0, "eval_seconds": 1.0})):
        d = root / method
        d.mkdir(parents=True)
        (d / "config.yaml").write_text(f"task:\n  name: glue\n  subset: sst2\nmethod:\n  name: {method}\ntag: ''\n")
        (d / "metrics.json").write_text(json.dumps({"method": method, "model": "tiny_llama",
                                                    "task": "glue_sst2", "seed": 0,
                                                    "n_eval_examples": 6, "metrics": metrics}))
        (d / "status.json").write_text(json.dumps({"status": "complete"}))
    out = tmp_path / "tables"
    compare.render(OmegaConf.merge(OmegaConf.structured(compare.Config),
                                   {"runs": str(root), "out": str(out), "metric": "length_reduction", "se": "none"}))
    rows = {r["method"]: r for r in csv.DictReader((out / "compare_glue_sst2_tiny_llama.csv").open())}
    assert rows["tinyte_full"]["length_reduction"] == "" and float(rows["ktoken"]["length_reduction"]) == 50.0
    md = {ln.split("|")[1].strip(): ln.split("|")[2].strip()
          for ln in (out / "compare_glue_sst2_tiny_llama.md").read_text().splitlines()
          if ln.startswith("| ") and "---" not in ln}
    assert md["TinyTE-full"] == "" and md["K-Token merging"] == "50.00"


def test_evaluation_does_not_import_the_studies_layer():
    import ast

    src = Path(__file__).resolve().parents[1] / "src" / "embexp" / "run" / "predict.py"
    mods = {n.module for n in ast.walk(ast.parse(src.read_text())) if isinstance(n, ast.ImportFrom)}
    assert not any(m and m.startswith("embexp.studies") for m in mods)


# ---- evaluate: one implementation, two doors -----------------------------------------------------------
EVALUATE_CHECK = r"""
import json, sys
import evaluate
from embexp import metric_modules

out = {}
for run_dir, module in json.loads(sys.argv[1]):
    recs = [json.loads(l) for l in open(f"{run_dir}/predictions.jsonl")]
    m = evaluate.load(metric_modules.path(module), keep_in_memory=True)
    out[run_dir] = m.compute(predictions=[r["generation"] for r in recs], references=[r["target"] for r in recs])
print(json.dumps(out))
"""


@pytest.mark.serial
def test_evaluate_modules_load_offline_and_match_the_runs_metrics(tmp_path):
    pytest.importorskip("evaluate")
    wmt = tmp_path / "wmt"
    cnn = tmp_path / "cnn"
    # repeat_prompt's outputs (the question) overlap the references, so the scores are not all 0
    run_train(smoke("method=repeat_prompt", "model=tiny_llama", "task=wmt16"), wmt)
    run_train(smoke("method=repeat_prompt", "model=tiny_llama", "task=cnndm"), cnn)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HOME": str(tmp_path / "hf"),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"),
                                          os.environ.get("PYTHONPATH", "")])}
    arg = json.dumps([[str(wmt), "embexp_translation"], [str(cnn), "embexp_rouge"]])
    r = subprocess.run([sys.executable, "-c", EVALUATE_CHECK, arg], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for run_dir, keys in ((wmt, ("bleu", "ter")), (cnn, ("rouge1", "rougeL", "rougeLsum"))):
        recorded = json.loads((run_dir / "metrics.json").read_text())["metrics"]
        for k in keys:
            assert got[str(run_dir)][k] == pytest.approx(recorded[k], abs=1e-9), k
        assert any(recorded[k] > 0 for k in keys)
    assert "chrf" in got[str(wmt)]  # the module also offers chrF (the wmt16 runs record BLEU and TER)
    assert (tmp_path / "modules").is_dir()  # evaluate copied the local scripts there: nothing came from the hub


def test_every_metric_module_is_a_folder_with_its_script():
    from embexp import metric_modules

    for name in metric_modules.NAMES:
        assert (Path(metric_modules.path(name)) / f"{name}.py").is_file()
    with pytest.raises(EmbexpError, match=r"unknown embexp metric module 'bleu' \(choose from: embexp_translation"):
        metric_modules.path("bleu")
