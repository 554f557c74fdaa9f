"""K-Token Merging: the merge, the prefix length, the measured length reduction, the P-L score of the
paper's tables, scoring on the compressed prefix, the run record, and bad input. (The shared matrix in
test_methods.py covers training, save/load, KV-cache generation and padding independence.)"""

from __future__ import annotations

import math

import pytest
import torch

from conftest import run_cli, run_train, smoke
from embexp.featurize import Featurizer, collate
from embexp.methods import build_method
from embexp.methods.ktoken import block_layout
from embexp.models import load_backbone
from embexp.run.predict import compression_metrics
from embexp.tasks.base import Example
from embexp.tasks.metrics import pl_from_accuracy, pl_from_perplexity, pl_score


def ktoken(*overrides, model="tiny_llama"):
    cfg = smoke("method=ktoken", f"model={model}", "task=tree", *overrides)
    torch.manual_seed(0)
    bb = load_backbone(cfg.model)
    return build_method(cfg.method, bb)


def rows(method, lengths):
    """Left-padded prompts of the given lengths (ids of real bytes, never the pad id)."""
    seqs = [[10 + (7 * i + j) % 200 for j in range(n)] for i, n in enumerate(lengths)]
    return seqs, collate([{"input_ids": s} for s in seqs], method.tokenizer.pad_token_id, left=True)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_zero_init_merges_each_block_to_its_exact_mean(k):
    method = ktoken(f"method.k={k}", "method.zero_init=true")
    space = method.tokenizer(" ", add_special_tokens=False)["input_ids"]
    assert method.pad_id == space[0] and len(space) == 1  # the authors' pad: the space token
    lengths = [1, 5, 7, 8, 12]
    seqs, batch = rows(method, lengths)
    emb = method.backbone_model.get_input_embeddings()
    with torch.no_grad():
        x, mask = method.prefix(batch["input_ids"], batch["attention_mask"])
    width = max(math.ceil(n / k) for n in lengths)
    assert x.shape[:2] == mask.shape == (len(lengths), width)
    for row, seq in enumerate(seqs):
        m = math.ceil(len(seq) / k)
        assert mask[row].tolist() == [0] * (width - m) + [1] * m  # ceil(n/K) positions, left-padded
        padded = seq + [method.pad_id] * (m * k - len(seq))  # the end of the prompt padded with spaces
        with torch.no_grad():
            want = emb(torch.tensor(padded)).view(m, k, -1).mean(1)
        assert torch.equal(x[row, width - m:], want)
        assert not x[row, : width - m].any()


def test_authors_init_is_the_mean_plus_the_authors_mlp():
    method = ktoken("method.k=4", "method.zero_init=false")
    net = method.encoder.net
    d = method.backbone_model.config.hidden_size
    assert [type(m).__name__ for m in net] == ["Linear", "ReLU", "Linear", "ReLU", "Linear"]
    assert ((net[0].in_features, net[0].out_features, net[2].out_features, net[4].out_features)
            == (4 * d, 6 * d, 4 * d, d))
    assert net[4].weight.abs().sum() > 0  # PyTorch's default init, not zero (the authors' code)
    _, batch = rows(method, [8])
    emb = method.backbone_model.get_input_embeddings()
    with torch.no_grad():
        x, _ = method.prefix(batch["input_ids"], batch["attention_mask"])
        blocks = emb(batch["input_ids"]).view(1, 2, 4 * d)
        want = blocks.view(1, 2, 4, d).mean(2) + net(blocks)
    torch.testing.assert_close(x, want, atol=1e-6, rtol=0)


