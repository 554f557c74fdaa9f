"""Bad input at every entry point: train, eval, judge, report, analyze and sweep, one table. Each case
asserts the one error line (what it names), the exit status, that no traceback is printed and that nothing
that looks like a complete record was written (no metrics.json where none was, a run's records unchanged)."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from conftest import CliResult, run_cli
from embexp.core.records import is_complete

TRAIN = ("debug=smoke", "method=tinyte_full", "model=tiny_llama", "task=glue", "task.subset=sst2",
         "trainer.max_steps=2", "trainer.lr=0.05")


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("finished") / "run"
    r = run_cli(*TRAIN, f"hydra.run.dir={d}")
    assert r.returncode == 0 and is_complete(d), r.stderr
    return d


def call(module: str, args: list[str]) -> CliResult:
    """The entry point of ``python -m <module>`` in this process (report and analyze: their main)."""
    if module == "embexp.train":  # the entry's checks, then the run on the cached tree (what is tested: its line)
        return run_cli(*args)
    if module in ("embexp.eval", "embexp.judge", "embexp.sweep"):
        return run_cli(*args, module=module)
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            importlib.import_module(module).main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return CliResult(code, out.getvalue(), err.getvalue())


# ---- how each case's input is made: (a function of (tmp_path, the finished run) -> arguments) ------------------
def train(*extra):
    return lambda tmp, run: ("embexp.train", [*TRAIN, *extra, f"hydra.run.dir={tmp / 'run'}"])


def train_at(make, *extra):
    """A train command into the directory ``make(tmp, run)`` prepares."""
    return lambda tmp, run: ("embexp.train", [*TRAIN, *extra, f"hydra.run.dir={make(tmp, run)}"])


def a_file(tmp: Path, _run=None) -> Path:
    (tmp / "afile").write_text("not a directory")
    return tmp / "afile"


def lock_dir(tmp: Path, _run=None) -> Path:
    (tmp / "locked" / "run.lock").mkdir(parents=True)
    return tmp / "locked"


def dangling(tmp: Path, _run=None) -> Path:
    (tmp / "gone").symlink_to(tmp / "nowhere")
    return tmp / "gone" / "run"


def loop(tmp: Path, _run=None) -> Path:
    (tmp / "a").symlink_to(tmp / "b")
    (tmp / "b").symlink_to(tmp / "a")
    return tmp / "a" / "run"


def linked(tmp: Path, _run=None) -> Path:
    (tmp / "real").mkdir()
    (tmp / "link").symlink_to(tmp / "real")
    return tmp / "link"


def copy_of(tmp: Path, run: Path) -> Path:
    return Path(shutil.copytree(run, tmp / "copy"))


def damaged(how):
    """A copy of the finished run, damaged by ``how(copy)``."""
    def make(tmp: Path, run: Path) -> Path:
        d = copy_of(tmp, run)
        how(d)
        return d
    return make


def random_adapter(d: Path) -> None:
    (d / "adapter.safetensors").write_bytes(bytes(range(256)) * 8)


def truncated_adapter(d: Path) -> None:
    path = d / "adapter.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def nan_adapter(d: Path) -> None:
    state = load_file(d / "adapter.safetensors")
    key = next(iter(state))
    state[key] = state[key] * float("nan")
    save_file(state, d / "adapter.safetensors")


def broken_config(d: Path) -> None:
    (d / "config.yaml").write_text("model: [unclosed\n  - : :\n")


def failed_status(d: Path) -> None:
    (d / "status.json").write_text(json.dumps({"status": "failed", "error": "boom"}))


def empty(tmp: Path) -> Path:
    (tmp / "empty").mkdir()
    return tmp / "empty"


def tool(module: str, *args, at=None):
    """``python -m <module> run_dir=<the finished run, or at(tmp, run)> *args``; ``{tmp}`` in an argument is
    the test's folder."""
    def make(tmp: Path, run: Path):
        d = at(tmp, run) if at else run
        return module, [f"run_dir={d}", *(a.format(tmp=tmp) for a in args)]
    return make


