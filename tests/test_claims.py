"""The claims page (report/claims.py): each rule's verdict, pending checks, and the three checks on the claims'
own runs read from run records written by the results API exactly as a run writes them."""

from __future__ import annotations

import contextlib
import csv
import shutil
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from embexp import EmbexpError
from embexp.core.config import run_name
from embexp.core.records import RunRecord
from embexp.report import claims
from embexp.report.claims import FAILS, HOLDS, PENDING, UNSEP, Config, judge


def run(root: Path, method: str, subset: str, lr: float, seed: int, record: dict, k=None, tag="", n=None,
        config: dict | None = None, model: str = "m") -> Path:
    """A finished run written by the results API; ``config``: its config beyond these fields (a check's protocol)."""
    tag = tag or f"lr{lr:g}" + (f"_n{n}" if n else "")
    model = (config or {}).get("model", {}).get("name", model)
    rec = RunRecord(Path(run_name(str(root), "glue", subset, model, method, tag, seed)))
    method_cfg = {"name": method, **({"k": k} if k is not None else {})}
    full = {"trainer": {"batch_size": 8}}  # a run's config.yaml holds every field: where the protocol sets none
    rec.start(OmegaConf.merge(full, config or {}, {"task": {"name": "glue", "subset": subset}, "model": {"name": model},
                                                   "method": method_cfg, "trainer": {"lr": lr}, "tag": tag,
                                                   "seed": seed}))
    rec.finish({"method": method, "model": model, "task": f"glue_{subset}", "seed": seed,
                **({"n_train_examples": n} if n else {}), **record})
    return rec.dir


def protocol(folder: str, alternative: int = 0, **changes) -> dict:
    """The config of a run of the check on runs/<folder> as claims.yaml's run_config states it (of a list of
    values, the first), with ``changes`` (dotted keys as a__b)."""
    check = next(c for p in yaml.safe_load(claims.SPEC.read_text()) for c in p["checks"] if c.get("runs") == folder)
    out: dict = {}
    for key, v in {**check["run_config"][alternative], **{k.replace("__", "."): v for k, v in changes.items()}}.items():
        *parents, last = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = v[0] if isinstance(v, list) and key != "task.datasets" else v
    return out


@pytest.mark.parametrize("rule,diff,se,tol,want", [
    ("beats", 3.0, 1.0, 0, HOLDS), ("beats", 1.0, 1.0, 0, UNSEP), ("beats", -3.0, 1.0, 0, FAILS),
    ("beats", 0.5, None, 0, HOLDS),  # one run each: the point value alone
    ("matches", -1.5, 1.0, 0, UNSEP), ("matches", -2.5, 1.0, 0, FAILS), ("matches", -2.5, 0.5, 2.0, UNSEP),
    ("matches", -1.5, 0.5, 2.0, HOLDS),
    ("matches", 4.0, None, 0, HOLDS), ("matches", -0.1, None, 0, FAILS),
])
def test_rules(rule, diff, se, tol, want):
    assert judge(rule, diff, se, tol)[0] == want


def test_a_failed_match_names_the_bound_it_fell_below():
    # the bound is tolerance + 2 s.e. as one number, not "2 + 2 s.e. = 0.11" (which reads as a sum of 0.11)
    assert judge("matches", -3.0, 0.25, 2.0)[1] == \
        "-3.00 points is below -2.50, the tolerance 2 plus 2 s.e. (0.50)"
    assert judge("matches", -3.0, None, 2.0)[1] == "-3.00 points is below -2, the tolerance (no s.e.: one run each)"
    assert judge("matches", -3.0, None, 2.0, alone="lora has one run")[1] == \
        "-3.00 points is below -2, the tolerance (no s.e.: lora has one run)"


def test_the_spec_names_known_rules_and_every_field():
    papers = yaml.safe_load(claims.SPEC.read_text())
    assert [p["paper"] for p in papers] == ["TinyTE", "PEMA", "PETE", "Tiny-Attention", "K-Token Merging"]
    for p in papers:
        assert {"quote", "where", "short", "gpu", "checks"} <= set(p)
        for c in p["checks"]:
            assert c["rule"] in ("beats", "matches", "paired", "gap") and ("table" in c) != ("runs" in c)


