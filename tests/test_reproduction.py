"""The reproduction ledger (docs/reproduction.md, src/embexp/report/ledger/): each paper's printed cells are a
data file (ledger/printed/<paper>.csv) joined by id with the code that computes embexp's value; every row of
those files that computes is one case of one test, against the paper's printed number at the printed
precision (or, for a row that differs for a stated reason or that the paper does not print, against the
value the row records, so any drift fails); the rows that read EMBEXP_DATA skip without it; the committed
file is what the code renders."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from conftest import DATA
from embexp.report import ledger
from embexp.report.ledger import core, markdown
from embexp.report.ledger.core import KINDS, Row, compare, decide, missing_files, printed

REPO = Path(__file__).resolve().parents[1]
ROWS = [r for rows in ledger.all_rows().values() for r in rows]  # building the rows computes nothing
BY_ID = {r.id: r for r in ROWS}
# the cases: every row of the data files that embexp computes (on a CPU, from the code or the real data)
CELLS = [BY_ID[c["id"]] for p in ledger.PAPERS for c in core.sheet(p)]
COMPUTED = [r for r in CELLS if not (r.gpu or r.hub or r.absent)]


def check(row: Row, out) -> None:
    assert out.status in ("equal", "differs", "unprinted"), f"{row.id}: {out.text}"
    if out.status == "equal":
        assert not row.reason and not row.expected, f"{row.id} now equals the paper: drop its reason and expected value"
    else:
        assert out.ours == row.expected, f"{row.id}: ours is {out.ours}, the row records {row.expected}"


# one worker renders the rows and the committed file: the ledger's lru_caches (models on the meta
# device, tokenizers) are filled once, not once per pytest-xdist worker (~10 s of make test)
LEDGER = pytest.mark.xdist_group("ledger")


@LEDGER
@pytest.mark.parametrize("row", COMPUTED, ids=lambda r: r.id)
def test_a_printed_cell_is_ours_at_its_precision_or_its_recorded_value(row):
    if row.data:
        if DATA is None:
            pytest.skip("EMBEXP_DATA is unset")
        gone = missing_files(row, DATA)
        if gone:
            pytest.skip(f"no {gone[0]} under EMBEXP_DATA")
    check(row, decide(row, DATA if row.data else None))


def test_each_paper_s_printed_cells_are_a_data_file_that_ships_with_the_package():
    assert sorted(p.stem for p in core.DIR.glob("*.csv")) == sorted(ledger.PAPERS)
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '[tool.setuptools.package-data]' in pyproject
    assert '"embexp.report.ledger" = ["printed/*.csv", "estimates/*.csv"]' in pyproject
    for paper in ledger.PAPERS:
        cells = core.sheet(paper)
        ids = [c["id"] for c in cells]
        assert len(ids) == len(set(ids)) and all(i.startswith(paper + ".") for i in ids), paper
        assert all(c["kind"] in KINDS for c in cells), paper
        # a formula row carries the printed numbers it applies the formula to; no other row has inputs
        assert all(bool(c["inputs"]) == (c["kind"] == "formula") for c in cells), paper
        # a recorded value goes with a reason, or with a cell the paper does not print
        assert all(c["reason"] or c["paper"] in ("—", "") for c in cells if c["expected"]), paper


def test_the_table_of_run_sets_holds_every_gpu_row_s_runs_and_nothing_else():
    """Each GPU row names a set (estimates/sets.csv) or a run (estimates/runs.csv); each set's runs are runs;
    every run and set is some row's; a run's model and trainable parameters are ones the code resolves."""
    from embexp.report.ledger import runs

    sets, table = runs.table("sets"), runs.table("runs")
    named = {c["runs"] for p in ledger.PAPERS for c in core.sheet(p) if c["runs"]}
    assert named <= set(sets) | set(table), named - set(sets) - set(table)
    assert set(sets) <= named, set(sets) - named
    members = {r for s in sets.values() for r in s["runs"].split()}
    assert members <= set(table), members - set(table)
    assert set(table) <= members | named, set(table) - members - named
    assert all(not s["runs"] or s["runs"].split() != [k] or s["note"] for k, s in sets.items())  # else: the run
    for r in table.values():
        kind, _, name = r["model"].rpartition(":")
        assert kind in runs.ARCHS and r["precision"] in runs.PEAK, r["run"]
        assert r["trainable"] in ("0", "all") or (not kind and r["trainable"].startswith("method=")), r["run"]
        assert all(runs.works(r[w]) or not r[w] for w in ("train", "evals", "decode")), r["run"]
    with pytest.raises(ValueError, match="no run set or run 'tinyte.nope'"):
        runs.estimate("tinyte.nope")


def test_the_tinyte_runs_select_as_often_as_the_recipe_does():
    """A TinyTE run's selection-loss passes in estimates/runs.csv are one per eval_every optimizer steps of
    conf/trainer/tinyte_paper.yaml over its training rows and epochs."""
    import math

    from embexp.report.ledger import runs, sources

    t = sources.composed("trainer=tinyte_paper", "model=gemma2", "task=cnndm", "method=tinyte_full").trainer
    every = t.batch_size * t.grad_accum * t.eval_every  # training rows between two selection passes
    checked = 0
    for r in runs.table("runs").values():
        select = [w for w in runs.works(r["evals"]) if w.what == "selection loss"]
        if r["run"].startswith("tinyte.") and select:
            (train,) = runs.works(r["train"])
            assert select[0].times == math.floor(train.rows * train.times / every), r["run"]
            checked += 1
    assert checked > 50


def test_the_k_token_runs_shrink_their_prompts_by_k_or_by_the_printed_reduction():
    """Each K-Token run's tokens per row in estimates/runs.csv are prompt / k + answer: k = K, or for a
    token-dropping baseline 1 / (1 - the length reduction the paper printed, ``ledger.ktoken.rate``); the
    prompt and answer are solved from the uncompressed and 2-Token runs of the same table."""
    import math

    from embexp.report.ledger import ktoken, runs

    table = runs.table("runs")
    for n in "123":
        k = {"uncompressed": 1, "k2": 2, "k3": 3, "k4": 4}
        k |= {col: 1 / (1 - ktoken.rate(f"Table {n}", col)) for col in ("selective_context", "llmlingua2")}
        works = {col: runs.works(table[f"ktoken.table{n}.{col}"]["train"])
                 + runs.works(table[f"ktoken.table{n}.{col}"]["evals"]) for col in ktoken.COLS}
        for i, (full, half) in enumerate(zip(works["uncompressed"], works["k2"])):
            prompt = 2 * (full.tokens - half.tokens)
            answer = full.tokens - prompt
            for col in ktoken.COLS:
                assert math.isclose(works[col][i].tokens, prompt / k[col] + answer), (n, col, works[col][i])


def test_a_row_computes_or_says_what_it_needs_and_the_code_keeps_no_printed_cell():
    import importlib
    import inspect

    for r in CELLS:
        assert (r.ours is not None) + bool(r.gpu or r.hub or r.absent) == 1, r.id
        assert r.ours is None or not (r.hub or r.absent), r.id
    for paper in ledger.PAPERS:
        source = inspect.getsource(importlib.import_module(f"embexp.report.ledger.{paper}"))
        assert "Row(" not in source and "def computes()" in source, paper


def test_a_computed_id_missing_from_the_data_file_is_an_error(monkeypatch):
    from embexp.report.ledger import pete
    from embexp.report.ledger.core import Compute

    real = pete.computes
    monkeypatch.setattr(pete, "computes", lambda: {**real(), "pete.t2.typo": Compute(lambda _d: 1)})
    with pytest.raises(ValueError, match="computed but not in pete.csv: pete.t2.typo"):
        ledger.paper_rows("pete")


def measured(row: Row, text: str) -> bool:
    """The committed line of a GPU row read from finished runs (ledger/measured.py): the row's cell,
    paper value and command, a measured status; its value is the runs' (no test)."""
    head = markdown.line(row, decide(row, None)).split(" | ")[:3]
    return row.measure is not None and any(
        ln.split(" | ")[:3] == head and "measured" in ln and ln.endswith(f"`{markdown.celltext(row.command)}` |")
        for ln in text.splitlines()
    )