def plain(module: str, *args):
    return lambda tmp, run: (module, [a.format(tmp=tmp, run=run) for a in args])


# (id, input, exit status, what the one line says); a bad option of a Hydra-composed command (train, eval, judge)
# exits 2 before anything runs, what fails later 1
CASES = [
    ("train seed past 32 bits", train("seed=4294967296"), 2, "seed=4294967296 is out of range (valid: >= 0 and <= "),
    ("train lr 1e38", train("trainer.lr=1e38"), 2, "trainer.lr=1e+38 is out of range"),
    ("train lr nan", train("trainer.lr=nan"), 2, "trainer.lr=nan is not a finite number"),
    ("train unknown method", train("method=nope"), 2, "unknown method 'nope' (choose from: "),
    ("train typo key", train("trainer.lrr=1"), 2, "trainer.lrr"),
    ("train empty run dir", lambda tmp, run: ("embexp.train", [*TRAIN, "hydra.run.dir="]), 2,
     "hydra.run.dir is empty"),
    ("train tag outside root", lambda tmp, run: ("embexp.train", [*TRAIN, "tag=../../x", f"output_root={tmp}"]), 2,
     "tag='../../x' is not a name"),
    ("train model name path", lambda tmp, run: ("embexp.train", [*TRAIN, "model.name=a/b", f"output_root={tmp}"]), 2,
     "model.name='a/b' is not a name"),
    ("train run dir is a file", train_at(a_file), 2, "afile is not a directory"),
    ("train run dir under a file", lambda tmp, run: ("embexp.train", [*TRAIN, f"hydra.run.dir={a_file(tmp)}/run"]), 2,
     "afile is not a directory"),
    ("train output_root a file", lambda tmp, run: ("embexp.train", [*TRAIN, f"output_root={a_file(tmp)}"]), 2,
     "afile is not a directory"),
    ("train run dir through a dangling symlink", train_at(dangling), 2, "gone is a symlink to "),
    ("train run dir through a symlink loop", train_at(loop), 2, "is a symlink loop"),
    ("train run dir a symlink", train_at(linked), 2, "link: it is a symlink (to "),
    ("train tag too long", lambda tmp, run: ("embexp.train", [*TRAIN, "tag=" + "x" * 300, f"output_root={tmp}"]), 2,
     "tag is 300 characters long"),
    ("train tag a glob", lambda tmp, run: ("embexp.train", [*TRAIN, "tag=a*", f"output_root={tmp}"]), 2,
     "tag='a*' is not a name: it holds '*'"),
    ("train spec misspelled", train("model=llama31", "model.init=random", "+model.spec.num_hiden_layers=1"), 1,
     "model.spec.num_hiden_layers is not a field of llama31's architecture (llama's LlamaConfig); did you mean "
     "num_hidden_layers?"),
    ("train spec no layers", train("model=llama31", "model.init=random", "+model.spec.num_hidden_layers=0"), 1,
     "model.spec.num_hidden_layers=0 is out of range (valid: >= 1; llama31 has 32)"),
    ("train spec negative size", train("model=llama31", "model.init=random", "+model.spec.hidden_size=-64"), 1,
     "model.spec.hidden_size=-64 is out of range (valid: >= 1"),
    ("train spec not a number", train("model=llama31", "model.init=random", "+model.spec.hidden_size=abc"), 1,
     "model.spec.hidden_size='abc' is not a whole number"),
    ("train spec with pretrained weights", train("+model.spec.num_hidden_layers=1"), 1,
     "which only model.init=random builds"),
    ("train spec past the memory", train("model=llama31", "model.init=random", "+model.spec.hidden_size=32768"), 1,
     "GiB of float32 weights as built, more than the"),
    ("train run.lock a directory", train_at(lock_dir), 1, "Is a directory"),
    ("train another seed into a complete run", train_at(copy_of, "seed=3"), 1, "seed (0 -> 3)"),
    ("train resume with another lr", train_at(copy_of, "trainer.lr=0.1", "trainer.resume=true"), 1,
     "trainer.lr (0.05 -> 0.1)"),
    ("train resume and overwrite", train_at(copy_of, "trainer.resume=true", "trainer.overwrite=true"), 1,
     "contradict each other"),
    ("eval max_eval_samples -3", tool("embexp.eval", "max_eval_samples=-3"), 2,
     "max_eval_samples=-3 is out of range (valid: >= 1, or -1)"),
    ("eval batch_size 0", tool("embexp.eval", "batch_size=0"), 2, "batch_size=0 is out of range (valid: >= 1)"),
    ("eval tolerance nan", tool("embexp.eval", "tolerance=nan"), 2, "tolerance=nan is not a finite number"),
    ("eval export_rows 0", tool("embexp.eval", "check_export=true", "export_rows=0"), 2, "export_rows=0 is out of"),
    ("eval missing run dir", tool("embexp.eval", at=lambda tmp, run: tmp / "nope"), 1, "does not exist"),
    ("eval no run_dir", plain("embexp.eval"), 2, "missing run_dir"),
    ("eval random-bytes adapter", tool("embexp.eval", at=damaged(random_adapter)), 1,
     "adapter.safetensors: SafetensorError"),
    ("eval truncated adapter", tool("embexp.eval", at=damaged(truncated_adapter)), 1,
     "adapter.safetensors: SafetensorError"),
    ("eval non-finite adapter", tool("embexp.eval", at=damaged(nan_adapter)), 1, "holds non-finite values"),
    ("eval unparseable config", tool("embexp.eval", at=damaged(broken_config)), 1,
     "config.yaml: ParserError"),
    ("eval unfinished run", tool("embexp.eval", at=damaged(failed_status)), 1, "did not finish"),
    ("judge batch_size 0", tool("embexp.judge", "judge.batch_size=0", "judge.model=tiny_llama"), 2,
     "judge.batch_size=0 is out of range (valid: >= 1)"),
    ("judge max_input_tokens 3", tool("embexp.judge", "judge.max_input_tokens=3"), 2,
     "judge.max_input_tokens=3 is out of range (valid: >= 16)"),
    ("judge unknown kind", tool("embexp.judge", "judge.kind=nope"), 2, "unknown judge.kind 'nope'"),
    ("judge unknown what", tool("embexp.judge", "what=nope"), 2, "unknown what 'nope'"),
    ("judge unparseable config", tool("embexp.judge", "judge.model=tiny_llama", at=damaged(broken_config)), 1,
     "config.yaml: ParserError"),
    ("report out through a file", lambda tmp, run: ("embexp.report", ["table=compare", f"runs={run}",
                                                                      f"out={a_file(tmp)}/tables"]), 1,
     "cannot write"),
    ("report unknown table", plain("embexp.report", "table=nope"), 1, "unknown table"),
    ("report unknown se", plain("embexp.report", "table=compare", "runs={run}", "out={tmp}/t", "se=nope"), 1,
     "unknown se 'nope'"),
    ("report runs missing", plain("embexp.report", "table=compare", "runs={tmp}/none", "out={tmp}/t"), 1,
     "none does not exist (runs names the run directories"),
    ("report no runs", lambda tmp, run: ("embexp.report", ["table=compare", f"runs={empty(tmp)}", f"out={tmp}/t"]), 1,
     "no finished runs"),
    ("analyze params unknown model", plain("embexp.analyze", "params", "models=[nope]", "out={tmp}/t"), 1,
     "unknown models entry 'nope' (choose from: gemma2,"),
    ("analyze unknown study", plain("embexp.analyze", "nope"), 1, "nope"),
    ("analyze ablation no rows", plain("embexp.analyze", "ablation", "n_samples=0"), 1,
     "n_samples=0 is out of range (valid: >= 1)"),
    ("analyze vocab max_length 0", plain("embexp.analyze", "vocab", "max_length=0"), 1,
     "max_length=0 is out of range (valid: >= 1)"),
    ("analyze params negative labels", plain("embexp.analyze", "params", "num_labels=-1"), 1,
     "num_labels=-1 is out of range (valid: >= 0)"),
    ("sweep unknown task", plain("embexp.sweep", "compare/curves", "--dry-run", "tasks=nope"), 1,
     "unknown tasks entry 'nope' (choose from: sst2, mrpc, rte, cola)"),
    ("sweep unknown kind", plain("embexp.sweep", "compare/curves", "--dry-run", "kinds=nope"), 1,
     "unknown kinds entry 'nope'"),
    ("sweep unknown method", plain("embexp.sweep", "compare/curves", "--dry-run", "only=nope"), 1,
     "unknown only entry 'nope' (choose from: emb_tuning,"),
    ("sweep seeds not numbers", plain("embexp.sweep", "compare/curves", "--dry-run", "seeds=abc"), 1,
     "seeds: 'abc' is not a whole number"),
    ("sweep negative steps", plain("embexp.sweep", "compare/curves", "--dry-run", "steps=-5"), 1,
     "its train cell does not compose: trainer.max_steps=-5 is out of range"),
    ("sweep bad extra", plain("embexp.sweep", "compare/curves", "--dry-run", "--extra", "trainer.lr=-1"), 1,
     "trainer.lr=-1.0 is out of range"),
    ("sweep pema models", plain("embexp.sweep", "pema/table10", "--dry-run", "models=nope"), 1,
     "unknown models entry 'nope'"),
    ("sweep pema glue", plain("embexp.sweep", "pema/table10", "--dry-run", "glue=nope"), 1,
     "unknown glue entry 'nope'"),
    ("sweep no cell", plain("embexp.sweep", "compare/curves", "--dry-run", "headline=lora", "others=", "only=pete"), 1,
     "no train cell for these variables"),
]