def test_the_summary_row_shows_the_headline_check_once_it_has_run():
    paper = {"paper": "P", "short": "claim", "gpu": "make p"}
    table = ({"name": "at the comparison's budget"}, claims.Verdict(FAILS, "a 70.7 vs b 88.2", "", []))
    gap = ({"name": "against training rows", "headline": True}, claims.Verdict(FAILS, "gap 12.6, 7.8", "", []))
    pending = ({"name": "against training rows", "headline": True}, claims.Verdict(PENDING, "", "", []))
    assert claims.summary_row(paper, [table, gap]) == \
        f"| P | claim | against training rows | gap 12.6, 7.8 | {FAILS} (2 of 2 checks run) | make p |"
    # the headline not yet run: the first check that ran, its name beside its numbers
    assert claims.summary_row(paper, [pending, table]) == \
        f"| P | claim | at the comparison's budget | a 70.7 vs b 88.2 | {FAILS} (1 of 2 checks run) | make p |"
    spec = yaml.safe_load(claims.SPEC.read_text())
    assert [c["name"] for p in spec for c in p["checks"] if c.get("headline")] == \
        ["SmolLM2-135M, SST-2, gap against training rows"]


def compare_table(folder: Path, name: str, rows: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with (folder / name).open("w", newline="") as fh:
        w = csv.DictWriter(fh, keys)
        w.writeheader()
        w.writerows(rows)


def test_a_table_check_reads_the_rendered_comparison_and_marks_edge_lrs(tmp_path):
    rows = [{"Method": "A", "accuracy": 80.0, "accuracy se": 0.2, "lr": "0.001", "lrs tried": "0.0003 0.001 0.003",
             "seeds": 3, "#TP": 10},
            {"Method": "B", "accuracy": 82.0, "accuracy se": 0.4, "lr": "6e-05", "lrs tried": "6e-06 2e-05 6e-05",
             "seeds": 3, "#TP": 99},
            {"Method": "Majority class (answers it always)", "accuracy": 50.9}]
    compare_table(tmp_path, "t.csv", rows)
    check = {"table": "t.csv", "metric": "accuracy", "method": "A", "against": "B", "rule": "matches", "tol": 0}
    v = claims.table_check(check, Config(compare=str(tmp_path)))
    assert v.verdict == FAILS and "-2.00" in v.why
    labels = [r[0] for r in v.rows]
    assert labels == ["A", "B (lr at the grid's edge)", "Majority class (answers it always)"]
    missing = claims.table_check({**check, "table": "none.csv"}, Config(compare=str(tmp_path)))
    assert missing.verdict == PENDING and "make compare" in missing.why


def test_paired_runs_pair_on_task_lr_and_seed(tmp_path):
    mem = lambda mb: {"train": {"state_memory": {"total_bytes": mb * 2**20}}}  # noqa: E731
    for lr in (2e-5, 1e-4):
        run(tmp_path, "full_ft", "sst2", lr, 0, {"metrics": {"accuracy": 80.0}, **mem(346)})
        run(tmp_path, "pema", "sst2", lr, 0, {"metrics": {"accuracy": 80.0 + (0.2 if lr > 5e-5 else 0)}, **mem(206)})
    run(tmp_path, "pema", "mrpc", 1e-4, 0, {"metrics": {"accuracy": 70.0}})  # no full FT partner: not a pair
    check = {"runs": "x", "method": "pema", "against": "full_ft", "rule": "paired", "tol": 0.0, "metric": "accuracy"}
    from embexp.core.records import collect_runs

    v = claims.paired_check(check, collect_runs(str(tmp_path)))
    assert v.verdict == HOLDS and len(v.rows) == 2
    assert "0.1 ± 0.1 points over 2 pairs" in v.numbers and "206 MB vs 346 MB" in v.numbers
    assert claims.paired_check(check, []).verdict == PENDING


def test_the_gap_check_chooses_on_held_out_rows_at_each_size(tmp_path):
    def curve(held, val, flat=False):
        return {"curve": [{"step": 100, "ll_accuracy": val - 5, "select": {"ll_accuracy": held - 5}},
                          {"step": 200, "ll_accuracy": val, "select": {"ll_accuracy": held}}],
                "metrics": {"ll_accuracy": val}, "train": {"steps": 200, "stopped_early": flat}}
    for n, lora, kt in ((2000, 88.0, 70.0), (8000, 90.0, 89.0)):
        run(tmp_path, "lora", "sst2", 1e-3, 0, curve(85, lora, flat=n > 2000), n=n)
        run(tmp_path, "ktoken", "sst2", 3e-4, 0, curve(80, kt), k=2, n=n)
    from embexp.core.records import collect_runs

    check = {"name": "gap", "runs": "x", "method": "ktoken", "against": "lora", "rule": "gap", "tol": 2.0,
             "protocol": "p"}
    v = claims.gap_check(check, collect_runs(str(tmp_path)), Config(out=str(tmp_path / "docs" / "claims.md"),
                                                                     img=str(tmp_path / "docs" / "img")))
    assert v.verdict == HOLDS and "2,000 rows: 18.0, 8,000 rows: 1.0" in v.numbers
    # the curve over the sizes: a PNG per check, linked from the page as the page's folder reaches it
    assert v.figure == "img/claims_x.png" and (tmp_path / "docs" / "img" / "claims_x.png").stat().st_size > 0
    assert "![gap: ktoken and lora against the training rows](img/claims_x.png)" in claims.detail(check, v)
    assert "Gap to lora (ll_accuracy; the best ktoken run at each size), 2,000 rows: 18.0, 8,000 rows: 1.0 " \
        "points." in claims.detail(check, v)  # the trend beside the verdict's largest size
    assert {(r[0], r[1]) for r in v.rows} == {(2000, "lora"), (2000, "ktoken K=2"), (8000, "lora"),
                                              (8000, "ktoken K=2")}
    # how long each trained and why it stopped: the held-out curve flat (trainer.curve_patience) or the cap
    assert {(r[0], r[1], r[7]) for r in v.rows if r[1] == "lora"} == {(2000, "lora", "200 (cap)"),
                                                                   (8000, "lora", "200 (flat)")}
    assert "| 8,000 | lora | 90.0 | 200 | 0.001 | 1 | 200 (flat) |" in claims.detail(check, v)
    assert claims.detail({**check, "reading": "the gap\n  narrows"}, v)[-2] == "What the runs show: the gap narrows."
    # an untrained zero-shot run shows at 0 rows; a balanced metric's majority class is 50
    run(tmp_path, "zero_shot", "sst2", 1e-3, 0, {"metrics": {"ll_balanced_accuracy": 61.0}, "n_eval_examples": 100})
    balanced = {**check, "metric": "ll_balanced_accuracy"}
    v = claims.gap_check(balanced, [r for r in collect_runs(str(tmp_path)) if r["method"] == "zero_shot"],
                         Config(out="", img=str(tmp_path / "img")))
    assert v.verdict == PENDING and [(r[0], r[1], r[2]) for r in v.rows] == [(0, "zero-shot", 61.0),
                                                                           (0, "majority class", 50.0)]
    # a second ktoken seed at the largest size: its s.e. is over seeds, lora's one run has none, and the
    # verdict says which side lacks it
    run(tmp_path, "ktoken", "sst2", 3e-4, 1, curve(80, 80.0), k=2, n=8000)
    v = claims.gap_check(check, collect_runs(str(tmp_path)), Config(out="", img=str(tmp_path / "img")))
    assert v.verdict == FAILS and v.why == "-5.50 points is below -2, the tolerance (no s.e.: lora has one run)"


def test_the_page_renders_pending_checks_without_numbers(tmp_path):
    out = tmp_path / "claims.md"
    claims.render(Config(runs=str(tmp_path / "none"), compare=str(tmp_path / "none"), records=str(tmp_path / "none"),
                         out=str(out), img=str(tmp_path / "img")))
    text = out.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and " | pending" in line]
    assert len(rows) == 5 and "never edit it by hand" in text
    assert "What the runs show" not in text  # a reading explains a verdict: none before the runs


