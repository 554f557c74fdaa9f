"""PEMA: counting, the partial matrix and its id map, equivalence with the inner method, merging,
measured memory, the vocabulary analysis (Fig. 2, Tables 2-4), the run tables (9, 10) and XNLI."""

from __future__ import annotations

import collections
import itertools
import json
import time

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from conftest import make_dry, run_train, smoke
from embexp import EmbexpError
from embexp.featurize import Featurizer, collate
from embexp.methods import build_method
from embexp.methods.pema import count_tokens, embedding_trainers
from embexp.models import load_backbone
from embexp.tasks import build_task


def build(model="tiny_bert", task="glue", *overrides):
    cfg = smoke("method=pema", f"model={model}", f"task={task}", *overrides)
    t = build_task(cfg.task)
    bb = load_backbone(cfg.model, num_labels=t.num_labels)
    ref = load_backbone(cfg.model, num_labels=t.num_labels)
    ref.model.load_state_dict(bb.model.state_dict())
    enc = Featurizer(bb.tokenizer, bb.is_decoder, 128, 32)
    feats = [enc.train_features(e) for e in t.examples("train")[:8]]
    return cfg, bb, ref, feats


# ---- counting -------------------------------------------------------------------------------------
def test_count_tokens_matches_counter_and_checks_range():
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, 50, size=rng.integers(0, 20)).tolist() for _ in range(200)]
    ref = collections.Counter(itertools.chain.from_iterable(seqs))
    got = count_tokens(seqs, 50)
    assert got.shape == (50,) and all(got[k] == v for k, v in ref.items()) and got.sum() == sum(ref.values())
    assert count_tokens([], 7).tolist() == [0] * 7
    with pytest.raises(EmbexpError, match="token ids must lie"):
        count_tokens([[1, 50]], 50)


def test_counting_throughput_over_a_million_tokens_per_second():
    rng = np.random.default_rng(1)
    seqs = [a.tolist() for a in np.split(rng.integers(0, 30522, size=1_000_000), 10_000)]
    count_tokens(seqs, 30522)
    t0 = time.perf_counter()
    count_tokens(seqs, 30522)
    assert 1_000_000 / (time.perf_counter() - t0) > 1e6


# ---- the partial matrix -------------------------------------------------------------------------
def test_setup_keeps_used_pad_and_special_rows_and_preserves_outputs():
    cfg, bb, ref, feats = build()
    m = build_method(cfg.method, bb)
    used = {i for f in feats for i in f["input_ids"]}
    m.setup({"train": [f["input_ids"] for f in feats], "eval": [[200, 201]]})
    kept = set(m.kept_ids.tolist())
    assert kept == used | set(bb.special_ids()) and 200 not in kept  # eval is not counted by default
    emb = bb.model.get_input_embeddings()
    assert emb.weight.shape == (len(kept), bb.hidden_size) and emb.num_embeddings == len(kept)
    assert m.n_trainable(include_head=False) < sum(p.numel() for p in ref.model.base_model.parameters())
    batch = collate(feats, bb.tokenizer.pad_token_id)
    batch.pop("labels")
    every = {"input_ids": torch.arange(ref.vocab_size).view(3, -1)}  # ids outside the kept set read their original rows
    with torch.no_grad():
        assert torch.equal(m(**batch).logits, ref.model(**batch).logits)
        assert torch.equal(m(**every).logits, ref.model(**every).logits)


def test_count_splits_and_bad_inner_are_checked():
    cfg, bb, _, feats = build("tiny_bert", "glue", "method.count_splits=[train,eval]")
    m = build_method(cfg.method, bb)
    m.setup({"train": [f["input_ids"] for f in feats], "eval": [[200, 201]]})
    assert {200, 201} <= set(m.kept_ids.tolist())
    able = ", ".join(embedding_trainers())  # the inners are the methods that train the embedding matrix
    assert {"emb_tuning", "full_ft"} <= set(embedding_trainers())
    for inner in ("tinyte_full", "nope", "pema"):
        with pytest.raises(EmbexpError, match=rf"unknown method.inner '{inner}' \(choose from: {able}\)"):
            build("tiny_bert", "glue", f"method.inner={inner}")
    bad_split = r"unknown method.count_splits entry 'predict' \(choose from: train, eval, test\)"
    with pytest.raises(EmbexpError, match=bad_split):
        build("tiny_bert", "glue", "method.count_splits=[predict]")