@LEDGER
def test_the_committed_ledger_is_what_the_code_renders():
    """Every row is in docs/reproduction.md, and every row that reads no data (its value, status, GPU
    estimate) is there exactly as rendered now (a GPU row may instead show its finished runs' value):
    regenerate with `make reproduction`."""
    text = (REPO / "docs" / "reproduction.md").read_text(encoding="utf-8")
    assert text.startswith("# Reproduction ledger") and ledger.COMMAND in text.split("\n", 3)[2]
    stale = []
    for paper, rows in ledger.all_rows().items():
        assert f"## {ledger.PAPERS[paper]}" in text
        for r in rows:
            assert f"| `{r.id}` |" in text, f"{r.id} is not in docs/reproduction.md: make reproduction"
            if not r.data:
                line = markdown.line(r, decide(r, None))
                if line not in text and not measured(r, text):
                    stale.append(line)
                if r.gpu is not None:
                    assert f"- **{r.gpu.ref}**: {r.gpu.text()}" in text, r.gpu.ref
    assert not stale, f"{len(stale)} rows are stale (make reproduction), e.g. {stale[0]}"


def test_a_committed_gpu_row_may_show_its_runs_value():
    from embexp.report.ledger.core import Outcome

    r = BY_ID["tinyte.t1.gemma2.tinyte-full.cnndm"]
    line = markdown.line(r, Outcome("measured", "31.00", "measured: differs by 1.22; GPU estimate ≈ 6.5 GPU-h"))
    assert measured(r, f"x\n{line}\n") and not measured(r, line.replace("measured", "computed"))
    assert not measured(dataclasses.replace(r, measure=None), line)