def test_the_page_renders_the_same_from_the_committed_digest_when_the_runs_are_gone(tmp_path, capsys):
    """Output folders do not travel with the repository: write_digests=true writes each check's run records into a
    digest, and a checkout without the runs renders the same page from it. Rendering alone writes no digest: it
    names the lines the runs would change."""
    runs, docs = tmp_path / "outputs", tmp_path / "docs"
    pema = protocol("pema")
    for lr in (2e-5, 1e-4):
        run(runs / "pema", "full_ft", "sst2", lr, 0, {"metrics": {"accuracy": 80.0}}, config=pema)
        run(runs / "pema", "pema", "sst2", lr, 0, {"metrics": {"accuracy": 80.5}}, config=pema)
    cfg = dict(compare=str(tmp_path / "none"), out=str(docs / "claims.md"), img=str(docs / "img"),
               records=str(docs / "claims"))
    digest = docs / "claims" / "pema.jsonl"
    claims.render(Config(runs=str(runs), **cfg))
    page = (docs / "claims.md").read_text()
    keys = "glue_sst2/minilm/full_ft_lr0.0001/seed0, glue_sst2/minilm/full_ft_lr2e-05/seed0, " \
        "glue_sst2/minilm/pema_lr0.0001/seed0, glue_sst2/minilm/pema_lr2e-05/seed0"
    assert "+0.50 points" in page and not digest.exists()
    assert f"embexp: warning: {digest} left as it is; the runs would change it, 0 -> 4 lines: 4 added ({keys}) " \
        "(write_digests=true writes it)\n" in capsys.readouterr().err
    claims.render(Config(runs=str(runs), write_digests=True, **cfg))  # the explicit step
    assert f"(written: {digest}, 0 -> 4 lines: 4 added ({keys}))" in capsys.readouterr().out
    assert (docs / "claims.md").read_text() == page and len(digest.read_text().splitlines()) == 4
    assert not (docs / "claims" / "pete.jsonl").exists()  # no records, no digest
    assert str(tmp_path) not in digest.read_text()  # runs are named by their path under the folder
    claims.render(Config(runs=str(runs), write_digests=True, **cfg))  # nothing changed: nothing written or said
    assert "(written: " not in capsys.readouterr().out

    shutil.rmtree(runs)  # a new checkout
    claims.render(Config(runs=str(runs), **cfg))
    assert (docs / "claims.md").read_text() == page

    # a rerun replaces its own line and keeps the digest's others, once asked to
    rerun = run(tmp_path / "rerun" / "pema", "pema", "sst2", 1e-4, 0, {"metrics": {"accuracy": 81.5}}, config=pema)
    before = digest.read_bytes()
    claims.render(Config(runs=str(tmp_path / "rerun"), **cfg))
    assert digest.read_bytes() == before and "= 1.0 ± 0.5 points over 2 pairs" in (docs / "claims.md").read_text()
    assert "4 -> 4 lines: 1 replaced (glue_sst2/minilm/pema_lr0.0001/seed0)" in capsys.readouterr().err
    claims.render(Config(runs=str(tmp_path / "rerun"), write_digests=True, **cfg))
    lines = digest.read_text().splitlines()
    assert len(lines) == 4 and sum('"accuracy":81.5' in line for line in lines) == 1 and rerun.is_dir()
    assert "4 -> 4 lines: 1 replaced (glue_sst2/minilm/pema_lr0.0001/seed0))" in capsys.readouterr().out

    digest.write_text(digest.read_text() + "{not json\n")
    with pytest.raises(EmbexpError, match=r".*pema.jsonl:5: not JSON"):
        claims.render(Config(runs=str(runs), **cfg))


