"""The report layer (python -m embexp.report paper=<paper> table=<name>): the K-Token and
Tiny-Attention tables from hand-made run records, the CLI's choice of module and its one-line errors.
No model is loaded: every record is written by the results API (conftest.record_run)."""

from __future__ import annotations

import csv
import math

import pytest

from conftest import record_run
from embexp import EmbexpError
from embexp.core.records import Runs, collect_runs
from embexp.report import configure, main
from embexp.tasks.metrics import pl_from_accuracy


def render(tmp_path, *args: str) -> dict[str, str]:
    module, cfg = configure([*args, f"runs={tmp_path / 'runs'}", f"out={tmp_path / 'tables'}"])
    return module.render(cfg)


def cells(text: str, label: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith(f"| {label} "))
    return [c.strip() for c in line.strip("|").split("|")]


def tree(root, tag, seed, acc, red, select_on="heldout", method="ktoken", eff=(256, 128), bal=None):
    record_run(root, "tree", "x3large", "qwen25_05b", method, tag, seed,
               {"select_on": select_on, "metrics": {"em_accuracy": acc, "length_reduction": red,
                                                    "em_balanced_accuracy": acc - 1 if bal is None else bal,
                                                    "em_majority_baseline": 50.5},
                "train": {"effective_batch": list(eff)}})


# ---- K-Token Merging ---------------------------------------------------------------------------------------
def test_ktoken_table1_best_of_n_mean_se_and_the_papers_figures(tmp_path):
    runs = tmp_path / "runs"
    for seed, acc in ((42, 90.0), (43, 96.0), (44, 93.0)):
        tree(runs, "k2", seed, acc, 50.0 + seed - 42)
    tree(runs, "uncompressed", 42, 99.0, 0.0, method="lora")
    tree(runs, "k4", 42, 97.0, 75.0, select_on="reported", eff=(16,))  # says it selected on the reported split
    tree(runs, "k3", 42, 10.0, 66.7, method="lora")  # another method: not K-Token's k3 column
    text = render(tmp_path, "paper=ktoken", "table=table1", "seeds=[42,43,44]")["table1"]
    assert text.startswith("table1: accuracy, length reduction %, P-L; seeds [42, 43, 44]; "
                           "the paper's figure in brackets")
    k2 = cells(text, "k2")
    se = math.sqrt(((90 - 93) ** 2 + (96 - 93) ** 2 + 0) / 2 / 3)  # sample s.d. / sqrt(N)
    # best of 3 (seed 43), its balanced accuracy and the majority class, then the mean over the same 3
    assert k2[1:6] == ["96.00 [99.91]", "95.00", "50.50", f"93.00 ± {se:.2f}", "3"]
    assert k2[6:] == ["256/128", "51.0 [50.0]",
                      f"{pl_from_accuracy(96.0, 51.0):.3f} [{pl_from_accuracy(99.91, 50.0):.3f}]"]
    assert cells(text, "uncompressed")[1:6] == ["99.00 [99.97]", "98.00", "50.50", "99.00 ± -", "1"]  # no s.e.
    assert cells(text, "k3") == ["k3", "- [98.63]", "-", "-", "-", "0", "-", "- [66.7]",
                                 f"- [{pl_from_accuracy(98.63, 66.7):.3f}]"]
    assert "| balanced accuracy (best run) | majority class |" in text and "majority class:" in text
    assert cells(text, "k4 †")[1] == "97.00 [98.38]" and text.splitlines()[-1].startswith("† paper protocol")
    rows = list(csv.DictReader(open(tmp_path / "tables" / "table1.csv")))
    assert [r["column"] for r in rows] == ["uncompressed", "selective_context", "llmlingua2", "k2", "k3", "k4"]
    assert (float(rows[3]["best"]) == 96.0 and float(rows[3]["se"]) == pytest.approx(se)
            and rows[5]["paper protocol"] == "True" and float(rows[3]["balanced"]) == 95.0)
    assert (tmp_path / "tables" / "table1.md").read_text() == text + "\n"
    only = render(tmp_path, "paper=ktoken", "table=table1", "seeds=[43]")["table1"]
    assert "seeds [43]" in only and cells(only, "k2")[1:6] == ["96.00 [99.91]", "95.00", "50.50", "96.00 ± -", "1"]
    # seeds=[]: every seed found
    assert "seeds [42, 43, 44]" in render(tmp_path, "paper=ktoken", "table=table1")["table1"]


