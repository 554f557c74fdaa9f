"""K-Token Merging's other tasks (amazon, commitpack), its hard-compression baselines
(method=prompt_compress) and its paper sweeps (embexp/sweep/papers/ktoken.py, mk/ktoken.mk)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import shlex
import sys
from pathlib import Path

import pytest
import torch

from conftest import compose, make_dry, record_run, run_cli, run_train, smoke
from embexp import EmbexpError, sweep
from embexp.featurize import Featurizer, collate
from embexp.methods import build_method
from embexp.methods.prompt_compress import drop_lowest
from embexp.models import load_backbone
from embexp.run.predict import compression_metrics, continuation_ids
from embexp.tasks import build_task
from embexp.tasks.amazon import authors_split
from embexp.tasks.base import Example
from embexp.tasks.metrics import pl_from_accuracy

REPO = Path(__file__).resolve().parents[1]
ENV = {"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}


# ---- tasks ---------------------------------------------------------------------------------
def test_authors_split_is_datasets_train_test_split():
    import datasets

    ds = datasets.Dataset.from_dict({"i": list(range(57))})
    want = ds.train_test_split(test_size=11, seed=42)
    train, test = authors_split(57, 11, 42)
    assert train == want["train"]["i"] and test == want["test"]["i"]
    with pytest.raises(EmbexpError, match="task.test_size=57 must be between 1 and 56"):
        authors_split(57, 57, 42)


def test_amazon_prompt_label_and_local_split(tmp_path):
    task = build_task(smoke("task=amazon").task)
    rows = task.fixture_rows("full", 30, __import__("random").Random(0))
    assert set(rows[0]) == {"rating", "title", "text", "images", "asin", "parent_asin", "user_id", "timestamp",
                            "helpful_vote", "verified_purchase"}  # the hub schema
    ex = task.format({"rating": 3.5, "text": "Nice hat"})
    assert (ex.prompt, ex.target, ex.label, ex.choices) == ("Review: Nice hat, Label:", "positive", 1,
                                                            ("negative", "positive"))
    assert task.format({"rating": 3.0, "text": "x"}).target == "negative"
    (tmp_path / "full.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = compose("task=amazon", f"task.data_dir={tmp_path}", "task.test_size=10", "task.train_fraction=0.5").task
    local = build_task(cfg)
    train, test = local.load("train"), local.load("eval")
    tr_ids, te_ids = authors_split(30, 10, 42)
    assert test == [rows[i] for i in te_ids] and len(train) == 10
    assert all(r in [rows[i] for i in tr_ids] for r in train)


def test_commitpack_prompt_is_the_authors():
    task = build_task(smoke("task=commitpack").task)
    ex = task.format({"old_contents": "a = 1\n", "subject": "Bump a", "new_contents": "a = 2\n"})
    assert ex.prompt == ("Update the old python code content based on the instrutions.\nOld Content: a = 1\n\n"
                         "Instructions: Bump a\nNew Content:\n")
    assert ex.target == "a = 2\n" and task.kind == "perplexity"
    assert len(task.load("eval")) == 6 and len(task.load("train")) == 24  # debug=smoke caps


@pytest.mark.parametrize("method", ["ktoken", "lora"])
def test_amazon_smoke_run(method, tmp_path):
    m = run_train(smoke(f"method={method}", "model=tiny_llama", "task=amazon"), tmp_path / "run")
    assert {"em_accuracy", "ll_accuracy", "em_majority_baseline", "length_reduction", "pl_score"} <= set(m["metrics"])
    assert (m["metrics"]["length_reduction"] > 40) == (method == "ktoken")


@pytest.mark.parametrize("method", ["ktoken", "lora"])
def test_commitpack_perplexity_is_the_trained_loss_on_the_compressed_prefix(method, tmp_path):
    m = run_train(smoke(f"method={method}", "model=tiny_llama", "task=commitpack"), tmp_path / "run")
    met = m["metrics"]
    # scored by score_continuations, trained by the forward: the same token-weighted loss
    assert met["nll"] == pytest.approx(m["train"]["eval_loss"], abs=1e-4)
    assert met["perplexity"] == pytest.approx(math.exp(met["nll"]))
    assert (45 < met["length_reduction"] <= 50) == (method == "ktoken")


def test_trailing_space_of_the_context_moves_to_the_continuation():
    bb = load_backbone(smoke("model=tiny_llama").model)
    enc = Featurizer(bb.tokenizer, True, 512, 8)
    ctx, cont = continuation_ids(enc, "Parent: AB, Answer: ", "true")
    whole = enc.prompt_ids("Parent: AB, Answer: true")
    assert cont and ctx + cont == whole  # lm-eval's _encode_pair
    assert ctx == enc.prompt_ids("Parent: AB, Answer:")


# ---- prompt_compress -------------------------------------------------------------------------
def test_drop_lowest_drops_the_floor_of_rate_times_n():
    assert drop_lowest([9.0, 1.0, 5.0, 1.0, 7.0], 0.4, {0}) == [0, 2, 4]  # ties: the earlier goes first
    assert drop_lowest([0.0, 1.0, 2.0], 0.5, {0}) == [0, 2]
    assert drop_lowest([3.0, 1.0], 0.0, set()) == [0, 1]


def test_selective_context_drops_the_lowest_self_information_by_hand():
    cfg = smoke("method=prompt_compress", "model=tiny_llama", "task=tree", "method.rate=0.5")
    torch.manual_seed(0)
    method = build_method(cfg.method, load_backbone(cfg.model))
    ids = method.tokenizer("Tree: AB\n+CD, Parent: AB, Child: CD, Answer: ")["input_ids"]
    with torch.no_grad():
        logp = torch.log_softmax(method.backbone_model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
    info = [-float(logp[i - 1, ids[i]]) for i in range(1, len(ids))]
    order = sorted(range(1, len(ids)), key=lambda i: (info[i - 1], i))
    dropped = set(order[: len(ids) // 2])
    assert method.compress_ids(ids) == [t for i, t in enumerate(ids) if i not in dropped]
    enc = Featurizer(method.tokenizer, True, 512, 8)
    exs = [Example(prompt="Tree: AB\n+CD, Parent: AB, Child: CD, Answer: ", target="true")] * 2
    red = compression_metrics(method, enc, exs, {}, 2, torch.device("cpu"))["length_reduction"]
    assert red == pytest.approx(100.0 * (len(ids) // 2) / len(ids))  # measured from the prefix actually built
    batch = collate([{"input_ids": ids}, {"input_ids": ids[:5]}], method.tokenizer.pad_token_id, left=True)
    x, mask = method.prefix(batch["input_ids"], batch["attention_mask"])
    assert mask.sum(1).tolist() == [len(ids) - len(ids) // 2, len(method.compress_ids(ids[:5]))]


def test_prompt_compress_smoke_run(tmp_path):
    m = run_train(smoke("method=prompt_compress", "model=tiny_llama", "task=tree",
                        "method.rate=0.35"), tmp_path / "run")
    assert 25 < m["metrics"]["length_reduction"] < 40 and "em_accuracy" in m["metrics"]
    assert 0 < m["train"]["tokens"] < m["train"]["input_tokens"]  # the backbone read the compressed prompts


def test_llmlingua_missing_package_or_network_is_one_line(tmp_path):
    try:
        import llmlingua  # noqa: F401
        needle = "method.compressor="  # offline: the hub model / tiktoken, or no path for a tiny model
    except ImportError:
        needle = "needs the llmlingua package (pip install 'embexp[compress]')"
    for comp in ("llmlingua2", "llmlingua"):
        r = run_cli("debug=smoke", "method=prompt_compress", f"method.compressor={comp}", "model=smollm2",
                           "task=tree", f"hydra.run.dir={tmp_path / comp}")
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("embexp: error:")]
        assert r.returncode != 0 and len(lines) == 1 and needle in lines[0], r.stderr


class FakeCompressor:
    """Stands in for llmlingua.PromptCompressor (its real one needs the network): keeps every other word."""

    calls: list = []

    def __init__(self, model_name, device_map, model_config, **extra):
        FakeCompressor.calls.append(("init", model_name, device_map, dict(model_config), extra))

    def compress_prompt(self, text, rate):
        FakeCompressor.calls.append(("compress", text, rate))
        return {"compressed_prompt": " ".join(text.split()[::2])}


def test_llmlingua_glue_decodes_compresses_and_tokenises_again(monkeypatch):
    import types

    monkeypatch.setitem(sys.modules, "llmlingua", types.SimpleNamespace(PromptCompressor=FakeCompressor))
    FakeCompressor.calls = []
    cfg = smoke("method=prompt_compress", "model=tiny_llama", "task=tree",
                "method.compressor=llmlingua2", "method.rate=0.4")
    method = build_method(cfg.method, load_backbone(cfg.model))
    assert FakeCompressor.calls[0] == ("init", "microsoft/llmlingua-2-xlm-roberta-large-meetingbank", "cpu",
                                       {"trust_remote_code": False}, {"use_llmlingua2": True})
    text = "Tree: AB +CD, Parent: AB, Child: CD, Answer:"
    ids = method.tokenizer(text)["input_ids"]
    assert method.compress_ids(ids) == method.tokenizer("Tree: +CD, AB, CD,")["input_ids"]
    assert FakeCompressor.calls[1] == ("compress", text, pytest.approx(0.6))  # rate = 1 - method.rate
    method.compress_ids(ids)
    assert len(FakeCompressor.calls) == 2  # cached
    with pytest.raises(EmbexpError, match="loads its scorer from a path: model tiny_llama"):
        build_method(smoke("method=prompt_compress", "model=tiny_llama", "task=tree",
                           "method.compressor=llmlingua").method,
                     load_backbone(cfg.model))
    cfg1 = smoke("method=prompt_compress", "model=tiny_llama", "task=tree", "method.compressor=llmlingua",
                 "method.compressor_model=/models/scorer")
    build_method(cfg1.method, load_backbone(cfg1.model))
    assert FakeCompressor.calls[-1] == ("init", "/models/scorer", "cpu", {"trust_remote_code": False}, {})


# ---- the paper's sweeps (embexp/sweep/papers/ktoken.py, mk/ktoken.mk) ----------------------------------------
def sweep_commands(table: str, *assignments: str) -> list[list[str]]:
    from embexp.sweep import command_lines

    cmds = command_lines(f"ktoken/{table}", ["seeds=42", *assignments], ["debug=smoke"])  # one seed: one run per cell
    return [[sys.executable, *c] for c in cmds if c[1] == "embexp.train"]


def test_every_sweep_command_composes_with_debug_smoke():
    seen = {}
    for table in ("table1", "table2", "table3", "ablation"):
        cmds = sweep_commands(table)
        assert cmds and all(c[1:3] == ["-m", "embexp.train"] and c[-1] == "debug=smoke" for c in cmds)
        for c in cmds:
            cfg = smoke(*c[3:])
            assert cfg.model.source == "tiny" and cfg.trainer.max_steps == 4 and cfg.seed == 42
            assert (cfg.trainer.lr, cfg.trainer.scheduler) == (1e-4, "constant")  # the authors' recipe
            seen.setdefault(table, []).append((cfg.method.name, cfg.tag, cfg.task.name))
    assert [t for _, t, _ in seen["table1"]] == ["uncompressed", "selective_context", "llmlingua2", "k2", "k3", "k4"]
    assert {n for _, _, n in seen["table2"]} == {"amazon"} and {n for _, _, n in seen["table3"]} == {"commitpack"}
    assert [t for _, t, _ in seen["ablation"]] == ["init_average", "init_random"]
    lora = smoke(*sweep_commands("table1")[0][3:])
    assert (lora.method.r, lora.method.alpha, lora.trainer.curriculum[-1]) == (4, 16, "x3large")
    assert "lm_head" in lora.method.target_modules


@pytest.mark.serial
def test_make_target_calls_the_sweep():
    r = make_dry("ktoken_table3", env=ENV)  # the sweep make calls, with --dry-run
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if "-m embexp.train" in ln]
    assert len(lines) == 18 and all("task=commitpack" in ln for ln in lines)  # three seeds: the paper's best of three
    assert [sum(f"seed={s}" in ln.split() for ln in lines) for s in (42, 43, 44)] == [6, 6, 6]


def test_sweep_cells_run_with_debug_smoke_and_the_tables_render(tmp_path):
    out = f"output_root={tmp_path}"
    for table, pick, extra in (("table3", "tag=k2", []),
                               ("ablation", "tag=init_random", ["trainer.curriculum_max_rounds=2"])):
        cmd = next(c for c in sweep_commands(table) if pick in c)
        r = run_cli(*cmd[3:], out, *extra)  # the printed command, run in this process
        assert r.returncode == 0, r.stderr[-2000:]
    from embexp.report import configure
    from embexp.tasks.metrics import pl_from_perplexity

    def render(table):
        module, cfg = configure(["paper=ktoken", f"table={table}", f"runs={tmp_path}",
                                 f"out={tmp_path / 'tables'}", "seeds=[42]"])
        return module.render(cfg)[table]

    k2 = json.loads((tmp_path / "commitpack_python" / "qwen25_05b" / "ktoken_k2" / "seed42"
                     / "metrics.json").read_text())
    # an uncompressed record with a known perplexity: Eq. 4 against it
    record_run(tmp_path, "commitpack", "python", "qwen25_05b", "lora", "uncompressed", 42,
               {"metrics": {"perplexity": 100.0, "length_reduction": 0.0}})
    table = render("table3")
    row = [c.strip() for c in next(ln for ln in table.splitlines() if ln.startswith("| k2 ")).split("|")]
    ppl, red = k2["metrics"]["perplexity"], k2["metrics"]["length_reduction"]
    assert row[2] == f"{ppl:.3f} [1.343]" and row[3] == f"{ppl:.3f} \u00b1 -" and row[4] == "1"
    assert row[5] == str(k2["train"]["effective_batch"]) and row[6] == f"{red:.1f} [50.0]"
    assert row[7] == f"{pl_from_perplexity(ppl, 100.0, red):.3f} [0.658]"  # ours beside the paper's
    assert "| selective_context | - [1.38] | - | 0 |" in table
    curve = next(ln for ln in render("ablation").splitlines() if ln.startswith("| random"))
    cols = [c.strip() for c in curve.split("|")[2:-1]]
    assert cols[0] == "1" and len(cols) == 12 and cols[2] != "-" and cols[3] != "-" and cols[4] == "-"  # two epochs ran


def render(table: str, root: Path, seeds: list[int], select_on: str = "heldout") -> str:
    """python -m embexp.report paper=ktoken table=<table> over the runs under root."""
    from embexp.report import configure

    module, cfg = configure(["paper=ktoken", f"table={table}", f"runs={root}", f"out={root / 'tables'}",
                             f"seeds=[{','.join(map(str, seeds))}]", f"select_on={select_on}"])
    return module.render(cfg)[table]


def test_sweep_states_the_effective_batch_tree_size_and_protocol_of_each_cell():
    from embexp.sweep import command_lines

    def cmds(table, *assignments):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert sweep.main([f"ktoken/{table}", "--dry-run", "--py", "python", "seeds=42", *assignments]) == 0
        return out.getvalue(), [shlex.split(ln) for ln in out.getvalue().splitlines() if " -m embexp.train " in ln]

    from embexp.run.results import effective_batch

    def eff(cmd):
        cfg = compose(*cmd[3:])
        return effective_batch(cfg.trainer, 1), cfg

    # Tables 2 and 3: the authors' 3 per GPU x 4 GPUs x accumulation 4 = 48, as 3 x accumulation 16 on one device
    for table in ("table2", "table3"):
        text, cs = cmds(table)
        assert text.startswith(f"# {table}: seeds 42 (N=1; the paper: best of 3 runs); effective batch 48 ="), text
        assert {eff(c)[0] for c in cs} == {48} and all(eff(c)[1].trainer.batch_size == 3 for c in cs)
    # Table 1: the authors' per-stage per-GPU table x 16; the paper's tree size (2.45M questions) by default
    _, cs = cmds("table1")
    got = {eff(c)[1].tag: eff(c) for c in cs}
    assert got["k4"][0] == [5120, 5120, 3072, 2048, 768, 256]
    assert got["k2"][0] == got["k3"][0] == got["uncompressed"][0] == [4512, 3072, 2304, 1536, 768, 256]
    t = got["k4"][1].task
    assert t.select_split == "train_holdout" and got["k4"][1].trainer.select_on == "heldout"
    # the paper's 2.45M training and 50k test questions (k-token-merging.md) follow from the trees the cell asks
    # for times the questions the generator actually writes per tree at the cell's per-tree settings
    train, held, test = tree_rows_per_tree(t)
    (per_train,), (per_test,) = set(train.values()), set(test.values())  # one count per tree, on the final stage
    assert (t.num_train_trees - t.select_size) * per_train == 2_450_000 and t.num_eval_trees * per_test == 50_000
    _, small = cmds("table1", "tree=small")
    assert compose(*small[0][3:]).task.num_train_trees == 5000
    _, paper = cmds("ablation", "select_on=reported")
    cfg = compose(*paper[0][3:])
    assert (cfg.trainer.select_on, cfg.task.select_split, cfg.tag) == ("reported", "", "init_average_paper")
    with pytest.raises(EmbexpError, match="unknown sweep variable 'select_on'"):  # only the tree tables select
        command_lines("ktoken/table2", ["select_on=reported"])


def tree_rows_per_tree(task_cfg, trees: int = 40, held: int = 4, test: int = 8) -> tuple[dict, dict, dict]:
    """Generated rows per tree (rendered tree -> rows) of the train, held-out (gate) and test rows of a
    small stage built with ``task_cfg``'s per-tree settings (stage, max_pairs_per_tree, seeds): the project's
    own generator, ``trees`` training trees (``held`` of them held out) and ``test`` test trees. Checks that
    every generated tree lands in exactly one of the three and that the held-out ones are not trained on."""
    from collections import Counter

    from omegaconf import OmegaConf

    cfg = OmegaConf.merge(task_cfg, {"num_train_trees": trees, "num_eval_trees": test, "select_size": held,
                                     "max_train_samples": -1, "max_eval_samples": -1, "source": "auto", "data_dir": ""})
    task = build_task(cfg)
    rows = {w: Counter(r["indent_tree"] for r in task.load(w)) for w in ("train", "select", "eval")}
    assert (len(rows["train"]), len(rows["select"]), len(rows["eval"])) == (trees - held, held, test)
    trained, gate, tested = (set(rows[w]) for w in ("train", "select", "eval"))
    assert not trained & gate and not (trained | gate) & tested
    return rows["train"], rows["select"], rows["eval"]


def test_tree_generator_writes_fewer_questions_on_trees_with_fewer_pairs():
    """At max_pairs_per_tree=5 a tree with fewer than 5 ordered pairs gives all of them (the first stages,
    docs/fidelity.md): the 2.45M is the final stage's count (x3large: 5 per tree, measured above)."""
    from omegaconf import OmegaConf

    from embexp.tasks.tree import walk

    cfg = OmegaConf.merge(compose("task=tree", "task.max_pairs_per_tree=5").task,
                          {"subset": "small", "num_train_trees": 40, "num_eval_trees": 8, "select_size": 4,
                           "max_train_samples": -1, "max_eval_samples": -1, "source": "auto", "data_dir": ""})
    task = build_task(cfg)
    pairs = [len(list(walk(t))) * (len(list(walk(t))) - 1) for t in task.trees()]
    rows = sum(len(task.load(w)) for w in ("train", "select", "eval"))
    assert len(pairs) == 48 and rows == sum(min(5, n) for n in pairs) < 5 * len(pairs)