def committed(tmp_path: Path) -> Path:
    """A copy of the committed digests, to plant runs beside."""
    records = tmp_path / "records"
    shutil.copytree(Path(__file__).resolve().parents[1] / "docs" / "claims", records)
    return records


def test_a_smoke_run_of_another_model_is_skipped_named_and_the_digest_is_unchanged(tmp_path, capsys):
    """Two tiny-model debug=smoke runs under the PEMA check's runs folder once became a fifth pair and two more
    digest lines: a run enters a check only when its config is the check's protocol (claims.yaml run_config)."""
    from embexp.report import main

    records, runs = committed(tmp_path), tmp_path / "runs"
    smoke = protocol("pema", model__name="tiny_bert", model__source="tiny", task__source="fixture",
                     task__max_train_samples=24, task__select_size=6, trainer__batch_size=4, trainer__max_steps=4,
                     output_root="outputs/smoke")
    planted = [run(runs / "pema", m, "sst2", 2e-5, 0, {"metrics": {"accuracy": 50.0}}, config=smoke)
               for m in ("full_ft", "pema")]
    cheat = run(runs / "pema", "pema", "sst2", 1e-4, 0, {"metrics": {"accuracy": 99.0}},  # real model, 24 rows
                config=protocol("pema", task__max_train_samples=24))
    before = (records / "pema.jsonl").read_bytes()
    args = [f"runs={runs}", f"records={records}", f"out={tmp_path / 'claims.md'}", f"img={tmp_path}"]
    for extra in ([], ["write_digests=true"]):
        main(["paper=claims", *args, *extra])
        err = capsys.readouterr().err
        assert (records / "pema.jsonl").read_bytes() == before  # bytes equal, written or not
        for d in planted:
            assert (f"embexp: warning: skipped the run {d} for the check 'MiniLM-L6, SST-2 and MRPC, identical "
                    f"settings': model.name is \"tiny_bert\" (the check's runs: \"minilm\"); model.source is \"tiny\" "
                    f"(the check's runs: \"minilm\"); task.source is \"fixture\" (the check's runs: \"auto\"); "
                    f"4 more\n") in err
        assert f"skipped the run {cheat} for the check 'MiniLM-L6, SST-2 and MRPC, identical settings': " \
            "task.max_train_samples is 24 (the check's runs: 4000)\n" in err
        assert "over 4 pairs" in (tmp_path / "claims.md").read_text()


