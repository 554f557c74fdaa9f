"""The sweep runner (python -m embexp.sweep) and the paper tables under src/embexp/sweep/papers/.

The golden files under tests/golden/sweep/ hold the exact commands every table prints with --dry-run
(several variable settings each): a restructuring that changes any cell of any table fails here.
Regenerate them (after checking the change is wanted) with ``EMBEXP_REGEN_GOLDEN=1 pytest tests/test_sweep.py``.
``methods.txt`` beside them names the methods registered when they were written: a method added since
(one file + one YAML) is left out of the registry while they are compared, so it does not change
them, while any change to the commands of the methods they know still fails.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import shlex
from pathlib import Path

import pytest

from conftest import compose, execute_in_process, run_cli
from embexp import EmbexpError, sweep
from embexp.sweep import runner

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "sweep"

# spec -> the variable settings / --extra of each golden section (a spec not here: [[]], its defaults)
VARIANTS = {
    "tinyte/table1": [[], ["--extra", "debug=smoke output_root=/tmp/x", "seeds=0 1", "models=gemma2"]],
    "tinyte/table2": [[], ["seeds=0 1"]],
    "tinyte/table11": [[]],
    "tinyte/table3": [[], ["--extra", "debug=smoke", "seeds=3", "models=gemma2 qwen25"]],
    "tinyte/table4": [[], ["seeds=0 1", "--extra", "debug=smoke"]],
    "tinyte/table9": [[], ["nli_judge=smollm2", "models=gemma2"]],
    "tinyte/table10": [[], ["nli_judge=smollm2", "seeds=0 1"]],
    "tinyte/table5": [[], ["seeds=0 1"]],
    "tinyte/table6": [[], ["judge=tiny_llama", "--extra", "debug=smoke", "seeds=1 2"]],
    "tinyte/tinyte_alpaca": [[], ["seeds=0 1"]],
    "tinyte/fig3": [["--extra", "judge.model=tiny_llama judge.backend=transformers"]],
    "tinyte/ranking": [[], ["seeds=0 1"]],
    "tinyte/table8": [[], ["seeds=0 1", "--extra", "debug=smoke"]],
    "tinyattn/table1": [[], ["seeds=1 2 3 4", "fewglue_data=/data"]],
    "tinyattn/table2": [[], ["select_on=heldout"]],
    "tinyattn/table8": [[], ["select_on=reported", "seeds=0 1"], ["--extra", "debug=smoke output_root=/tmp/x"]],
    "tinyattn/table10": [[]],
    "tinyattn/table11": [[], ["select_on=reported"]],
    "tinyattn/table12": [[]],
    "ktoken/table1": [[], ["tree=small", "select_on=reported", "seeds=42", "questions=random"],
                      ["--extra", "debug=smoke"]],
    "ktoken/table2": [[], ["--extra", "debug=smoke", "seeds=42"]],
    "ktoken/table3": [[]],
    "ktoken/ablation": [[], ["tree=small"]],
    "ktoken/learning": [[], ["--extra", "debug=smoke"]],
    "pema/table2": [[], ["vocab_args=models=[minilm] source=fixture"]],
    "pema/table3": [[]],
    "pema/table4": [[]],
    "pema/table9": [[], ["seeds=0", "glue=rte cola", "--extra", "debug=smoke"]],
    "pema/table10": [[], ["models=bert xlmr", "glue=rte", "seeds=0 1"], ["models=bert"]],
    "pema/tables": [[]],
    "pete/table2": [[], ["recipe=cpu", "steps=300", "data_args=task.data_dir=d task.datasets=[snli]"],
                    ["--extra", "debug=smoke output_root=/tmp/x"]],
    "compare/curves": [[], ["--extra", "debug=smoke", "steps=2", "kinds=encoder decoder", "tasks=sst2", "seeds=0 1"],
                       ["kinds=decoder"], ["kinds=decoder", "dec_tasks=sst2 rte", "ktoken_check=1"]],
}


def dry(spec: str, *args: str, env: dict | None = None) -> str:
    out = io.StringIO()
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out):
            assert sweep.main([spec, "--dry-run", "--py", "python", *args]) == 0
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return out.getvalue()


def golden_text(spec: str) -> str:
    """The dry runs of a table with each of its variable settings (a table not in VARIANTS: its defaults)."""
    variants = VARIANTS.get(spec, [[]])
    return "".join(f"## {shlex.join(v)}\n" + dry(spec, *v, env={"EMBEXP_DATA": "/data"}) for v in variants)


def test_every_variant_names_a_spec():
    assert set(VARIANTS) <= set(sweep.spec_names())


KNOWN = GOLDEN / "methods.txt"  # the methods registered when the golden files were written


@contextlib.contextmanager
def registry_as_when_written():
    """The method registry without the methods that ``methods.txt`` does not name (the lists that the
    specs read from the classes, e.g. the comparison's, then hold only the known methods), restored
    in its order afterwards; a known method that is gone stays gone, so its missing commands fail."""
    from embexp.methods.registry import METHODS, registered

    saved, known = dict(METHODS), set(KNOWN.read_text().split())
    try:
        for name in set(registered()) - known:
            del METHODS[name]
        yield
    finally:
        METHODS.clear()
        METHODS.update(saved)


@pytest.mark.parametrize("spec", sweep.spec_names())
def test_dry_run_commands_equal_the_golden_file(spec):
    """Every spec has its golden file: a new table's is written by the command its failure names."""
    path = GOLDEN / f"{spec.replace('/', '_')}.txt"
    if os.environ.get("EMBEXP_REGEN_GOLDEN"):
        from embexp.methods.registry import registered

        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(golden_text(spec))
        KNOWN.write_text("".join(f"{name}\n" for name in sorted(registered())))
    with registry_as_when_written():
        text = golden_text(spec)
    regen = f"EMBEXP_REGEN_GOLDEN=1 pytest tests/test_sweep.py -k '{spec}]' (read it before you commit it)"
    assert path.is_file(), f"{spec} has no golden file: write it with {regen}"
    assert text == path.read_text(), f"{spec}: the dry-run commands changed (if that is wanted: {regen})"


def shape(args: list[str]) -> tuple:
    """A train command's overrides with only the experiment file's value kept (its 'step')."""
    return tuple(a if a.startswith("experiment=") else a.split("=", 1)[0] for a in args)


def train_commands(every: bool):
    """(spec, args) of the train commands of every table with debug=smoke: every distinct one (but one
    model and seed of each), or the first of each shape in any table (`every=False`: its keys and experiment
    file; a shape two tables share composes once)."""
    seen, out = set(), []
    for spec in sweep.spec_names():
        _, cmds = sweep.commands(spec, [], ["debug=smoke"])
        for c in cmds:
            if c.kind != "train":  # the other kinds' arguments name train cells' run directories: not needed here
                continue
            runner.resolve(c, ["debug=smoke"], dry=True)
            args = runner.with_extra(c, ["debug=smoke"], "x")
            key = shape(args) if not every else tuple(a for a in args if not a.startswith(("seed=", "model=")))
            if "-m" not in args and not c.build and key not in seen:
                seen.add(key)
                out.append((spec, args))
    return out


def check_composes(spec: str, args: list[str]) -> None:
    assert "trainer.resume=true" in args
    cfg = compose(*sweep.train.overrides(args))
    assert cfg.model.source == "tiny" or cfg.model.name == "minilm", (spec, args)
    assert any(a.startswith("trainer.max_steps=") for a in args) or cfg.trainer.max_steps == 4, (spec, args)


def test_each_shape_of_train_command_composes_with_debug_smoke():
    """The first train command of every shape in the tables composes with debug=smoke appended
    (experiment files exist, overrides are valid keys) and gets trainer.resume=true."""
    cmds = train_commands(every=False)
    assert len(cmds) >= 20
    for spec, args in cmds:
        check_composes(spec, args)


@pytest.mark.slow
def test_every_train_command_composes_with_debug_smoke():
    """Every distinct train command (one model and seed of each): ~130 composes, each equal to Hydra's own
    compose of the whole list (as test_guards composes it)."""
    from omegaconf import OmegaConf

    from test_guards import hydra_tree

    for spec, args in train_commands(every=True):
        check_composes(spec, args)
        overrides = sweep.train.overrides(args)
        assert OmegaConf.to_yaml(compose(*overrides)) == hydra_tree(overrides), (spec, args)


# ---- the tables and their variables ------------------------------------------------------------
def test_every_table_is_a_documented_function_of_its_paper_s_module():
    """No spec language: each table is a Python function (its docstring or its module's says the protocol),
    and no sweep spec is left under conf/."""
    tables = runner.load_tables()
    assert sorted(tables) == sweep.spec_names() and len(tables) >= 30
    for name, tab in tables.items():
        assert name == f"{tab.paper}/{tab.commands.__name__}" and tab.commands.__module__.endswith("." + tab.paper)
        assert tab.commands.__doc__ or importlib.import_module(tab.commands.__module__).__doc__, name
    assert not (REPO / "conf" / "sweep").exists()


def test_variables_take_lists_both_ways_and_keep_their_domains():
    tab = runner.get_table("pema/table10")
    assert runner.parse_vars(tab, ["seeds=[3,4]", "glue=rte cola"])["seeds"] == ["3", "4"]
    assert runner.parse_vars(tab, ["glue=rte cola"])["glue"] == ["rte", "cola"]
    assert runner.parse_vars(tab, [])["out"] == "tables/pema"
    with pytest.raises(EmbexpError, match=r"^seeds: 'x' is not a whole number"):
        runner.parse_vars(tab, ["seeds=x"])
    with pytest.raises(EmbexpError, match=r"^unknown glue entry 'mnli_m' \(choose from: cola, mnli,"):
        runner.parse_vars(tab, ["glue=mnli_m"])


def test_a_chosen_value_is_a_placeholder_in_a_dry_run_and_the_best_candidate_when_run(tmp_path, monkeypatch):
    cmd = runner.chosen("lr", {"0.1": ["a=1"], "0.3": ["a=3"]}, lambda lr: [f"trainer.lr={lr}", ""])
    runner.resolve(cmd, [], dry=True)
    assert cmd.args == ["trainer.lr=<lr chosen on held-out rows among 0.1 0.3>"]
    scores = {"a=1": 0.5, "a=3": 0.7}
    monkeypatch.setattr(sweep.train, "run_dir", lambda args: tmp_path / args[0])
    monkeypatch.setattr(sweep.train, "is_complete", lambda d: True)
    monkeypatch.setattr(sweep.train, "best_held_out", lambda m: m["score"])
    for args, score in scores.items():
        (tmp_path / args).mkdir()
        (tmp_path / args / "metrics.json").write_text(f'{{"score": {score}}}')
    runner.resolve(cmd, [], dry=False)
    assert cmd.args == ["trainer.lr=0.3"]


@pytest.mark.parametrize("args, message", [
    (["tinyte/table99"], "unknown sweep 'tinyte/table99' (choose from: claims/runs, compare/curves,"),
    (["tinyte/table1", "sedes=0"], "unknown sweep variable 'sedes' (choose from: models, seeds)"),
    (["ktoken/table1", "tree=huge"], "unknown tree 'huge' (choose from: paper, small)"),
    (["ktoken/table2", "select_on=reported"], "unknown sweep variable 'select_on' (choose from: seeds)"),
    (["tinyte/table1", "tinyte/table2"], "one sweep at a time (got: tinyte/table1, tinyte/table2)"),
    (["tinyte/table5", "--extra", "debug=smoke 'x"], "--extra \"debug=smoke 'x\": No closing quotation (valid: "),
])
def test_bad_sweep_input_is_one_line(args, message):
    r = run_cli(*args, "--dry-run", module="embexp.sweep")
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
    assert r.stdout == ""  # nothing printed before the error


def test_the_list_names_every_spec():
    r = run_cli("--list", module="embexp.sweep")
    assert r.returncode == 0 and r.stdout.split() == sweep.spec_names()


# ---- running: skips, resumes, failures, the report ---------------------------------------------
def test_a_smoke_table_runs_end_to_end_then_a_rerun_skips_every_cell(tmp_path, monkeypatch, capsys):
    """tinyte/table5 with debug=smoke: six cells, then the report; the second call trains nothing."""
    monkeypatch.setattr(runner, "execute", execute_in_process)
    extra = f"debug=smoke output_root={tmp_path}"
    assert sweep.main(["tinyte/table5", "--extra", extra]) == 0
    first = capsys.readouterr().out
    assert first.count("-m embexp.train") == 6 and "6/7 commands ok" not in first and "7/7 commands ok" in first
    table = (tmp_path / "tables" / "tinyte" / "table5.md").read_text()
    assert "TinyTE-gated" in table
    assert sweep.main(["tinyte/table5", "--extra", extra]) == 0
    second = capsys.readouterr().out
    assert second.count("skip (complete)") == 6 and second.count("-m embexp.train") == 0


@pytest.mark.parametrize("spec, assignments, table, runs, failed", [
    ("tinyattn/table12", ["select_on=heldout"], "tables/tinyattn/table12.md", 4, 0),
    # LLMLingua-2 needs the llmlingua package and the hub (neither offline): its cell fails, the sweep runs on
    ("ktoken/table2", ["seeds=42"], "tables/ktoken/table2.md", 5, 1),
    ("pema/table9", ["seeds=0", "glue=rte"], "tables/pema/table9.md", 2, 0),
])
def test_one_table_of_each_paper_runs_end_to_end_with_debug_smoke(spec, assignments, table, runs, failed, tmp_path,
                                                                   monkeypatch, capsys):
    """Every cell and the report, in this process (tinyte: the test above; pete: the slow make test;
    compare: tests/test_compare.py)."""
    monkeypatch.setattr(runner, "execute", execute_in_process)
    monkeypatch.chdir(tmp_path)  # reports that default to tables/<paper> write here
    rc = sweep.main([spec, "--extra", f"debug=smoke output_root={tmp_path}", *assignments])
    err = capsys.readouterr().err
    assert rc == (1 if failed else 0) and err.count("FAILED: ") == failed, err
    assert all("method=prompt_compress" in ln for ln in err.splitlines() if ln.startswith("FAILED: "))
    assert len(list(tmp_path.rglob("metrics.json"))) == runs
    assert (tmp_path / table).is_file(), sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.md"))


def test_a_failed_cell_does_not_stop_the_sweep_and_exits_1(tmp_path, monkeypatch, capsys):
    calls = []

    def fail_first(cmd):
        calls.append(cmd)
        return 1 if len(calls) == 1 else 0

    monkeypatch.setattr(runner, "execute", fail_first)
    assert sweep.main(["tinyte/table5", "--extra", f"debug=smoke output_root={tmp_path}"]) == 1
    assert len(calls) == 7  # every cell and the report ran
    assert "FAILED: " in capsys.readouterr().err


def test_a_failed_report_step_fails_the_sweep(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runner, "execute", lambda cmd: 1 if "embexp.report" in cmd else 0)
    assert sweep.main(["tinyte/table5", "--extra", f"debug=smoke output_root={tmp_path}"]) == 1
    err = capsys.readouterr().err
    assert err.count("FAILED: ") == 1 and "-m embexp.report " in err


def test_the_launch_prefix_replaces_the_interpreter_for_training_only(capsys):
    import shutil
    import sys

    sweep.main(["tinyte/table5", "--dry-run", "--launch", "accelerate launch -m"])
    lines = capsys.readouterr().out.splitlines()
    # accelerate on PATH as it is typed, else the one beside the interpreter (a venv not activated) by its path
    prog = "accelerate" if shutil.which("accelerate") else str(Path(sys.executable).parent / "accelerate")
    assert all(ln.startswith(f"{prog} launch -m embexp.train ") for ln in lines[:-1]), lines[0]
    assert " -m embexp.report " in lines[-1] and not lines[-1].startswith(prog)


@pytest.mark.parametrize("args, says", [
    (["--launch", "no-such-launcher -m"], "--launch 'no-such-launcher -m': 'no-such-launcher' is not a program on "
                                          "PATH, beside --py "),
    (["--launch", "{tmp}/afile -m"], "afile' is not a program on PATH, beside --py "),
    (["--launch", "accelerate 'launch"], "--launch \"accelerate 'launch\": No closing quotation (valid: "),
    (["--py", "{tmp}/nope/python"], "nope/python' is not an executable file (valid: the Python interpreter"),
])
@pytest.mark.parametrize("dry", [False, True], ids=["run", "dry-run"])
def test_a_launcher_or_interpreter_that_is_not_there_is_one_line_before_any_cell(args, says, dry, tmp_path,
                                                                                  monkeypatch):
    (tmp_path / "afile").write_text("not a program")
    monkeypatch.setattr(runner, "execute", lambda cmd: pytest.fail(f"a cell started: {cmd}"))
    if dry and args[0] == "--py":  # a dry run prints the interpreter, never runs it (make passes .venv/bin/python)
        assert run_cli("tinyte/table5", "--dry-run", *args, module="embexp.sweep").returncode == 0
        return
    before = sorted(tmp_path.rglob("*"))
    r = run_cli("tinyte/table5", *(["--dry-run"] * dry), *(a.format(tmp=tmp_path) for a in args),
                "--extra", f"debug=smoke output_root={tmp_path}", module="embexp.sweep")
    lines = r.stderr.splitlines()
    assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith("embexp: error: "), r.stderr
    assert says in lines[0] and r.stdout == "" and "Traceback" not in r.stderr, r.stderr
    assert sorted(tmp_path.rglob("*")) == before


# ---- the grid rule: a choice at an end of its grid takes one more grid step past it -------------------
def test_a_best_lr_at_an_end_of_its_grid_grows_the_grid_one_step_past_it(tmp_path):
    from omegaconf import OmegaConf

    from embexp.core.records import RunRecord
    from embexp.sweep import train as train_kind
    from embexp.sweep.runner import Choice

    assert train_kind.past_the_end("6e-05", ["6e-06", "2e-05", "6e-05"]) == "0.00018"
    assert train_kind.past_the_end("6e-06", ["6e-06", "2e-05", "6e-05"]) == "1.8e-06"
    assert train_kind.past_the_end("2e-05", ["6e-06", "2e-05", "6e-05"]) is None

    def cell(lr):
        return ["method=lora", "model=tiny_llama", "task=glue", "task.subset=sst2", "debug=smoke",
                f"output_root={tmp_path}", f"trainer.lr={lr}", f"tag=lr{lr}", "seed=0"]

    def finish(lr, held):
        rec = RunRecord(train_kind.run_dir(cell(lr)))
        rec.start(OmegaConf.create({"trainer": {"lr": float(lr)}}))
        rec.finish({"curve": [{"step": 2, "accuracy": 50.0, "select": {"accuracy": held}}]})

    grid = ["0.0003", "0.001", "0.003"]
    for lr, held in zip(grid, [60.0, 70.0, 80.0]):
        finish(lr, held)
    step = [Choice("lr", [(lr, cell(lr)) for lr in grid], cell, 2, s) for s in (1, 2)]
    assert train_kind.extension(step[0], [], dry=False) == "0.009"  # the best, 0.003, is the top end
    assert train_kind.extension(step[1], [], dry=False) is None  # step 1 has not run yet
    finish("0.009", 85.0)  # better again: the grid grows once more
    assert train_kind.extension(step[1], [], dry=False) == "0.027"
    finish("0.027", 75.0)  # worse: 0.009 is inside the grown grid, the choice
    assert train_kind.chosen(step[1], [], dry=False) == "0.009"
    plain = Choice("lr", [(lr, cell(lr)) for lr in grid])
    assert train_kind.chosen(plain, [], dry=False) == "0.003"  # without the rule: the grid's end
    assert "step 1 of 2" in train_kind.extension(step[0], [], dry=True)
