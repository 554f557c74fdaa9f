"""model.init=random: the papers' architectures with random weights, without the hub (models/random_weights.py),
the synthetic tokenizer, the synthetic task, and what a run on such a model records and refuses."""

from __future__ import annotations

import json

import pytest
import torch

from conftest import compose, run_cli, run_train
from embexp import EmbexpError
from embexp.models import load_backbone
from embexp.models.random_weights import HashTokenizer
from embexp.models.specs import SPECS
from embexp.run.build import count_params

SHRINK = ["+model.spec.num_hidden_layers=2", "+model.spec.hidden_size=64", "+model.spec.intermediate_size=128",
          "+model.spec.num_attention_heads=4", "+model.spec.num_key_value_heads=2"]


def random_cfg(model: str, *extra: str):
    task = "task=synthetic" if SPECS[model]["kind"] == "decoder" else "task=glue"
    return compose(f"model={model}", "model.init=random", "method=full_ft", task, *extra)


@pytest.mark.parametrize("model", sorted(SPECS))
def test_every_stored_architecture_has_the_real_models_parameter_count(model):
    """Built with random weights on the meta device through load_backbone, each model has the count the
    reproduction ledger uses (studies.params on the same architecture)."""
    from embexp.report.ledger.sources import count

    cfg = random_cfg(model)
    decoder = cfg.model.kind == "decoder"
    bb = load_backbone(cfg.model, sentence=not decoder, device="meta")
    assert count_params(bb.model) == count(model, "method=full_ft", num_labels=0)["total"]
    assert bb.vocab_size == SPECS[model]["config"].get("vocab_size")
    assert len(bb.tokenizer) == bb.vocab_size


def test_llama31_has_8_030_261_248_parameters():
    bb = load_backbone(random_cfg("llama31").model, device="meta")
    assert count_params(bb.model) == 8_030_261_248


def test_the_same_seed_gives_the_same_weights_in_fp32_and_rounded_in_bf16():
    cfg = random_cfg("smollm2", *SHRINK)
    torch.manual_seed(3)
    a = load_backbone(cfg.model).model.state_dict()
    cfg.model.dtype = "bfloat16"
    torch.manual_seed(3)
    b = load_backbone(cfg.model).model.state_dict()
    for k in a:
        assert b[k].dtype == torch.bfloat16 and torch.equal(a[k].to(torch.bfloat16), b[k]), k


def test_the_hash_tokenizer_spreads_words_over_the_vocabulary_and_reads_back_its_own_ids():
    tok = HashTokenizer(128256)
    ids = tok("the cat sat on the mat")["input_ids"]
    assert ids[0] == tok.bos_token_id and ids[1] == ids[5] and len(ids) == 7  # <s> + one id per word
    assert all(4 <= i < 128256 for i in ids[1:]) and len(set(ids[1:])) == 5
    assert tok(tok.decode(ids, skip_special_tokens=True), add_special_tokens=False)["input_ids"] == ids[1:]
    many = HashTokenizer(1000)(" ".join(f"w{i}" for i in range(5000)))["input_ids"]
    assert len(set(many)) > 900  # over the whole vocabulary, not a corner of it
    enc = HashTokenizer(30522, encoder=True)("a b", "c")["input_ids"]
    assert enc[0] == 1 and enc[3] == 2 and enc[-1] == 2 and len(enc) == 6  # [CLS] a b [SEP] c [SEP]
    with pytest.raises(EmbexpError, match="vocab_size=8 leaves no room"):
        HashTokenizer(8)


def test_the_synthetic_task_gives_prompts_of_the_set_length_in_tokens():
    from embexp.featurize import Featurizer
    from embexp.tasks import build_task

    cfg = random_cfg("llama31", "task.prompt_words=40", "task.max_source_tokens=32", "task.target_words=5")
    ex = build_task(cfg.task).examples("train")[0]
    enc = Featurizer(HashTokenizer(128256), True, 32, 16, False, "target")
    feats = enc.train_features(ex)
    assert len(ex.prompt.split()) == 40 and len(feats["input_ids"]) == 32 + 5 + 1  # cut prompt + target + eos


def test_a_run_on_random_weights_says_so_and_computes_no_quality_metric(tmp_run):
    cfg = random_cfg("llama31", *SHRINK, "task.prompt_words=16", "task.max_source_tokens=16", "task.fixture_size=8",
                     "trainer.max_steps=2", "trainer.batch_size=4", "trainer.progress=false", "method=tinyte_full")
    out = run_train(cfg, tmp_run)
    assert out["weights"] == "random" and out["metrics"] == {} and out["train"]["steps"] == 2
    assert json.loads((tmp_run / "metrics.json").read_text())["weights"] == "random"
    assert not (tmp_run / "predictions.jsonl").exists()
    res = run_cli(f"run_dir={tmp_run}", module="embexp.eval")
    assert res.returncode == 1 and "random weights (model.init=random)" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("args,line", [
    (["model=tiny_llama", "model.init=random"], "model.init=random: model 'tiny_llama' has no stored architecture"),
    (["model=llama31", "model.init=random", "export=true"], "export=true with model.init=random"),
    (["model=llama31", "model.init=random", "+model.spec.hidden_size=100"],
     "model.init=random: the architecture of 'llama31' with model.spec {'hidden_size': 100} is not valid: "),
    (["model=llama31", "model.init=randm"], "unknown model.init 'randm' (choose from: pretrained, random)"),
])
def test_bad_random_weight_runs_are_one_line(tmp_path, args, line):
    res = run_cli(*args, "method=tinyte_full", "task=synthetic", f"output_root={tmp_path}")
    assert res.returncode != 0 and line in res.stderr and "Traceback" not in res.stderr
    assert not list(tmp_path.rglob("metrics.json"))


def test_the_ledger_never_reads_a_random_weight_run_as_a_measurement():
    from embexp.report.ledger.measured import smoke

    assert smoke({"config": {"model": {"name": "llama31", "init": "random"}, "task": {"source": "auto"}}})
    assert not smoke({"config": {"model": {"name": "llama31", "init": "pretrained"}, "task": {"source": "auto"}}})