def test_block_layout_is_per_row_over_the_real_tokens():
    ids = torch.tensor([[0, 0, 0, 5, 6, 7], [1, 2, 3, 4, 5, 6]])
    mask = torch.tensor([[0, 0, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    got, bmask = block_layout(ids, mask, 4, pad_id=99)
    assert got.tolist() == [[99, 99, 99, 99, 5, 6, 7, 99], [1, 2, 3, 4, 5, 6, 99, 99]]
    assert bmask.tolist() == [[0, 1], [1, 1]]


@pytest.mark.parametrize("k,want", [(2, 50.0), (3, 66.7), (4, 75.0)])
def test_measured_length_reduction_on_prompts_of_a_multiple_of_k(k, want):
    method = ktoken(f"method.k={k}")
    enc = Featurizer(method.tokenizer, True, 1024, 8)
    # byte tokenizer: <s> + one id per byte, so a text of 12*j - 1 bytes is 12*j tokens
    examples = [Example(prompt="x" * (12 * j - 1), target="t") for j in (1, 2, 3, 5)]
    assert all(len(enc.prompt_ids(e.prompt)) % k == 0 for e in examples)
    out = compression_metrics(method, enc, examples, {"em_accuracy": 90.0}, 3, torch.device("cpu"))
    assert out["length_reduction"] == pytest.approx(100.0 * (1 - 1 / k), abs=1e-9)
    assert round(out["length_reduction"], 1) == want
    assert out["pl_score"] == pytest.approx(pl_score(0.9, 1 - 1 / k))
    # a prompt that is not a multiple of K keeps its padding: 5 tokens -> 3 positions at K=2
    if k == 2:
        short = compression_metrics(method, enc, [Example(prompt="xxxx", target="t")], {}, 1, torch.device("cpu"))
        assert short["length_reduction"] == pytest.approx(40.0) and "pl_score" not in short


def test_uncompressed_methods_report_no_reduction():
    cfg = smoke("method=lora", "model=tiny_llama", "task=tree")
    method = build_method(cfg.method, load_backbone(cfg.model))
    enc = Featurizer(method.tokenizer, True, 1024, 8)
    out = compression_metrics(method, enc, [Example(prompt="abc", target="t")], {"em_accuracy": 99.0}, 1,
                              torch.device("cpu"))
    assert out == {"length_reduction": 0.0, "pl_score": 0.0}


# The paper's Tables 1-3: (accuracy or perplexity, length reduction %, printed P-L).
TABLE1 = [(99.97, 0.0, 0.000), (90.43, 52.5, 0.664), (82.17, 27.0, 0.406), (99.68, 27.1, 0.426),
          (99.91, 50.0, 0.666), (98.63, 66.7, 0.796), (98.38, 75.0, 0.851)]
TABLE2 = [(93.54, 0.0, 0.000), (91.30, 44.6, 0.599), (91.49, 51.0, 0.655), (93.48, 0.1, 0.002),
          (92.51, 50.0, 0.649), (92.23, 66.7, 0.774), (91.05, 75.0, 0.822)]
TABLE3 = [(1.293, 0.0, 0.000), (1.380, 39.9, 0.560), (1.381, 30.0, 0.454), (1.296, 17.2, 0.293),
          (1.343, 50.0, 0.658), (1.382, 66.7, 0.779), (1.391, 75.0, 0.830)]


@pytest.mark.parametrize("table", [TABLE1, TABLE2], ids=["table1_tree", "table2_amazon"])
def test_pl_score_reproduces_the_paper_accuracy_tables(table):
    assert [round(pl_from_accuracy(acc, red), 3) for acc, red, _ in table] == [pl for _, _, pl in table]


def test_pl_score_reproduces_the_paper_perplexity_table():
    uncompressed = TABLE3[0][0]
    assert ([round(pl_from_perplexity(ppl, uncompressed, red), 3) for ppl, red, _ in TABLE3]
            == [pl for _, _, pl in TABLE3])
    # without Eq. 4's normalisation (raw perplexity as P) the table is not reproduced
    assert round(pl_score(1.391, 0.75), 3) != 0.830


def test_loglik_scoring_on_the_compressed_prefix_by_hand():
    method = ktoken("method.k=3")
    with torch.no_grad():
        for p in method.encoder.parameters():
            p.normal_(std=0.05)
    method.eval()
    seqs, _ = rows(method, [7, 4, 9, 5])
    requests = [(s[:-2], s[-2:]) for s in seqs] + [(seqs[0][:-2], seqs[1][-1:])]
    got = method.score_continuations(requests, batch_size=3)
    emb = method.backbone_model.get_input_embeddings()
    with torch.no_grad():
        for (ctx, cont), score in zip(requests, got):
            one = collate([{"input_ids": list(ctx)}], method.tokenizer.pad_token_id, left=True)
            px, _ = method.prefix(one["input_ids"], one["attention_mask"])
            assert px.shape[1] == math.ceil(len(ctx) / 3)
            x = torch.cat([px, emb(torch.tensor([cont[:-1]], dtype=torch.long))], 1)
            logp = torch.log_softmax(method.backbone_model(inputs_embeds=x).logits[0].float(), -1)
            want = sum(float(logp[x.shape[1] - len(cont) + j, c]) for j, c in enumerate(cont))
            assert abs(score - want) < 1e-4, (score, want)


def test_run_record_reports_reduction_pl_and_backbone_tokens(tmp_path):
    cfg = smoke("method=ktoken", "model=tiny_llama", "task=tree", "method.k=4", "trainer.max_steps=2")
    cfg.save_adapter = False
    m = run_train(cfg, tmp_path / "run")
    metrics, train = m["metrics"], m["train"]
    assert 60.0 < metrics["length_reduction"] < 75.0  # tree prompts: ceil(n/4) positions each
    assert {"em_accuracy", "ll_accuracy", "pl_score"} <= set(metrics)
    assert 0 < train["tokens"] < train["input_tokens"]


@pytest.mark.parametrize("args,needle", [
    (("method.k=1",), "unknown method.k '1' (choose from: 2, 3, 4)"),
    (("method.k=5",), "unknown method.k '5' (choose from: 2, 3, 4)"),
    (("model=tiny_roberta", "task=glue"), "method ktoken needs a decoder model; model tiny_roberta is an encoder"),
    (("method.pad_id=100000",),
     "method.pad_id=100000 is outside the vocabulary (choose -1 for the space token, or 0..260)"),
    (("method.inner=prompt_tuning",), "unknown method.inner 'prompt_tuning' (choose from: none,"),
])
def test_bad_input_is_one_clear_line(args, needle, tmp_path):
    r = run_cli("debug=smoke", "method=ktoken", "task=tree", *args, f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("embexp: error:")]
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


# ---- the curriculum (a trainer feature; the paper's tree recipe) -------------------------------
def test_curriculum_trains_each_stage_until_its_gate(tmp_path):
    args = ("method=ktoken", "model=tiny_llama", "task=tree", "task.subset=xsmall", "trainer.max_steps=2",
            "trainer.curriculum=[small,xsmall]", "trainer.curriculum_max_rounds=2")
    passing = run_train(smoke(*args, "trainer.curriculum_gate=0", "trainer.curriculum_final_gate=0"), tmp_path / "pass")
    rounds = [h for h in passing["train"]["history"] if "stage" in h]
    assert [(h["stage"], h["round"], h["passed"]) for h in rounds] == [("small", 1, True), ("xsmall", 1, True)]
    assert passing["train"]["steps"] == 4 and passing["task"] == "tree_xsmall"
    assert {h["gate_split"] for h in rounds} == {"train_holdout"}  # the default: held-out rows, never 'test'
    missing = run_train(smoke(*args, "trainer.curriculum_gate=0",
                              "trainer.curriculum_final_gate=101"), tmp_path / "miss")
    rounds = [h for h in missing["train"]["history"] if "stage" in h]
    assert [(h["stage"], h["round"], h["passed"], h["gate"]) for h in rounds] == [
        ("small", 1, True, 0.0), ("xsmall", 1, False, 101.0), ("xsmall", 2, False, 101.0)]
    assert missing["train"]["steps"] == 6 and 0 < missing["train"]["tokens"] < missing["train"]["input_tokens"]


def test_curriculum_gate_reads_held_out_trees_by_default_and_the_reported_split_only_by_name(tmp_path):
    # 5 held-out rows (the fixture), 6 reported rows: the count tells them apart
    args = ("method=ktoken", "model=tiny_llama", "task=tree", "task.subset=xsmall", "trainer.max_steps=1",
            "trainer.curriculum=[xsmall]", "trainer.curriculum_final_gate=0", "task.select_size=5")
    held = run_train(smoke(*args), tmp_path / "held")
    rounds = [h for h in held["train"]["history"] if "stage" in h]
    assert [(h["gate_split"], h["gate_rows"]) for h in rounds] == [("train_holdout", 5)]
    assert (held["curriculum_gate_split"], held["select_on"]) == ("train_holdout", "heldout")
    paper = run_train(smoke(*args, "trainer.select_on=reported", "task.select_split="), tmp_path / "paper")
    rounds = [h for h in paper["train"]["history"] if "stage" in h]
    assert [(h["gate_split"], h["gate_rows"]) for h in rounds] == [("test", 6)]
    assert (paper["curriculum_gate_split"], paper["select_on"]) == ("test", "reported")
    # the last gate read the reported rows themselves: the final evaluation of the same state
    assert rounds[-1]["em_accuracy"] == paper["metrics"]["em_accuracy"]


@pytest.mark.parametrize("args", [("task.select_split=",), ("task.select_split=test",)], ids=["none", "reported"])
def test_curriculum_gating_on_the_reported_split_is_refused_in_one_line(args, tmp_path):
    r = run_cli("debug=smoke", "method=lora", "task=tree", "trainer.curriculum=[small]", *args,
                       f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("embexp: error:")]
    assert len(lines) == 1 and "trainer.curriculum's gate would read the reported split 'test'" in lines[0], r.stderr
    assert "trainer.select_on=reported" in lines[0]
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_a_misspelled_curriculum_metric_fails_in_one_line_before_any_training(tmp_path, monkeypatch):
    """The gate's metric is scored on two of the first stage's gate rows before anything trains."""
    from embexp import EmbexpError
    from embexp.run.loop import Trainer

    monkeypatch.setattr(Trainer, "fit", lambda self: pytest.fail("a stage trained before the metric was checked"))
    cfg = smoke("method=ktoken", "model=tiny_llama", "task=tree", "task.subset=xsmall", "trainer.max_steps=1",
                "trainer.curriculum=[small,xsmall]", "trainer.curriculum_metric=em_acuracy")
    with pytest.raises(EmbexpError) as e:
        run_train(cfg, tmp_path / "run")
    line = str(e.value)
    assert line.startswith("trainer.curriculum_metric=em_acuracy: the evaluation of tree_small gives no "
                           "'em_acuracy' (it gives: ") and "em_accuracy" in line and "\n" not in line, line


def test_curriculum_bad_stage_is_one_line(tmp_path):
    r = run_cli("debug=smoke", "method=lora", "task=tree", "trainer.curriculum=[small,huge]",
                       f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == ("embexp: error: unknown trainer.curriculum stage 'huge' for task tree "
                                                 "(choose from: small, xsmall, medium, xmedium, large, x3large)")


# ---- learning (issue #25): a planted label survives merging and is learned ------------------------
def planted_rows(n: int, seed: int):
    """Prompts of 6-12 random consonants with one planted 'A' (answer ' yes') or 'Z' (' no') at a
    random position, then ' Answer:'; the byte tokenizer of the tiny models makes each letter a token."""
    import random

    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        s = [rng.choice("bcdfghjklmnpqrstvwx") for _ in range(rng.randint(6, 12))]
        yes = rng.random() < 0.5
        s[rng.randrange(len(s))] = "A" if yes else "Z"
        rows.append(Example(prompt="".join(s) + " Answer:", target=" yes" if yes else " no"))
    return rows


def planted_accuracy(*overrides, steps=200, prefix=None):
    """Train ``method`` (K-Token with the authors' LoRA by default) on 2,000 planted rows at
    trainer.lr=1e-3, batch 16, constant lr; accuracy (%) of ' yes' vs ' no' by log-likelihood on 200
    held-out rows."""
    from accelerate import Accelerator

    from embexp.run.loop import Trainer, TrainInputs

    cfg = smoke("method=ktoken", "model=tiny_llama", "task=tree", "trainer.lr=1e-3", f"trainer.max_steps={steps}",
                "trainer.batch_size=16", "trainer.scheduler=constant", *overrides)
    torch.manual_seed(0)
    bb = load_backbone(cfg.model)
    method = build_method(cfg.method, bb)
    if prefix is not None:  # a control: another prefix through the same shared replace path
        method.prefix = prefix(method)
    fz = Featurizer(bb.tokenizer, True, 256, 8)
    train = [fz.train_features(e) for e in planted_rows(2000, 0)]
    Trainer(method, cfg.trainer, Accelerator(cpu=True), TrainInputs(train, bb.tokenizer.pad_token_id, 0)).fit()
    test = planted_rows(200, 1)
    reqs = [(fz.prompt_ids(e.prompt), fz.target_ids(t)[:-1]) for e in test for t in (" yes", " no")]
    scores = method.score_continuations(reqs, 32)
    hits = [(scores[2 * i] > scores[2 * i + 1]) == (e.target == " yes") for i, e in enumerate(test)]
    return 100.0 * sum(hits) / len(hits)


def test_a_planted_label_is_learned_through_the_merged_prompt():
    """K=2 + LoRA must learn a label that one merged position carries (100% in ~10 s). Before the fix
    (issue #25) this stayed at chance (53%): PyTorch's default init of the MLP's last layer gave an
    output of norm ~0.4 on a table whose rows have norm ~0.16, so the noise buried every block's
    mean, and one shared lr of 1e-3 let the MLP's input-independent output grow without bound."""
    assert planted_accuracy() >= 95.0


@pytest.mark.parametrize("undo", [["method.zero_init=false", "method.encoder_lr=-1"],  # main before the fix
                                  pytest.param(["method.zero_init=false"], marks=pytest.mark.slow),
                                  pytest.param(["method.encoder_lr=-1"], marks=pytest.mark.slow)],
                         ids=["authors_init_one_lr", "authors_init", "one_lr"])
def test_either_half_of_the_fix_alone_leaves_the_planted_label_at_chance(undo):
    """The other side of the test above: undo either half of the fix (the zero-initialised last layer,
    the encoder's own lr of 1e-4) and the same run stays at chance on the tiny model (53%), so the
    test above measures the fix and not luck."""
    assert planted_accuracy(*undo) <= 65.0


@pytest.mark.slow
def test_the_shared_replace_path_learns_the_planted_label_without_merging():
    """The control behind the diagnosis: the prompt's own embeddings, unmerged, through the same
    prefix path (positions, mask, loss, scoring) are learned like uncompressed LoRA, so the path
    is sound and the defect was the encoder's."""
    def identity(method):
        def prefix(ids, mask):
            e = method.backbone_model.get_input_embeddings()(ids)
            return e * mask.unsqueeze(-1).to(e.dtype), mask
        return prefix

    assert planted_accuracy("method.encoder_lr=-1", "method.zero_init=false", prefix=identity) >= 95.0


def test_the_encoder_trains_at_its_own_lr_under_the_same_schedule():
    """encoder_lr is a second AdamW group that the schedule scales like trainer.lr; -1 = one group."""
    from accelerate import Accelerator

    from embexp.run.loop import Trainer, TrainInputs

    for enc_lr, want in [("1e-4", {1e-4, 1e-3}), ("-1", {1e-3})]:
        cfg = smoke("method=ktoken", "model=tiny_llama", "task=tree", "trainer.lr=1e-3", "trainer.max_steps=2",
                    "trainer.scheduler=linear", "trainer.warmup_steps=0", f"method.encoder_lr={enc_lr}")
        bb = load_backbone(cfg.model)
        method = build_method(cfg.method, bb)
        fz = Featurizer(bb.tokenizer, True, 64, 8)
        feats = [fz.train_features(e) for e in planted_rows(4, 0)]
        trainer = Trainer(method, cfg.trainer, Accelerator(cpu=True), TrainInputs(feats, bb.tokenizer.pad_token_id, 0))
        groups = trainer.optimizer.param_groups
        assert {g["peak_lr"] for g in groups} == want
        enc = {id(p) for p in method.encoder.parameters()}
        carried = {id(p) for g in groups if g["peak_lr"] == 1e-4 for p in g["params"]}
        assert carried == (enc if enc_lr == "1e-4" else set())  # the encoder's tensors, and only those, carry 1e-4
        assert enc <= {id(p) for g in groups for p in g["params"]}  # and train under either setting
        trainer.fit()
        assert all(abs(g["lr"] - g["peak_lr"] * 0.5) < 1e-12 for g in groups)  # the last step: factor 1/2


def test_the_logged_scale_compares_the_merged_prefix_with_its_block_means():
    """log_values: merged_norm == block_mean_norm at a zero init; the authors' init adds its noise."""
    for zero, same in (("true", True), ("false", False)):
        method = ktoken(f"method.zero_init={zero}")
        _, batch = rows(method, [5, 8])
        method.train()
        method.prefix(batch["input_ids"], batch["attention_mask"])
        v = method.log_values()
        assert {"encoder_norm", "merged_norm", "block_mean_norm"} <= set(v)
        assert (abs(v["merged_norm"] - v["block_mean_norm"]) < 1e-6) == same
