"""The ledger's GPU rows read finished runs (ledger/measured.py): run records written
by the results API exactly as a run writes them, the ledger pointed at them (runs=<tmp>); a complete run
shows its metric at the paper's precision with a measured status, a failed, running or smoke run is
ignored, and without runs a row is what it was."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from conftest import record_run
from embexp.core.records import RunRecord
from embexp.report import ledger
from embexp.report.ledger import markdown
from embexp.report.ledger.core import decide
from embexp.report.ledger.measured import decide_with_runs, index
from embexp.report.ledger.runs import Estimate

ROWS = {r.id: r for p in ("tinyte", "pema", "tinyattn", "ktoken") for r in ledger.paper_rows(p)}


def row(rid: str):
    """A ledger row with an estimate that needs no model (the real one counts parameters: seconds)."""
    return dataclasses.replace(ROWS[rid], gpu=Estimate("t", lambda: [], "the estimate"))


@pytest.fixture
def runs(tmp_path):
    """TinyTE-full on Gemma-2: CNN/DM R-L 32.20 and 32.24 (two seeds, mean 32.22 = the paper's), WMT16 BLEU-4
    24.00 / TER 59.87; a failed, a running and a smoke run of the same cell that must not count."""
    cell = ("gemma2", "tinyte_full", "")
    for seed, rl in ((0, 32.20), (1, 32.24)):
        record_run(tmp_path, "cnndm", "", *cell, seed, {"metrics": {"rougeLsum": rl}})
    record_run(tmp_path, "wmt16", "", *cell, 0, {"metrics": {"bleu": 24.0, "ter": 59.87}})
    failed = record_run(tmp_path, "cnndm", "", *cell, 2, {"metrics": {"rougeLsum": 99.0}})
    RunRecord(failed).fail("out of memory")
    running = RunRecord(tmp_path / "cnndm" / "gemma2" / "tinyte_full" / "seed3")
    running.start(ledger_config("cnndm", cell, 3))
    running.write_jsonl("metrics.json", [{"metrics": {"rougeLsum": 99.0}}])
    smoke = record_run(tmp_path / "smoke", "cnndm", "", *cell, 4, {"metrics": {"rougeLsum": 99.0}})
    cfg = OmegaConf.load(smoke / "config.yaml")
    cfg.model.source = "tiny"  # what debug=smoke sets
    OmegaConf.save(cfg, smoke / "config.yaml")
    return tmp_path


def ledger_config(task, cell, seed):
    return OmegaConf.create({"task": {"name": task, "subset": ""}, "model": {"name": cell[0]},
                             "method": {"name": cell[1]}, "tag": cell[2], "seed": seed})


def test_a_finished_run_is_measured_at_the_paper_s_precision(runs):
    idx = index(str(runs))
    assert sorted(r["seed"] for rs in idx.by_key.values() for r in rs) == [0, 0, 1]  # no failed, running or smoke run
    for t in ("t1", "t11"):
        out = decide_with_runs(row(f"tinyte.{t}.gemma2.tinyte-full.cnndm"), None, idx)
        assert (out.status, out.ours) == ("equal", "32.22") and "measured; GPU estimate the estimate [t]" in out.text
    out = decide_with_runs(row("tinyte.t1.gemma2.tinyte-full.wmt16"), None, idx)
    assert (out.status, out.ours) == ("measured", "24.00 / 59.87")
    assert out.text.split(";")[0] == "measured: differs by 0.05 / ="
    out = decide_with_runs(row("tinyte.t2.gemma2.tinyte-gated.cnndm"), None, idx)  # no run of that cell
    assert out.status == "gpu"


def test_without_runs_a_row_is_unchanged(runs):
    r = row("tinyte.t1.gemma2.tinyte-full.cnndm")
    assert decide_with_runs(r, None, index("")) == decide(r) == decide_with_runs(r, None, index(str(runs / "none")))
    assert ledger.Config().runs == "outputs"


def test_a_partly_finished_run_set_and_the_other_papers_lookups(tmp_path):
    record_run(tmp_path, "glue", "cola", "distilbert", "full_ft", "", 0, {"metrics": {"mcc": 49.31}})
    record_run(tmp_path, "glue", "sst2", "roberta", "tinyattn", "1h", 0, {"metrics": {"accuracy": 96.61}})
    for seed, acc in ((42, 99.91), (43, 99.5)):
        record_run(tmp_path, "tree", "x3large", "qwen25_05b", "ktoken", "k2", seed,
                   {"metrics": {"em_accuracy": acc, "length_reduction": 50.0}})
    record_run(tmp_path, "superglue", "boolq", "gemma2", "tinyte_full", "", 0, {"metrics": {"em_accuracy": 85.2}})
    idx = index(str(tmp_path))
    out = decide_with_runs(row("pema.t10.distilbert.ft"), None, idx)
    assert out.status == "partial" and out.ours.startswith("49.3 / — / ")
    assert out.text.startswith("measured in part: = / no run")
    assert decide_with_runs(row("pema.t10.distilbert.pema"), None, idx).status == "gpu"
    # Table 8's 4H reads the 1H run where the paper did not train 4H (SST-2)
    assert [decide_with_runs(row(f"tinyattn.t8.{h}.sst2"), None, idx).ours for h in ("1h", "4h")] == ["96.6", "96.6"]
    out = decide_with_runs(row("ktoken.t1.k2.run"), None, idx)  # the best of the runs, the mean reduction
    assert (out.status, out.ours) == ("equal", "99.91 / 50.0")
    assert decide_with_runs(row("tinyte.t3.gemma2.tinyte-all-indiv.boolq"), None, idx).ours == "85.2"
    assert decide_with_runs(row("tinyte.t3.gemma2.tinyte-all-indiv.avg"), None, idx).status == "gpu"


def test_the_ledger_renders_a_measured_row(runs, monkeypatch, capsys):
    r = row("tinyte.t1.gemma2.tinyte-full.wmt16")
    monkeypatch.setattr(ledger, "paper_rows", lambda paper: [r])
    text = ledger.render(ledger.Config(table="tinyte", out="", runs=str(runs), data_dir=""))
    assert markdown.line(r, decide_with_runs(r, None, index(str(runs)))) in text
    assert "| 23.95 / 59.87 | 24.00 / 59.87 | measured: differs by 0.05 / =" in text


def test_each_tinyte_method_label_reads_the_report_s_cell_of_its_method():
    """Each TinyTE label's runs are its cell of report/tinyte.py's tables (method, tag): a prompt-tuning
    label's virtual tokens, which its parameter count sets, are its cell's tag; Tables 1, 2 and 11 are the
    report's rows."""
    from embexp.report import tinyte as report
    from embexp.report.ledger import tinyte

    for label, ((method, tag), overrides) in tinyte.METHODS.items():
        tokens = [o.split("=")[1] for o in overrides if o.startswith("method.num_virtual_tokens=")] or ["1"]
        assert tag == (f"tk{tokens[0]}" if method == "prompt_tuning" else ""), label
    assert [tinyte.METHODS[m][0] for m in tinyte.TABLES["t2"]] == report.TABLE2
    assert len(tinyte.TABLES["t11"]) == sum(len(cells) for _, cells in report.TABLE11) == 10