def test_every_committed_digest_line_is_a_run_of_its_check_and_the_sweep_writes_only_such_runs():
    """claims.yaml's run_config is what src/embexp/sweep/papers/claims.py writes: each train command of the
    sweep's dry run (tests/golden) sets every run_config field it names to a value the check accepts, and every
    committed digest line is read (none skipped)."""
    import shlex

    from embexp.report import digest

    repo = Path(__file__).resolve().parents[1]
    checks = {c["runs"]: c for p in yaml.safe_load(claims.SPEC.read_text()) for c in p["checks"] if "runs" in c}
    for path in sorted((repo / "docs" / "claims").glob("*.jsonl")):
        for i, rec in digest.read(path):
            assert digest.protocol_error(rec, checks[path.stem]) == "", f"{path.name}:{i}"
    seen = set()
    for cmd in (repo / "tests" / "golden" / "sweep" / "claims_runs.txt").read_text().splitlines():
        args = dict(a.split("=", 1) for a in shlex.split(cmd)[3:])
        if "embexp.train" not in cmd:
            continue
        folder = args["output_root"].rsplit("/", 1)[1]
        given: dict = {}  # the fields the command sets, nested as in a run's config
        for k, v in args.items():
            *parents, last = {"method": "method.name", "model": "model.name", "task": "task.name"}.get(k, k).split(".")
            node = given
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = yaml.safe_load(v)
            with contextlib.suppress(TypeError, ValueError):  # 5e-4: a float to Hydra, a string to YAML 1.1
                node[last] = float(node[last]) if isinstance(node[last], str) else node[last]
        alternatives = [{k: v for k, v in alt.items() if digest.value_at(given, k) is not KeyError}
                        for alt in checks[folder]["run_config"]]
        assert any(not digest.mismatch(given, alt) for alt in alternatives), cmd
        seen.add(folder)
    assert seen == set(checks)


def sections(page: str) -> dict[str, str]:
    """A claims page's check sections by the check's name: from its bold name to the next check or paper."""
    out, name = {}, None
    for line in page.splitlines():
        if line.startswith("## "):
            name = None
        elif line.startswith("**"):
            name = line[2:].split("**", 1)[0]
            out[name] = ""
        if name:
            out[name] += line + "\n"
    return out


def test_the_committed_page_is_what_its_committed_records_render(tmp_path, monkeypatch):
    """docs/claims.md is, byte for byte, what `make claims` renders in a fresh clone: from the repository alone
    (the comparison's tables in docs/compare, the run records' digests in docs/claims), without any run (a copy of
    those folders, the default paths, no outputs/). A check whose records are missing says so in the page, with
    the command that makes them: none is dropped."""
    repo = Path(__file__).resolve().parents[1]
    for folder in ("compare", "claims"):
        shutil.copytree(repo / "docs" / folder, tmp_path / "docs" / folder)
    monkeypatch.chdir(tmp_path)
    page = claims.render(Config(out="", img=str(tmp_path / "img")))["claims"]
    committed = (repo / "docs" / "claims.md").read_text()
    assert sections(page).keys() == sections(committed).keys()
    assert page == committed, "docs/claims.md is not what `make claims` renders from the repository"
    for name, text in sections(page).items():
        if "Verdict: **pending**" in text:
            assert "`make claims_runs PARTS=" in text and "then `make claims` writes the digest" in text, name


