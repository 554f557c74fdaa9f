"""The judge (src/embexp/judge/): verdict domains, truncation, the cache, train + re-score, NLI judges."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from conftest import DATA, compose, run_cli, run_train, smoke
from embexp import EmbexpError
from embexp.core.config import JudgeConfig
from embexp.judge import HARMBENCH_PROMPT, INSTRUCT_CHOICES, aggregate, build_judge, check, parse, rescore

# the judge continues its prompt's cache by the keyword its transformers takes (cache from 5.24 on)
pytestmark = pytest.mark.filterwarnings("error:.*past_key_values.*:FutureWarning")


def jcfg(**kw):
    c = OmegaConf.structured(JudgeConfig)
    c.model = "tiny_llama"
    c.max_input_tokens = 1000  # the byte tokenizer counts bytes; tiny_llama's window is 1024
    for k, v in kw.items():
        c[k] = v
    return c


@pytest.fixture(scope="module")
def tiny_judge():
    return build_judge(jcfg(), "cpu")


QA = [{"question": f"Name {i} fruits.", "answer": "apple banana " * i} for i in range(1, 5)]


def test_each_kind_gives_verdicts_in_its_domain(tiny_judge):
    v = tiny_judge.score("instruct", QA)
    assert len(v) == 4 and all(x in [float(r) for r in range(1, 11)] for x in v)
    h = tiny_judge.score("harmbench", [{"behavior": "b", "generation": g} for g in ("x", "y z")])
    assert all(x in (0.0, 1.0) for x in h)
    n = tiny_judge.score("nli", [{"premise": "a cat sat", "hypothesis": "a cat"}])
    assert n[0] in (0.0, 1.0)
    assert aggregate("harmbench", h)["asr"] == 100.0 * sum(h) / 2


def test_verdict_is_the_likeliest_allowed_answer(tiny_judge):
    """The batched, cached scoring equals a plain forward of each prompt + answer, one at a time."""
    b = tiny_judge.backend
    prompts = tiny_judge.prompts("instruct", QA[:3])
    fast = b.causal_logliks(prompts, INSTRUCT_CHOICES)
    for i, p in enumerate(prompts):
        for j, c in enumerate(INSTRUCT_CHOICES):
            ctx, cont = b.split(p, c)
            lp = torch.log_softmax(b.model(input_ids=torch.tensor([ctx + cont])).logits.float(), -1)[0]
            assert fast[i][j] == pytest.approx(sum(float(lp[len(ctx) - 1 + k, t])
                                                   for k, t in enumerate(cont)), abs=1e-3)
    verdicts = tiny_judge.score("instruct", QA[:3])
    assert verdicts == [float(max(range(10), key=s.__getitem__) + 1) for s in fast]


def test_prompts_are_cut_in_the_judged_text_and_keep_the_instructions(tiny_judge):
    j = build_judge(jcfg(max_input_tokens=800), "cpu")
    item = {"question": "What is two plus two?", "answer": "four " * 1000}
    p = j.prompts("instruct", [item])[0]
    tok = j.backend.tok
    assert len(tok(p)["input_ids"]) + 4 <= 800  # + the longest answer "10]]"
    assert "What is two plus two?" in p and p.endswith("[The End of Assistant's Answer]\n\nRating: [[")
    assert "four four" in p and p.count("four") < 1000
    h = tiny_judge.prompts("harmbench", [{"behavior": "steal", "generation": "x" * 5000}])[0]
    assert (len(tok(h)["input_ids"]) + 4 <= 1000 and "\nsteal\n" in h
            and h.startswith(HARMBENCH_PROMPT.split("{behavior}")[0]) and h.endswith("Answer: [/INST]"))
    with pytest.raises(EmbexpError, match="max_input_tokens"):
        build_judge(jcfg(max_input_tokens=100), "cpu").prompts("instruct", [item])


def test_cache_a_second_score_makes_no_judge_call(tmp_path):
    path = tmp_path / "judge_cache.jsonl"
    j = build_judge(jcfg(), "cpu", cache_path=path)
    first = j.score("instruct", QA + QA[:1])  # a repeated item is sent once
    assert j.calls == 4 and len(path.read_text().splitlines()) == 4
    assert j.score("instruct", QA) == first[:4] and j.calls == 0
    with open(path, "a") as fh:
        fh.write('{"key": "cut by a ki')  # a kill mid-write leaves a partial line
    again = build_judge(jcfg(), "cpu", cache_path=path)
    assert again.score("instruct", QA) == first[:4] and again.calls == 0
    assert again.score("nli", [{"premise": "p", "hypothesis": "h"}]) and again.calls == 1  # another kind: another key
    off = build_judge(jcfg(cache=False), "cpu", cache_path=tmp_path / "none.jsonl")
    off.score("instruct", QA)
    assert off.calls == 4 and not (tmp_path / "none.jsonl").exists()


def test_train_writes_verdicts_and_rescore_reuses_the_cache(tmp_path):
    cfg = smoke("method=zero_shot", "model=tiny_llama", "task=alpaca", "task.source=fixture", "judge.model=tiny_llama",
                "judge.max_input_tokens=1000")
    run_train(cfg, tmp_path)
    m = json.loads((tmp_path / "metrics.json").read_text())["metrics"]
    assert (1 <= m["judge_instruct"] <= 10 and m["judge_model"] == "tiny_llama"
            and m["judge_calls"] == m["judge_calls"] > 0)
    recs = [json.loads(x) for x in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert all(r["judge"] in [float(r) for r in range(1, 11)] for r in recs)
    assert sum(r["judge"] for r in recs) / len(recs) == pytest.approx(m["judge_instruct"])
    # python -m embexp.judge: the run's own judge, every verdict from the cache
    r = run_cli(f"run_dir={tmp_path}", "judge.max_input_tokens=1000", module="embexp.judge")
    assert r.returncode == 0, r.stderr
    assert ("judge_calls" in r.stdout
            and json.loads((tmp_path / "metrics.json").read_text())["metrics"]["judge_calls"] == 0)
    ref = rescore(tmp_path, jcfg(), what="reference")
    assert 1 <= ref["judge_instruct_reference"] <= 10 and ref["judge_calls_reference"] == len(recs)
    assert rescore(tmp_path, jcfg(), what="reference")["judge_calls_reference"] == 0
    nli = rescore(tmp_path, jcfg(kind="nli"))
    assert 0 <= nli["entailment"] <= 100 and "judge_model_nli" in nli
    merged = json.loads((tmp_path / "metrics.json").read_text())["metrics"]
    assert {"judge_instruct", "judge_instruct_reference", "entailment", "rougeL"} <= set(merged)
    recs = [json.loads(x) for x in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert {"judge", "judge_reference", "judge_nli"} <= set(recs[0])
    # Figure 3 from the finished run: bars + table naming the judge
    from embexp.report.tinyte import Config, render

    md = render(Config(table="fig3", runs=str(tmp_path), out=str(tmp_path / "tables")))["fig3"]
    row = next(ln for ln in md.splitlines() if "Base model" in ln)
    assert f"{merged['judge_instruct']:.2f}" in row and "tiny_llama" in row
    assert ((tmp_path / "tables" / "figure3.png").stat().st_size > 1000
            and (tmp_path / "tables" / "figure3.csv").is_file())


def _tiny_dir(tmp_path: Path, family: str) -> Path:
    import transformers as tf

    from embexp.models import byte_tokenizer

    tok = byte_tokenizer(encoder=family == "bert")
    torch.manual_seed(0)
    if family == "bert":
        config = tf.BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64, num_labels=3,
                               id2label={0: "entailment", 1: "neutral", 2: "contradiction"},
                               label2id={"entailment": 0, "neutral": 1, "contradiction": 2},
                               architectures=["BertForSequenceClassification"])
        model = tf.BertForSequenceClassification(config)
    else:
        config = tf.T5Config(vocab_size=len(tok), d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=2,
                             decoder_start_token_id=tok.pad_token_id, pad_token_id=tok.pad_token_id,
                             eos_token_id=tok.eos_token_id)
        model = tf.T5ForConditionalGeneration(config)
    d = tmp_path / family
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


def test_sequence_classification_nli_judge(tmp_path):
    d = _tiny_dir(tmp_path, "bert")
    j = build_judge(jcfg(model=str(d), max_input_tokens=64), "cpu")
    assert j.backend.type == "seqcls" and j.backend.entail == 0
    pairs = [{"premise": "a dog runs in the park " * 3, "hypothesis": h}
             for h in ("a dog runs", "the sky is green", "x" * 300)]
    v = j.score("nli", pairs)
    assert all(x in (0.0, 1.0) for x in v)
    b = j.backend
    for p, x in zip(j.prompts("nli", pairs), v):
        pp = json.loads(p)
        enc = b.tok(pp["premise"], pp["hypothesis"], return_tensors="pt")
        assert enc["input_ids"].shape[1] <= 64
        assert float(b.model(**enc).logits.argmax(-1).item() == 0) == x
    with pytest.raises(EmbexpError, match="nli only"):
        j.score("instruct", QA)


def test_a_folder_judge_loads_its_weights_only_for_uncached_verdicts(tmp_path):
    d = _tiny_dir(tmp_path, "bert")
    pairs = [{"premise": "a dog runs", "hypothesis": h} for h in ("a dog", "a cat")]
    first = build_judge(jcfg(model=str(d), max_input_tokens=64), "cpu", cache_path=tmp_path / "cache.jsonl")
    assert not first.backend.loaded  # the tokenizer and config are enough to build prompts and keys
    v = first.score("nli", pairs)
    assert first.backend.loaded and first.calls == 2
    again = build_judge(jcfg(model=str(d), max_input_tokens=64), "cpu", cache_path=tmp_path / "cache.jsonl")
    assert again.score("nli", pairs) == v and again.calls == 0 and not again.backend.loaded
    (d / "model.safetensors").unlink()  # weights that cannot load: one line, at the first uncached verdict
    with pytest.raises(EmbexpError, match=f"could not load judge '{d}'"):
        again.score("nli", [{"premise": "new", "hypothesis": "pair"}])


def test_seq2seq_true_judge(tmp_path):
    j = build_judge(jcfg(model=str(_tiny_dir(tmp_path, "t5"))), "cpu")
    assert j.backend.type == "seq2seq"
    assert j.prompts("nli", [{"premise": "p", "hypothesis": "h"}]) == ["premise: p hypothesis: h"]
    assert all(x in (0.0, 1.0)
               for x in j.score("nli", [{"premise": "p", "hypothesis": "h"}, {"premise": "q", "hypothesis": "r"}]))


def test_bad_kind_backend_and_tasks_without_generations_are_one_line(tiny_judge):
    with pytest.raises(EmbexpError, match=r"unknown judge kind 'pairwise' \(choose from: instruct, harmbench, nli\)"):
        tiny_judge.score("pairwise", QA)
    with pytest.raises(EmbexpError, match="lacks the text field"):
        tiny_judge.score("nli", QA)
    with pytest.raises(EmbexpError, match="unknown judge.backend 'remote'"):
        build_judge(jcfg(backend="remote"), "cpu")
    with pytest.raises(EmbexpError, match="needs the vllm package"):
        build_judge(jcfg(backend="vllm"), "cpu")
    with pytest.raises(EmbexpError, match="generates no text to judge with an encoder"):
        check(smoke("model=tiny_bert", "task=glue", "task.subset=sst2", "judge.model=tiny_llama", "judge.kind=nli"))
    with pytest.raises(EmbexpError, match="task.eval_mode=loglik"):
        check(smoke("model=tiny_llama", "task=superglue", "task.subset=boolq", "task.eval_mode=loglik",
                    "judge.model=tiny_llama", "judge.kind=nli"))
    with pytest.raises(EmbexpError, match="no judge kind"):
        check(smoke("model=tiny_llama", "task=wmt16", "judge.model=tiny_llama"))
    with pytest.raises(EmbexpError, match="is not a conf/model name"):
        check(smoke("model=tiny_llama", "task=alpaca", "judge.model=nosuchjudge"))
    r = run_cli("debug=smoke", "model=tiny_llama", "task=alpaca", "judge.model=tiny_llama",
                       "judge.kind=pairwise")
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "judge.kind" in r.stderr


def test_parse_and_aggregate():
    assert parse("instruct", "Fine answer. Rating: [[7]]") == 7.0 and parse("instruct", "Rating: [8]") == 8.0
    assert math.isnan(parse("instruct", "no rating")) and math.isnan(parse("instruct", "[[11]]"))
    assert parse("harmbench", "Yes") == 1.0 and parse("harmbench", " no.") == 0.0 and math.isnan(parse("nli", "maybe"))
    a = aggregate("instruct", [2.0, 4.0, math.nan])
    assert a["judge_instruct"] == 3.0 and a["judge_unparsed"] == 1 and a["judge_instruct_stderr"] == pytest.approx(1.0)
    assert aggregate("nli", [1.0, 0.0, 1.0, 1.0])["entailment"] == 75.0


@pytest.mark.slow
def test_smollm2_tunes_and_judges_real_alpaca_rows(tmp_path):
    if DATA is None or not (DATA / "tatsu-lab").is_dir():
        pytest.skip("EMBEXP_DATA is unset or holds no tatsu-lab/alpaca")
    cfg = compose("method=zero_shot", "model=smollm2", "task=alpaca", f"task.data_dir={DATA}", "task.source=local",
                  "task.train_split=train_sample2000", "task.heldout_size=200", "task.max_eval_samples=8",
                  "task.max_new_tokens=64", "judge.model=smollm2", "trainer.cpu=true", "trainer.progress=false")
    run_train(cfg, tmp_path)
    m = json.loads((tmp_path / "metrics.json").read_text())["metrics"]
    assert 1 <= m["judge_instruct"] <= 10 and m["judge_calls"] == 8
    assert rescore(tmp_path, OmegaConf.structured(JudgeConfig))["judge_calls"] == 0  # the run's own judge, cached
    assert 0 <= rescore(tmp_path, jcfg(model="smollm2", kind="nli"))["entailment"] <= 100