def test_pad_is_remapped_explicitly_for_a_decoder_with_a_high_pad_id():
    cfg, bb, ref, feats = build("tiny_qwen2", "wmt16")
    bb.tokenizer.pad_token = bb.tokenizer.convert_ids_to_tokens(250)  # like pad = eos = 128009 (Llama 3)
    m = build_method(cfg.method, bb)
    m.setup({"train": [f["input_ids"] for f in feats], "eval": []})
    pad = bb.tokenizer.pad_token_id
    assert pad == 250 and 0 <= int(m.token_map[pad]) != pad  # the authors' code requires token_map[pad] == pad
    assert bb.model.get_input_embeddings().weight.shape[0] < ref.vocab_size
    assert bb.model.config.tie_word_embeddings is False  # tied head untied: it keeps the full matrix
    assert bb.model.get_output_embeddings().weight.shape[0] == ref.vocab_size
    batch = collate([{"input_ids": f["input_ids"][:10]} for f in feats], pad, left=True)
    with torch.no_grad():
        assert torch.equal(m(**batch).logits, ref.model(**batch).logits)


def test_weight_decay_changes_only_the_removed_rows():
    """With decoupled weight decay, full_ft shrinks rows that never get a gradient; PEMA keeps them."""
    out = {}
    for method in ("full_ft", "pema"):
        cfg, bb, ref, feats = build("tiny_bert", "glue", f"method={method}")
        torch.manual_seed(0)
        m = build_method(cfg.method, bb)
        m.setup({"train": [f["input_ids"] for f in feats], "eval": []})
        opt = torch.optim.AdamW(list(m.trainable_tensors().values()), lr=1e-2, weight_decay=0.1)
        batch = collate(feats, bb.tokenizer.pad_token_id)
        m.train()
        for _ in range(3):
            m(**batch).loss.backward()
            opt.step()
            opt.zero_grad()
        out[method] = (m.trainable_state(), getattr(m, "kept_ids", None))
    (full, _), (pema, kept) = out["full_ft"], out["pema"]
    orig = ref.model.get_input_embeddings().weight
    key = next(k for k in full if k.endswith("word_embeddings.weight"))
    assert set(full) == set(pema) and all(torch.equal(full[k], pema[k]) for k in full if k != key)
    removed = torch.ones(orig.shape[0], dtype=torch.bool)
    removed[kept] = False
    assert torch.equal(full[key][~removed], pema[key][~removed])
    assert torch.equal(pema[key][removed], orig[removed])  # PEMA: pretrained values, bit for bit
    assert not torch.equal(full[key][removed], orig[removed])  # full_ft: decayed


# ---- end to end: the same weights as full_ft, merge, memory, tables --------------------------------
@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pema_runs")
    over = ("model=tiny_bert", "task=glue", "trainer.max_steps=6", "trainer.weight_decay=0.0", "save_adapter=true")
    out = {}
    for method in ("full_ft", "pema"):
        cfg = smoke(f"method={method}", *over, "export=true" if method == "pema" else "export=false")
        out[method] = (run_train(cfg, root / method), root / method)
    return out


def test_pema_over_full_ft_ends_with_the_same_weights_and_metrics(runs):
    (mf, df), (mp, dp) = runs["full_ft"], runs["pema"]
    a, b = load_file(df / "adapter.safetensors"), load_file(dp / "adapter.safetensors")
    assert set(a) == set(b) and all(a[k].shape == b[k].shape for k in a)  # the saved state is full-size
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-6
    assert mp["metrics"]["accuracy"] == mf["metrics"]["accuracy"]
    assert mp["train"]["eval_loss"] == pytest.approx(mf["train"]["eval_loss"], abs=1e-6)


