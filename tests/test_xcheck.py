"""make xcheck (python -m embexp.xcheck): verdicts, docs/xcheck.md from rows, one line on bad input; the module checks
against the authors' code run only when AUTHORS names a folder with their checkouts (slow)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from embexp import xcheck
from embexp.xcheck.methods import AuthorsCodeError, Row, load_package

REPO = Path(__file__).resolve().parents[1]


def script(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "embexp.xcheck", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def test_verdicts_of_tolerance_count_and_choice_rows():
    assert Row("m", "w", 1e-7, tol=1e-6).verdict == "ok"
    assert Row("m", "w", 1e-5, tol=1e-6).verdict == "FAIL"
    assert Row("m", "w", float("nan"), tol=1.0).verdict == "FAIL"  # nothing measured is never within tolerance
    assert Row("m", "w", 918.0, kind="count", ours=918.0).verdict == "ok"
    assert Row("m", "w", 918.0, kind="count", ours=917.0).verdict == "FAIL"
    assert Row("m", "w", 5.0, kind="choice").verdict == "choice"  # a documented choice is shown, never a failure


def test_docs_page_is_rendered_from_the_rows_commits_and_seconds():
    rows = [Row("Tiny-Attention", "1H", 7.2e-7, tol=1e-5, note="last hidden state"),
            Row("Tiny-Attention", "1H adapter parameters", 918.0, kind="count", ours=918.0, metric="parameters"),
            Row("PEMA", "keep_special=true", 2.0, kind="choice", metric="rows", note="special ids"),
            Row("PETE", "features", 2e-5, tol=1e-6)]
    commits = {"tiny-attn": "03eee7ec9ae12abd529b156b1ee0e7b4ed0cb799"}
    page = xcheck.render(rows, commits, {"tinyattn": 9.6, "pema": 2.1})
    assert "| Tiny-Attention | 1H | max \\|Δ\\| 7.2e-07 | <= 1e-05 | ok | last hidden state |" in page
    assert "| Tiny-Attention | 1H adapter parameters | authors 918, embexp 918 | equal | ok |" in page
    assert "| PEMA | keep_special=true | rows 2 | documented choice | choice | special ids |" in page
    assert "| PETE | features | max \\|Δ\\| 2.0e-05 | <= 1e-06 | FAIL |" in page
    assert "| `tiny-attn` | cindermond/tiny-attn | `03eee7ec9ae1` |" in page
    assert "| `pete` | HMUNACHI/pete | `1d2527c` (not run) |" in page
    assert "4 rows: 2 ok, 1 failed, 1 documented choices. Time: tinyattn 10 s, pema 2 s (CPU)." in page
    assert "make xcheck AUTHORS=<folder>" in page
    for name, (repo, commit, _) in xcheck.REPOS.items():  # how to fetch each checkout
        fetch = f"git clone https://github.com/{repo} $AUTHORS/{name} && git -C $AUTHORS/{name} checkout {commit}"
        assert fetch in page


def one_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode != 0 and not r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("embexp: error: "), r.stderr
    return lines[0]


def git_checkout(path: Path) -> None:
    path.mkdir(parents=True)
    (path / "README.md").write_text("x\n")
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(path), *cmd], check=True, env=env, capture_output=True)


@pytest.mark.serial  # starts python
def test_bad_input_is_one_line(tmp_path):
    assert "AUTHORS is not set: make xcheck AUTHORS=<folder>" in one_line(script())
    assert one_line(script(f"authors={tmp_path / 'nope'}")).endswith("is not a folder")
    line = one_line(script(f"authors={tmp_path}"))
    assert f"lacks tiny-attn: git clone https://github.com/cindermond/tiny-attn {tmp_path}/tiny-attn" in line
    (tmp_path / "tiny-attn").mkdir()
    assert "tiny-attn is not a git checkout, so its commit cannot be checked" in one_line(script(f"authors={tmp_path}"))
    (tmp_path / "tiny-attn").rmdir()
    git_checkout(tmp_path / "tiny-attn")
    line = one_line(script(f"authors={tmp_path}", "only=tinyattn"))
    assert "tiny-attn is at " in line and line.endswith(f"not 03eee7e: git -C {tmp_path}/tiny-attn checkout 03eee7e")
    assert "unknown option 'autors=x'" in one_line(script("autors=x"))
    assert "unknown method 'lora' (choose from: tinyattn, pete, ktoken, pema)" in one_line(script("only=lora"))


def test_authors_code_that_cannot_be_imported_is_named_in_one_line(tmp_path):
    pkg = tmp_path / "authors_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import no_such_module_of_theirs\n")
    with pytest.raises(AuthorsCodeError, match="needs no_such_module_of_theirs: install it, or leave the method out"):
        load_package("xcheck_test_authors_pkg", pkg)
    assert "xcheck_test_authors_pkg" not in sys.modules


def test_the_committed_page_holds_every_check_at_the_pinned_commits_and_no_failure():
    page = (REPO / "docs" / "xcheck.md").read_text()
    for name, (repo, commit, _) in xcheck.REPOS.items():
        assert f"| `{name}` | {repo} | `{commit}" in page
    rows = [ln for ln in page.splitlines() if ln.startswith("| ") and ln.count(" | ") >= 5][1:]
    assert {ln.split(" | ")[0][2:] for ln in rows} == {"Tiny-Attention", "PETE", "K-Token", "PEMA"}
    assert not [ln for ln in rows if " | FAIL | " in ln]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("AUTHORS"), reason="AUTHORS=<folder> with the authors' checkouts is not set")
def test_every_module_matches_the_authors_code():
    found = xcheck.checkouts(os.environ["AUTHORS"])
    rows, seconds = xcheck.run_checks(xcheck.METHODS, {n: p for n, (p, _) in found.items()},
                                      REPO / xcheck.OPTIONS["build"], lambda r: None)
    assert set(seconds) == set(xcheck.METHODS)
    failed = [xcheck.line(r) for r in rows if r.verdict == "FAIL"]
    assert not failed, "\n".join(failed)
    assert {r.method for r in rows if r.kind == "count"} == {"Tiny-Attention", "PETE", "K-Token", "PEMA"}