def test_ktoken_tables_show_best_of_n_mean_se_runs_and_effective_batch(tmp_path):
    from embexp.report import ktoken as sw

    def rec(tag, method, seed, acc, red, eff=48, select_on="heldout"):
        record_run(tmp_path, "amazon", "Amazon_Fashion", "qwen25_05b", method, tag, seed,
                   {"metrics": {"em_accuracy": acc, "length_reduction": red}, "train": {"effective_batch": eff},
                    "select_on": select_on})

    for seed, acc in ((42, 90.0), (43, 92.0), (44, 94.0)):
        rec("k2", "ktoken", seed, acc, 50.0 + seed - 43)
    rec("uncompressed", "lora", 42, 93.0, 0.0)
    rec("selective_context", "prompt_compress", 42, 91.0, 40.0, eff=24)
    rec("selective_context", "prompt_compress", 43, 89.0, 42.0)
    table = render("table2", tmp_path, [42, 43, 44])
    lines = table.splitlines()
    head = [c.strip() for c in next(ln for ln in lines if ln.startswith("| column")).split("|")[1:-1]]
    assert head == ["column", "accuracy: best of N", "accuracy: mean \u00b1 s.e.", "N", "eff. batch",
                    "reduction (measured)", "P-L (best run)"]
    row = lambda tag: [c.strip() for c in next(ln for ln in lines if ln.startswith(f"| {tag} |")).split("|")[2:-1]]  # noqa: E731
    # best of 3 = 94.0 (seed 44, reduction 51.0); mean 92.0, s.e. = s.d. 2 / sqrt(3)
    assert row("k2") == ["94.00 [92.51]", f"92.00 \u00b1 {2 / math.sqrt(3):.2f}", "3", "48", "50.0 [50.0]",
                         f"{pl_from_accuracy(94.0, 51.0):.3f} [0.649]"]
    assert row("uncompressed")[:4] == ["93.00 [93.54]", "93.00 \u00b1 -", "1", "48"]
    sc = row("selective_context")  # the measured reduction (mean of 40 and 42), the two batches both shown
    assert sc[2:5] == ["2", "24 or 48", "41.0 [44.6]"] and sc[0] == "91.00 [91.3]"
    assert row("k4") == ["- [91.05]", "-", "0", "-", "- [75.0]", "- [0.822]"]
    assert any("method.rate is an input set to the paper's measured reduction" in ln for ln in lines)
    assert any(ln.startswith("best of N: the paper's protocol") for ln in lines) and sw.MARK not in table
    # perplexity: best of N is the lowest
    for seed, ppl in ((42, 1.5), (43, 1.3)):
        record_run(tmp_path, "commitpack", "python", "qwen25_05b", "ktoken", "k2", seed,
                   {"metrics": {"perplexity": ppl, "length_reduction": 50.0}, "train": {"effective_batch": 48}})
    k2 = next(ln for ln in render("table3", tmp_path, [42, 43]).splitlines() if ln.startswith("| k2 |"))
    assert k2.split("|")[2].strip() == "1.300 [1.343]" and k2.split("|")[3].strip() == "1.400 \u00b1 0.100"


def test_ktoken_tree_tables_mark_cells_whose_gate_read_the_reported_split(tmp_path):
    from embexp.report import ktoken as sw

    record_run(tmp_path, "tree", "x3large", "qwen25_05b", "ktoken", "k4_paper", 42,
               {"metrics": {"em_accuracy": 98.0, "length_reduction": 74.0},
                "train": {"effective_batch": [5120, 5120, 3072, 2048, 768, 256]},
                "select_on": "reported", "curriculum_gate_split": "test"})
    table = render("table1", tmp_path, [42], "reported")
    row = next(ln for ln in table.splitlines() if ln.startswith(f"| k4 {sw.MARK} |"))
    assert "| 5120/5120/3072/2048/768/256 |" in row
    assert table.splitlines()[-1] == sw.MARK_NOTE and "held" not in render("table1", tmp_path, [42]).splitlines()[-1]