@pytest.mark.parametrize(
    "text, value, same, shown",
    [
        ("176K", 174_154, False, "174K"),
        ("0.7M", 690_466, True, "0.7M"),
        ("8.9 million", 8_930_048, True, "8.9 million"),
        ("54.9", 54.92, True, "54.9"),
        ("28,996", 30_522, False, "30,522"),
        ("0.05%", 0.049, True, "0.05%"),
        ("~63.4%", 63.93, False, "~63.9%"),
        ("1e-8", 1e-8, True, "1e-8"),
        ("7.5e-6", 7.5e-6, True, "7.5e-6"),
        ("2.45 million", 2_450_000, True, "2.45 million"),
        ("8.5k", 8_551, False, "8.6k"),
        ("0.000", 0.0, True, "0.000"),
    ],
)
def test_a_printed_number_carries_its_precision(text, value, same, shown):
    p = printed(text)
    assert p.same(value) is same and p.render(value) == shown


def test_statuses_of_hand_made_rows(tmp_path):
    row = Row("x", "T", "c", "176K", "cmd", lambda _d: 174_154)
    assert decide(row).text == "differs by 2K (unexplained)"
    row.reason, row.expected = "of Y", "174K"
    assert (decide(row).status, decide(row).text) == ("differs", "differs by 2K because of Y")
    assert compare(Row("s", "T", "c", "Linear", ""), "linear").status == "equal"
    assert decide(Row("u", "T", "c", "—", "", lambda _d: 64.49, expected="64.5%")).ours == "64.5%"
    needs = Row("d", "T", "c", "1", "", lambda _d: 1, data=("glue/x/train.jsonl",))
    assert decide(needs).status == "data" and "EMBEXP_DATA is unset" in decide(needs).text
    assert "no glue/x/train.jsonl under EMBEXP_DATA" in decide(needs, tmp_path).text
    (tmp_path / "glue" / "x").mkdir(parents=True)
    (tmp_path / "glue" / "x" / "train.jsonl").write_text("{}\n")
    assert decide(needs, tmp_path).status == "equal"


def test_every_paper_has_gpu_rows_and_every_status_kind_occurs():
    kinds = {
        p: {
            ("gpu" if r.gpu else "hub" if r.hub else "absent" if r.absent else "data" if r.data else "free")
            for r in rows
        }
        for p, rows in ledger.all_rows().items()
    }
    assert set(kinds) == {"tinyte", "pema", "pete", "tinyattn", "ktoken"}
    assert all({"gpu", "free"} <= k for k in kinds.values()), kinds
    assert {"gpu", "hub", "absent", "data", "free"} <= set().union(*kinds.values())
    unprinted = [r for rows in ledger.all_rows().values() for r in rows if r.paper in ("—", "") and r.data_free]
    assert unprinted and all(r.expected for r in unprinted)


def test_an_estimate_is_arithmetic_that_adds_up():
    from embexp.report.ledger.runs import Arch, Estimate, Run, Work

    a = Arch(n=2_000_000_000, n_matmul=1_000_000_000, d=1024, layers=10, vocab=1000, kv=256)
    run = Run(
        "toy",
        a,
        "bf16",
        trainable=1_000,
        train=(Work("train", 1_000, 100, 2),),
        evals=(Work("eval", 100, 100),),
        seq=100,
        batch=2,
    )
    tr, ev = run.flops()
    assert (tr, ev) == (4 * 1e9 * 2e5, 2 * 1e9 * 1e4)
    assert abs(run.hours() - (tr + ev) / (0.4 * 989.4e12) / 3600) < 1e-12
    gb, terms = run.memory()
    assert abs(gb - (8e9 + 12_000 + 10 * 2 * 100 * 1024 * 34 + 8 * 2 * 100 * 1000) / 1e9) < 1e-9 and len(terms) == 4
    est = Estimate("k", lambda: [run])
    assert (
        "FLOP" in est.text()
        and est.summary().startswith("≈ ")
        and Estimate("d", lambda: [], "derived").summary() == "derived [d]"
    )