def test_merged_export_keeps_absent_rows_shapes_and_vocab(runs):
    from transformers import AutoConfig, AutoModelForSequenceClassification

    (mp, dp) = runs["pema"]
    cfg = smoke("method=pema", "model=tiny_bert", "task=glue")
    orig = load_backbone(cfg.model, num_labels=2)
    w0 = orig.model.get_input_embeddings().weight
    exported = AutoModelForSequenceClassification.from_pretrained(dp / "export")
    w = exported.get_input_embeddings().weight
    assert w.shape == w0.shape and AutoConfig.from_pretrained(dp / "export").vocab_size == orig.model.config.vocab_size
    kept = int(mp["method_values"]["pema_kept_rows"])
    same = (w == w0).all(dim=1)
    assert int(same.sum()) >= w0.shape[0] - kept  # every absent row bit-identical (kept rows were trained)
    assert not same.all()


def test_measured_memory_falls_by_the_predicted_amount(runs):
    (mf, _), (mp, _) = runs["full_ft"], runs["pema"]
    saved = mf["train"]["state_memory"]["total_bytes"] - mp["train"]["state_memory"]["total_bytes"]
    predicted = 4 * mp["method_values"]["pema_removed_param_bytes"]  # param + grad + two Adam moments
    assert saved >= 0.9 * predicted and mp["method_values"]["pema_setup_seconds"] > 0


def test_saved_run_reevaluates_to_the_same_metrics(runs):
    from embexp.eval import reevaluate

    new, recorded = reevaluate(runs["pema"][1], cpu=True)
    assert new["accuracy"] == recorded["accuracy"]


def test_tables_9_and_10_from_the_runs(runs, tmp_path):
    import json

    from embexp.report import configure

    root = str(runs["pema"][1].parent)
    module, cfg = configure(["paper=pema", "table=all", f"runs={root}", f"out={tmp_path}"])
    md = module.render(cfg)
    t9, t10 = (json.loads((tmp_path / f"{n}.json").read_text())["rows"] for n in ("table9", "table10"))
    assert len(t9) == 1 and t9[0]["saved / predicted"] == pytest.approx(1.0, abs=0.1)
    assert [r["PEMA"] for r in t10] == ["✗", "✓"] and t10[0]["SST-2"] == t10[1]["SST-2"]
    assert (tmp_path / "table10.md").read_text() == md["table10"] and (tmp_path / "table9.csv").is_file()


@pytest.mark.slow
def test_minilm_20_steps_same_weights_metrics_and_memory(tmp_path):
    """The acceptance run: real MiniLM, GLUE fixture, 20 steps of AdamW, weight decay 0."""
    from conftest import compose

    over = ("model=minilm", "task=glue", "task.source=fixture", "trainer.max_steps=20", "trainer.cpu=true",
            "trainer.weight_decay=0.0", "trainer.progress=false")
    res = {m: run_train(compose(f"method={m}", *over), tmp_path / m) for m in ("full_ft", "pema")}
    a, b = (load_file(tmp_path / m / "adapter.safetensors") for m in ("full_ft", "pema"))
    assert set(a) == set(b) and max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-6
    assert res["pema"]["metrics"]["accuracy"] == res["full_ft"]["metrics"]["accuracy"]
    saved = res["full_ft"]["train"]["state_memory"]["total_bytes"] - res["pema"]["train"]["state_memory"]["total_bytes"]
    assert saved >= 0.9 * 4 * res["pema"]["method_values"]["pema_removed_param_bytes"]