def records(root: Path) -> dict:
    """Every metrics.json and status.json below ``root``, with its content."""
    return {str(p): p.read_bytes() for p in root.rglob("*") if p.name in ("metrics.json", "status.json")}


@pytest.mark.parametrize("make, code, says", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_a_nonzero_exit_no_traceback_and_no_complete_looking_record(finished, tmp_path,
                                                                                          make, code, says):
    before = records(finished)
    module, args = make(tmp_path, finished)
    made = records(tmp_path)
    r = call(module, args)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("embexp: error: ")]
    assert r.returncode == code and len(errors) == 1 and says in errors[0], (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout and not any(ln.startswith("  File ") for ln in lines), r.stderr
    assert records(finished) == before  # the finished run is as it was
    assert records(tmp_path) == made  # no record written or changed (no metrics.json that looks complete)


def test_the_table_covers_every_entry_point():
    assert {c[0].split()[0] for c in CASES} == {"train", "eval", "judge", "report", "analyze", "sweep"}
    assert len(CASES) >= 45 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("extra, says", [
    (("trainer.warmup_steps=5",), "trainer.warmup_steps=5 is not shorter than the 2 steps trained: the learning rate "
                                  "never reaches trainer.lr=0.05"),
    (("trainer.max_steps=70",), "trainer.max_steps=70 is 12 epochs over the 24 training rows"),
])
def test_a_schedule_that_does_not_do_what_it_seems_runs_with_one_warning_line(tmp_path, extra, says):
    """Deliberately accepted (a choice someone may make), and said."""
    r = run_cli(*TRAIN, "do_eval=false", *extra, f"hydra.run.dir={tmp_path / 'run'}")
    said = [ln for ln in r.stderr.splitlines() if says in ln]
    assert r.returncode == 0 and len(said) == 1 and is_complete(tmp_path / "run"), r.stderr
