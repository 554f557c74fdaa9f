"""scripts/bench.py: every benchmark runs end to end on a tiny setting and prints its ratio line."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("embexp_bench_script", REPO / "scripts" / "bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TINY = {
    "pema_count": (["sequences=300", "vocab=500", "repeats=1"], "speed-up "),
    "throughput": (["model=tiny_llama", "task=wmt16", "methods=tinyte_full", "steps=1", "repeats=1",
                    "source_tokens=32"],
                   "tinyte_full "),
    "ktoken_prefill": (["model=tiny_llama", "k=2", "tokens=32", "repeats=1"], "ratio merged / uncompressed "),
    # pete: the bench's code on a tiny encoder (the paper's scratch_encoder is built in tests/test_pete.py)
    "pete": (["model=tiny_bert", "steps=1", "repeats=1", "batch=4", "threads=1"], "ratio pete / full_ft: wall "),
    "tinyattn": (["model=tiny_roberta", "steps=2", "repeats=1", "batch=4", "threads=1",
                  "source_tokens=32"], "head_full_bw "),
    # the committed code against the working tree, on fixtures (lm-eval needs SmolLM2's folder and the real rows)
    "evaluation": (["model=tiny_llama", "data_dir=", "sst2_rows=3", "boolq_rows=3", "repeats=1", "batch=2", "lmeval=0",
                    "before=HEAD"], "speed after / before: median "),
}


# evaluation: 15 s
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "evaluation" else n for n in TINY])
def test_every_benchmark_runs_on_a_tiny_setting(bench, name, capsys):
    args, needle = TINY[name]
    bench.main([name, *args])
    assert needle in capsys.readouterr().out


def test_a_bad_benchmark_or_option_is_one_line(bench, capsys):
    with pytest.raises(SystemExit, match=r"unknown benchmark 'nope' \(choose from: throughput, ktoken_prefill, "
                                         r"pema_count, pete, tinyattn, evaluation\)"):
        bench.main(["nope"])
    with pytest.raises(SystemExit, match=r"unknown option '--sequences' of pema_count "
                                         r"\(choose from: sequences=, vocab=, repeats=\)"):
        bench.main(["pema_count", "--sequences", "5"])
    with pytest.raises(SystemExit, match=r"option without a value 'steps' of pete"):
        bench.main(["pete", "steps"])
