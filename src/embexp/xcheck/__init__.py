"""make xcheck AUTHORS=<folder>: embexp's method modules against the authors' published code (docs/xcheck.md).

    python -m embexp.xcheck authors=<folder> [only=tinyattn,pete,ktoken,pema] [out=docs/xcheck.md] [write=true]
        [build=outputs/xcheck/pete_build]

``authors`` holds git checkouts of the four repositories at the commits of :data:`REPOS`, each in the folder named
there (how they are fetched and run, and what a row is: docs/xcheck.md). Every row prints as it is measured, and
docs/xcheck.md is written from the rows (``write=false``: print only; ``only=``: a subset, never written, so the page
always holds every check). Exit 1 when a checked row fails; bad input is one line.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from embexp import EmbexpError
from embexp.core.cli import one_line_errors

REPO = Path(__file__).resolve().parents[1]
# folder under AUTHORS -> (GitHub repository, pinned commit, the method it checks)
REPOS = {
    "tiny-attn": ("cindermond/tiny-attn", "03eee7e", "tinyattn"),
    "pete": ("HMUNACHI/pete", "1d2527c", "pete"),
    "K-Token-Merging": ("shsjxzh/K-Token-Merging", "8d29f47", "ktoken"),
    "partial-embedding-matrix-adaptation": ("mlsw/partial-embedding-matrix-adaptation", "1e9fae5", "pema"),
}
METHODS = [m for _, _, m in REPOS.values()]
OPTIONS = {"authors": "", "only": ",".join(METHODS), "out": "docs/xcheck.md", "write": "true",
           "build": "outputs/xcheck/pete_build"}
COMMAND = "make xcheck AUTHORS=<folder>"


def fetch_hint(folder: str, name: str) -> str:
    repo, commit, _ = REPOS[name]
    return f"git clone https://github.com/{repo} {folder}/{name} && git -C {folder}/{name} checkout {commit}"


def parse(argv: list[str]) -> dict[str, str]:
    opts = dict(OPTIONS)
    for a in argv:
        key, eq, value = a.partition("=")
        if not eq or key not in opts:
            raise EmbexpError(f"unknown option '{a}' (valid: {', '.join(f'{k}=' for k in OPTIONS)})")
        opts[key] = value
    bad = [m for m in opts["only"].split(",") if m not in METHODS]
    if bad:
        raise EmbexpError(f"only={opts['only']}: unknown method '{bad[0]}' (choose from: {', '.join(METHODS)})")
    if opts["write"] not in ("true", "false"):
        raise EmbexpError(f"write={opts['write']} is not true or false")
    return opts


def head(path: Path) -> str:
    r = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 and (path / ".git").exists() else ""


def checkouts(folder: str, methods: list[str] | None = None) -> dict[str, tuple[Path, str]]:
    """name -> (checkout, its full commit) for the repositories of ``methods``; one line on anything missing."""
    if not folder:
        raise EmbexpError("AUTHORS is not set: make xcheck AUTHORS=<folder>, a folder with git checkouts of "
                          f"{', '.join(REPOS)} at the pinned commits (docs/xcheck.md)")
    root = Path(folder)
    if not root.is_dir():
        raise EmbexpError(f"AUTHORS='{folder}' is not a folder")
    out = {}
    for name, (_, commit, method) in REPOS.items():
        if methods is not None and method not in methods:
            continue
        path = root / name
        if not path.is_dir():
            raise EmbexpError(f"AUTHORS='{folder}' lacks {name}: {fetch_hint(folder, name)}")
        full = head(path)
        if not full:
            raise EmbexpError(f"{path} is not a git checkout, so its commit cannot be checked: "
                              f"{fetch_hint(folder, name)}")
        if not full.startswith(commit):
            raise EmbexpError(f"{path} is at {full[:7]}, not {commit}: git -C {path} checkout {commit}")
        out[name] = (path, full)
    return out


def number(v: float) -> str:
    return "0" if v == 0 else f"{v:.1e}" if abs(v) < 0.01 or abs(v) >= 1e4 else f"{v:.3g}"


def measured(row) -> str:
    if row.kind == "count":
        return f"authors {row.value:,.0f}, embexp {row.ours:,.0f}"
    return f"{row.metric} {number(row.value)}"


def tolerance(row) -> str:
    return {"count": "equal", "choice": "documented choice"}.get(row.kind, f"<= {row.tol:g}")


def line(row) -> str:
    return f"{row.method:15} {row.what:75} {measured(row):34} {tolerance(row):18} {row.verdict}"


def render(rows, commits: dict[str, str], seconds: dict[str, float]) -> str:
    """docs/xcheck.md from the measured rows, the checkouts' commits and each method's seconds."""
    failed = [r for r in rows if r.verdict == "FAIL"]
    out = [
        "# Reference check against the authors' code",
        "",
        f"Written by `{COMMAND}` (`python -m embexp.xcheck authors=<folder>`) from what it measured; not edited by "
        "hand. Each method's embexp module runs beside the authors' own module, imported from their checkout as it "
        "is (by file path, with embexp's shims where a newer library removed a symbol), with the same weights, on "
        "tiny random-weight models (d = 64, 2 layers; PETE at the paper's d = 512 over BERT's 30,522 ids), in "
        "seconds on a CPU. A row is a tolerance (the largest absolute difference, max |Δ|, stays within it), a "
        "parameter count (equal), or a **documented choice**: a difference embexp makes on purpose, measured in the "
        "authors' setting and shown, never a tolerance (docs/fidelity.md says why each is made, and the config "
        "value that gives the authors' behaviour where there is one).",
        "",
        "## The authors' code",
        "",
        "| folder under AUTHORS | repository | commit |",
        "|---|---|---|",
    ]
    for name, (repo, commit, _) in REPOS.items():
        out.append(f"| `{name}` | {repo} | `{commits[name][:12]}` |" if name in commits
                   else f"| `{name}` | {repo} | `{commit}` (not run) |")
    out += [
        "",
        "Fetch them once, outside this repository (it never vendors them):",
        "",
        "```bash",
        *[fetch_hint("$AUTHORS", name) for name in REPOS],
        "make xcheck AUTHORS=$AUTHORS      # rewrites this page; exit 1 if a checked row fails",
        "```",
        "",
        "## Rows",
        "",
        "| method | check | measured | tolerance | verdict | how |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = (r.method, r.what, measured(r), tolerance(r), r.verdict, r.note)
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")  # |Δ| inside a table cell
    took = ", ".join(f"{m} {s:.0f} s" for m, s in seconds.items())
    out += [
        "",
        f"{len(rows)} rows: {sum(r.verdict == 'ok' for r in rows)} ok, {len(failed)} failed, "
        f"{sum(r.verdict == 'choice' for r in rows)} documented choices. Time: {took} (CPU).",
        "",
        "## How the authors' code is run",
        "",
        "- **Tiny-Attention.** `rewriter/model/RobertaForSC.py` (1H, `structure=m0` sequential and `s0` parallel) "
        "and `RobertaForSCAda.py` (4 modules), their RoBERTa layers holding the tiny RoBERTa's weights. transformers "
        "5 removed `modeling_utils.apply_chunking_to_forward` and `get_extended_attention_mask`'s old form; the shims "
        "put back 4.19.2's. The averaged model is train_ada.py's evaluation (L173-184, inside `train()`, so repeated "
        "in the script line for line). The initialisation rows replay transformers 4.19.2's `from_pretrained`: the "
        "model built without weight init (`no_init_weights`, so `TinyAttention.__init__`'s x0.01 stays), the "
        "checkpoint loaded, then `_init_weights` (RoBERTa's, 4.19.2) on every module with a key the checkpoint "
        "lacks: linear1, linear2 and the MHA's out_proj become N(0, initializer_range), their biases 0.",
        "- **PETE.** `pete/src/pete.py` with `polynomial_embeddings` over its C++ extension, built from their sources "
        "(setup.py's CPU build) by torch's JIT loader into "
        "`outputs/xcheck/pete_build` (once: minutes on a small CPU, seconds after), without `-std=c++17` (torch's "
        "headers need C++20) and "
        "without `-fopenmp` (their `chebyshev_kernel.cpp` does not compile with it; the Fourier kernel is "
        "element-wise, so threads do not change it). Their GPU runs use `fourier_kernel.cu`, which differs in one "
        "step (the float product `freq * x` times the double `M_PI`, the rest in double); with no GPU here its "
        "arithmetic is repeated in numpy, a repetition that matches their compiled CPU kernel when it repeats "
        "that kernel's steps instead.",
        "- **K-Token merging.** `k_token_merging.encoder.AverageInitializedEncoder` and "
        "`compression.build_prefill_embeddings` with tiny Qwen2's byte tokenizer and embedding table.",
        "- **PEMA.** `EmbeddingPruner.prepare` / `restore` and `data.token_counter.TokenCounter` on a `datasets` "
        "Dataset of padded rows; one AdamW step on each side.",
        "- Not run: training either side to a score (an hour-long optional part, `XCHECK_TRAIN=1`, is not built).",
        "",
    ]
    return "\n".join(out)


def run_checks(methods: list[str], roots: dict[str, Path], build: Path, report) -> tuple[list, dict]:
    """Each method's rows (``report`` is called with each row as it comes) and the seconds each took."""
    from embexp.xcheck import embeddings as xcheck_embeddings
    from embexp.xcheck import methods as xcheck_methods

    xcheck_methods.shim_transformers()
    checks = {"tinyattn": lambda: xcheck_methods.ta_all(roots["tiny-attn"]),
              "pete": lambda: xcheck_embeddings.pete_checks(roots["pete"], build),
              "ktoken": lambda: xcheck_embeddings.ktoken_checks(roots["K-Token-Merging"]),
              "pema": lambda: xcheck_embeddings.pema_checks(roots["partial-embedding-matrix-adaptation"])}
    rows, seconds = [], {}
    for m in methods:
        t0 = time.perf_counter()
        got = checks[m]()
        seconds[m] = time.perf_counter() - t0
        for r in got:
            report(r)
        rows += got
    return rows, seconds


@one_line_errors
def main(argv: list[str]) -> int:
    """Bad input, the authors' code that cannot load here and a failed check: one line, exit 1."""
    import warnings

    opts = parse(argv)
    methods = opts["only"].split(",")
    found = checkouts(opts["authors"], methods)
    warnings.filterwarnings("ignore")
    rows, seconds = run_checks(methods, {n: p for n, (p, _) in found.items()}, REPO / opts["build"],
                               lambda r: print(line(r), flush=True))
    if opts["write"] == "true" and methods == METHODS:
        out = REPO / opts["out"]
        out.write_text(render(rows, {n: c for n, (_, c) in found.items()}, seconds))
        print(f"wrote {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")
    failed = [r for r in rows if r.verdict == "FAIL"]
    if failed:
        raise EmbexpError(f"{len(failed)} check(s) failed: " + "; ".join(f"{r.method} {r.what}" for r in failed))
    return 0