@pytest.mark.parametrize("content, expected", [
    (b"\x89PNG\r\n\x1a\n\x00\xff\xfe", r"pema\.jsonl:1: not UTF-8 text \(expected one JSON object a line"),
    (b"{}\n", r"pema\.jsonl:1: no 'run' \(expected one JSON object a line, a run's record"),
    (b'{"run": "a/seed0"}\n', r"pema\.jsonl:1: no 'method' \(expected"),
    (b"[1, 2]\n", r"pema\.jsonl:1: a JSON list, not an object"),
    (b"\n{not json\n", r"pema\.jsonl:2: not JSON \(Expecting property name"),
    (b'{"run": "a", "method": "pema", "seed": 0, "task": "glue_sst2", "subset": "sst2", "metrics": {}, '
     b'"config": {"model": {}, "task": {}, "method": {}}}\n', r"pema\.jsonl:1: no config\.trainer mapping"),
    (b'{"run": "a", "method": "pema", "seed": "0", "task": "t", "subset": "", "metrics": {}, "config": {}}\n',
     r"""pema\.jsonl:1: 'seed' is "0", not a int"""),
    (b'{"run": "a", "method": "pema", "seed": 0, "task": "t", "subset": "", "metrics": {"accuracy": "high"}, '
     b'"config": {"model": {}, "task": {}, "method": {}, "trainer": {"lr": 1}}}\n',
     r"pema\.jsonl:1: metrics\.accuracy is not a number"),
])
def test_a_records_file_that_is_no_digest_is_one_line_naming_the_file_and_line(tmp_path, capsys, content, expected):
    from embexp.report import main

    records = committed(tmp_path)
    (records / "pema.jsonl").write_bytes(content)
    page = tmp_path / "claims.md"
    with pytest.raises(SystemExit) as e:
        main(["paper=claims", f"records={records}", f"runs={tmp_path}", f"out={page}", f"img={tmp_path}",
              "write_digests=true"])
    err = capsys.readouterr().err
    assert e.value.code != 0 and err.count("\n") == 1 and err.startswith("embexp: error: ") and "Traceback" not in err
    import re

    assert re.search(expected, err), err
    assert (records / "pema.jsonl").read_bytes() == content and not page.exists()  # nothing written


def test_a_digest_that_repeats_a_run_and_the_claims_folders_are_checked_first(tmp_path, capsys):
    from embexp.report import main

    records = committed(tmp_path)
    first = (records / "pema.jsonl").read_text().splitlines()[0]
    (records / "pema.jsonl").write_text(first + "\n" + first + "\n")
    cases = [([f"records={records}"], "pema.jsonl:2: the run 'glue_mrpc/minilm/full_ft_lr0.0001/seed0' again "
                                      "(line 1): one line a run"),
             ([f"records={records / 'pete.jsonl'}"], "is a file: records names the folder of the digests"),
             ([f"records={tmp_path / 'none'}"], "does not exist (the folder of the digests"),
             (["records=''", "write_digests=true"], "write_digests=true needs records= a folder"),
             (["records="], "records= (empty) is not text; for empty text: records=''"),
             ([f"compare={tmp_path / 'none'}"], "is not a folder (the comparison's rendered tables"),
             ([f"runs={tmp_path / 'none'}"], "does not exist (runs names the run directories"),
             (["write_digests=maybe"], "write_digests=maybe is not true or false")]
    for args, message in cases:
        with pytest.raises(SystemExit) as e:
            main(["paper=claims", f"runs={tmp_path}", f"out={tmp_path / 'claims.md'}", f"img={tmp_path}", *args])
        err = capsys.readouterr().err
        assert e.value.code != 0 and err.count("\n") == 1 and message in err, (args, err)
    assert not (tmp_path / "claims.md").exists()