def test_an_equal_row_says_what_it_rests_on_and_the_summary_counts_each_kind_apart():
    from embexp.report.ledger.core import Outcome
    from embexp.report.ledger.markdown import summary

    kinds = {r.id: r.kind for r in ROWS}
    assert all(kinds[r.id] == "formula" for r in ROWS if r.id.startswith("ktoken.t") and r.id.endswith(".pl"))
    assert kinds["ktoken.tree.x3large.train"] == kinds["tinyte.t2.llama31.lorar8.tp"] == "construction"
    assert kinds["tinyattn.t4.tinyattn_1h_sst2"] == kinds["pema.t8.adam_ε.pema_glue"] == "config"
    assert kinds["tinyte.t1.gemma2.tinyte-full.tp"] == "reproduced"
    assert set(kinds.values()) == set(KINDS)
    rows = [Row(f"r{k}", "T", "c", "1", "", lambda _d: 1, kind=k) for k in KINDS]
    assert [decide(r).text for r in rows] == [f"equal at the paper's precision ({v})" for v in KINDS.values()]
    lines = summary({"ktoken": [(r, decide(r)) for r in rows] + [(rows[0], Outcome("gpu", "", ""))]})
    assert all(f"equal: {v}" in lines[0] for v in KINDS.values()) and "needs a GPU" in lines[0]
    assert lines[2].startswith("| K-Token Merging | 5 | 1 | 1 | 1 | 1 | 1 |")
    with pytest.raises(ValueError, match="kind 'echo' is not one of"):
        Row("bad", "T", "c", "1", "", kind="echo")


def test_the_ledger_s_four_honesty_points():
    """XNLI's blank lr cell is inferred (no printed value), Tiny-Attention Table 1 runs the spec's seeds,
    each calibrated LoRA count has PEFT's default-target count beside it."""
    from embexp.sweep.runner import get_table

    by_id = BY_ID
    xnli = by_id["pema.t8.learning_rate_peak.pema_xnli"]
    assert decide(xnli).status == "unprinted" and "inferred" in xnli.cell
    seeds = get_table("tinyattn/table1").vars["seeds"].default
    t1 = by_id["tinyattn.t1.1h"]
    assert f"({len(seeds)} seeds" in t1.cell and all(run.copies == len(seeds) for run in t1.gpu.runs)
    assert all("calibrated" in by_id[f"tinyte.t2.{m}.lorar8.tp"].reason for m in ("gemma2", "qwen25"))
    assert "LoRA targets calibrated" in markdown.STATUSES  # llama31's row is equal: its kind says it
    for model in ("gemma2", "qwen25", "llama31"):
        assert decide(by_id[f"tinyte.t2.{model}.lorar8.peft_default"]).status == "unprinted"


def test_no_report_module_holds_a_copy_of_a_printed_number():
    """The paper's numbers live in ledger/printed/<paper>.csv only: a report module reads them there
    (``core.printed_cell``, ``printed_numbers``, ``inputs``), a study through ``studies.printed_cell``. No module
    under src/embexp/report or src/embexp/studies holds, as a code literal, a printed number with a fraction and
    three significant digits or more (96.6, 88.57, 0.664) or a string that is a printed cell ('77.40')."""
    import ast
    import re

    cells, numbers = set(), set()
    for paper in ledger.PAPERS:
        for c in core.sheet(paper):
            cells.add(c["paper"].strip())
            for t in re.findall(r"\d+\.\d+", f"{c['paper']} {c['inputs']}"):
                if len(t.replace(".", "").lstrip("0")) >= 3 and float(t) != int(float(t)):
                    numbers.add(float(t))
    assert {96.6, 88.57, 0.664, 1.293} <= numbers and "77.40" in cells  # the scan sees what it looks for
    copies = []
    for path in sorted(p for d in ("report", "studies") for p in (REPO / "src" / "embexp" / d).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            value = getattr(node, "value", None) if isinstance(node, ast.Constant) else None
            if (isinstance(value, float) and value in numbers) or (isinstance(value, str) and value in cells
                                                                    and re.fullmatch(r"\d+\.\d+", value)):
                copies.append(f"{path.relative_to(REPO)}:{node.lineno}: {value!r}")
    assert not copies, "printed numbers copied into modules (read them from the CSVs): " + ", ".join(copies)
