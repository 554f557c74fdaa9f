"""PETE (issue 12): the Fourier features against the paper's formula, E = T with the MLP's last
layer at zero, frequency ranks, the module swap and its errors.

The shared matrix (tests/test_methods.py) covers training, save/load, export and generation."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from conftest import make_dry, run_cli, smoke
from embexp import EmbexpError
from embexp.methods import build_method
from embexp.methods.pete import PETEConfig, PETEEmbedding, fourier_features
from embexp.models import load_backbone
from embexp.tasks import build_task

REPO = Path(__file__).resolve().parents[1]


def by_hand(p: int, d: int, denominator: int) -> list[float]:
    """The paper's formula, in float64 with math.sin/cos."""
    x = 2 * p / denominator - 1
    return [(math.sin if i % 2 == 0 else math.cos)((i // 2 + 1) * math.pi * x) for i in range(d)]


@pytest.mark.parametrize("norm,denominator", [("vocab", 30522 - 1), ("seq_len", 128 - 1)])
def test_fourier_features_equal_the_formula(norm, denominator):
    """First, middle and last id of the BERT vocabulary at d=512, both normalisations (with
    norm=seq_len x leaves [-1, 1], where a plain fp32 sin would be ~1e-5 off)."""
    cfg = PETEConfig(name="pete", norm=norm)
    module = PETEEmbedding(cfg, vocab_size=30522, dim=512)
    assert module.denominator == denominator
    ids = torch.tensor([0, 15261, 30521])
    got = module.features(ids)
    assert got.dtype == torch.float32 and got.shape == (3, 512)
    want = torch.tensor([by_hand(p, 512, denominator) for p in ids.tolist()], dtype=torch.float64)
    assert (got.double() - want).abs().max().item() < 1e-6
    assert torch.equal(fourier_features(ids.view(3, 1), 512, denominator), got.view(3, 1, 512))  # any batch shape


def test_zero_last_layer_gives_e_equal_t():
    """With the MLP's last layer at zero, E = T exactly (zero_init, and by zeroing a trained one)."""
    module = PETEEmbedding(PETEConfig(name="pete", zero_init=True), vocab_size=1000, dim=64)
    ids = torch.randint(0, 1000, (3, 7))
    assert torch.equal(module(ids), module.features(ids))
    module = PETEEmbedding(PETEConfig(name="pete", mlp_layers=3, activation="silu"), vocab_size=1000, dim=64)
    assert not torch.equal(module(ids), module.features(ids))
    with torch.no_grad():
        module.mlp[-1].weight.zero_()
        module.mlp[-1].bias.zero_()
    assert torch.equal(module(ids), module.features(ids))


def test_code_variant_is_rmsnorm_of_linear_plus_t():
    module = PETEEmbedding(PETEConfig(name="pete", variant="code"), vocab_size=1000, dim=64)
    ids = torch.tensor([[3, 999]])
    t = module.features(ids)
    h = module.linear(t) + t
    want = h / torch.sqrt((h * h).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(module(ids), want, atol=1e-6, rtol=0)
    assert sum(p.numel() for p in module.parameters()) == 64 * 64 + 64 + 64


def build(*overrides, model="tiny_roberta", task="glue"):
    cfg = smoke("method=pete", f"model={model}", f"task={task}", *overrides)
    t = build_task(cfg.task)
    torch.manual_seed(0)
    bb = load_backbone(cfg.model, num_labels=t.num_labels)
    return build_method(cfg.method, bb), bb


def test_module_swap_keeps_the_other_embedding_parts_and_holds_no_table():
    method, bb = build(model="tiny_bert")
    emb = bb.model.bert.embeddings
    assert emb.word_embeddings is method.pete
    assert isinstance(emb.position_embeddings, nn.Embedding) and isinstance(emb.LayerNorm, nn.LayerNorm)
    v, d = bb.vocab_size, bb.hidden_size
    assert (v, d) == (method.pete.num_embeddings, method.pete.embedding_dim)  # read from the config
    for name, t in [*method.named_parameters(), *method.named_buffers()]:
        assert v not in t.shape, f"{name} {tuple(t.shape)} has a row per vocabulary entry"
    ids = torch.tensor([[1, 40, 41, 2]])
    e = emb.LayerNorm(method.pete(ids) + emb.position_embeddings(torch.arange(4)[None])
                      + emb.token_type_embeddings(torch.zeros_like(ids)))
    with torch.no_grad():
        torch.testing.assert_close(emb(input_ids=ids), e)


def test_train_backbone_false_trains_only_the_pete_module_and_the_head():
    method, bb = build("method.train_backbone=false")
    names = set(method.trainable_tensors())
    assert names == ({f"pete.{n}" for n, _ in method.pete.named_parameters()}
                     | {f"head.{n}" for n, _ in bb.head_parameters()})
    full, _ = build()
    assert full.n_trainable(include_head=False) == (sum(p.numel() for p in full.model.parameters())
                                                    - sum(p.numel() for _, p in bb.head_parameters()))


def test_tied_decoder_head_is_untied_and_keeps_its_table():
    method, bb = build(model="tiny_qwen2", task="wmt16")
    head = bb.model.get_output_embeddings()
    assert head.weight.shape == (bb.vocab_size, bb.hidden_size) and head.weight.abs().sum() > 0
    assert bb.model.config.tie_word_embeddings is False


def test_frequency_ranks_from_the_training_split_round_trip():
    method, bb = build("method.rank_by_frequency=true")
    train = [[7, 7, 7, 9, 9, 5], [9, 7]]
    method.setup({"train": train, "eval": [[100, 100, 100, 100, 100]]})  # eval ids are not counted
    rank = method.pete.rank
    assert rank[7].item() == 0 and rank[9].item() == 1 and rank[5].item() == 2 and rank[0].item() == 3  # then by id
    assert torch.equal(method.pete.positions(torch.tensor([7, 9, 0])), torch.tensor([0, 1, 3]))
    state = method.trainable_state()
    assert torch.equal(state["rank"], rank)
    fresh, _ = build("method.rank_by_frequency=true")
    fresh.load_trainable_state(state)
    assert torch.equal(fresh.pete.rank, rank)
    with pytest.raises(EmbexpError, match="no 'rank' tensor"):
        fresh.load_trainable_state({k: v for k, v in state.items() if k != "rank"})


def test_bad_kernel_odd_dimension_and_unswappable_embeddings():
    with pytest.raises(EmbexpError, match=r"unknown method.kernel 'chebyshev' \(choose from: fourier\)"):
        build("method.kernel=chebyshev")
    with pytest.raises(EmbexpError, match="even embedding dimension.*d=33"):
        build("+model.tiny.embedding_size=33", model="tiny_albert")
    cfg = smoke("method=pete", "model=tiny_roberta", "task=glue")
    bb = load_backbone(cfg.model, num_labels=2)
    bb.model.get_input_embeddings = lambda: nn.Linear(4, 4)  # e.g. a model whose input layer is no table
    with pytest.raises(EmbexpError, match="has Linear, which cannot be swapped"):
        build_method(cfg.method, bb)
    bb = load_backbone(cfg.model, num_labels=2)
    bb.model.set_input_embeddings = lambda module: None  # a model that ignores the swap
    with pytest.raises(EmbexpError, match="does not swap its embedding module"):
        build_method(cfg.method, bb)


def test_cli_bad_kernel_is_one_line(tmp_path):
    r = run_cli("debug=smoke", "method=pete", "model=tiny_bert", "task=glue", "method.kernel=legendre",
                       f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == ["embexp: error: unknown method.kernel 'legendre' (choose from: fourier)"]


# ---- model=scratch_encoder -------------------------------------------------------------------
def test_scratch_encoder_is_the_papers_size_from_a_transformers_class():
    from conftest import compose

    cfg = compose("model=scratch_encoder", "method=full_ft", "task=glue")
    torch.manual_seed(0)
    bb = load_backbone(cfg.model, num_labels=2, sentence=True)
    c = bb.model.config
    assert type(bb.model).__name__ == "ModernBertModel" and bb.head_parameters() == []
    assert (c.num_hidden_layers, c.num_attention_heads, c.hidden_size, c.vocab_size) == (2, 2, 512, 30522)
    assert bb.tokenizer("Hello world")["input_ids"] == [101, 7592, 2088, 102]  # uncased BERT WordPiece
    assert (c.pad_token_id, c.cls_token_id, c.sep_token_id) == (0, 101, 102)


@pytest.mark.parametrize("model", ["scratch_encoder", "tiny_bert"])
def test_pete_and_full_ft_start_from_the_same_body(model):
    """Same seed, same architecture: the two runs differ only in the input table."""
    from embexp.run.build import build as build_run

    cfgs = {m: smoke(f"method={m}", f"model={model}", "task=glue", "model.source=scratch", "model.tokenizer=byte",
                     "++model.scratch={hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 2, "
                     "intermediate_size: 64}",
                     "seed=3") for m in ("pete", "full_ft")}
    built = {}
    for m, cfg in cfgs.items():
        torch.manual_seed(cfg.seed)
        built[m] = build_run(cfg, torch.device("cpu"))
    pete, full = (dict(built[m].method.model.named_parameters()) for m in ("pete", "full_ft"))
    emb = {n for n in full if n.endswith(("word_embeddings.weight", "tok_embeddings.weight"))}
    assert len(emb) == 1 and all(not n.startswith(tuple(emb)) for n in pete)
    rest = [n for n in full if n not in emb]
    assert rest and all(torch.equal(pete[n], full[n]) for n in rest)
    assert built["full_ft"].method.model.config.hidden_size == 32


# ---- parameter accounting (python -m embexp.analyze params) ---------------------------------
def test_parameter_counts_of_the_papers_pair_term_by_term():
    """Ours from the configs, and the paper's 24.3M / 8.9M once the authors' pooler
    (Linear(512, 512) + tanh on the mean, 262,656) is added: docs/methods_pete.md."""
    from embexp.studies import params

    full = params.count("scratch_encoder", ["method=full_ft"], num_labels=0)
    pete = params.count("scratch_encoder", ["method=pete"], num_labels=0)
    code = params.count("scratch_encoder", ["method=pete", "method.variant=code"], num_labels=0)
    assert (full["tp"], pete["tp"], code["tp"]) == (24_031_744, 8_667_392, 8_667_648)
    assert full["groups"]["embeddings.tok_embeddings"] == 30522 * 512
    assert pete["groups"]["embeddings.tok_embeddings"] == (512 * 256 + 256) + (256 * 512 + 512)  # d -> d/2 -> d
    assert code["groups"]["embeddings.tok_embeddings"] == 512 * 512 + 512 + 512  # Linear + RMSNorm
    body = {k: v for k, v in full["groups"].items() if k != "embeddings.tok_embeddings"}
    assert body == {k: v for k, v in pete["groups"].items() if k != "embeddings.tok_embeddings"}
    pooler = 512 * 512 + 512
    assert round((full["tp"] + pooler) / 1e6, 1) == 24.3 and round((code["tp"] + pooler) / 1e6, 1) == 8.9
    assert round((pete["tp"] + pooler) / 1e6, 1) == 8.9


# ---- export ----------------------------------------------------------------------------------------
PLAIN = r"""
import json, sys
import torch
from transformers import AutoModel, AutoTokenizer
path, texts = sys.argv[1], json.loads(sys.argv[2])
tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
enc = tok(texts, padding=True, return_tensors="pt")
with torch.no_grad():
    h = model(**enc).last_hidden_state
m = enc["attention_mask"].unsqueeze(-1).float()
emb = (h * m).sum(1) / m.sum(1)
w = model.get_input_embeddings().weight
assert "embexp" not in sys.modules and type(model.get_input_embeddings()).__name__ == "Embedding"
print(json.dumps({"emb": emb.tolist(), "table_rows": w.shape[0]}))
"""


@pytest.mark.serial
def test_export_gives_the_trained_sentence_embeddings_without_embexp(tmp_path):
    """Train PETE a few steps on nli_pairs, export, load with plain transformers in a fresh process
    (no embexp import): same sentence embeddings to 1e-5, and the table is E(p) for every id."""
    import json
    import os

    from accelerate import Accelerator

    from embexp.objectives.sentence import embed_texts
    from embexp.run.build import build as build_run
    from embexp.run.loop import Trainer, TrainInputs

    cfg = smoke("method=pete", "model=scratch_encoder", "task=nli_pairs", "trainer.max_steps=3", "trainer.lr=1e-2")
    torch.manual_seed(cfg.seed)
    c = build_run(cfg, torch.device("cpu"))
    feats = [c.featurizer.train_features(e) for e in c.task.examples("train")]
    Trainer(c.method, cfg.trainer, Accelerator(cpu=True),
            TrainInputs(feats, c.backbone.tokenizer.pad_token_id, cfg.seed)).fit()
    texts = ["The red cat chased the dog.", "A dog.", "The old horse helped the big sheep yesterday."]
    want = embed_texts(c.method, c.featurizer, texts, batch_size=8, device="cpu")
    c.method.export().save_pretrained(tmp_path / "export")
    c.backbone.tokenizer.save_pretrained(tmp_path / "export")
    with torch.no_grad():  # the exported table is E(p) for every id (times no scale: ModernBERT has none)
        table = c.method.pete.table()
        ids = torch.tensor([0, 7, c.method.pete.num_embeddings - 1])
        torch.testing.assert_close(table[ids], c.method.pete(ids), atol=1e-6, rtol=0)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", PLAIN, str(tmp_path / "export"), json.dumps(texts)], capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["table_rows"] == c.method.pete.num_embeddings
    torch.testing.assert_close(torch.tensor(got["emb"]), want, atol=1e-5, rtol=0)


# ---- make pete_table -------------------------------------------------------------------------------
def pete_commands(extra: str, runs: str = "") -> list[list[str]]:
    import shlex

    r = make_dry("pete_table", f"EXTRA={extra}", *([f"PETE_RUNS={runs}"] if runs else []))
    assert r.returncode == 0, r.stderr
    return [[sys.executable] + shlex.split(line)[1:] for line in r.stdout.splitlines() if " -m embexp." in line]


def pete_configs(cmds: list[list[str]]) -> list:
    from conftest import compose

    return [compose(*[a if a != "method=pete,full_ft" else f"method={method}" for a in cmd[4:]])
            for cmd in cmds[1:3] for method in ("pete", "full_ft")]


@pytest.mark.serial
def test_make_pete_table_dry_run_composes_with_debug_smoke():
    cmds = pete_commands("debug=smoke")
    assert [c[2] for c in cmds] == ["embexp.analyze", "embexp.train", "embexp.train", "embexp.report"]
    for cmd in cmds[1:3]:
        assert cmd[3] == "-m" and "method=pete,full_ft" in cmd and cmd[-1] == "debug=smoke"
    cfgs = pete_configs(cmds)
    for cfg in cfgs:
        assert cfg.model.name == "scratch_encoder" and cfg.task.name == "nli_pairs" and cfg.model.source == "tiny"
        assert cfg.model.scratch.mlp_dropout == cfg.model.tiny.mlp_dropout == cfg.model.tiny.attention_dropout
        # debug=smoke replaces the recipe's budget (the paper's 122,700 steps of 128 pairs would never end on a CPU)
        assert ((cfg.trainer.max_steps, cfg.trainer.batch_size, cfg.trainer.warmup_steps, cfg.trainer.mixed_precision)
                == (4, 4, 0, "no"))
    # dropout off, then the paper's baseline dropout 0.1
    assert [cfg.model.scratch.mlp_dropout for cfg in cfgs] == [0, 0, 0.1, 0.1]


# The paper's recipe, stated once from its text (HMUNACHI/pete @1d2527c paper/main.tex L82: "mixed-precision
# training ... with a batch size of 128 over 122,700 iterations, a learning rate of 2x10^-5, and 1,000 warmup
# steps ... the AdamW optimizer"), and what the paper leaves to the authors' code (src/trainer.py: L12/L30
# get_linear_schedule_with_warmup; L127 fp16 autocast with a GradScaler; no clip_grad_norm_; main.py L87
# AdamW(params, lr=...), so torch's weight decay 0.01). Not read from conf/trainer/pete_paper.yaml.
PAPER_RECIPE = {"batch": 128, "steps": 122_700, "lr": 2e-5, "warmup": 1_000, "optimizer": torch.optim.AdamW}
AUTHORS_CODE = {"decay": "linear", "precision": "fp16", "weight_decay": 0.01, "clip": 0.0}


@pytest.mark.serial
def test_make_pete_table_default_recipe_is_the_papers():
    """Every train command ``make pete_table`` prints (PETE and the baseline, each dropout) composes to a
    trainer that applies the paper's recipe, read through the project's own training functions: examples
    per optimizer step, steps run, the optimizer built and the lr of each step (warm-up, then linear decay
    to 0). Changing conf/trainer/pete_paper.yaml (or the sweep) away from the paper fails here."""
    from embexp.run.results import effective_batch
    from embexp.run.schedule import build_optimizer, lr_factor, total_steps

    out = make_dry("pete_table").stdout
    assert out.splitlines()[0].startswith("# PETE_RECIPE=paper, trainer=pete_paper:"), out
    cfgs = pete_configs(pete_commands(""))
    assert len(cfgs) == 4
    for cfg in cfgs:
        t, r = cfg.trainer, PAPER_RECIPE
        assert effective_batch(t, 1) == r["batch"]  # one device, as the sweep runs
        n = total_steps(10**6, t, 1)  # whatever the number of pairs: 122,700 iterations
        assert n == r["steps"]
        opt = build_optimizer([torch.nn.Parameter(torch.zeros(2))], t)
        assert type(opt) is r["optimizer"] and opt.param_groups[0]["peak_lr"] == r["lr"]
        assert opt.param_groups[0]["weight_decay"] == AUTHORS_CODE["weight_decay"]
        w, decay = r["warmup"], n - r["warmup"]
        lr = [r["lr"] * lr_factor(k, n, t.warmup_steps, t.scheduler) for k in (0, w - 2, w - 1, w, w + 1, n - 1)]
        assert lr[0] == pytest.approx(r["lr"] / w) and lr[1] < r["lr"] and lr[2] == pytest.approx(r["lr"])  # warm-up
        assert AUTHORS_CODE["decay"] == "linear"  # then the linear decay to 0 of transformers' schedule
        assert lr[3:] == pytest.approx([r["lr"], r["lr"] * (decay - 1) / decay, r["lr"] / decay])
        assert t.mixed_precision == AUTHORS_CODE["precision"] and t.max_grad_norm == AUTHORS_CODE["clip"]
        assert cfg.model.source == "scratch" and cfg.model.scratch.global_rope_theta == 10000.0


@pytest.mark.serial
def test_make_pete_table_cpu_recipe_and_bad_recipe():
    import os

    env = {**os.environ, "PETE_RECIPE": "cpu", "PETE_STEPS": "300"}
    r = make_dry("pete_table", env=env)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.splitlines()[0].startswith("# PETE_RECIPE=cpu, trainer=pete_cpu: lr=5.0e-4 scheduler=cosine"), out
    cmds = [[sys.executable] + __import__("shlex").split(line)[1:] for line in out.splitlines()
            if " -m embexp." in line]
    for cfg in pete_configs(cmds):
        assert ((cfg.trainer.lr, cfg.trainer.scheduler, cfg.trainer.batch_size, cfg.trainer.max_steps)
                == (5e-4, "cosine", 128, 300))
    bad = make_dry("pete_table", "PETE_RECIPE=fast")
    assert (bad.returncode != 0
            and "embexp: error: unknown recipe 'fast' (choose from: paper, cpu)" in bad.stderr), bad.stderr
    assert " -m embexp." not in bad.stdout  # refused before any command is printed


@pytest.mark.serial
@pytest.mark.slow
def test_make_pete_table_runs_offline_with_debug_smoke(tmp_path):
    env = {**__import__("os").environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO / "src")}
    for cmd in pete_commands(f"debug=smoke output_root={tmp_path}", runs=str(tmp_path)):
        cmd = [a.replace("out=tables/", f"out={tmp_path}/tables/") for a in cmd]
        subprocess.run(cmd, cwd=REPO, env=env, check=True, capture_output=True)
    text = (tmp_path / "tables" / "pete" / "comparison.md").read_text()
    assert sum(line.startswith(("| pete |", "| full_ft |")) for line in text.splitlines()) == 4, text


def test_scratch_encoder_rope_is_the_authors():
    """The authors' RotaryPositionEncoding: inv_freq = 1 / 10000^(2i/head_dim), head_dim = 512 / 2 heads."""
    from transformers import ModernBertModel

    from conftest import compose
    from embexp.models import scratch_config, scratch_tokenizer

    cfg = compose("model=scratch_encoder", "method=pete", "task=nli_pairs").model
    model = ModernBertModel(scratch_config(cfg, scratch_tokenizer(cfg)))
    want = 1.0 / (10000 ** (torch.arange(0, 256, 2).float() / 256))
    got = dict(model.named_buffers())["rotary_emb.full_attention_inv_freq"]
    assert model.config.global_attn_every_n_layers == 1  # every layer is a global one, so this is the only RoPE
    torch.testing.assert_close(got, want, atol=0, rtol=1e-6)