# ---- vocabulary analysis ----------------------------------------------------------------------------
def test_registry_parameter_counts_match_the_papers_tables_5_and_6():
    from embexp.studies.vocab import model_config, shape_of

    # BERT, DistilBERT: Table 5 prints the cased checkpoints (22.3M / 65.8M, 108.3M) but Table 2 counts the
    # uncased ones (test below), whose sizes the registry holds: 30,522 x 768 = 23.4M embedding parameters.
    paper = {"distilbert": (23.4, 67.0), "distilroberta": (38.6, 82.1), "distilmbert": (91.8, 135.3),
             "bert": (23.4, 109.5),
             "roberta_base": (38.6, 124.6), "deberta": (98.4, 184.4), "mbert": (91.8, 177.9), "xlmr": (192.0, 278.0),
             "xlmv": (692.5, 778.5), "deberta_v3_xsmall": (49.2, 70.8), "deberta_v3_small": (98.4, 141.9),
             "deberta_v3_large": (131.2, 435.1)}
    for name, (emb, total) in paper.items():
        rows, dim, n = shape_of(model_config(name, 2))
        assert (round(rows * dim / 1e6, 1), round(n / 1e6, 1)) == (emb, total), name


# The paper's Table 2, BERT and DistilBERT rows (identical embedding %: the same vocabulary).
PAPER_T2_EMB = {"cola": 80.1, "mnli": 14.8, "mrpc": 54.9, "qnli": 13.1, "qqp": 11.5, "rte": 41.5, "sst2": 57.9,
                "stsb": 57.2, "wnli": 94.3}
PAPER_T2_MODEL = {"bert": (17.1, 3.2, 11.8, 2.8, 2.5, 8.9, 12.4, 12.2, 20.2),
                  "distilbert": (28.0, 5.2, 19.2, 4.6, 4.0, 14.5, 20.3, 20.0, 33.0)}


class _KeptRows:
    """A TokenCache stand-in that keeps a fixed number of rows (as if counted from the real GLUE splits)."""

    def __init__(self, n):
        self.n = n

    def kept(self, tok_name, task_name, subset):
        return np.arange(self.n)


def _model_pct_range(name, subset, fields):
    """Model-% that vocab.reductions gives for the paper's embedding-% of the cell (printed to 0.1: the
    fewest and the most kept rows it can stand for), with the model's stored config `fields`."""
    from embexp.studies import vocab

    spec = vocab.MODELS[name]
    vocab.MODELS[name] = spec._replace(fields=fields)
    try:
        rows = vocab.shape_of(vocab.model_config(name, vocab.num_labels("glue", subset)))[0]
        e = PAPER_T2_EMB[subset]
        ends = (round(rows * (1 - (e + 0.05) / 100)), round(rows * (1 - (e - 0.05) / 100)))
        recs = [vocab.reductions(vocab.Config(), _KeptRows(k), [name], "glue", [subset])[0] for k in ends]
    finally:
        vocab.MODELS[name] = spec
    assert all(r["embedding_pct"] == pytest.approx(100 * (rows - r["kept_rows"]) / rows) for r in recs)
    return min(r["model_pct"] for r in recs), max(r["model_pct"] for r in recs)


@pytest.fixture
def cached_shapes(monkeypatch):
    """vocab.shape_of memoised on the config (one meta-device build per architecture and head)."""
    from embexp.studies import vocab

    cache, real = {}, vocab.shape_of

    def memo(config):
        key = config.to_json_string()
        if key not in cache:
            cache[key] = real(config)
        return cache[key]

    monkeypatch.setattr(vocab, "shape_of", memo)


@pytest.mark.parametrize("name", ["bert", "distilbert"])
def test_table2_bert_percentages_need_the_uncased_vocabulary(name, cached_shapes):
    """Every BERT/DistilBERT model-% of the paper's Table 2 follows from its embedding-% with the uncased
    30,522-row vocabulary the registry holds (CoLA: 17.1 / 28.0), and none with the cased 28,996 rows
    its Table 5 prints (CoLA: 16.5 / 27.1)."""
    from embexp.studies import vocab

    uncased, cased = vocab.MODELS[name].fields, {**vocab.MODELS[name].fields, "vocab_size": 28996}
    assert uncased["vocab_size"] == 30522 and vocab.MODELS[name].tokenizer.endswith("-base-uncased")
    for subset, paper in zip(vocab.GLUE, PAPER_T2_MODEL[name]):
        lo, hi = _model_pct_range(name, subset, uncased)
        assert lo - 0.05 <= paper <= hi + 0.05, (subset, lo, hi, paper)
        lo, hi = _model_pct_range(name, subset, cased)
        assert not lo - 0.05 <= paper <= hi + 0.05, (subset, lo, hi, paper)