def test_ktoken_reported_protocol_reads_the_paper_tags_and_the_ablation_curves(tmp_path):
    runs = tmp_path / "runs"
    tree(runs, "k2", 42, 80.0, 50.0)
    tree(runs, "k2_paper", 42, 85.0, 50.0, select_on="reported")
    hist = lambda accs: [{"round": i, "em_accuracy": a} for i, a in enumerate(accs)] + [{"step": 9, "loss": 0.1}]  # noqa: E731
    for seed, accs in ((42, [10.0, 20.0]), (43, [30.0, 40.0, 50.0])):
        record_run(runs, "tree", "x3large", "qwen25_05b", "ktoken", "init_random", seed,
                   {"select_on": "heldout", "metrics": {}, "train": {"effective_batch": 16, "history": hist(accs)}})
    tree(runs, "k2_uniform", 42, 99.5, 50.0, bal=50.0)  # the released code's pairs: the majority class, no more
    tree(runs, "k2_uniform_paper", 42, 99.0, 50.0, select_on="reported")
    paper = render(tmp_path, "paper=ktoken", "table=table1", "select_on=reported")["table1"]
    assert cells(paper, "k2 †")[1] == "85.00 [99.91]"
    held = render(tmp_path, "paper=ktoken", "table=table1")["table1"]
    assert cells(held, "k2")[1] == "80.00 [99.91]" and "†" not in held
    uniform = render(tmp_path, "paper=ktoken", "table=table1", "questions=random")["table1"]
    assert cells(uniform, "k2")[1:3] == ["99.50 [99.91]", "50.00"]
    both = render(tmp_path, "paper=ktoken", "table=table1", "questions=random", "select_on=reported")["table1"]
    assert cells(both, "k2 †")[1] == "99.00 [99.91]"
    curve = render(tmp_path, "paper=ktoken", "table=ablation")["ablation"]
    # mean over the runs that reach each epoch
    assert cells(curve, "random") == ["random", "2", "16", "20.0", "30.0", "50.0"] + ["-"] * 7
    assert cells(curve, "average") == ["average", "0", "-"] + ["-"] * 10
    assert (tmp_path / "tables" / "ablation.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(EmbexpError, match="select_on=reported is the tree curriculum's gate; table2 selects nothing"):
        render(tmp_path, "paper=ktoken", "table=table2", "select_on=reported")


def test_ktoken_table3_perplexity_best_is_the_lowest_and_pl_is_against_the_uncompressed_run(tmp_path):
    runs = tmp_path / "runs"
    for tag, method, seed, ppl, red in (("uncompressed", "lora", 42, 1.30, 0.0),
                                        ("uncompressed", "lora", 43, 1.20, 0.0),
                                        ("k4", "ktoken", 42, 1.50, 75.0), ("k4", "ktoken", 43, 1.40, 74.0)):
        record_run(runs, "commitpack", "python", "qwen25_05b", method, tag, seed,
                   {"metrics": {"perplexity": ppl, "length_reduction": red}, "train": {"effective_batch": 48}})
    text = render(tmp_path, "paper=ktoken", "table=table3")["table3"]
    from embexp.tasks.metrics import pl_from_perplexity

    k4 = cells(text, "k4")
    assert k4[1] == "1.400 [1.391]" and k4[2].startswith("1.450 ± ") and k4[5] == "74.5 [75.0]"
    # the best run's reduction, the best uncompressed run
    assert k4[6].startswith(f"{pl_from_perplexity(1.40, 1.20, 74.0):.3f} [")


# ---- Tiny-Attention ----------------------------------------------------------------------------------------
def test_tinyattn_mean_over_seeds_paper_figures_and_the_protocol_rows(tmp_path):
    runs = tmp_path / "runs"
    for seed, value in ((0, 80.0), (1, 84.0)):
        record_run(runs, "glue", "rte", "roberta", "tinyattn", "1h", seed,
                   {"metrics": {"accuracy": value}, "select_on": "heldout"})
    record_run(runs, "glue", "rte", "roberta", "tinyattn", "1h_paper", 0,
               {"metrics": {"accuracy": 90.0}, "select_on": "reported", "select_metric": "accuracy"})
    record_run(runs, "glue", "cola", "roberta", "tinyattn", "4h", 0, {"metrics": {"mcc": 61.0}, "select_on": "heldout"})
    record_run(runs, "glue", "cola", "roberta", "tinyattn", "1h", 0,
               {"metrics": {"mcc": 60.0, "accuracy": 99.0}, "select_on": "heldout"})
    # nested root: ignored
    record_run(runs / "smoke", "glue", "rte", "roberta", "tinyattn", "1h", 0, {"metrics": {"accuracy": 1.0}})
    text = render(tmp_path, "paper=tinyattn", "table=table11", "seeds=[0,1]")["table11"]
    assert text.startswith("table11 (mean over seeds [0, 1]; paper in brackets; cola: mcc, rte: accuracy)")
    assert cells(text, "1h")[2:] == ["60.0 [68.8]", "82.0 [88.8]"]  # CoLA's MCC, never its accuracy
    assert (cells(text, "4h")[2:] == ["61.0 [69.4]", "- [89.2]"]
            and cells(text, "4h_noavg")[2:] == ["- [68.8]", "- [88.8]"])
    assert cells(text, "1h (paper protocol)")[2:] == ["- [68.8]", "90.0† [88.8]"]
    assert text.splitlines()[-1] == "† paper protocol: selected on the reported split"
    held = render(tmp_path, "paper=tinyattn", "table=table11", "seeds=[1]", "select_on=heldout")["table11"]
    assert "(paper protocol)" not in held and cells(held, "1h")[2:] == ["- [68.8]", "84.0 [88.8]"] and "†" not in held
    rows = list(csv.DictReader(open(tmp_path / "tables" / "table11.csv")))
    assert (rows[0]["setting"] == "1h" and float(rows[0]["rte"]) == 84.0 and rows[0]["rte seeds"] == "1"
            and rows[0]["rte paper"] == "88.8")


def test_tinyattn_table1_reads_fewglue_runs_and_has_one_protocol(tmp_path):
    for seed in (1, 2, 3, 4):
        record_run(tmp_path / "runs", "superglue", "cb", "albert_xxlarge", "tinyattn", "fewglue", seed,
                   {"metrics": {"accuracy": 80.0 + seed}})
    text = render(tmp_path, "paper=tinyattn", "table=table1", "select_on=reported")["table1"]
    # rte, then cb
    assert ("seeds [1, 2, 3, 4]" in text
            and cells(text, "fewglue")[1:] == ["albert_xxlarge", "- [68.38]", "82.5 [88.57]"])


# ---- the results API and the CLI ---------------------------------------------------------------------------
def test_runs_find_one_run_per_seed_in_order_nearest_the_root(tmp_path):
    record_run(tmp_path, "glue", "rte", "roberta", "tinyattn", "1h", 1, {"metrics": {"accuracy": 1.0}})
    record_run(tmp_path, "glue", "rte", "roberta", "tinyattn", "1h", 0, {"metrics": {"accuracy": 2.0}})
    record_run(tmp_path / "smoke", "glue", "rte", "roberta", "tinyattn", "1h", 0, {"metrics": {"accuracy": 3.0}})
    (tmp_path / "glue_rte" / "roberta" / "tinyattn_1h" / "seed1" / "status.json").write_text('{"status": "running"}')
    idx = Runs(collect_runs(str(tmp_path)))
    # seed 1 never finished
    assert [r["metrics"]["accuracy"] for r in idx.find("glue", "rte", "roberta", "tinyattn", "1h")] == [2.0]
    assert idx.find("glue", "rte", "roberta", "tinyattn", "1h", [5, 0])[0]["seed"] == 0
    assert idx.find("glue", "rte", "roberta", "tinyattn", "4h") == []


@pytest.mark.parametrize("args, message", [
    (["paper=nope"],
     "unknown paper 'nope' (choose from: claims, compare, ktoken, ledger, pema, pete, run_curves, tinyattn, tinyte)"),
    (["paper=ktoken", "table=table9"], "unknown table 'table9' (choose from: table1, table2, table3, ablation, all)"),
    (["paper=tinyattn", "select_on=maybe"], "unknown select_on 'maybe' (choose from: heldout, reported, both)"),
    (["paper=pema", "table=table2"], "unknown table 'table2' (choose from: table9, table10, all)"),
    (["table=99"],
     "unknown table '99' (choose from: 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, alpaca, ranking, fig3, fig6, all)"),
    (["paper=compare", "table=curve"], "unknown table 'curve' (choose from: compare, curves)"),
])
def test_a_bad_paper_or_table_is_one_line_naming_the_choices(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as e:
        main([*args, f"runs={tmp_path}", f"out={tmp_path}"])
    assert e.value.code != 0 and capsys.readouterr().err == f"embexp: error: {message}\n"


@pytest.mark.parametrize("args, message", [
    (["paper=tinyattn", "table=table8", "seeds=[abc]"], "seeds=[abc] is not a list of integers, e.g. [0,1] (valid: "
                                                         "each >= 0)"),
    (["paper=tinyattn", "seeds=[-1]"], "seeds entry -1 is out of range (valid: >= 0)"),
    (["paper=tinyattn", "seeds=3"], "seeds=3 is not a list of integers, e.g. [0,1] (valid: each >= 0)"),
    (["paper=ktoken", "table=table1", "seeds=[1.5]"], "seeds=[1.5] is not a list of integers, e.g. [0,1] (valid: "
                                                       "each >= 0)"),
    (["paper=tinyte", "table=1", "bootstrap_iters=many"], "bootstrap_iters=many is not an integer (valid: >= 1)"),
    (["paper=compare", "strict=maybe"], "strict=maybe is not true or false"),
    (["paper=tinyattn", "runs={tmp}/none"], "runs={tmp}/none: {tmp}/none does not exist (runs names the run "
                                            "directories: a folder that holds them, one run directory or a glob)"),
    (["paper=tinyattn", "runs={tmp}/x*"], "runs={tmp}/x*: the glob {tmp}/x* matches no folder"),
    (["paper=ledger", "table=pema", "runs={tmp},{tmp}/none"], "runs={tmp},{tmp}/none: {tmp}/none does not exist"),
])
def test_a_report_option_outside_its_schema_is_one_line_and_writes_nothing(tmp_path, capsys, args, message):
    """Checked through the typed schema (core.cli.parse, the fields' domains) before any work: seeds=[abc] once
    wrote a table."""
    out = tmp_path / "tables"
    with pytest.raises(SystemExit) as e:
        main([f"runs={tmp_path}", f"out={out}", *[a.format(tmp=tmp_path) for a in args]])
    err = capsys.readouterr().err
    assert e.value.code != 0 and err.startswith(f"embexp: error: {message.format(tmp=tmp_path)}") and \
        err.count("\n") == 1, err
    assert not out.exists()


def test_table_alone_keeps_meaning_tinyte_compare_or_curve_and_help_lists_every_paper(capsys):
    from embexp.report import compare, pete, run_curves, select, tinyte

    assert (select(["table=1"])[0] is tinyte and select(["table=compare"])[0] is compare
            and select(["table=curve"])[0] is run_curves)
    assert select(["paper=pete", "runs=x"]) == (pete, ["runs=x"])
    main(["--help"])
    out = capsys.readouterr().out
    for line in ("paper=tinyattn   table=table1|table2|table8|table10|table11|table12|all",
                 "paper=ktoken     table=table1|table2|table3|ablation|all",
                 "paper=pema       table=table9|table10|all",
                 "paper=pete       table=table2", "paper=compare    table=compare", "(no paper)       table=curve"):
        assert line in out
    main(["paper=ktoken", "--help"])
    assert "select_on=" in capsys.readouterr().out