@pytest.mark.serial
def test_pema_tables_name_the_uncased_checkpoints():
    """`make pema_table2 DRY_RUN=1` (and the other PEMA targets) name the checkpoint of every model, and
    the analysis registry counts with the same checkpoints that conf/model trains."""

    from omegaconf import OmegaConf

    from conftest import CONF
    from embexp.studies import vocab

    for target in ("pema_table2", "pema_table10", "pema_tables"):
        r = make_dry(target)
        assert r.returncode == 0, r.stderr
        out = r.stdout
        named = dict(line[len("# model="):].split(": ", 1) for line in out.splitlines() if line.startswith("# model="))
        assert named["bert"] == "google-bert/bert-base-uncased", target
        assert named["distilbert"] == "distilbert/distilbert-base-uncased", target
    for name, spec in vocab.MODELS.items():
        if (CONF / "model" / f"{name}.yaml").is_file() and spec.tokenizer != "minilm":
            assert OmegaConf.load(CONF / "model" / f"{name}.yaml").id == spec.tokenizer, name
    tok = vocab.load_tokenizer("minilm")  # offline stand-in: the same uncased WordPiece
    assert len(tok) == 30522
    assert tok.convert_tokens_to_ids(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the"]) == [0, 100, 101, 102, 1996]


def test_table2_for_the_bert_wordpiece_tokenizer_on_glue_fixtures(tmp_path):
    from embexp.studies import vocab
    from embexp.studies.vocab import load_tokenizer, texts

    cfg = vocab.Config(what="table2", models=["minilm"], subsets=["rte", "stsb"], source="fixture", out=str(tmp_path))
    recs = vocab.run(cfg)["records"]
    tok = load_tokenizer("minilm")
    for r in recs:
        ids = {i for which in ("train", "eval", "test") for t in texts(cfg, "glue", r["subset"], which)
               for i in tok(*t, truncation=True, max_length=128)["input_ids"]}
        kept = len(ids | {tok.pad_token_id})  # the authors' rule: what occurs over padded inputs
        assert r["kept_rows"] == kept and r["embedding_rows"] == 30522 and r["dim"] == 384
        assert r["embedding_pct"] == pytest.approx(100 * (30522 - kept) / 30522)
        assert r["model_pct"] == pytest.approx(100 * (30522 - kept) * 384 / r["n_params"])
    assert "Table 2" in (tmp_path / "table2.md").read_text()


def test_heaps_curve_fit_and_plot(tmp_path):
    from embexp.studies import vocab

    ids = np.array([5, 5, 7, 5, 9, 7, 11, 11])
    n, u = vocab.growth_curve(ids, points=8)
    brute = [len(set(ids[:k].tolist())) for k in n]
    assert u.tolist() == brute
    x = np.array([1e3, 1e4, 1e5, 1e6])
    fit = vocab.heaps_fit(x, 7.0 * x ** 0.6)
    assert fit["K"] == pytest.approx(7.0) and fit["beta"] == pytest.approx(0.6) and fit["r2"] == pytest.approx(1.0)
    out = vocab.run(vocab.Config(what="heaps", tokenizer="minilm", subsets=["rte", "sst2"], source="fixture",
                                 out=str(tmp_path)))
    assert len(out["rows"]) == 2 and out["heaps_fit"] and (tmp_path / "heaps_minilm.png").stat().st_size > 1000


def test_tables_3_and_4_code_path_offline(tmp_path):
    from embexp.studies import vocab

    t3 = vocab.run(vocab.Config(what="table3", tokenizer_override="minilm", subsets=["wnli"], source="fixture",
                                out=None))
    by = {r["model"]: r for r in t3["records"]}
    assert by["deberta_v3_small"]["removed_params"] == by["deberta"]["removed_params"]  # same d, same vocabulary
    removed = {name: row["removed_params"] for name, row in by.items()}
    assert removed["deberta_v3_large"] > removed["deberta"] > removed["deberta_v3_xsmall"]
    t4 = vocab.run(vocab.Config(what="table4", models=["mbert"], tokenizer_override="minilm", source="fixture",
                                out=None))
    kept = {r["subset"]: r["kept_rows"] for r in t4["records"]}
    assert kept["en"] <= kept["en-de"] <= kept["all"] and kept["en"] < kept["all"]


# ---- XNLI ------------------------------------------------------------------------------------------
def test_xnli_fixture_subsets_and_format():
    from embexp.tasks.xnli import LANGUAGES

    t = build_task(smoke("task=xnli", "task.subset=en-zh").task)
    rows = t.load("train")
    assert len(rows) == 48 and set(rows[0]) == {"premise", "hypothesis", "label"}
    assert any("看见" in r["premise"] for r in rows) and rows[0]["premise"].isascii()
    ex = t.format({"premise": "A cat sleeps.", "hypothesis": "An animal sleeps.", "label": 2})
    assert ex.text == ("A cat sleeps.", "An animal sleeps.") and ex.target == " False" and t.num_labels == 3
    assert len(build_task(smoke("task=xnli", "task.subset=all").task).languages) == len(LANGUAGES) == 15
    assert t.score_labels([0, 1, 2], [0, 1, 1])["accuracy"] == pytest.approx(200 / 3)
    json.dumps(rows)  # hub schema: plain JSON


def test_count_splits_test_counts_the_hidden_label_test_split(tmp_path):
    """count_splits=[train,eval,test] (the paper's tables, as the authors' run_glue_pema.py under
    --do_predict) keeps the rows of the test split's tokens; its hidden labels (-1) are only counted."""
    from embexp.run.build import build as build_run

    d = tmp_path / "data"
    d.mkdir()
    train = [{"sentence": s, "label": i % 2, "idx": i} for i, s in enumerate(["a charming film", "a dull story",
                                                                              "warm and clever", "tedious and weak"])]
    test = [{"sentence": "quixotic jazz", "label": -1, "idx": 0}]  # q, x, j, z occur nowhere else
    for name, rows in (("train", train), ("validation", train), ("test", test)):
        (d / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    kept = {}
    for splits in ("[train,eval]", "[train,eval,test]"):
        cfg = smoke("method=pema", "model=tiny_bert", "task=glue", "task.source=local", f"task.data_dir={d}",
                    f"method.count_splits={splits}")
        c = build_run(cfg, torch.device("cpu"))
        kept[splits] = set(c.method.kept_ids.tolist())
        ids = set(c.backbone.tokenizer("quixotic jazz", add_special_tokens=False)["input_ids"])
    new = ids - kept["[train,eval]"]  # the byte tokenizer: q, x, j, z
    assert len(new) >= 4 and ids <= kept["[train,eval,test]"]
    assert kept["[train,eval,test]"] - kept["[train,eval]"] == new


def test_the_vocab_study_counts_as_the_authors_pad_and_what_occurs():
    """Table 2's rule: the ids that occur over inputs padded to max_length (pad included), not the
    special tokens that never occur; keep_special=true adds them (method=pema's default)."""
    from embexp.studies.vocab import table_cells

    rows = {k: table_cells("table2", models=["minilm"], subsets=["rte"], source="fixture", keep_special=k)[0]
            for k in (False, True)}
    tok = __import__("embexp.studies.vocab", fromlist=["load_tokenizer"]).load_tokenizer("minilm")
    unused_special = {tok.unk_token_id, tok.mask_token_id}  # the fixture's inputs never hold [UNK] or [MASK]
    assert rows[True]["kept_rows"] - rows[False]["kept_rows"] == len(unused_special)
    assert rows[False]["embedding_pct"] > rows[True]["embedding_pct"]


@pytest.mark.serial
def test_an_analysis_value_outside_its_domain_is_one_line_before_any_tokenizer_loads():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "embexp.analyze", "vocab", "what=table2", "splits=[predict]", "out="],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip() == "embexp: error: unknown splits entry 'predict' (choose from: train, eval, test)"
